package card

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
)

// PAN is a validated primary account number. Every way of printing,
// logging or encoding it yields the masked form; Reveal is the one door to
// the clear digits, so a grep for Reveal finds every place they leave.
//
// The digits are kept out of reach of reflection, because fmt prints
// unexported fields by reflection, bypassing our methods: a PAN held in a
// caller's unexported field would otherwise come out in full under %+v, and
// fmt follows even a pointer when it reports a bad verb. A func is the one
// kind of value reflection never looks inside; it prints an address. The
// pointer around it keeps PAN comparable so structs holding one still work
// with ==, but == compares identity, not digits: compare Fingerprints.
type PAN struct {
	held *sealedDigits
}

type sealedDigits struct {
	reveal func() string
}

const (
	minPANDigits = 12
	maxPANDigits = 19
)

// ParsePAN validates a card number as typed by a customer. Single spaces or
// dashes between digit groups are accepted because that is how the number
// is printed on the card; anything looser could hide typing mistakes.
func ParsePAN(s string) (PAN, error) {
	// Bound the work before looking at the text: 19 digits with a
	// separator between each is the longest acceptable input.
	if len(s) > 2*maxPANDigits-1 {
		return PAN{}, fmt.Errorf("card: card number is too long: %w", ErrPANFormat)
	}
	var buf [maxPANDigits]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			if n == maxPANDigits {
				return PAN{}, fmt.Errorf("card: card number has more than %d digits: %w", maxPANDigits, ErrPANFormat)
			}
			buf[n] = c
			n++
		case c == ' ' || c == '-':
			if i == 0 || i == len(s)-1 || !isDigit(s[i-1]) || !isDigit(s[i+1]) {
				return PAN{}, fmt.Errorf("card: card number separator must sit alone between digits: %w", ErrPANFormat)
			}
		default:
			return PAN{}, fmt.Errorf("card: card number contains a character other than digits, spaces or dashes: %w", ErrPANFormat)
		}
	}
	if n < minPANDigits {
		return PAN{}, fmt.Errorf("card: card number has %d digits, want at least %d: %w", n, minPANDigits, ErrPANFormat)
	}
	digits := string(buf[:n])
	if !Luhn(digits) {
		return PAN{}, fmt.Errorf("card: %w", ErrLuhn)
	}
	if brandOf(digits) == "" {
		return PAN{}, fmt.Errorf("card: %d-digit card number: %w", n, ErrBrand)
	}
	return PAN{held: &sealedDigits{reveal: func() string { return digits }}}, nil
}

func (p PAN) digits() string {
	if p.held == nil {
		return ""
	}
	return p.held.reveal()
}

// Brand is the card scheme; "" for the zero PAN.
func (p PAN) Brand() Brand {
	return brandOf(p.digits())
}

// First6 is the issuer prefix, which PCI DSS allows to be shown and stored.
func (p PAN) First6() string {
	d := p.digits()
	return d[:min(6, len(d))]
}

// Last4 is the tail customers recognise their card by; PCI DSS allows it
// to be shown and stored.
func (p PAN) Last4() string {
	d := p.digits()
	return d[max(0, len(d)-4):]
}

// Reveal returns the clear card number. Only the acquirer call should need
// it; anything else wants First6, Last4 or Fingerprint.
func (p PAN) Reveal() string { return p.digits() }

// String is the masked form: first six digits, a star for each hidden
// digit, last four.
func (p PAN) String() string { return mask(p.digits()) }

// GoString is masked too, so %#v in a debugging session cannot leak.
func (p PAN) GoString() string { return p.String() }

// Format masks for every verb. Without it, verbs such as %d or %x would
// fall back to reflection over the struct. %q quotes the masked form.
func (p PAN) Format(f fmt.State, verb rune) {
	if verb != 'q' {
		verb = 's'
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), p.String())
}

// LogValue keeps slog handlers, which do not all go through fmt, masked.
func (p PAN) LogValue() slog.Value { return slog.StringValue(p.String()) }

// MarshalJSON emits the masked form as a JSON string.
func (p PAN) MarshalJSON() ([]byte, error) {
	// The masked form is only digits and '*', so it needs no escaping.
	return []byte(`"` + p.String() + `"`), nil
}

// MarshalText emits the masked form, covering encoders that prefer text
// (including JSON map keys and slog's text handler).
func (p PAN) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// Fingerprint identifies a card without storing it: the same digits under
// the same key always give the same value, and without the key the value
// cannot be brute-forced back to the digits, which a plain hash of a
// 16-digit number with a known prefix and check digit could.
func Fingerprint(key []byte, p PAN) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(p.digits()))
	return hex.EncodeToString(mac.Sum(nil))
}

// mask keeps the first six and last four digits, the most PCI DSS allows
// to be displayed, and stars the rest. Numbers too short to hide anything
// that way are starred entirely.
func mask(digits string) string {
	if len(digits) < minPANDigits {
		return strings.Repeat("*", len(digits))
	}
	return digits[:6] + strings.Repeat("*", len(digits)-10) + digits[len(digits)-4:]
}
