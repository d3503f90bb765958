package card

import (
	"cmp"
	"slices"
)

// Redact masks every card number in s as its first six digits, a star for
// each hidden digit and its last four, dropping any separators inside it,
// and returns all other text unchanged. It runs on every log line,
// so text without digits is returned as is without allocating, and so is
// text whose digits contain no card number.
//
// A card number here is 13 to 19 digits that pass the Luhn check, bounded
// by non-digits, and written either solid or in groups joined by single
// separators: a space or a dash, and the dot, underscore, plus (a form's
// space) that request ids, paths and encoded bodies carry. Not the slash:
// it joins a file path's numbered directories (a data dir's
// ".../TestX2088031234/001") into runs that pass Luhn one time in ten;
// RedactPath, for request paths, takes it too.
// Groups are joined greedily into chains ("1500 nnnn nnnn nnnn nnnn"), and
// every run of whole groups in a chain is tried, so a card
// number is found even when an amount or reference sits one space away from
// it.
//
// The test is deliberately wider than ParsePAN's: it ignores brand, since a
// scheme we do not route is no less sensitive. About one in ten 13 to 19
// digit numbers passes Luhn by chance, so the occasional millisecond
// timestamp or long reference gets masked too; that is the price of never
// logging a card number.
func Redact(s string) string { return redact(s, isSeparator) }

// RedactPath is Redact for a URL path, where a card number may come split
// by slashes too ("/x/4242/4242/4242/4242"): the path is the client's, not
// a file's.
func RedactPath(p string) string { return redact(p, isPathSeparator) }

// HoldsPAN reports whether s holds a card number of a brand we know: a
// run of whole digit groups, 13 to 19 digits joined by single separators
// (the slash too), that passes Luhn. Every run inside a chain is tried, so
// a card followed by its expiry and CVV ("4242 4242 4242 4242 01 25 123")
// is found. Narrower than Redact on purpose: it refuses text a merchant
// sent, where a long order or invoice number that merely passes Luhn must
// not be turned away.
func HoldsPAN(s string) bool {
	var buf [16]digitGroup
	for groups, i := nextChain(s, 0, isPathSeparator, buf[:0]); groups != nil; groups, i = nextChain(s, i, isPathSeparator, buf[:0]) {
		branded := false
		eachLuhnRun(s, groups, func(a, b, _ int) bool {
			branded = brandOf(stripSeparators(s[groups[a].start:groups[b].end])) != ""
			return !branded
		})
		if branded {
			return true
		}
	}
	return false
}

func redact(s string, sep func(byte) bool) string {
	var out []byte // stays nil until the first mask, so clean text costs nothing
	copied := 0    // s[:copied] is already in out
	eachCardSpan(s, sep, func(from, to int) {
		if out == nil {
			out = make([]byte, 0, len(s))
		}
		out = append(out, s[copied:from]...)
		out = appendMasked(out, s[from:to])
		copied = to
	})
	if out == nil {
		return s
	}
	return string(append(out, s[copied:]...))
}

// eachCardSpan calls mask(from, to), left to right, for every stretch of s
// that Redact must mask, with sep telling the separators that join groups.
func eachCardSpan(s string, sep func(byte) bool, mask func(from, to int)) {
	var buf [16]digitGroup
	for groups, i := nextChain(s, 0, sep, buf[:0]); groups != nil; groups, i = nextChain(s, i, sep, buf[:0]) {
		maskCardsInChain(s, groups, mask)
	}
}

// nextChain finds the first chain at or after s[i] with digits enough for
// a card number, collected in buf, and the index just past it; no groups
// when there is none. Redact and HoldsPAN walk s alike with it.
func nextChain(s string, i int, sep func(byte) bool, buf []digitGroup) ([]digitGroup, int) {
	for i < len(s) {
		if !isDigit(s[i]) {
			i++
			continue
		}
		groups, digits, end := scanChain(s, i, sep, buf)
		if i = end; digits >= minRedactDigits {
			return groups, i
		}
	}
	return nil, i
}

// eachLuhnRun calls f(a, b, digits) for every run of whole groups in a
// chain, groups[a..b], of 13 to 19 digits that passes Luhn, until f
// returns false: the runs Redact masks from and HoldsPAN looks through.
func eachLuhnRun(s string, groups []digitGroup, f func(a, b, digits int) bool) {
	for a := range groups {
		digits := 0
		for b := a; b < len(groups); b++ {
			if digits += groups[b].end - groups[b].start; digits > maxRedactDigits {
				break
			}
			if digits >= minRedactDigits && luhnSum(s[groups[a].start:groups[b].end])%10 == 0 && !f(a, b, digits) {
				return
			}
		}
	}
}

