// Package money holds amounts as integer minor units of an ISO 4217 currency,
// so that no amount we charge, store or report ever passes through binary
// floating point.
package money

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Errors returned by Parse and FromMinor. Callers tell them apart with
// errors.Is; the wrapping text adds the currency but never the raw input,
// which may be arbitrary merchant bytes headed for a log.
var (
	ErrUnknownCurrency = errors.New("unknown currency code")
	ErrFormat          = errors.New("amount must be plain decimal digits with an optional single '.'")
	ErrPrecision       = errors.New("amount has more decimal places than the currency allows")
	ErrNotPositive     = errors.New("amount must be greater than zero")
	ErrTooLarge        = errors.New("amount is too large")
)

// Amount is a quantity of one currency counted in its minor unit (cents for
// KES, whole shillings for UGX, fils for BHD).
type Amount struct {
	Minor    int64
	Currency Currency
}

// Parse reads a merchant-supplied decimal such as "1500.00" in the given
// currency. It is deliberately strict: anything a person might read two ways
// (signs, exponents, separators, surplus decimal places) is refused rather
// than guessed at.
func Parse(text string, code string) (Amount, error) {
	cur, ok := LookupCurrency(code)
	if !ok {
		return Amount{}, fmt.Errorf("money: currency %.8q: %w", code, ErrUnknownCurrency)
	}
	minor, err := toMinor(text, cur.Digits, false)
	if rest, negative := strings.CutPrefix(text, "-"); err != nil && negative {
		if _, e := toMinor(rest, cur.Digits, true); e == nil {
			err = ErrNotPositive // "-5": a number, and the rule it breaks is that one
		}
	}
	if err != nil {
		return Amount{}, fmt.Errorf("money: %s amount: %w", cur.Code, err)
	}
	if minor == 0 {
		return Amount{}, fmt.Errorf("money: %s amount: %w", cur.Code, ErrNotPositive)
	}
	return Amount{Minor: minor, Currency: cur}, nil
}

// FromMinor builds an amount from a stored minor-unit count. It refuses
// zero and negatives for the same reason Parse does: a charge of nothing, or
// of less than nothing, is always a bug upstream.
func FromMinor(minor int64, code string) (Amount, error) {
	cur, ok := LookupCurrency(code)
	if !ok {
		return Amount{}, fmt.Errorf("money: currency %.8q: %w", code, ErrUnknownCurrency)
	}
	if minor <= 0 {
		return Amount{}, fmt.Errorf("money: %s minor units %d: %w", cur.Code, minor, ErrNotPositive)
	}
	return Amount{Minor: minor, Currency: cur}, nil
}

// String renders the amount with exactly the currency's minor digits, the
// form acquirers and merchants' reconciliation expect ("1500.00", "1500",
// "1.500").
// Grouped is String with thousands separators, for people to read:
// "1,500.00", "250,000". Wire formats keep String.
func (a Amount) Grouped() string {
	whole, frac, hasFrac := strings.Cut(a.String(), ".")
	var b strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if hasFrac {
		b.WriteString("." + frac)
	}
	return b.String()
}

func (a Amount) String() string {
	digits := max(a.Currency.Digits, 0)
	negative := a.Minor < 0
	magnitude := uint64(a.Minor)
	if negative {
		// Two's complement negation in uint64 keeps math.MinInt64 exact.
		magnitude = -magnitude
	}
	text := strconv.FormatUint(magnitude, 10)
	if digits > 0 {
		if len(text) <= digits {
			text = strings.Repeat("0", digits-len(text)+1) + text
		}
		text = text[:len(text)-digits] + "." + text[len(text)-digits:]
	}
	if negative {
		return "-" + text
	}
	return text
}

// EqualText reports whether text names the same value as a, so a callback
// that echoes "1500" or "1500.000" still matches a stored 1500.00 KES. Unlike
// Parse it tolerates surplus trailing zeros, because they do not change the
// value being compared; anything else that Parse would refuse is unequal.
func (a Amount) EqualText(text string) bool {
	minor, err := toMinor(text, max(a.Currency.Digits, 0), true)
	return err == nil && minor == a.Minor
}

// toMinor converts decimal text to a count of 10^-digits units. With
// ignoreTrailingZeros, zeros past the precision are dropped before the
// precision check instead of being an error.
func toMinor(text string, digits int, ignoreTrailingZeros bool) (int64, error) {
	whole, fraction, hasDot := strings.Cut(text, ".")
	if whole == "" || (hasDot && fraction == "") || !allDigits(whole) || !allDigits(fraction) {
		return 0, ErrFormat
	}
	if ignoreTrailingZeros {
		fraction = strings.TrimRight(fraction, "0")
	}
	if len(fraction) > digits {
		return 0, ErrPrecision
	}
	var n int64
	push := func(d int64) error {
		if n > (math.MaxInt64-d)/10 {
			return ErrTooLarge
		}
		n = n*10 + d
		return nil
	}
	for _, s := range [...]string{whole, fraction} {
		for i := 0; i < len(s); i++ {
			if err := push(int64(s[i] - '0')); err != nil {
				return 0, err
			}
		}
	}
	for range digits - len(fraction) {
		if err := push(0); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// allDigits is true for the empty string, which callers rule out where it
// matters; a second '.' lands here as a non-digit.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// CheckDecimal applies the rules of Parse that need no currency (format,
// sign, size), so an amount can be judged even when its currency is wrong.
func CheckDecimal(text string) error {
	_, fraction, _ := strings.Cut(text, ".")
	minor, err := toMinor(text, len(fraction), false)
	if err != nil {
		return err
	}
	if minor == 0 {
		return ErrNotPositive
	}
	return nil
}
