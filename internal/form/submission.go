package form

import (
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/merchant"
)

// Submission is spec 2.4: the fields posted to /cardPay.
type Submission struct {
	Token              string
	OutletCode         string
	MerchantCode       string
	Amount             string
	OrderReference     string
	BillReference      string
	ProductType        string
	ProductDescription string
	ServiceDate        string
	CardFirstName      string
	CardLastName       string
	CardNumber         string
	CardSecurity       string
	CardExpiryYear     string
	CardExpiryMonth    string
	CustomerFirstName  string
	CustomerLastName   string
	Country            string
	MobileNumber       string
	EmailAddress       string
	PostalcodeZip      string
	Address            string
	City               string
	IPAddress          string
	CallbackURL        string

	// CardExpiry is our card page's one "MM / YY" field (not a spec field);
	// the merchant's form sends the month and year apart.
	CardExpiry string

	// Checkout is the checkout session id our own pages post instead of
	// the token and the merchant's fields (not a spec field). A post that
	// carries one comes from our card-entry page, where a typo in the card
	// is shown back to the customer instead of failing the bill.
	Checkout string
}

// field binds a spec field name to its place in Submission. The order is
// the spec's, which is also the order of hidden inputs we render.
type field struct {
	name string
	ptr  func(*Submission) *string
	max  int // in characters
	part part
}

// part is which check of a post judges a field's length and characters.
type part int

const (
	// trustPart is what the bill and callbackUrl are believed by: its
	// problems are shown on our own page, as the browser cannot be sent to
	// an unchecked URL.
	trustPart part = iota
	// customerPart is the shop's customer fields: a shopper cannot fix
	// them, so their problems go back to the shop, as a malformed e-mail
	// address's do (a name too long stranded the shopper on our page).
	customerPart
	cardPart
)

var fields = []field{
	{"token", func(s *Submission) *string { return &s.Token }, 512, trustPart},
	{"outletCode", func(s *Submission) *string { return &s.OutletCode }, 20, trustPart},
	{"merchantCode", func(s *Submission) *string { return &s.MerchantCode }, 20, trustPart},
	{"amount", func(s *Submission) *string { return &s.Amount }, 32, trustPart},
	{"orderReference", func(s *Submission) *string { return &s.OrderReference }, 29, trustPart},
	{"billReference", func(s *Submission) *string { return &s.BillReference }, 20, trustPart},
	{"productType", func(s *Submission) *string { return &s.ProductType }, 50, customerPart},
	{"productDescription", func(s *Submission) *string { return &s.ProductDescription }, 200, customerPart},
	{"serviceDate", func(s *Submission) *string { return &s.ServiceDate }, 40, customerPart},
	{"cardFirstName", func(s *Submission) *string { return &s.CardFirstName }, maxHolderName, cardPart},
	{"cardLastName", func(s *Submission) *string { return &s.CardLastName }, maxHolderName, cardPart},
	{"cardNumber", func(s *Submission) *string { return &s.CardNumber }, 30, cardPart},
	{"cardSecurity", func(s *Submission) *string { return &s.CardSecurity }, 4, cardPart},
	{"cardExpiryYear", func(s *Submission) *string { return &s.CardExpiryYear }, 4, cardPart},
	{"cardExpiryMonth", func(s *Submission) *string { return &s.CardExpiryMonth }, 2, cardPart},
	{"cardExpiry", func(s *Submission) *string { return &s.CardExpiry }, 9, cardPart},
	{"customerFirstName", func(s *Submission) *string { return &s.CustomerFirstName }, 50, customerPart},
	{"customerLastName", func(s *Submission) *string { return &s.CustomerLastName }, 50, customerPart},
	{"country", func(s *Submission) *string { return &s.Country }, 56, customerPart},
	{"mobileNumber", func(s *Submission) *string { return &s.MobileNumber }, 24, customerPart},
	{"emailAddress", func(s *Submission) *string { return &s.EmailAddress }, 254, customerPart},
	{"postalcodeZip", func(s *Submission) *string { return &s.PostalcodeZip }, 20, customerPart},
	{"address", func(s *Submission) *string { return &s.Address }, 200, customerPart},
	{"city", func(s *Submission) *string { return &s.City }, 100, customerPart},
	{"ipAddress", func(s *Submission) *string { return &s.IPAddress }, 45, customerPart},
	{"callbackUrl", func(s *Submission) *string { return &s.CallbackURL }, 2048, trustPart},
}

