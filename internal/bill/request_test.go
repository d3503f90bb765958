package bill

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/kadipay/kadi/internal/money"
)

func TestDecodeRequestMalformed(t *testing.T) {
	tests := []struct {
		name string
		body string
	}{
		{"empty", ""},
		{"whitespace only", " \n\t "},
		{"unterminated object", `{"customer":{"name":"Zoë"}`},
		{"truncated value", `{"order":{"amount":`},
		{"syntax error", `{"order":{"amount":"1500",}}`},
		{"single quotes", `{'order':{}}`},
		{"array", `[]`},
		{"array of the object", `[{"order":{"amount":"1500"}}]`},
		{"string", `"order"`},
		{"number", `1500`},
		{"true", `true`},
		{"null", `null`},
		{"two objects", `{}{}`},
		{"object then garbage", `{} x`},
		{"object then number", `{"order":{}} 1`},
		{"form-encoded", `customer[name]=Zoe&order[amount]=1500`},
		// One body, two readings: refused (docs/security.md).
		{"repeated amount", `{"order":{"amount":"1","amount":"1500"}}`},
		{"repeated order", `{"order":{"amount":"1"},"order":{"amount":"1500"}}`},
		{"repeated name, escaped", `{"customer":{"name":"a","n\u0061me":"b"}}`},
		{"repeated name, another case", `{"order":{"amount":"1","AMOUNT":"1500"}}`},
		{"repeated name, long s", `{"customer":{"name":"a"},"cuſtomer":{"name":"b"}}`},
		{"gzip-compressed", "\x1f\x8b\x08\x00\x00\x00\x00\x00"},
		{"Latin-1", "{\"customer\":{\"name\":\"Jos\xe9\"}}"},
		// The HTTP layer removes one; a second is not JSON.
		{"byte order mark", "\xef\xbb\xbf{}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tt.body))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeRequest(%q) error = %v, want ErrMalformed", tt.body, err)
			}
			// The message reaches the merchant: decoder internals stay out.
			for _, leak := range []string{"bill.", "struct", "Go value", "json:"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q mentions %q", err, leak)
				}
			}
		})
	}
}

// A closing bracket after the object is trailing data like any other.
func TestDecodeRequestTrailingCloser(t *testing.T) {
	for _, body := range []string{`{}}`, `{}]`, `{"order":{}}}`} {
		if _, err := DecodeRequest([]byte(body)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeRequest(%q) error = %v, want ErrMalformed", body, err)
		}
	}
}

func TestDecodeRequestAccepts(t *testing.T) {
	tests := []struct {
		name string
		body string
		want func(Request) bool
	}{
		{"empty object", `{}`, func(r Request) bool { return !r.Customer.Name.Present && !r.Order.Amount.Present }},
		{"whitespace around", " \n{\"order\":{\"reference\":\"R1\"}}\n\n", func(r Request) bool { return r.Order.Reference.Value == "R1" }},
		{"unknown customer field ignored", `{"customer":{"name":"Zoë","customerid":"C-17"}}`,
			func(r Request) bool { return r.Customer.Name.Value == "Zoë" }},
		{"unknown order field ignored", `{"order":{"foo":{"bar":[1,2]},"reference":"R1"}}`,
			func(r Request) bool { return r.Order.Reference.Value == "R1" }},
		{"unknown top-level field ignored", `{"callbackUrl":"https://shop.example/cb","order":{"reference":"R1"}}`,
			func(r Request) bool { return r.Order.Reference.Value == "R1" }},
		{"null order", `{"order":null}`, func(r Request) bool { return !r.Order.Reference.Present }},
		{"null field is absent", `{"order":{"expiry":null}}`, func(r Request) bool { return !r.Order.Expiry.Present }},
		{"wrong type is flagged, not fatal", `{"customer":{"name":{}},"order":{"reference":"R1"}}`,
			func(r Request) bool { return r.Customer.Name.BadType && r.Order.Reference.Value == "R1" }},
		{"escaped string", `{"customer":{"name":"Zo\u00eb"}}`, func(r Request) bool { return r.Customer.Name.Value == "Zoë" }},
		// Not an object: flagged, to be reported with the other rules.
		{"customer is a string", `{"customer":"Zoë","order":{"reference":"R1"}}`,
			func(r Request) bool { return r.Customer.BadType && !r.Order.BadType && r.Order.Reference.Value == "R1" }},
		{"order is an array", `{"order":[]}`, func(r Request) bool { return r.Order.BadType }},
		{"order is a number", `{"order":1500}`, func(r Request) bool { return r.Order.BadType }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := DecodeRequest([]byte(tt.body))
			if err != nil {
				t.Fatalf("DecodeRequest(%q): %v", tt.body, err)
			}
			if !tt.want(req) {
				t.Errorf("DecodeRequest(%q) = %+v", tt.body, req)
			}
		})
	}
}

