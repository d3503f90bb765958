package card

import (
	"cmp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Redact masks every card number in s as its first six digits, a star for
// each hidden digit and its last four, dropping any separators inside it,
// and returns all other text unchanged. It runs on every log line,
// so text without digits is returned as is without allocating, and so is
// text whose digits contain no card number.
//
// A card number here is 13 to 19 digits that pass the Luhn check, bounded
// by non-digits, and written either solid or in groups joined by one to
// three separators (maxGap): a space or a dash, and the dot, underscore,
// plus (a form's space) that request ids, paths and encoded bodies carry,
// so "nnnn  nnnn" and "nnnn - nnnn" join as "nnnn nnnn" does. Not the
// slash: it joins a file path's numbered directories (a data dir's
// ".../TestX2088031234/001") into runs that pass Luhn one time in ten;
// RedactPath, for request paths, takes it too. Nor the colon, which
// would join a log line's times ("09:26:53.123+03:00") into such runs.
// Groups are joined greedily into chains ("1500 nnnn nnnn nnnn nnnn"), and
// every run of whole groups in a chain is tried, so a card
// number is found even when an amount or reference sits one space away from
// it. A card written straight on into its expiry and security code, in
// one solid run of digits (sixteen digits, then "1230" and "123"), is masked
// whole but its first six (cardTail).
//
// The test is deliberately wider than ParsePAN's: it ignores brand, since a
// scheme we do not route is no less sensitive. About one in ten 13 to 19
// digit numbers passes Luhn by chance, so the occasional millisecond
// timestamp or long reference gets masked too; that is the price of never
// logging a card number.
func Redact(s string) string { return redact(s, isSeparator) }

// RedactPath is Redact for a URL path, the client's: any character that is
// not a letter or digit may separate a card's groups in it
// ("/x/nnnn,nnnn,nnnn,nnnn"), and digits of other scripts count as the
// digits they are ("/x/４２４２…").
func RedactPath(p string) string {
	folded, offsets := fold(p)
	if offsets == nil {
		return redact(p, isAnySeparator)
	}
	// As redact does, masking in folded and copying from p: one function
	// for both, with the offsets optional, cost every log line about 25 ns
	// more (BenchmarkRedact, alternating builds).
	var out []byte
	copied := 0
	eachCardSpan(folded, isAnySeparator, func(from, to int, hideEnd bool) {
		out = append(out, p[copied:offsets[from]]...)
		out = appendMasked(out, folded[from:to], hideEnd)
		copied = offsets[to]
	})
	if out == nil {
		return p
	}
	return string(append(out, p[copied:]...))
}

// HoldsPAN reports whether s holds a card number of a brand we know: a
// run of whole digit groups, 13 to 19 digits joined by one to three of
// any characters that are not letters or digits, that passes Luhn, digits
// of any script counting as the digits they are. Every run inside a chain
// is tried, so a card followed by its expiry and CVV
// ("nnnn nnnn nnnn nnnn 01 25 123") is found, and so is one written
// straight on into them (cardTail). Narrower than Redact on purpose: it
// refuses text a merchant sent, where a long order or invoice number that
// merely passes Luhn must not be turned away.
func HoldsPAN(s string) bool {
	s, _ = foldText(s, false)
	var buf [16]digitGroup
	for groups, i := nextChain(s, 0, isAnySeparator, buf[:0]); groups != nil; groups, i = nextChain(s, i, isAnySeparator, buf[:0]) {
		branded := false
		eachLuhnRun(s, groups, func(a, _, _, end int) bool {
			branded = isBranded(s[groups[a].start:end])
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
	eachCardSpan(s, sep, func(from, to int, hideEnd bool) {
		if out == nil {
			out = make([]byte, 0, len(s))
		}
		out = append(out, s[copied:from]...)
		out = appendMasked(out, s[from:to], hideEnd)
		copied = to
	})
	if out == nil {
		return s
	}
	return string(append(out, s[copied:]...))
}

// eachCardSpan calls mask(from, to, hideEnd), left to right, for every
// stretch of s that Redact must mask, with sep telling the separators that
// join groups; hideEnd: keep no last four (a card run into its expiry and
// code, whose last four are the code).
func eachCardSpan(s string, sep func(byte) bool, mask func(from, to int, hideEnd bool)) {
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

// eachLuhnRun calls f(a, b, digits, end) for every card in a chain,
// s[groups[a].start:end], until f returns false: a run of whole groups,
// groups[a..b] (end is groups[b].end), of 13 to 19 digits that passes
// Luhn and is written as one card number is (joined); or a card of a known
// brand that ends inside its last group, the rest of that group its expiry
// and code (cardTail). These are the runs Redact masks from and HoldsPAN
// looks through.
func eachLuhnRun(s string, groups []digitGroup, f func(a, b, digits, end int) bool) {
	for a := range groups {
		digits := 0 // in groups[a..b-1]
		for b := a; b < len(groups) && digits < maxRedactDigits; b++ {
			g := groups[b]
			n := g.end - g.start
			if total := digits + n; total >= minRedactDigits && total <= maxRedactDigits &&
				luhnSum(s[groups[a].start:g.end])%10 == 0 && joined(s, groups[a:b+1], n) && !f(a, b, total, g.end) {
				return
			}
			for k := max(1, minRedactDigits-digits); k < n && digits+k <= maxRedactDigits; k++ {
				cut := g.start + k
				if cardTail(s[cut:g.end]) && luhnSum(s[groups[a].start:cut])%10 == 0 &&
					isBranded(s[groups[a].start:cut]) && joined(s, groups[a:b+1], k) && !f(a, b, digits+k, cut) {
					return
				}
			}
			digits += n
		}
	}
}

// joined reports whether groups, the last of them last digits long, are
// written as one card number is: every gap one space, dash, dot,
// underscore, plus or slash (mixed, as a typed number may be), or every
// gap alike but for spaces ("nnnn - nnnn - …", "nnnn,nnnn,…", doubled
// spaces) with the groups laid out as cards print them (4-4-4-4…, 4-6-5,
// 4-6-4). Separate numbers one after another ("0742 414 609, 0724 101
// 488", two dates, two addresses) are neither.
func joined(s string, groups []digitGroup, last int) bool {
	classic := true
	for i := 1; i < len(groups); i++ {
		gap := s[groups[i-1].end:groups[i].start]
		if len(gap) != 1 || !(gap[0] == '/' || isSeparator(gap[0])) {
			classic = false
			break
		}
	}
	if classic {
		return true
	}
	shape := func(gap string) string { return strings.Join(strings.Fields(gap), "") }
	first := shape(s[groups[0].end:groups[1].start])
	for i := 2; i < len(groups); i++ {
		if shape(s[groups[i-1].end:groups[i].start]) != first {
			return false
		}
	}
	size := func(i int) int {
		if i == len(groups)-1 {
			return last
		}
		return groups[i].end - groups[i].start
	}
	if len(groups) == 3 && size(0) == 4 && size(1) == 6 && (size(2) == 5 || size(2) == 4) {
		return true
	}
	for i := range groups {
		if n := size(i); n != 4 && !(i == len(groups)-1 && n >= 1 && n < 4) {
			return false
		}
	}
	return len(groups) >= 4
}

// cardTail reports whether digits could be what follows a card number
// typed or pasted on without a break: its expiry (MMYY or MMYYYY, month
// 01 to 12), its security code (3 or 4 digits), or the one then the other.
func cardTail(digits string) bool {
	code := func(d string) bool { return len(d) == 3 || len(d) == 4 }
	if code(digits) {
		return true
	}
	if len(digits) < 4 || !(digits[0] == '0' && digits[1] >= '1' || digits[0] == '1' && digits[1] <= '2') {
		return false
	}
	rest := digits[4:] // after MMYY
	if len(rest) >= 2 && digits[2:4] == "20" && (len(rest) == 2 || code(rest[2:])) {
		return true // MMYYYY, with a code or not
	}
	return len(rest) == 0 || code(rest)
}

const (
	minRedactDigits = 13
	maxRedactDigits = 19
	// maxGap is how many separators may join two groups: "nnnn  nnnn" and
	// "nnnn - nnnn" are one chain, as "nnnn nnnn" is.
	maxGap = 3
)

// digitGroup is a maximal run of digits, s[start:end].
type digitGroup struct{ start, end int }

// scanChain collects the digit groups starting at s[i] that are joined by
// one to maxGap separators, with their total digit count and the index just past
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
		j := i
		for j < len(s) && j-i < maxGap && sep(s[j]) {
			j++
		}
		if j > i && j < len(s) && isDigit(s[j]) {
			i = j
			continue
		}
		return groups, digits, i
	}
}

func isSeparator(c byte) bool {
	return c == ' ' || c == '-' || c == '.' || c == '_' || c == '+'
}

// isAnySeparator: in a client's path and in text a person typed, anything
// but a letter or digit may stand between a card's groups.
func isAnySeparator(c byte) bool {
	return !isDigit(c) && !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') && c < utf8.RuneSelf
}

// fold returns s with every rune one byte: a decimal digit of any script
// as its ASCII digit, a letter as 'a', anything else as a space, and for
// each byte of the result the offset of its rune in s (and len(s) last).
// ASCII text comes back as it is, with no offsets.
func fold(s string) (string, []int) { return foldText(s, true) }

// foldText is fold, with the offsets only when asked for (HoldsPAN needs
// none, and text in another script than Latin is common in a name).
func foldText(s string, withOffsets bool) (string, []int) {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s, nil
	}
	out := make([]byte, 0, len(s))
	var offsets []int
	if withOffsets {
		offsets = make([]int, 0, len(s)+1)
	}
	for i, r := range s {
		if withOffsets {
			offsets = append(offsets, i)
		}
		switch {
		case r < utf8.RuneSelf:
			out = append(out, byte(r))
		case unicode.IsDigit(r):
			out = append(out, '0'+byte(digitValue(r)))
		case unicode.IsLetter(r) || unicode.IsMark(r):
			out = append(out, 'a')
		default:
			out = append(out, ' ')
		}
	}
	if withOffsets {
		offsets = append(offsets, len(s))
	}
	return string(out), offsets
}

// digitValue is the value of r, a decimal digit (Unicode's Nd): each
// script's digits are ten code points in a row from its zero, and scripts
// whose digits sit side by side (mathematical digits) start at a zero each.
func digitValue(r rune) int {
	start := r
	for unicode.IsDigit(start-1) && r-start < 60 {
		start--
	}
	return int(r-start) % 10
}

// candidate is a run of whole groups, groups[first..last], that could be a
// card number.
type candidate struct {
	first, last int
	digits      int
	branded     bool
	// tailed: a card run straight on into its expiry and code, in one
	// group: the group is masked but its first six.
	tailed bool
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
func maskCardsInChain(s string, groups []digitGroup, mask func(from, to int, hideEnd bool)) {
	var found []candidate
	eachLuhnRun(s, groups, func(a, b, digits, end int) bool {
		found = append(found, candidate{a, b, digits, isBranded(s[groups[a].start:end]), end < groups[b].end})
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
			// Where either may be a card run into its code, the mask
			// shows no last four: they could be the code.
			c.first, c.last, c.tailed = min(c.first, o.first), max(c.last, o.last), c.tailed || o.tailed
			chosen = slices.Delete(chosen, i, i+1)
		}
		if !overlapped || c.branded {
			chosen = append(chosen, c)
		}
	}
	slices.SortFunc(chosen, func(x, y candidate) int { return cmp.Compare(x.first, y.first) })
	for _, c := range chosen {
		mask(groups[c.first].start, groups[c.last].end, c.tailed)
	}
}

// isBranded reports whether text, a run of groups, is a card number of a
// brand we know.
func isBranded(text string) bool { return isCardNumber(stripSeparators(text)) }

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
// stars, last four (with hideEnd, stars to the end), dropping the
// separators so the result reads as one masked number.
func appendMasked(out []byte, text string, hideEnd bool) []byte {
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
		if k < 6 || k >= total-4 && !hideEnd {
			out = append(out, text[i])
		} else {
			out = append(out, '*')
		}
		k++
	}
	return out
}