// maxHolderName is the card holder's names' length limit, each.
const maxHolderName = 50

// proseFields are free text a shop may take from a textarea (an address
// over two lines): their line breaks and tabs become spaces. Refused as
// control characters, they stranded the shopper on an error page before
// any card was asked, with no way back to the shop.
var proseFields = map[string]bool{
	"productType": true, "productDescription": true, "cardFirstName": true, "cardLastName": true,
	"customerFirstName": true, "customerLastName": true, "country": true, "address": true, "city": true,
}

// flattenLines turns each run of line breaks and tabs, with the spaces
// around it, into one space.
func flattenLines(s string) string {
	if !strings.ContainsAny(s, "\r\n\t") {
		return s
	}
	return lineBreaks.ReplaceAllString(s, " ")
}

var lineBreaks = regexp.MustCompile(` *[\r\n\t][ \r\n\t]*`)

// checkoutField names the checkout session id in our pages' forms.
const checkoutField = "checkout"

// ErrBadEncoding: the body is not form encoding.
var ErrBadEncoding = errors.New("the payment form is not valid form encoding")

// ParseSubmission reads a /cardPay body. Content-Type is not consulted;
// values are trimmed and unknown fields ignored.
func ParseSubmission(body string) (Submission, error) {
	v, err := url.ParseQuery(body)
	if err != nil {
		return Submission{}, ErrBadEncoding
	}
	return submissionOf(v)
}

// submissionOf reads a /cardPay form's fields, however they were encoded.
func submissionOf(v url.Values) (Submission, error) {
	var s Submission
	for _, f := range fields {
		if len(v[f.name]) > 1 {
			// Kadi would read the first copy and the shop's PHP the last.
			return Submission{}, fmt.Errorf("%w: the field %s appears more than once", ErrBadEncoding, f.name)
		}
		value := v.Get(f.name)
		if proseFields[f.name] {
			value = flattenLines(value)
		}
		*f.ptr(&s) = strings.TrimSpace(value)
	}
	// Our pages post their session's id as checkout; a shop's own form may
	// carry a field of that name too (a cart's "checkout=1"), which is not
	// ours to read, and made its post a 410 "Payment page expired". Only a
	// well-formed id makes a post a session's.
	ids := slices.DeleteFunc(slices.Clone(v[checkoutField]), func(id string) bool { return !checkout.ValidID(strings.TrimSpace(id)) })
	if len(ids) > 1 || len(ids) == 1 && len(v[checkoutField]) > 1 {
		return Submission{}, fmt.Errorf("%w: the field %s appears more than once", ErrBadEncoding, checkoutField)
	}
	if len(ids) == 1 {
		s.Checkout = strings.TrimSpace(ids[0])
	}
	return s, nil
}

// sessionFields are the merchant's fields a checkout session keeps: all
// but the token (which our pages never carry on) and the card, but for
// the cardholder's names, which prefill our card page when it may show
// them (shownName: not a card number typed in the wrong box, not a name
// the page would refuse).
func (s Submission) sessionFields() map[string]string {
	out := map[string]string{}
	for _, f := range fields {
		v := *f.ptr(&s)
		if isHolderName(f.name) {
			v = shownName(v) // a prefill only: the shopper types what is left out
		}
		if (f.part != cardPart || isHolderName(f.name)) && f.name != "token" && v != "" {
			out[f.name] = v
		}
	}
	return out
}

func isHolderName(name string) bool { return name == "cardFirstName" || name == "cardLastName" }

