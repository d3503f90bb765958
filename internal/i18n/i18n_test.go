package i18n

import (
	"regexp"
	"testing"

	"github.com/kadipay/kadi/internal/money"
)

func TestNegotiate(t *testing.T) {
	for header, want := range map[string]string{
		"":                         "en",
		"sw":                       "sw",
		"sw-KE,sw;q=0.9,en;q=0.8":  "sw",
		"en-GB,en;q=0.9,sw;q=0.8":  "en",
		"fr-RW,fr;q=0.9":           "en", // not ours yet: English
		"fr;q=0.9,sw;q=0.5":        "sw",
		"sw;q=0,en":                "en",
		"*":                        "en",
		"garbage;;;,=,sw-TZ;q=0.7": "sw",
	} {
		if got := Negotiate(header).Tag; got != want {
			t.Errorf("Negotiate(%q) = %s, want %s", header, got, want)
		}
	}
}

var verb = regexp.MustCompile(`%[sdvq]`)

// A translation keeps its message's fmt verbs, in order: a missing %s
// would print "%!(EXTRA …)" to a shopper.
func TestCataloguesKeepVerbs(t *testing.T) {
	for _, l := range All() {
		for id, tr := range l.msgs {
			a, b := verb.FindAllString(id, -1), verb.FindAllString(tr, -1)
			if len(a) != len(b) {
				t.Errorf("%s: %q → %q: verbs %v, want %v", l.Tag, id, tr, b, a)
				continue
			}
			for i := range a {
				if a[i] != b[i] {
					t.Errorf("%s: %q → %q: verbs %v, want %v", l.Tag, id, tr, b, a)
				}
			}
			if tr == "" {
				t.Errorf("%s: %q translates to nothing", l.Tag, id)
			}
		}
	}
}

func TestT(t *testing.T) {
	if got := Swahili.T("Pay %s", "KES 1,500.00"); got != "Lipa KES 1,500.00" {
		t.Errorf("Swahili T = %q", got)
	}
	if got := Swahili.T("a message nobody translated"); got != "a message nobody translated" {
		t.Errorf("an unknown id: %q, want it in English", got)
	}
	if got := English.T("%d attempts left.", 3); got != "3 attempts left." {
		t.Errorf("English T = %q", got)
	}
	for _, tt := range []struct {
		minor    int64
		currency string
		want     string
	}{{150_000, "KES", "KES 1,500.00"}, {250_000, "UGX", "UGX 250,000"}, {123_456_750, "USD", "USD 1,234,567.50"}} {
		a, _ := money.FromMinor(tt.minor, tt.currency)
		for _, l := range All() {
			if got := l.Amount(a); got != tt.want {
				t.Errorf("%s: Amount = %q, want %q", l.Tag, got, tt.want)
			}
		}
	}
}
