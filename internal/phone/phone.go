// Package phone reads customers' mobile numbers as integrations send them
// and writes them the one way the spec documents. Numbers are checked
// against the real numbering plan (libphonenumber's metadata, through its
// maintained Go port), not a pattern: "+254 712345678", "+254712345678" and
// "0712345678" (national form, read in the operator's default region) are
// all the same Safaricom mobile, and "+254 112345678" is no mobile at all.
package phone

import (
	"errors"
	"strconv"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// ErrInvalid is any input that is not a mobile number.
var ErrInvalid = errors.New("must be a mobile number, in international form (+254 712345678) or national form (0712345678)")

// maxInput bounds what reaches the parser: E.164 numbers have at most 15
// digits; spaces, dashes and a '+' make room for a little more.
const maxInput = 32

// ValidRegion reports whether region is a two-letter region the numbering
// plan knows (KE, UG, TZ, RW, …).
func ValidRegion(region string) bool {
	return phonenumbers.GetCountryCodeForRegion(strings.ToUpper(region)) != 0
}

// Mobile parses raw, a number in international form or in the national form
// of defaultRegion, and returns it in E.123 international notation as the
// spec describes it: '+', the country code, a space, the national number
// ("+254 712345678").
func Mobile(raw, defaultRegion string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || len(raw) > maxInput || strings.ContainsFunc(raw, notPhoneChar) || strings.LastIndex(raw, "+") > 0 {
		return "", ErrInvalid
	}
	n, err := phonenumbers.Parse(raw, strings.ToUpper(defaultRegion))
	if err != nil || !phonenumbers.IsValidNumber(n) {
		return "", ErrInvalid
	}
	switch phonenumbers.GetNumberType(n) {
	case phonenumbers.MOBILE, phonenumbers.FIXED_LINE_OR_MOBILE:
	default:
		return "", ErrInvalid
	}
	return "+" + strconv.Itoa(int(n.GetCountryCode())) + " " + phonenumbers.GetNationalSignificantNumber(n), nil
}

// notPhoneChar refuses what no written phone number holds, so that letters
// (which libphonenumber would read as keypad digits) and extensions are
// not numbers here.
func notPhoneChar(r rune) bool {
	return !(r >= '0' && r <= '9' || r == '+' || r == ' ' || r == '-' || r == '(' || r == ')' || r == '.')
}
