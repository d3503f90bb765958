package card

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	nineteen := withCheckDigit("4" + strings.Repeat("2", 17)) // no card and code inside it: 4222222222222222224
	thirteen := withCheckDigit("422222222222")
	twelve := withCheckDigit("42424242424")
	sixteenNotLuhn := breakLuhn(visa4242)
	unknownBrand := withCheckDigit("900000000000000")
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", ""},
		{"no digits", "payment declined by issuer", "payment declined by issuer"},
		{"bare", visa4242, "424242******4242"},
		{"json", `{"cardNumber":"` + visa4242 + `","amount":"1500.00"}`,
			`{"cardNumber":"424242******4242","amount":"1500.00"}`},
		{"json number", `{"pan":` + visa4111 + `}`, `{"pan":411111******1111}`},
		{"form", "cardNumber=" + visa4242 + "&x=1", "cardNumber=424242******4242&x=1"},
		{"form with spaces encoded as plus", "cardNumber=4242+4242+4242+4242&x=1", "cardNumber=424242******4242&x=1"},
		{"dots, as a request id may", "id 4242.4242.4242.4242", "id 424242******4242"},
		{"underscores", "id 4242_4242_4242_4242", "id 424242******4242"},
		{"slashes join no groups: a file path's numbered dirs", "/tmp/X2088031234/001/data", "/tmp/X2088031234/001/data"},
		{"spaces", "card 4242 4242 4242 4242 ok", "card 424242******4242 ok"},
		{"dashes", "card 4242-4242-4242-4242 ok", "card 424242******4242 ok"},
		{"amex grouping", "amex 3782 822463 10005.", "amex 378282*****0005."},
		{"diners 14", "d=" + diners, "d=362272****1667"},
		{"thirteen digits", thirteen + "!", thirteen[:6] + "***" + thirteen[9:] + "!"},
		{"nineteen digits", "[" + nineteen + "]", "[" + nineteen[:6] + "*********" + nineteen[15:] + "]"},
		{"unknown brand still masked", unknownBrand, unknownBrand[:6] + "******" + unknownBrand[12:]},
		{"two cards", visa4242 + "," + mastercard5555, "424242******4242,555555******4444"},
		{"mastercard 2-series", "pan:" + mastercard2222, "pan:222300******3222"},
		{"amount one space before card", "1500 " + visa4242, "1500 424242******4242"},
		{"order ref one space after card", visa4242 + " 12345", "424242******4242 12345"},
		{"grouped card next to a date", "2026-03-15 4242 4242 4242 4242", "2026-03-15 424242******4242"},
		{"rival run with a brand is masked along with the card", "ref 4 5555 5555 5555 4444", "ref 455555*******4444"},
		{"utf-8 around card", "carte «" + visa4242 + "» payée", "carte «424242******4242» payée"},

		{"sixteen digits failing luhn", "ref " + sixteenNotLuhn, "ref " + sixteenNotLuhn},
		{"twelve digits", "ref " + twelve, "ref " + twelve},
		{"twenty digits, no card then an expiry or code", "id 91111111111111111114", "id 91111111111111111114"},
		{"card inside a longer digit run", "x1" + visa4242 + "1", "x1" + visa4242 + "1"},
		{"double space", "4242  4242 4242 4242", "424242******4242"},
		{"spaced dashes", "4242 - 4242 - 4242 - 4242", "424242******4242"},
		{"double dashes", "id 4242--4242--4242--4242", "id 424242******4242"},
		{"four spaces break grouping", "4242    4242 4242 4242", "4242    4242 4242 4242"},
		{"a time's fraction and its zone are not one number", "2026-11-04 18:17:34.803525945 +0300 EAT", "2026-11-04 18:17:34.803525945 +0300 EAT"},
		{"card in groups, its code stuck to the last", "pan 4242 4242 4242 4242737", "pan 424242*************"},
		{"card run into its expiry and code", "v=" + visa4242 + "1230123", "v=424242*****************"},
		{"card run into its code", visa4242 + "737", "424242*************"},
		{"card run into no expiry", visa4242 + "1330123", visa4242 + "1330123"},
		// Nineteen digits that are a card, or a shorter card and its code:
		// the code is not shown.
		{"nineteen digits or a card and its code", withCheckDigit("4" + strings.Repeat("1", 17)), "411111*************"},
		{"amount", "amount=1500.00&currency=KES", "amount=1500.00&currency=KES"},
		{"timestamp", "2026-03-15T12:00:00Z", "2026-03-15T12:00:00Z"},
		{"phone", "+254 712 345 678", "+254 712 345 678"},
		{"order ref", "order ORD-2026-000123 for 250.50", "order ORD-2026-000123 for 250.50"},
		{"lone digits", "1 2 3", "1 2 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

// A request path is the client's, and a card number may come split by
// slashes in it.
func TestRedactPath(t *testing.T) {
	for in, want := range map[string]string{
		"/x/4242/4242/4242/4242":                "/x/424242******4242",
		"/x/4242/4242/4242/4242/receipt":        "/x/424242******4242/receipt",
		"/x/" + visa4242:                        "/x/424242******4242",
		"/x/4242,4242,4242,4242":                "/x/424242******4242",
		"/x/4242:4242:4242:4242":                "/x/424242******4242",
		"/x/4242:4242;4242~4242":                "/x/4242:4242;4242~4242", // not one way of writing
		"/x/4242\t4242\n4242  4242":             "/x/424242******4242",
		"/x/4242\u00a04242\u00a04242\u00a04242": "/x/424242******4242",
		"/x/４２４２４２４２４２４２４２４２":                   "/x/424242******4242",
		"/x/é٤٢٤٢٤٢٤٢٤٢٤٢٤٢٤٢/y":                "/x/é424242******4242/y",
		"/x/" + visa4242 + "1230123":            "/x/424242*****************",
		"/payment/v2/bills":                     "/payment/v2/bills",
		"/dashboard/payments/ABCDEF123456":      "/dashboard/payments/ABCDEF123456",
		"/x/café/2026/11/27":                    "/x/café/2026/11/27",
	} {
		if got := RedactPath(in); got != want {
			t.Errorf("RedactPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRedactDoesNotAllocateWithoutCards(t *testing.T) {
	for _, line := range []string{benchLineWithoutCard, benchLineWithoutDigits} {
		if n := testing.AllocsPerRun(100, func() { _ = Redact(line) }); n != 0 {
			t.Errorf("Redact allocated %v times on %q", n, line)
		}
	}
}

// cardLikeRuns finds every stretch s[from:to] that Redact's contract
// forbids leaving intact: 13 to 19 digits bounded by non-digits, in groups
// joined by one to three separators as one card number is written
// (cardLayout), passing Luhn; and such groups whose last one goes on, with
// no break, with what an expiry and a security code look like, the card
// part of a known brand. It is written independently of Redact, by brute
// force, so the fuzz target checks the contract rather than the code. cut
// is where the card ends inside its last group, else 0.
func cardLikeRuns(s string, sep func(byte) bool) []cardRun {
	var found []cardRun
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) || (i > 0 && isDigit(s[i-1])) {
			continue
		}
		var starts, ends []int // the groups from s[i] on
		var gaps []string
		for j := i; ; {
			k := j
			for k < len(s) && isDigit(s[k]) {
				k++
			}
			starts, ends = append(starts, j), append(ends, k)
			g := k
			for g < len(s) && g-k < 3 && sep(s[g]) {
				g++
			}
			if g == k || g == len(s) || !isDigit(s[g]) || len(starts) > 19 {
				break
			}
			gaps, j = append(gaps, s[k:g]), g
		}
		for last := range starts {
			var digits string
			for x := 0; x < last; x++ {
				digits += s[starts[x]:ends[x]]
			}
			lens := func(lastLen int) []int {
				var l []int
				for x := 0; x < last; x++ {
					l = append(l, ends[x]-starts[x])
				}
				return append(l, lastLen)
			}
			whole := digits + s[starts[last]:ends[last]]
			if len(whole) >= 13 && len(whole) <= 19 && Luhn(whole) && cardLayout(gaps[:last], lens(len(whole)-len(digits))) {
				found = append(found, cardRun{i, ends[last], 0})
			}
			for k := 1; k < ends[last]-starts[last]; k++ {
				c := digits + s[starts[last]:starts[last]+k]
				if len(c) >= 13 && len(c) <= 19 && Luhn(c) && isCardNumber(c) && expiryAndCode.MatchString(s[starts[last]+k:ends[last]]) &&
					cardLayout(gaps[:last], lens(k)) {
					found = append(found, cardRun{i, ends[last], starts[last] + k})
				}
			}
		}
	}
	return found
}

// cardLayout reports whether groups of these lengths, with these gaps
// between them, are written as one card: every gap one of " -._+/", or
// every gap the same but for whitespace and the groups 4-4-4-4…, 4-6-5 or
// 4-6-4.
var layouts = regexp.MustCompile(`^((4-){3,}[1-4]|4-6-[45])$`)

func cardLayout(gaps []string, lens []int) bool {
	if !slices.ContainsFunc(gaps, func(g string) bool { return len(g) != 1 || !strings.Contains(" -._+/", g) }) {
		return true
	}
	for _, g := range gaps[1:] {
		if strings.Join(strings.Fields(g), "") != strings.Join(strings.Fields(gaps[0]), "") {
			return false
		}
	}
	var l []string
	for _, n := range lens {
		l = append(l, strconv.Itoa(n))
	}
	return layouts.MatchString(strings.Join(l, "-"))
}

type cardRun struct{ from, to, cut int }

// expiryAndCode is what may follow a card number run on without a break:
// a security code, an expiry (MMYY, MMYYYY), or both.
var expiryAndCode = regexp.MustCompile(`^(\d{3,4}|(0[1-9]|1[0-2])(\d{2}|20\d{2})(\d{3,4})?)$`)

// FuzzRedact checks that every card-like run in the input is broken by a
// mask, and that the output is exactly the input with those masks applied.
// Comparing runs found in the output with runs found in the input would not
// work: a mask's first six digits can join the digits before it into a
// new run that happens to spell an old one.
func FuzzRedact(f *testing.F) {
	for _, seed := range []string{
		"", "no digits here", visa4242, "4242 4242 4242 4242", "4242-4242-4242-4242",
		`{"cardNumber":"` + visa4242 + `"}`, "cardNumber=" + amex + "&x=1",
		"1500 " + visa4242 + " 12345", breakLuhn(visa4242), diners, "1 2 3 4 5 6 7 8 9 0 1 2 3 4",
		visa4242 + visa4242, visa4242 + " " + visa4242 + " " + visa4242,
		"42424242 42424242424242", "ref 4 5555 5555 5555 4444", "2026-03-15 4242 4242 4242 4242",
		"4242.4242_4242+4242", "/tmp/X2088031234/001/data", "42424 4242 4242 42+2", "/x/4242/4242/4242/4242",
		"4242  4242 - 4242,4242", "0742 414 609, 0724 101 488", "4242 4242 4242 4242737", visa4242 + "1230123", "４２４２４２４２４２４２４２４２", "٤٢٤٢٤٢٤٢٤٢٤٢٤٢٤٢",
		"6759 6498 2643 8453", "2200000000000004" + "1230123", "5060990000000000001",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		for _, r := range []struct {
			name   string
			redact func(string) string
			sep    func(byte) bool
			folds  bool
		}{{"Redact", Redact, isSeparator, false}, {"RedactPath", RedactPath, isAnySeparator, true}} {
			checkRedaction(t, r.name, in, r.redact(in), r.sep, r.folds)
		}
		// HoldsPAN walks the chains RedactPath does, and asks a brand too.
		folded, _ := fold(in)
		want := false
		for _, run := range cardLikeRuns(folded, isAnySeparator) {
			end := run.to
			if run.cut > 0 {
				end = run.cut
			}
			want = want || isCardNumber(digitsOf(folded[run.from:end]))
		}
		if got := HoldsPAN(in); got != want {
			t.Fatalf("HoldsPAN(%q) = %v, want %v", in, got, want)
		}
	})
}

// digitsOf is s without its separators.
func digitsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// checkRedaction checks out, what name made of in, against the spans
// eachCardSpan finds (in the folded text, when name folds), and that every
// card-like run is broken by one.
func checkRedaction(t *testing.T, name, in, out string, sep func(byte) bool, folds bool) {
	text, offsets := in, []int(nil)
	if folds {
		text, offsets = fold(in)
	}
	at := func(i int) int { // text's index i in in
		if offsets == nil {
			return i
		}
		return offsets[i]
	}
	type span struct {
		from, to int
		hideEnd  bool
	}
	var spans []span
	eachCardSpan(text, sep, func(from, to int, hideEnd bool) { spans = append(spans, span{from, to, hideEnd}) })
	var want strings.Builder
	copied := 0
	for _, sp := range spans {
		if sp.from < copied || sp.to <= sp.from {
			t.Fatalf("%s(%q): span %v out of order after %d", name, in, sp, copied)
		}
		want.WriteString(in[at(copied):at(sp.from)])
		digits := digitsOf(text[sp.from:sp.to])
		if len(digits) < 13 {
			t.Fatalf("%s(%q): span %q is too short to be a card", name, in, text[sp.from:sp.to])
		}
		if sp.hideEnd {
			want.WriteString(digits[:6] + strings.Repeat("*", len(digits)-6))
		} else {
			want.WriteString(digits[:6] + strings.Repeat("*", len(digits)-10) + digits[len(digits)-4:])
		}
		copied = sp.to
	}
	want.WriteString(in[at(copied):])
	if out != want.String() {
		t.Fatalf("%s(%q) = %q, want %q", name, in, out, want.String())
	}

	for _, run := range cardLikeRuns(text, sep) {
		broken := false
		for _, sp := range spans {
			if run.from < sp.to && sp.from < run.to {
				// A card of a known brand run into its code keeps none
				// of its last digits.
				broken = run.cut == 0 || sp.hideEnd
				break
			}
		}
		if !broken {
			t.Fatalf("%s(%q) = %q, left card-like %q intact", name, in, out, text[run.from:run.to])
		}
	}
}

const (
	benchLineWithoutDigits = `level=INFO msg="payment page served" merchant=acme-stores outlet=westlands channel=CARD ` +
		`customer="Jane Wanjiru" description="School fees, term two" status=awaiting_card_details source=web`
	benchLineWithoutCard = `time=2026-03-15T12:00:00.123+03:00 level=INFO msg="charge approved" merchant=M1024 ` +
		`order=ORD-2026-000123 amount=1500.00 currency=KES brand=VISA last4=4242 auth=A1B2C3 latency_ms=184`
	benchLineWithCard = `time=2026-03-15T12:00:00.123+03:00 level=WARN msg="unexpected field" merchant=M1024 ` +
		`order=ORD-2026-000123 body="cardNumber=` + visa4242 + `&amount=1500.00&currency=KES" ip=10.0.0.7`
)

func BenchmarkRedact(b *testing.B) {
	for _, bench := range []struct{ name, line string }{
		{"no digits", benchLineWithoutDigits},
		{"no card", benchLineWithoutCard},
		{"card", benchLineWithCard},
	} {
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bench.line)))
			for b.Loop() {
				_ = Redact(bench.line)
			}
		})
	}
}

