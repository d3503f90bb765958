package card

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

// Well-known scheme test numbers. They live only in test files: production
// code must never special-case them.
const (
	visa4242       = "4242424242424242"
	visa4111       = "4111111111111111"
	visa0002       = "4000000000000002"
	mastercard5555 = "5555555555554444"
	mastercard2222 = "2223003122003222"
	amex           = "378282246310005"
	discover       = "6011111111111117"
	jcb            = "3530111333300000"
	diners         = "36227206271667"
)

// withCheckDigit appends the digit that makes body pass Luhn, so tests can
// build valid numbers of any prefix and length.
func withCheckDigit(body string) string {
	for d := '0'; d <= '9'; d++ {
		if candidate := body + string(d); Luhn(candidate) {
			return candidate
		}
	}
	panic("unreachable: one check digit always fits")
}

// breakLuhn changes the last digit so the number no longer passes Luhn.
func breakLuhn(number string) string {
	last := number[len(number)-1]
	return number[:len(number)-1] + string('0'+(last-'0'+1)%10)
}

func TestLuhn(t *testing.T) {
	tests := []struct {
		digits string
		want   bool
	}{
		{visa4242, true},
		{visa4111, true},
		{mastercard5555, true},
		{amex, true},
		{diners, true},
		{"79927398713", true},
		{"0", true},
		{"00", true},
		{"18", true},
		{"59", true},
		{breakLuhn(visa4242), false},
		{"79927398710", false},
		{"1", false},
		{"", false},
		{"4242 4242 4242 4242", false},
		{"4242-4242-4242-4242", false},
		{"42424242424242a2", false},
		{"-" + visa4242, false},
		{"٤٢٤٢", false},
	}
	for _, tt := range tests {
		if got := Luhn(tt.digits); got != tt.want {
			t.Errorf("Luhn(%q) = %v, want %v", tt.digits, got, tt.want)
		}
	}
}