// resumed is the submission a checkout session's fields and a post from
// our page make together: the merchant's fields from the session (the
// browser cannot change them), the card from the post.
func resumed(stored map[string]string, posted Submission) Submission {
	var s Submission
	for _, f := range fields {
		if f.part == cardPart {
			*f.ptr(&s) = *f.ptr(&posted)
		} else if f.name != "token" {
			*f.ptr(&s) = stored[f.name]
		}
	}
	s.Checkout = posted.Checkout
	if s.CardExpiry != "" && s.CardExpiryMonth == "" && s.CardExpiryYear == "" {
		s.CardExpiryMonth, s.CardExpiryYear = card.SplitExpiry(s.CardExpiry)
	}
	return s
}

// HasCard reports whether any card field was posted: without them we
// collect the card ourselves.
func (s Submission) HasCard() bool {
	return s.CardNumber != "" || s.CardSecurity != "" || s.CardExpiryMonth != "" || s.CardExpiryYear != "" || s.CardExpiry != ""
}

type nameValue struct{ Name, Value string }

// Problem is one field rule a submission breaks.
type Problem struct{ Field, Message string }

// checkLengths applies docs/hosted-form.md's length limits to the fields of
// one part, and refuses text that is not UTF-8 or holds control characters.
func (s Submission) checkLengths(which part) []Problem {
	var out []Problem
	for _, f := range fields {
		if f.part != which {
			continue
		}
		if msg := textProblem(*f.ptr(&s), f.max); msg != "" {
			out = append(out, Problem{f.name, msg})
		}
	}
	return out
}

// textProblem is what is wrong with v as the text of a field of at most max
// characters, or "" when nothing is: the one rule for the fields posted
// and for what a page may show again (typedText).
func textProblem(v string, max int) string {
	switch {
	case !utf8.ValidString(v):
		// A shop page in Latin-1 posts "José" as one byte é: told only
		// that the name held characters not allowed, its developers
		// looked for them in the name.
		return "is not UTF-8 text: post the form as UTF-8 (its page's charset=utf-8, or accept-charset=\"UTF-8\" on the form)"
	// Counted as composed, as the bill's fields are: "é" sent as "e"
	// and a combining accent is one character.
	case utf8.RuneCountInString(norm.NFC.String(v)) > max:
		return fmt.Sprintf("must be at most %d characters", max)
	case strings.IndexFunc(v, isControl) >= 0:
		return "contains characters that are not allowed"
	}
	return ""
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// CheckEmail validates a bare address. Empty is allowed.
func CheckEmail(v string) error {
	if v == "" {
		return nil
	}
	a, err := mail.ParseAddress(v)
	if err != nil || a.Address != v || a.Name != "" || !strings.Contains(v[strings.LastIndex(v, "@")+1:], ".") {
		return errors.New("must be an e-mail address such as name@example.com")
	}
	return nil
}

// ErrCallbackURL explains why a callbackUrl cannot be trusted.
type ErrCallbackURL struct{ Reason string }

func (e *ErrCallbackURL) Error() string { return "callbackUrl " + e.Reason }

// CheckCallbackURL applies docs/hosted-form.md: absolute http(s), no query, no
// fragment, no credentials; https only in live mode.
func CheckCallbackURL(raw string, mode merchant.Mode) (*url.URL, error) {
	if raw == "" {
		return nil, &ErrCallbackURL{"is required"}
	}
	if len(raw) > 2048 || strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return nil, &ErrCallbackURL{"is not a valid URL"}
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, &ErrCallbackURL{"is not a valid URL"}
	case u.Scheme != "https" && u.Scheme != "http":
		return nil, &ErrCallbackURL{"must be an absolute http or https URL"}
	case mode == merchant.Live && u.Scheme != "https":
		return nil, &ErrCallbackURL{"must use https in live mode"}
	case u.Host == "" || u.Hostname() == "" || u.Opaque != "":
		return nil, &ErrCallbackURL{"must name a host"}
	case strings.HasSuffix(u.Hostname(), "."):
		// DNS's root dot, valid but refused with the rest: said, so the
		// shop's developer need not guess which character it was.
		return nil, &ErrCallbackURL{"must name its host without a trailing dot"}
	case !validHost(u.Hostname()):
		// The origin goes into the page's Content-Security-Policy: a host
		// with ';' or quotes in it would write directives of its own.
		return nil, &ErrCallbackURL{"must name a host by DNS name (ASCII, punycode for IDN) or IPv4 address"}
	case !validPort(u):
		// A port the browser cannot reach would still be charged first.
		return nil, &ErrCallbackURL{"must use a port between 1 and 65535"}
	case u.User != nil:
		return nil, &ErrCallbackURL{"must not carry credentials"}
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "?"):
		return nil, &ErrCallbackURL{"must not contain query parameters"}
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, &ErrCallbackURL{"must not contain a fragment"}
	}
	return u, nil
}

