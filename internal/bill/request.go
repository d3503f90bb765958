package bill

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kadipay/kadi/internal/jsoncheck"
)

// Request is the create-bill body of spec 2.2. Every field is flexible on
// the wire so that one wrongly typed field is reported with the others
// instead of failing the whole decode.
type Request struct {
	Customer Customer `json:"customer"`
	Order    Order    `json:"order"`
}

// Customer is the request's customer object.
type Customer struct {
	Name Text `json:"name"`
	// BadType: "customer" was not an object (a string, an array…).
	BadType bool `json:"-"`
}

// Order is the request's order object.
type Order struct {
	BillerCode  Text `json:"billerCode"`
	Reference   Text `json:"reference"`
	Amount      Text `json:"amount"`
	Currency    Text `json:"currency"`
	Description Text `json:"description"`
	Channel     Text `json:"channel"`
	Outlet      Text `json:"outlet"`
	Expiry      Text `json:"expiry"`
	// BadType: "order" was not an object.
	BadType bool `json:"-"`
}

// UnmarshalJSON flags a customer that is not an object, to be reported
// with every other broken rule (invalid_type), not as a body that is not
// JSON.
func (c *Customer) UnmarshalJSON(b []byte) error {
	type fields Customer
	return objectOrFlag(b, (*fields)(c), &c.BadType)
}

// UnmarshalJSON flags an order that is not an object, as Customer's does.
func (o *Order) UnmarshalJSON(b []byte) error {
	type fields Order
	return objectOrFlag(b, (*fields)(o), &o.BadType)
}

// objectOrFlag decodes b into v when it is an object, leaves v empty for
// null, and sets bad for anything else.
func objectOrFlag(b []byte, v any, bad *bool) error {
	switch b = bytes.TrimSpace(b); {
	case len(b) > 0 && b[0] == '{':
		return json.Unmarshal(b, v)
	case string(b) != "null":
		*bad = true
	}
	return nil
}

// Text is a JSON value the spec calls a string. Integrations also send
// numbers ("amount": 1000), which we keep as their literal text; anything
// else marks the field as wrongly typed.
type Text struct {
	Value   string
	Present bool
	BadType bool
	// Number: the value was a JSON number (Value is its literal).
	Number bool
}

func (t *Text) UnmarshalJSON(b []byte) error {
	t.Present = true
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		t.Present = false
	case b[0] == '"':
		return json.Unmarshal(b, &t.Value)
	case b[0] == '-' || (b[0] >= '0' && b[0] <= '9'):
		t.Value, t.Number = string(b), true
	default:
		t.BadType = true
	}
	return nil
}

// ErrMalformed is returned when the body is not a JSON object.
var ErrMalformed = errors.New("request body is not a valid JSON object")

// DecodeRequest decodes a create-bill body, as the HTTP layer read it
// (less a byte order mark). Content-Type is deliberately not consulted:
// many integrations post JSON with a form type or none.
func DecodeRequest(body []byte) (Request, error) {
	var req Request
	if gzipped := len(body) > 1 && body[0] == 0x1f && body[1] == 0x8b; gzipped {
		return req, fmt.Errorf("%w: the body is gzip-compressed; send it uncompressed (no Content-Encoding)", ErrMalformed)
	}
	if !utf8.Valid(body) {
		// The decoder reads such bytes as U+FFFD, and a name in Latin-1
		// was refused for "character 4 is '\ufffd'".
		return req, fmt.Errorf("%w: the body is not UTF-8 text (JSON is UTF-8; encode it so, not as Latin-1 or Windows-1252)", ErrMalformed)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: %s", ErrMalformed, describeJSONError(err))
	}
	if len(bytes.TrimSpace(body[dec.InputOffset():])) > 0 {
		return req, fmt.Errorf("%w: trailing data after the object", ErrMalformed)
	}
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' {
		return req, ErrMalformed
	}
	if err := jsoncheck.UniqueNames(body); err != nil {
		return req, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return req, nil
}

// describeJSONError keeps decoder messages short and free of Go type names.
func describeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "body"
		}
		return fmt.Sprintf("%s must be an object", strings.TrimSpace(field))
	case errors.Is(err, io.EOF):
		return "empty body"
	}
	return "unexpected end of input"
}

// plainNumber writes a JSON number as the decimal text of its value,
// exactly (never through a float64): Jackson writes a double of ten
// million or more as 1.0E7, and below that as 1500.0, as Python's json
// does; other encoders write 1e3. Trailing zeros after the point are
// dropped, so UGX 1500.0 is 1500: a number's digits say nothing of the
// amount's precision, and the same amount written as text ("1500.0") is
// still refused for its place. An exponent too far from 1 to be worth
// writing out is left as written (and refused as such).
func plainNumber(n string) string {
	mantissa, exp, hasExp := strings.Cut(strings.ToLower(n), "e")
	shift := 0
	if hasExp {
		var err error
		if shift, err = strconv.Atoi(strings.TrimPrefix(exp, "+")); err != nil || shift > maxShift || shift < -maxShift {
			return n
		}
	}
	sign := ""
	if rest, neg := strings.CutPrefix(mantissa, "-"); neg {
		sign, mantissa = "-", rest
	}
	whole, fraction, _ := strings.Cut(mantissa, ".")
	digits := whole + fraction
	point := len(whole) + shift // where the point falls in digits
	switch {
	case point <= 0:
		digits, point = strings.Repeat("0", 1-point)+digits, 1
	case point > len(digits):
		digits += strings.Repeat("0", point-len(digits))
	}
	whole, fraction = strings.TrimLeft(digits[:point], "0"), strings.TrimRight(digits[point:], "0")
	if whole == "" {
		whole = "0"
	}
	if fraction == "" {
		return sign + whole
	}
	return sign + whole + "." + fraction
}

// maxShift bounds the exponent plainNumber writes out: far beyond any
// amount (1e31 is too large, 1e-31 has too many places), and short enough
// to write.
const maxShift = 1000
