package bill

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
)

// FieldError is one violated rule. Code is stable for programs; Message is
// for people.
type FieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Codes of FieldError.
const (
	CodeRequired            = "required"
	CodeInvalidType         = "invalid_type"
	CodeTooLong             = "too_long"
	CodeInvalidCharacters   = "invalid_characters"
	CodeInvalidFormat       = "invalid_format"
	CodeInvalidPrecision    = "invalid_precision"
	CodeNotPositive         = "not_positive"
	CodeTooLarge            = "too_large"
	CodeUnsupportedCurrency = "unsupported_currency"
	CodeInvalidChannel      = "invalid_channel"
	CodeUnknownBiller       = "unknown_biller_code"
	CodeUnknownOutlet       = "unknown_outlet"
	CodeInPast              = "in_past"
	CodeCardNumber          = "card_number"
)

// ValidationError lists every rule a request broke, all at once.
type ValidationError struct{ Fields []FieldError }

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid bill: " + strings.Join(parts, "; ")
}

// Policy is the operator's configuration that bill rules depend on.
type Policy struct {
	Currencies []string // supported ISO 4217 codes
	MaxAmount  int64    // in major units, per bill, any currency not in MaxAmountIn
	// MaxAmountIn caps some currencies otherwise, by ISO 4217 code: one
	// figure for all, at 10,000,000, capped a bill in UGX at about 2,700
	// US dollars, and raising it raised every currency's cap.
	MaxAmountIn map[string]int64
	// TTL is how long a bill without order.expiry stays payable.
	TTL time.Duration
	// MaxTTL caps order.expiry, so no bill stays payable forever.
	MaxTTL time.Duration
	// Location reads an order.expiry without an offset (nil: UTC).
	Location *time.Location
}

// maxAmount is the largest bill in currency, in major units.
func (p Policy) maxAmount(currency string) int64 {
	if n, ok := p.MaxAmountIn[currency]; ok {
		return n
	}
	return p.MaxAmount
}

// DefaultPolicy is the defaults docs/api.md describes.
func DefaultPolicy() Policy {
	return Policy{
		Currencies: []string{"KES", "USD", "EUR", "GBP", "UGX", "TZS", "RWF"},
		MaxAmount:  10_000_000,
		TTL:        24 * time.Hour,
		MaxTTL:     30 * 24 * time.Hour,
	}
}

// Check reports a policy no bill could be valid under.
func (p Policy) Check() error {
	switch {
	case p.TTL <= 0 || p.MaxTTL <= 0:
		return errors.New("bill lifetimes must be positive")
	case p.TTL > p.MaxTTL:
		return fmt.Errorf("the default bill lifetime (%s) is longer than the longest allowed (%s)", p.TTL, p.MaxTTL)
	}
	return nil
}

func (p Policy) supports(code string) bool {
	for _, c := range p.Currencies {
		if c == code {
			return true
		}
	}
	return false
}

type fieldRule struct {
	field   string
	text    Text
	max     int
	allowed func(rune) bool
	what    string // the allowed set, for the message
}

func isNameRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || r == ' ' || r == '.' || r == '\'' || r == '-'
}

func isReferenceRune(r rune) bool {
	return r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
}

func isDescriptionRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r) || strings.ContainsRune(" .,-()/:#", r)
}