// CallbackOrigin is u's origin as callback origins are registered and
// compared: lower case, without the scheme's default port.
func CallbackOrigin(u *url.URL) string {
	host := u.Host // url.Parse has lowered the scheme already
	if p := u.Port(); (u.Scheme == "https" && p == "443") || (u.Scheme == "http" && p == "80") {
		host = u.Hostname()
	}
	return u.Scheme + "://" + strings.ToLower(host)
}

// ParseCallbackOrigin reads an origin a merchant registers for mode's
// callbacks: scheme and host (and a port), held to CheckCallbackURL's
// rules, nothing after them.
func ParseCallbackOrigin(raw string, mode merchant.Mode) (string, error) {
	if card.HoldsPAN(raw) { // saved, it would be in the audit log; not repeated
		return "", errors.New("a callback origin must not hold a card number")
	}
	u, err := CheckCallbackURL(raw, mode)
	if err != nil {
		return "", fmt.Errorf("callback origin %q: %s", raw, strings.TrimPrefix(err.Error(), "callbackUrl "))
	}
	if u.Path != "" && u.Path != "/" {
		return "", fmt.Errorf("callback origin %q: an origin is a scheme and a host (https://shop.example), without a path", raw)
	}
	return CallbackOrigin(u), nil
}

// ParseCallbackOrigins reads a list of origins, separated by commas, spaces
// or line breaks, each by ParseCallbackOrigin, once each in their order.
func ParseCallbackOrigins(list string, mode merchant.Mode) ([]string, error) {
	var origins []string
	for _, raw := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		o, err := ParseCallbackOrigin(raw, mode)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(origins, o) {
			origins = append(origins, o)
		}
	}
	return origins, nil
}

// dnsName has no trailing dot: the result page's Content-Security-Policy
// names the callback's origin as a CSP host-source (letters, digits,
// dashes, dots between labels), and a browser drops a source it cannot
// parse, then refuses the post back to the shop after the charge.
var dnsName = regexp.MustCompile(`^(?i)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`)

// validPort accepts no port, or a decimal one in 1–65535; a ':' with
// nothing after it is no port either.
func validPort(u *url.URL) bool {
	p := u.Port()
	if p == "" {
		return !strings.HasSuffix(u.Host, ":")
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// validHost is a DNS name or an IPv4 address in dotted form: an IPv6
// address, bracketed, is no CSP host-source (see dnsName).
func validHost(h string) bool {
	if len(h) > 253 {
		return false
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Is4()
	}
	return dnsName.MatchString(h) && !endsInNumber(h)
}

// endsInNumber is the URL Standard's test for a host the browser reads as
// an IPv4 address: its last label is a number (decimal, or 0x hex).
// Written any way but dotted decimal ("127.1", "0x7f000001", "017.0.0.1")
// the browser posts to the address it stands for, which is not the host
// the page's Content-Security-Policy names, and refuses the post back to
// the shop after the charge.
func endsInNumber(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if hex, ok := strings.CutPrefix(strings.ToLower(last), "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}