func TestParsePAN(t *testing.T) {
	nineteenVisa := withCheckDigit("4" + strings.Repeat("1", 17))
	tests := []struct {
		name      string
		input     string
		wantClear string
		wantBrand Brand
		wantErr   error
	}{
		{"visa", visa4242, visa4242, Visa, nil},
		{"visa 4111", visa4111, visa4111, Visa, nil},
		{"visa 0002", visa0002, visa0002, Visa, nil},
		{"visa 13 digits", withCheckDigit("422222222222"), withCheckDigit("422222222222"), Visa, nil},
		{"visa 19 digits", nineteenVisa, nineteenVisa, Visa, nil},
		{"mastercard 5-series", mastercard5555, mastercard5555, Mastercard, nil},
		{"mastercard 2-series", mastercard2222, mastercard2222, Mastercard, nil},
		{"mastercard 2221 low edge", withCheckDigit("222100000000000"), withCheckDigit("222100000000000"), Mastercard, nil},
		{"mastercard 2720 high edge", withCheckDigit("272099999999999"), withCheckDigit("272099999999999"), Mastercard, nil},
		{"mastercard 51", withCheckDigit("510000000000000"), withCheckDigit("510000000000000"), Mastercard, nil},
		{"amex", amex, amex, Amex, nil},
		{"amex 34", withCheckDigit("34000000000000"), withCheckDigit("34000000000000"), Amex, nil},
		{"discover", discover, discover, Discover, nil},
		{"discover 644", withCheckDigit("644000000000000"), withCheckDigit("644000000000000"), Discover, nil},
		{"discover 65 19 digits", withCheckDigit("650000000000000000"), withCheckDigit("650000000000000000"), Discover, nil},
		{"jcb", jcb, jcb, JCB, nil},
		{"jcb 3589 high edge", withCheckDigit("358900000000000"), withCheckDigit("358900000000000"), JCB, nil},
		{"diners 14", diners, diners, DinersClub, nil},
		{"diners 300", withCheckDigit("3000000000000"), withCheckDigit("3000000000000"), DinersClub, nil},
		{"diners 38", withCheckDigit("380000000000000"), withCheckDigit("380000000000000"), DinersClub, nil},
		{"unionpay", withCheckDigit("620000000000000"), withCheckDigit("620000000000000"), UnionPay, nil},

		{"spaces", "4242 4242 4242 4242", visa4242, Visa, nil},
		{"dashes", "4242-4242-4242-4242", visa4242, Visa, nil},
		{"amex grouping", "3782 822463 10005", amex, Amex, nil},
		{"mixed separators", "4242 4242-4242 4242", visa4242, Visa, nil},

		{"empty", "", "", "", ErrPANFormat},
		{"11 digits", withCheckDigit("4242424242"), "", "", ErrPANFormat},
		{"20 digits", withCheckDigit("4" + strings.Repeat("1", 18)), "", "", ErrPANFormat},
		{"40 digits", strings.Repeat("4", 40), "", "", ErrPANFormat},
		{"letter", "4242424242424a42", "", "", ErrPANFormat},
		{"double space", "4242  4242 4242 4242", "", "", ErrPANFormat},
		{"space dash", "4242 -4242 4242 4242", "", "", ErrPANFormat},
		{"leading space", " " + visa4242, "", "", ErrPANFormat},
		{"trailing space", visa4242 + " ", "", "", ErrPANFormat},
		{"leading dash", "-" + visa4242, "", "", ErrPANFormat},
		{"tab", "4242\t4242 4242 4242", "", "", ErrPANFormat},
		{"dot", "4242.4242.4242.4242", "", "", ErrPANFormat},
		{"newline", visa4242 + "\n", "", "", ErrPANFormat},
		{"fullwidth digits", "４２４２４２４２４２４２４２４２", "", "", ErrPANFormat},

		{"luhn fail", breakLuhn(visa4242), "", "", ErrLuhn},
		{"luhn fail grouped", "4242 4242 4242 4243", "", "", ErrLuhn},

		{"12 digits, no brand issues them", withCheckDigit("42424242424"), "", "", ErrBrand},
		{"starts with 9", withCheckDigit("900000000000000"), "", "", ErrBrand},
		{"starts with 1", withCheckDigit("100000000000000"), "", "", ErrBrand},
		{"visa 15 digits", withCheckDigit("42424242424242"), "", "", ErrBrand},
		{"mastercard 15 digits", withCheckDigit("55555555555544"), "", "", ErrBrand},
		{"amex 16 digits", withCheckDigit("378282246310005"), "", "", ErrBrand},
		{"2220 below 2-series", withCheckDigit("222099999999999"), "", "", ErrBrand},
		{"2721 above 2-series", withCheckDigit("272100000000000"), "", "", ErrBrand},
		{"56 not mastercard", withCheckDigit("560000000000000"), "", "", ErrBrand},
		{"3527 below jcb", withCheckDigit("352700000000000"), "", "", ErrBrand},
		{"306 not diners", withCheckDigit("306000000000000"), "", "", ErrBrand},
		{"643 not discover", withCheckDigit("643000000000000"), "", "", ErrBrand},
		{"6012 not discover", withCheckDigit("601200000000000"), "", "", ErrBrand},
	}
	longDigits := regexp.MustCompile(`[0-9]{5,}`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePAN(tt.input)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParsePAN(%q) error = %v, want %v", tt.input, err, tt.wantErr)
			}
			if err != nil {
				if msg := err.Error(); longDigits.MatchString(msg) {
					t.Errorf("error %q carries digits from the card number", msg)
				}
				if got.Reveal() != "" {
					t.Errorf("ParsePAN(%q) returned digits alongside an error", tt.input)
				}
				return
			}
			if got.Reveal() != tt.wantClear || got.Brand() != tt.wantBrand {
				t.Errorf("ParsePAN(%q) = %s %s, want %s %s", tt.input, got.Reveal(), got.Brand(), tt.wantClear, tt.wantBrand)
			}
		})
	}
}