// Validate checks req against docs/api.md for merchant m and returns the
// normalised bill (without reference, state or timestamps), or a
// *ValidationError naming every broken rule.
func Validate(req Request, m merchant.Merchant, p Policy, now time.Time) (Bill, error) {
	var errs []FieldError
	add := func(field, code, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Code: code, Message: fmt.Sprintf(format, args...)})
	}
	for _, parent := range []struct {
		name string
		bad  bool
	}{{"customer", req.Customer.BadType}, {"order", req.Order.BadType}} {
		if parent.bad {
			add(parent.name, CodeInvalidType, "must be an object")
		}
	}
	text := func(field string, t Text) (string, bool) {
		switch {
		case strings.HasPrefix(field, "customer.") && req.Customer.BadType, strings.HasPrefix(field, "order.") && req.Order.BadType:
			return "", false // said once, for the object
		case t.BadType && field == "order.amount":
			add(field, CodeInvalidType, "must be decimal text such as \"1500.00\", or a JSON number")
		case t.BadType:
			add(field, CodeInvalidType, "must be a string")
		case trimSpaces(t.Value) == "":
			add(field, CodeRequired, "is required")
		default:
			return trimSpaces(t.Value), true
		}
		return "", false
	}
	out := Bill{MerchantCode: m.Code}

	for _, r := range []fieldRule{
		{"customer.name", req.Customer.Name, 50, isNameRune, "letters, digits, spaces and . ' -"},
		{"order.reference", req.Order.Reference, 20, isReferenceRune, "ASCII letters and digits"},
		{"order.description", req.Order.Description, 70, isDescriptionRune, "letters, digits, spaces and . , - ( ) / : #"},
	} {
		v, ok := text(r.field, r.text)
		if !ok {
			continue
		}
		// Counted as composed characters: a phone keyboard that sends "é"
		// as e and a combining accent (NFD) was refused below the limit.
		if n := utf8.RuneCountInString(norm.NFC.String(v)); n > r.max {
			add(r.field, CodeTooLong, "must be at most %d characters, got %d", r.max, n)
		}
		if i := strings.IndexFunc(v, func(c rune) bool { return !r.allowed(c) }); i >= 0 {
			// Named: a typographic ’ or – looks like the ' or - allowed.
			bad, _ := utf8.DecodeRuneInString(v[i:])
			add(r.field, CodeInvalidCharacters, "may contain only %s (character %d is %s)",
				r.what, utf8.RuneCountInString(v[:i])+1, strconv.QuoteRuneToASCII(bad))
		}
		// Stored and shown on the dashboard as sent: a card number here
		// would be one in clear on disk (a shop that put the card in the
		// customer's name or the description).
		if r.field != "order.reference" && card.HoldsPAN(v) {
			add(r.field, CodeCardNumber, "must not hold a card number: card details go only into the hosted payment form")
		}
		switch r.field {
		case "customer.name":
			out.CustomerName = v
		case "order.reference":
			out.OrderReference = v
		case "order.description":
			out.Description = v
		}
	}

	if v, ok := text("order.billerCode", req.Order.BillerCode); ok && v != m.BillerCode {
		add("order.billerCode", CodeUnknownBiller, "is not this merchant's biller code")
	} else {
		out.BillerCode = v
	}
	if v, ok := text("order.outlet", req.Order.Outlet); ok && !m.HasOutlet(v) {
		add("order.outlet", CodeUnknownOutlet, "is not one of this merchant's outlets")
	} else {
		out.Outlet = v
	}
	if v, ok := text("order.channel", req.Order.Channel); ok && v != "CARD" {
		add("order.channel", CodeInvalidChannel, "must be CARD")
	}

	currency, currencyOK := text("order.currency", req.Order.Currency)
	if currencyOK {
		if _, known := money.LookupCurrency(currency); !known || !p.supports(currency) {
			add("order.currency", CodeUnsupportedCurrency, "must be one of %s", strings.Join(p.Currencies, ", "))
			currencyOK = false
		}
	}
	if amount, ok := text("order.amount", req.Order.Amount); ok {
		if req.Order.Amount.Number {
			// Only the amount: another field sent as a number (a numeric
			// order reference) is kept as written.
			amount = plainNumber(amount)
		}
		if !currencyOK {
			// Without a currency the precision cannot be judged, but format
			// and sign can: report them too, every rule at once.
			if err := money.CheckDecimal(amount); err != nil {
				addAmountError(add, err, currency, p)
			}
		} else if a, err := money.Parse(amount, currency); err != nil {
			addAmountError(add, err, currency, p)
		} else if exceeds(a, p.maxAmount(currency)) {
			add("order.amount", CodeTooLarge, "must be at most %d", p.maxAmount(currency))
		} else {
			out.Amount = a
		}
	}

	out.ExpiresAt = now.Add(p.TTL)

	if req.Order.Expiry.BadType {
		add("order.expiry", CodeInvalidType, "must be an ISO 8601 time")
	} else if v := trimSpaces(req.Order.Expiry.Value); v != "" {
		out.requestedExpiryText = v
		t, local, err := p.parseExpiry(v)
		if err == nil {
			out.requestedExpiry = t
		}
		switch {
		case err != nil:
			add("order.expiry", CodeInvalidFormat, "must be an ISO 8601 time, such as 2026-11-21T18:00:00+03:00 (without an offset it is read in %s)", p.zone())
		case !t.After(now) && local:
			add("order.expiry", CodeInPast, "must be in the future (it has no offset, so it was read as %s)", t.Format(time.RFC3339))
		case !t.After(now):
			add("order.expiry", CodeInPast, "must be in the future")
		case t.Sub(now) > p.MaxTTL:
			// Capped, not refused: integrations send far-off times
			// ("2030-01-17T00:00:00", decisions.md §4) to mean "no
			// particular expiry", and no bill stays payable for years.
			out.ExpiresAt = now.Add(p.MaxTTL)
		default:
			out.ExpiresAt = t
		}
	}

	if len(errs) > 0 {
		return Bill{}, &ValidationError{Fields: errs}
	}
	out.RequestHash = requestHash(out, trimSpaces(req.Order.Expiry.Value))
	return out, nil
}

// expiryLayouts are the ISO 8601 forms order.expiry is read in, with an
// offset: RFC 3339's, the basic "+0300" that PHP's DATE_ISO8601 and
// Java's SimpleDateFormat "Z" write (the spec's own dateTime pattern), and
// the hour alone ("+03", Java's "X"); seconds may be left out.
var expiryLayouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999Z07",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04Z0700",
	"2006-01-02T15:04Z07",
}

