package card

// Luhn reports whether digits, a string of ASCII digits only, carries a valid
// mod-10 check digit. Anything that is not purely digits is false rather than
// an error, so callers can use it as a plain predicate on untrusted text.
func Luhn(digits string) bool {
	if digits == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		if !isDigit(digits[i]) {
			return false
		}
	}
	return luhnSum(digits)%10 == 0
}

// luhnSum adds up the Luhn digits of s from the right, skipping anything
// that is not a digit, so Redact can check a grouped number in place
// without copying it.
func luhnSum(s string) int {
	sum := 0
	double := false
	for i := len(s) - 1; i >= 0; i-- {
		if !isDigit(s[i]) {
			continue
		}
		d := int(s[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