func TestPANParts(t *testing.T) {
	thirteen := withCheckDigit("422222222222")
	tests := []struct {
		input      string
		wantFirst6 string
		wantLast4  string
		wantMasked string
	}{
		{visa4242, "424242", "4242", "424242******4242"},
		{mastercard5555, "555555", "4444", "555555******4444"},
		{amex, "378282", "0005", "378282*****0005"},
		{diners, "362272", "1667", "362272****1667"},
		{thirteen, "422222", thirteen[9:], "422222***" + thirteen[9:]},
	}
	for _, tt := range tests {
		p, err := ParsePAN(tt.input)
		if err != nil {
			t.Fatalf("ParsePAN(%q): %v", tt.input, err)
		}
		if got := p.First6(); got != tt.wantFirst6 {
			t.Errorf("First6() = %q, want %q", got, tt.wantFirst6)
		}
		if got := p.Last4(); got != tt.wantLast4 {
			t.Errorf("Last4() = %q, want %q", got, tt.wantLast4)
		}
		if got := p.String(); got != tt.wantMasked {
			t.Errorf("String() = %q, want %q", got, tt.wantMasked)
		}
	}
}

func TestZeroPAN(t *testing.T) {
	var p PAN
	if p.Reveal() != "" || p.String() != "" || p.First6() != "" || p.Last4() != "" || p.Brand() != "" {
		t.Errorf("zero PAN should be empty everywhere, got %q %q %q %q %q", p.Reveal(), p.String(), p.First6(), p.Last4(), p.Brand())
	}
	if got, _ := json.Marshal(p); string(got) != `""` {
		t.Errorf("json of zero PAN = %s", got)
	}
}

// heldPAN mimics how other packages carry a PAN: exported, unexported,
// by pointer and in collections.
type heldPAN struct {
	Order   string
	Card    PAN
	ByRef   *PAN
	Many    []PAN
	Keyed   map[string]PAN
	private PAN
}

func TestPANNeverPrintsClearDigits(t *testing.T) {
	// A number whose middle digits appear nowhere else in it, so any leak
	// of the hidden part is unmistakable.
	clear := withCheckDigit("424242" + "987650" + "123")
	hidden := clear[6 : len(clear)-4]
	p, err := ParsePAN(clear)
	if err != nil {
		t.Fatal(err)
	}
	held := heldPAN{Order: "ord-1", Card: p, ByRef: &p, Many: []PAN{p}, Keyed: map[string]PAN{"k": p}, private: p}

	outputs := map[string]string{}
	for _, verb := range []string{"%v", "%s", "%+v", "%#v", "%q", "%d", "%x", "%X", "%10.4s", "%-30v", "%T %v"} {
		outputs["fmt "+verb+" PAN"] = fmt.Sprintf(verb, p)
		outputs["fmt "+verb+" *PAN"] = fmt.Sprintf(verb, &p)
		outputs["fmt "+verb+" struct"] = fmt.Sprintf(verb, held)
		outputs["fmt "+verb+" *struct"] = fmt.Sprintf(verb, &held)
	}
	outputs["fmt Sprint"] = fmt.Sprint(p, held)
	outputs["fmt Sprintln"] = fmt.Sprintln(p, &p)
	outputs["GoString"] = p.GoString()
	outputs["error wrap"] = fmt.Errorf("charging %v: %w", p, errors.New("declined")).Error()

	for name, handler := range map[string]func(*bytes.Buffer) slog.Handler{
		"slog json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"slog text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(handler(&buf))
		log.Info("charge", "pan", p, "ptr", &p, "held", held, slog.Any("any", p), slog.Group("g", "pan", p))
		log.With("pan", p).Info("again")
		outputs[name] = buf.String()
	}

	asJSON, err := json.Marshal(held)
	if err != nil {
		t.Fatal(err)
	}
	outputs["json"] = string(asJSON)
	mapKeyJSON, err := json.Marshal(map[PAN]int{p: 1})
	if err != nil {
		t.Fatal(err)
	}
	outputs["json map key"] = string(mapKeyJSON)
	text, _ := p.MarshalText()
	outputs["MarshalText"] = string(text)

	for name, out := range outputs {
		if strings.Contains(out, clear) || strings.Contains(out, hidden) {
			t.Errorf("%s leaked the card number: %s", name, out)
		}
	}
	for _, name := range []string{"fmt %v PAN", "fmt %s PAN", "fmt %d PAN", "slog json", "slog text", "json", "MarshalText"} {
		if !strings.Contains(outputs[name], p.String()) {
			t.Errorf("%s should show the masked form %s: %s", name, p.String(), outputs[name])
		}
	}
	if want := `"` + p.String() + `"`; outputs["fmt %q PAN"] != want {
		t.Errorf("%%q = %s, want %s", outputs["fmt %q PAN"], want)
	}
	if !strings.Contains(outputs["json"], `"Card":"`+p.String()+`"`) {
		t.Errorf("json of a struct should hold the masked string: %s", outputs["json"])
	}
}