// localExpiryLayouts are expiryLayouts' forms without an offset, read in
// the operator's zone.
var localExpiryLayouts = []string{"2006-01-02T15:04:05.999999999", "2006-01-02T15:04"}

// parseExpiry reads order.expiry: ISO 8601 with an offset, or without one
// (as some integrations send it), then in the operator's zone.
func (p Policy) parseExpiry(v string) (t time.Time, local bool, err error) {
	for _, layout := range expiryLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t, false, nil
		}
	}
	loc := p.Location
	if loc == nil {
		loc = time.UTC
	}
	for _, layout := range localExpiryLayouts {
		if t, err = time.ParseInLocation(layout, v, loc); err == nil {
			return t, true, nil
		}
	}
	return t, true, err
}

func (p Policy) zone() string {
	if p.Location == nil {
		return "UTC"
	}
	return p.Location.String()
}

// humanDuration writes whole days as days: "30 days", not "720h0m0s".
func humanDuration(d time.Duration) string {
	if d >= 24*time.Hour && d%(24*time.Hour) == 0 {
		if n := d / (24 * time.Hour); n > 1 {
			return fmt.Sprintf("%d days", n)
		}
		return "1 day"
	}
	return d.String()
}

func addAmountError(add func(field, code, format string, args ...any), err error, currency string, p Policy) {
	switch {
	case errors.Is(err, money.ErrPrecision):
		add("order.amount", CodeInvalidPrecision, "has more decimal places than %s allows", currency)
	case errors.Is(err, money.ErrNotPositive):
		add("order.amount", CodeNotPositive, "must be greater than zero")
	case errors.Is(err, money.ErrTooLarge):
		add("order.amount", CodeTooLarge, "must be at most %d", p.maxAmount(currency))
	default:
		add("order.amount", CodeInvalidFormat, "must be decimal text such as 1500.00")
	}
}

// trimSpaces removes leading and trailing spaces only: other whitespace is
// a control character, which no field accepts.
func trimSpaces(s string) string { return strings.Trim(s, " ") }

// sameRequest says whether b, as validated now, asks what stored asked:
// the same hash, or every field the same and an expiry naming the instant
// stored's was set to, written another way ("…T10:00:00Z" and
// "…T13:00:00+03:00", or a client's one time.Time in two zones), which
// was told 409. stored's expiry was capped at maxTTL when it asked for
// more (the stored hash has its text, the bill only the cap): then any
// expiry that would have been capped when stored was created makes that
// same bill, and is the same request.
func (b Bill) sameRequest(stored Bill, maxTTL time.Duration) bool {
	switch {
	case stored.RequestHash == b.RequestHash:
		return true
	case !slices.EqualFunc(b.requestFields(), stored.requestFields(), sameText):
		return false
	case requestHash(stored, b.requestedExpiryText) == stored.RequestHash:
		// The same text by meaning, one written composed and the other
		// decomposed ("é" as "e" and a combining accent), and the same
		// expiry, or none, as stored's: the hash, of the text as sent,
		// told them apart.
		return true
	case b.requestedExpiry.IsZero():
		return false
	case b.requestedExpiry.Equal(stored.ExpiresAt):
		return true
	}
	// Capped exactly at this node's cap: a node with another --bill-max-ttl
	// cannot tell, and judges by the expiry alone.
	return stored.ExpiresAt.Sub(stored.CreatedAt) == maxTTL && b.requestedExpiry.Sub(stored.CreatedAt) > maxTTL
}

// requestFields are what a bill request asks besides its expiry, as
// requestHash writes them: one list, so a field added to the request is
// judged by both.
func (b Bill) requestFields() []string {
	return []string{b.CustomerName, b.OrderReference, b.Description, b.BillerCode, b.Outlet,
		b.Amount.Currency.Code, strconv.FormatInt(b.Amount.Minor, 10)}
}

// sameText: a and b are the same text as composed (NFC).
func sameText(a, b string) bool { return a == b || norm.NFC.String(a) == norm.NFC.String(b) }

// requestFieldNames name requestFields, in their order, as a request
// spells them.
var requestFieldNames = []string{"customer.name", "order.reference", "order.description", "order.billerCode", "order.outlet", "order.currency", "order.amount"}

func exceeds(a money.Amount, maxMajor int64) bool {
	scale := int64(1)
	for i := 0; i < a.Currency.Digits; i++ {
		scale *= 10
	}
	return a.Minor/scale > maxMajor || (a.Minor/scale == maxMajor && a.Minor%scale != 0)
}

// requestHash identifies a request by its meaning, so "1500" and "1500.00"
// are the same retry but a different amount is a different request. The
// expiry goes in as its text, as every release has stored it (a node of
// the release before, during a rolling upgrade or after going back, must
// judge a retry as this one does); sameRequest judges one instant written
// in two offsets.
func requestHash(b Bill, expiry string) string {
	h := sha256.New()
	for _, s := range append(b.requestFields(), expiry) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}