// A JSON number reaches the rules as the digits the merchant sent, never
// through a float64 that would turn 1500.10 into 1500.1 or 1e3 into 1000.
func TestDecodeRequestKeepsNumbersAsText(t *testing.T) {
	for _, lit := range []string{"1000", "1500.50", "1500.10", "0.1", "-5", "1e3", "1E+3", "12345678901234567890123", "0.30000000000000004", "1e400"} {
		req, err := DecodeRequest([]byte(`{"order":{"amount":` + lit + `}}`))
		if err != nil {
			t.Fatalf("amount %s: %v", lit, err)
		}
		if a := req.Order.Amount; a.Value != lit || !a.Present || a.BadType || !a.Number {
			t.Errorf("amount %s decoded as %+v", lit, a)
		}
	}
}

func TestTextTypes(t *testing.T) {
	tests := []struct {
		json string
		want Text
	}{
		{`"x"`, Text{Value: "x", Present: true}},
		{`""`, Text{Value: "", Present: true}},
		{`12`, Text{Value: "12", Present: true, Number: true}},
		{`-0.5`, Text{Value: "-0.5", Present: true, Number: true}},
		{`null`, Text{}},
		{`true`, Text{Present: true, BadType: true}},
		{`false`, Text{Present: true, BadType: true}},
		{`{}`, Text{Present: true, BadType: true}},
		{`[]`, Text{Present: true, BadType: true}},
	}
	for _, tt := range tests {
		req, err := DecodeRequest([]byte(`{"order":{"outlet":` + tt.json + `}}`))
		if err != nil {
			t.Fatalf("outlet %s: %v", tt.json, err)
		}
		if req.Order.Outlet != tt.want {
			t.Errorf("outlet %s decoded as %+v, want %+v", tt.json, req.Order.Outlet, tt.want)
		}
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(validBody().bytes(f))
	f.Add(validBody().with("order.amount", raw("1000")).with("order.expiry", "2026-03-16T18:00:00+03:00").bytes(f))
	f.Add(validBody().with("customer.name", raw("{}")).with("order.currency", "UGX").bytes(f))
	f.Add(validBody().with("order.amount", "10000000.00").with("order.reference", strings.Repeat("Z", 20)).bytes(f))
	for _, s := range []string{``, `{}`, `[]`, `null`, `{}}`, `{"order":1}`, "{\"customer\":{\"name\":\"\xff\"}}", `{"order":{"amount":-0}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := DecodeRequest(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeRequest error %v is not ErrMalformed", err)
			}
			return
		}
		checkValidation(t, req)
	})
}

// FuzzValidateFields reaches the rules far more often than random bytes do:
// the fuzzer mutates field values inside a well-formed body.
func FuzzValidateFields(f *testing.F) {
	f.Add("Zoë Wanjiru-O'Neil", "ORD1001", "Order #1001", "1500.00", "KES", "")
	f.Add(" Zoe\u0308 ", "a", "x", "0.01", "UGX", "2026-03-16T18:00:00+03:00")
	f.Add("Q", strings.Repeat("9", 20), strings.Repeat("é", 70), "10000000", "USD", "2026-03-15T09:30:00.001Z")
	f.Fuzz(func(t *testing.T, name, ref, desc, amount, currency, expiry string) {
		b := validBody().
			with("customer.name", name).
			with("order.reference", ref).
			with("order.description", desc).
			with("order.amount", amount).
			with("order.currency", currency).
			with("order.expiry", expiry)
		req, err := DecodeRequest(b.bytes(t))
		if err != nil {
			t.Fatalf("a well-formed body was refused: %v", err)
		}
		checkValidation(t, req)
	})
}

var knownFields = []string{
	"customer", "order", "customer.name", "order.billerCode", "order.reference", "order.amount", "order.currency",
	"order.description", "order.channel", "order.outlet", "order.expiry",
}

var knownCodes = []string{
	CodeRequired, CodeInvalidType, CodeTooLong, CodeInvalidCharacters, CodeInvalidFormat, CodeInvalidPrecision,
	CodeNotPositive, CodeTooLarge, CodeUnsupportedCurrency, CodeInvalidChannel, CodeUnknownBiller, CodeUnknownOutlet, CodeInPast,
	CodeCardNumber,
}

// checkValidation runs Validate and checks the outcome against docs/api.md
// written out independently of rules.go.
func checkValidation(t *testing.T, req Request) {
	t.Helper()
	p := DefaultPolicy()
	b, err := Validate(req, testMerchant, p, testNow)
	if err != nil {
		var verr *ValidationError
		if !errors.As(err, &verr) || len(verr.Fields) == 0 {
			t.Fatalf("Validate error %v is not a non-empty *ValidationError", err)
		}
		for _, fe := range verr.Fields {
			if !slices.Contains(knownFields, fe.Field) || !slices.Contains(knownCodes, fe.Code) || fe.Message == "" {
				t.Fatalf("unexpected field error %+v", fe)
			}
		}
		return
	}
	checkText(t, "customer.name", b.CustomerName, 50, func(r rune) bool {
		return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || strings.ContainsRune(" .'-", r)
	})
	checkText(t, "order.reference", b.OrderReference, 20, func(r rune) bool {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	})
	checkText(t, "order.description", b.Description, 70, func(r rune) bool {
		return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) || strings.ContainsRune(" .,-()/:#", r)
	})
	if b.BillerCode != testMerchant.BillerCode || !slices.Contains(testMerchant.Outlets, b.Outlet) {
		t.Fatalf("accepted biller %q outlet %q of another merchant", b.BillerCode, b.Outlet)
	}
	if !slices.Contains(p.Currencies, b.Amount.Currency.Code) {
		t.Fatalf("accepted unsupported currency %q", b.Amount.Currency.Code)
	}
	if b.Amount.Minor <= 0 {
		t.Fatalf("accepted amount %d <= 0", b.Amount.Minor)
	}
	if again, err := money.Parse(b.Amount.String(), b.Amount.Currency.Code); err != nil || again != b.Amount {
		t.Fatalf("accepted amount %s does not round-trip: %v", b.Amount, err)
	}
	limit := p.MaxAmount
	for range b.Amount.Currency.Digits {
		limit *= 10
	}
	if b.Amount.Minor > limit {
		t.Fatalf("accepted amount %s above the maximum %d", b.Amount, p.MaxAmount)
	}
	if !b.ExpiresAt.After(testNow) {
		t.Fatalf("accepted expiry %v not after now %v", b.ExpiresAt, testNow)
	}
	if len(b.RequestHash) != 64 {
		t.Fatalf("RequestHash %q", b.RequestHash)
	}
}

func checkText(t *testing.T, field, v string, maxRunes int, allowed func(rune) bool) {
	t.Helper()
	n := utf8.RuneCountInString(v)
	if !utf8.ValidString(v) || n < 1 || n > maxRunes {
		t.Fatalf("accepted %s %q: %d characters, want 1 to %d", field, v, n, maxRunes)
	}
	if strings.TrimSpace(v) != v {
		t.Fatalf("accepted %s %q with surrounding space", field, v)
	}
	for _, r := range v {
		if !allowed(r) {
			t.Fatalf("accepted %s %q with %U", field, v, r)
		}
	}
}

// A JSON number becomes the decimal text of its value, exactly (never
// through a float64): an exponent written out, trailing zeros dropped.
func TestPlainNumber(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"1e3", "1000"},
		{"1E+3", "1000"},
		{"1.0E7", "10000000"},
		{"1.2345e2", "123.45"},
		{"15e-1", "1.5"},
		{"1e-2", "0.01"},
		{"1.50e1", "15"},
		{"-2.5E2", "-250"},
		{"0e5", "0"},
		{"123.456E-3", "0.123456"},
		{"9.99999999999999999999e20", "999999999999999999999"},
		{"1500.0", "1500"}, // Jackson's and Python's double
		{"1500.10", "1500.1"},
		{"1500", "1500"},
		{"0.50", "0.5"},
		{"-0.0", "-0"},
		{"1e31", "1" + strings.Repeat("0", 31)},
		{"1e1001", "1e1001"}, // too far to be worth writing: as written, refused
		{"1e-1001", "1e-1001"},
	} {
		if got := plainNumber(tt.in); got != tt.want {
			t.Errorf("plainNumber(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