const (
	minRedactDigits = 13
	maxRedactDigits = 19
)

// digitGroup is a maximal run of digits, s[start:end].
type digitGroup struct{ start, end int }

// scanChain collects the digit groups starting at s[i] that are joined by
// single separators, with their total digit count and the index just past
// the last one.
func scanChain(s string, i int, sep func(byte) bool, groups []digitGroup) ([]digitGroup, int, int) {
	digits := 0
	for {
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		groups = append(groups, digitGroup{start, i})
		digits += i - start
		if i+1 < len(s) && sep(s[i]) && isDigit(s[i+1]) {
			i++
			continue
		}
		return groups, digits, i
	}
}

func isSeparator(c byte) bool {
	return c == ' ' || c == '-' || c == '.' || c == '_' || c == '+'
}

func isPathSeparator(c byte) bool { return c == '/' || isSeparator(c) }

// candidate is a run of whole groups, groups[first..last], that could be a
// card number.
type candidate struct {
	first, last int
	digits      int
	branded     bool
}

// maskCardsInChain calls mask(from, to), left to right, for the stretches
// of a chain that must be masked so that no Luhn-valid run of 13 to 19
// digits in whole groups survives intact.
//
// Candidates can overlap: in "2026-03-15 nnnn nnnn nnnn nnnn" the run
// "03 15 nnnn nnnn nnnn" may pass Luhn by chance as well as the card. We
// mask the likeliest card first (a known brand, then more digits, then
// fewer groups), and a rival that shares a group with it is already broken
// by that mask, so the date survives. Two overlapping candidates that both
// carry a known brand are masked as one stretch, because if the wrong one
// had been chosen most of the real number would be left readable.
func maskCardsInChain(s string, groups []digitGroup, mask func(from, to int)) {
	var found []candidate
	eachLuhnRun(s, groups, func(a, b, digits int) bool {
		found = append(found, candidate{a, b, digits, brandOf(stripSeparators(s[groups[a].start:groups[b].end])) != ""})
		return true
	})
	if len(found) == 0 {
		return
	}
	slices.SortStableFunc(found, func(x, y candidate) int {
		switch {
		case x.branded != y.branded:
			if x.branded {
				return -1
			}
			return 1
		case x.digits != y.digits:
			return cmp.Compare(y.digits, x.digits)
		default:
			return cmp.Compare(x.last-x.first, y.last-y.first)
		}
	})

	var chosen []candidate
	for _, c := range found {
		overlapped := false
		for i := 0; i < len(chosen); {
			o := chosen[i]
			if c.first > o.last || o.first > c.last {
				i++
				continue
			}
			overlapped = true
			if !c.branded {
				break
			}
			c.first, c.last = min(c.first, o.first), max(c.last, o.last)
			chosen = slices.Delete(chosen, i, i+1)
		}
		if !overlapped || c.branded {
			chosen = append(chosen, c)
		}
	}
	slices.SortFunc(chosen, func(x, y candidate) int { return cmp.Compare(x.first, y.first) })
	for _, c := range chosen {
		mask(groups[c.first].start, groups[c.last].end)
	}
}

// stripSeparators returns the digits of a run of groups of at most
// maxRedactDigits digits.
func stripSeparators(text string) string {
	var buf [maxRedactDigits]byte
	n := 0
	for i := 0; i < len(text) && n < len(buf); i++ {
		if isDigit(text[i]) {
			buf[n] = text[i]
			n++
		}
	}
	return string(buf[:n])
}

// appendMasked writes the digits of text, a run of groups, as first six,
// stars, last four, dropping the separators so the result reads as one
// masked number.
func appendMasked(out []byte, text string) []byte {
	total := 0
	for i := 0; i < len(text); i++ {
		if isDigit(text[i]) {
			total++
		}
	}
	k := 0
	for i := 0; i < len(text); i++ {
		if !isDigit(text[i]) {
			continue
		}
		if k < 6 || k >= total-4 {
			out = append(out, text[i])
		} else {
			out = append(out, '*')
		}
		k++
	}
	return out
}
