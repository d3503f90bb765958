package card

import (
	"fmt"
	"strings"
	"time"
)

// Expiry is the month a card stops working at the end of. Year has four
// digits.
type Expiry struct {
	Month int
	Year  int
}

// maxYearsAhead bounds how far in the future an expiry may be. Issuers
// print at most a few years ahead, so anything further is a typo (often a
// two-digit year read the wrong way) rather than a real card.
const maxYearsAhead = 20

// ParseExpiry reads the expiry month and year as typed on the payment page.
// A card is good through the last day of its month, judged in now's
// location so that a customer is not turned away hours early because a
// server runs on UTC.
func ParseExpiry(month, year string, now time.Time) (Expiry, error) {
	m, ok := parseMonth(month)
	if !ok {
		return Expiry{}, fmt.Errorf("card: expiry month must be 1 to 12: %w", ErrExpiryFormat)
	}
	y, ok := parseYear(year)
	if !ok {
		return Expiry{}, fmt.Errorf("card: expiry year must be two or four digits: %w", ErrExpiryFormat)
	}
	// Count months since year zero so month and year compare as one number.
	expires := y*12 + m - 1
	current := now.Year()*12 + int(now.Month()) - 1
	if expires < current {
		return Expiry{}, fmt.Errorf("card: %w", ErrExpired)
	}
	if expires > current+maxYearsAhead*12 {
		return Expiry{}, fmt.Errorf("card: expiry is more than %d years ahead: %w", maxYearsAhead, ErrExpiryFormat)
	}
	return Expiry{Month: m, Year: y}, nil
}

// parseMonth accepts "1".."12" with an optional leading zero on single
// digits, as card forms and autofill send either.
func parseMonth(s string) (int, bool) {
	switch {
	case len(s) == 1 && isDigit(s[0]):
		m := int(s[0] - '0')
		return m, m >= 1
	case len(s) == 2 && isDigit(s[0]) && isDigit(s[1]):
		m := int(s[0]-'0')*10 + int(s[1]-'0')
		return m, m >= 1 && m <= 12
	}
	return 0, false
}

// parseYear takes "YY" as 20YY, which holds for every card issued this
// century, or a full four-digit year.
func parseYear(s string) (int, bool) {
	if len(s) != 2 && len(s) != 4 {
		return 0, false
	}
	y := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		y = y*10 + int(s[i]-'0')
	}
	if len(s) == 2 {
		y += 2000
	}
	return y, true
}

// SplitExpiry reads one expiry field as people type it ("12/29",
// "12 / 2029", "1229", "12-29") into the month and year ParseExpiry takes.
// What it cannot split comes back as it was, for ParseExpiry to refuse.
func SplitExpiry(s string) (month, year string) {
	s = strings.Join(strings.Fields(s), "")
	for _, sep := range []string{"/", "-", "."} {
		if m, y, ok := strings.Cut(s, sep); ok {
			return m, y
		}
	}
	if len(s) == 4 || len(s) == 6 {
		return s[:2], s[2:]
	}
	return s, ""
}