func TestHoldsPAN(t *testing.T) {
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"", false},
		{"Zoe Wanjiru", false},
		{"4242424242424242", true},
		{"card 4242 4242 4242 4242 please", true},
		{"5555-5555-5555-4444", true},
		{"Amex 378282246310005", true},
		{"4242 4242 4242 4242 01 25 100", true}, // with its expiry and CVV
		{"card 4242/4242/4242/4242", true},
		{"5555-5555-5555-4444-12-27-737", true},
		{"4242  4242  4242  4242", true},
		{"4242 - 4242 - 4242 - 4242", true},
		{"4242,4242,4242,4242", true},
		{"card 4242:4242:4242:4242", true},
		{"4242#4242#4242#4242", true},
		{"4242\u00a04242\u00a04242\u00a04242", true},
		{"４２４２ ４２４２ ４２４２ ４２４２", true},
		{"٤٢٤٢٤٢٤٢٤٢٤٢٤٢٤٢", true},
		{"4242424242424242" + "1230123", true}, // run on into its expiry and code
		{"4242424242424242" + "737", true},
		{"4242    4242    4242    4242", false}, // four spaces: four numbers
		// A card typed in groups with its code or expiry stuck to the last.
		{"4242 4242 4242 4242737", true},
		{"3782 822463 100051234", true},
		{"4242 4242 4242 42421227", true},
		// Separate numbers one after another, which a review found refused
		// once any gap of up to three joined groups: phone numbers, dates,
		// addresses, invoices (each was a Luhn-valid run across them).
		{"Kilimani, call 0742 414 609, 0724 101 488", false},
		{"+254 20 446 6436, +254 766 396 548", false},
		{"2026-06-26 08:59 - 2026-06-26 10:59", false},
		{"41.98.100.193, 10.7.168.202", false},
		{"P.O. Box 4811 - 00114, 0751 879 897", false},
		// Schemes we do not route are card numbers all the same.
		{"Maestro 6759 6498 2643 8453", true},
		{"Mir 2200000000000004", true},
		{"Verve 5060990000000000001", true},
		{"6759649826438454", false},         // the Maestro one, failing Luhn
		{"4242424242424241", false},         // fails Luhn
		{"Invoice 1000000000000008", false}, // passes Luhn, no brand
		{"order 2026112512", false},         // too short
		{"42424242424242424242424", false},  // too long for a card
	} {
		if got := HoldsPAN(tt.text); got != tt.want {
			t.Errorf("HoldsPAN(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

func BenchmarkHoldsPAN(b *testing.B) {
	for _, bench := range []struct{ name, text string }{
		{"name", "Jane Wanjiru"},
		{"order", "ORD-2026-000123 1500.00"},
		{"card", "card 4242 4242 4242 4242 01 25 123"},
	} {
		b.Run(bench.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = HoldsPAN(bench.text)
			}
		})
	}
}