func TestFingerprint(t *testing.T) {
	a, _ := ParsePAN(visa4242)
	same, _ := ParsePAN("4242-4242-4242-4242")
	other, _ := ParsePAN(visa4111)
	key := []byte("fingerprint key one")
	otherKey := []byte("fingerprint key two")

	fp := Fingerprint(key, a)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(fp) {
		t.Fatalf("Fingerprint = %q, want 64 lower-case hex digits", fp)
	}
	tests := []struct {
		name string
		got  string
		same bool
	}{
		{"same card, same key", Fingerprint(key, same), true},
		{"other card, same key", Fingerprint(key, other), false},
		{"same card, other key", Fingerprint(otherKey, a), false},
	}
	for _, tt := range tests {
		if (tt.got == fp) != tt.same {
			t.Errorf("%s: equal = %v, want %v", tt.name, tt.got == fp, tt.same)
		}
	}
	if strings.Contains(fp, visa4242) {
		t.Error("fingerprint contains the card number")
	}
}

func FuzzParsePAN(f *testing.F) {
	for _, seed := range []string{
		visa4242, "4242 4242 4242 4242", "4242-4242-4242-4242", amex, diners, jcb,
		discover, mastercard2222, breakLuhn(visa4242), "", " ", "-", "4242--4242",
		strings.Repeat("4", 40), withCheckDigit("900000000000000"), "4242424242424a42",
	} {
		f.Add(seed)
	}
	longDigits := regexp.MustCompile(`[0-9]{5,}`)
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePAN(s)
		if err != nil {
			if !errors.Is(err, ErrPANFormat) && !errors.Is(err, ErrLuhn) && !errors.Is(err, ErrBrand) {
				t.Fatalf("ParsePAN(%q) error %v matches no sentinel", s, err)
			}
			if longDigits.MatchString(err.Error()) {
				t.Fatalf("error %q carries digits", err)
			}
			return
		}
		clear := p.Reveal()
		stripped := strings.NewReplacer(" ", "", "-", "").Replace(s)
		if clear != stripped {
			t.Fatalf("ParsePAN(%q).Reveal() = %q, want %q", s, clear, stripped)
		}
		if len(clear) < 12 || len(clear) > 19 || !Luhn(clear) || p.Brand() == "" {
			t.Fatalf("ParsePAN(%q) accepted %q brand %q", s, clear, p.Brand())
		}
		masked := p.String()
		if len(masked) != len(clear) || !strings.HasPrefix(masked, p.First6()) || !strings.HasSuffix(masked, p.Last4()) ||
			strings.Count(masked, "*") != len(clear)-10 {
			t.Fatalf("masked %q does not fit %q", masked, clear)
		}
		again, err := ParsePAN(clear)
		if err != nil || again.Reveal() != clear {
			t.Fatalf("reparsing %q: %v", masked, err)
		}
	})
}
