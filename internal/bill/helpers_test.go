package bill

import (
	"encoding/json"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
)

// testNow is a fixed clock so that expiry rows can be written as literals.
var testNow = time.Date(2026, 3, 15, 9, 30, 0, 0, time.UTC)

var testMerchant = merchant.Merchant{
	Code:       "4000123456",
	Name:       "Duka la Mama",
	BillerCode: "700100",
	Outlets:    []string{"80010001", "80010002"},
}

// body is a create-bill request under construction. Each table row starts
// from validBody and changes exactly what it names, so a row that fails
// points at one rule.
type body map[string]map[string]any

// raw is a JSON literal written as is: a number, an object, true, null.
type raw string

// absent removes a field from the body.
type absentField struct{}

var absent absentField

func validBody() body {
	return body{
		"customer": {"name": "Zoë Wanjiru-O'Neil"},
		"order": {
			"billerCode":  "700100",
			"reference":   "ORD1001",
			"amount":      "1500.00",
			"currency":    "KES",
			"description": "Order #1001 (2 items): shoes, socks / size 42.",
			"channel":     "CARD",
			"outlet":      "80010001",
		},
	}
}

// with returns a copy of b with the dotted path ("order.amount") set to v.
func (b body) with(path string, v any) body {
	c := body{}
	for k, m := range b {
		c[k] = maps.Clone(m)
	}
	obj, key, ok := strings.Cut(path, ".")
	if !ok {
		panic("path must be object.field: " + path)
	}
	if c[obj] == nil {
		c[obj] = map[string]any{}
	}
	switch v := v.(type) {
	case absentField:
		delete(c[obj], key)
	case raw:
		c[obj][key] = json.RawMessage(v)
	default:
		c[obj][key] = v
	}
	return c
}

func (b body) bytes(tb testing.TB) []byte {
	tb.Helper()
	out, err := json.Marshal(b)
	if err != nil {
		tb.Fatalf("marshal body: %v", err)
	}
	return out
}

// validate runs b through the same path a handler does: decode, then rules.
func validate(tb testing.TB, b body, p Policy) (Bill, error) {
	tb.Helper()
	req, err := DecodeRequest(b.bytes(tb))
	if err != nil {
		tb.Fatalf("DecodeRequest(%s): %v", b.bytes(tb), err)
	}
	return Validate(req, testMerchant, p, testNow)
}

// fieldErrors returns err's field errors, failing the test if err is not a
// *ValidationError.
func fieldErrors(tb testing.TB, err error) []FieldError {
	tb.Helper()
	var verr *ValidationError
	if !errors.As(err, &verr) {
		tb.Fatalf("error = %v (%T), want *ValidationError", err, err)
	}
	for _, f := range verr.Fields {
		if f.Message == "" {
			tb.Errorf("FieldError %s/%s has an empty message", f.Field, f.Code)
		}
	}
	return verr.Fields
}

// wantOnly asserts err reports exactly one rule: field broke code.
func wantOnly(tb testing.TB, err error, field, code string) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("accepted, want %s %s", field, code)
	}
	got := fieldErrors(tb, err)
	if len(got) != 1 || got[0].Field != field || got[0].Code != code {
		tb.Fatalf("errors = %s, want exactly [%s %s]", pairs(got), field, code)
	}
}

func pairs(fs []FieldError) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.Field + " " + f.Code
	}
	return "[" + strings.Join(s, ", ") + "]"
}
