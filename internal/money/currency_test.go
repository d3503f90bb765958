package money

import (
	"regexp"
	"testing"
)

func TestLookupCurrency(t *testing.T) {
	tests := []struct {
		code        string
		wantOK      bool
		wantDigits  int
		wantNumeric string
	}{
		{"KES", true, 2, "404"},
		{"UGX", true, 0, "800"},
		{"TZS", true, 2, "834"},
		{"RWF", true, 0, "646"},
		{"USD", true, 2, "840"},
		{"EUR", true, 2, "978"},
		{"GBP", true, 2, "826"},
		{"JPY", true, 0, "392"},
		{"BHD", true, 3, "048"},
		{"KWD", true, 3, "414"},
		{"JOD", true, 3, "400"},
		{"OMR", true, 3, "512"},
		{"TND", true, 3, "788"},
		{"IQD", true, 3, "368"},
		{"LYD", true, 3, "434"},
		{"CLF", true, 4, "990"},
		{"UYW", true, 4, "927"},
		{"ZAR", true, 2, "710"},
		{"NGN", true, 2, "566"},
		{"GHS", true, 2, "936"},
		{"ETB", true, 2, "230"},
		{"XOF", true, 0, "952"},
		{"XAF", true, 0, "950"},
		{"KRW", true, 0, "410"},
		{"VND", true, 0, "704"},
		{"ISK", true, 0, "352"},
		{"CHF", true, 2, "756"},
		{"CNY", true, 2, "156"},
		{"INR", true, 2, "356"},
		{"XCG", true, 2, "532"},
		{"ZWG", true, 2, "924"},
		{"SLE", true, 2, "925"},

		{"kes", false, 0, ""},
		{"Kes", false, 0, ""},
		{" KES", false, 0, ""},
		{"KES ", false, 0, ""},
		{"KE", false, 0, ""},
		{"KESS", false, 0, ""},
		{"", false, 0, ""},
		{"404", false, 0, ""},
		{"XXX", false, 0, ""}, // no currency involved: nothing to charge
		{"XAU", false, 0, ""}, // no minor unit
		{"HRK", false, 0, ""}, // withdrawn
		{"ANG", false, 0, ""}, // withdrawn
		{"ZWL", false, 0, ""}, // withdrawn
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			got, ok := LookupCurrency(tt.code)
			if ok != tt.wantOK {
				t.Fatalf("LookupCurrency(%q) ok = %v, want %v", tt.code, ok, tt.wantOK)
			}
			if !ok {
				if got != (Currency{}) {
					t.Errorf("LookupCurrency(%q) = %+v, want zero Currency", tt.code, got)
				}
				return
			}
			if got.Code != tt.code || got.Digits != tt.wantDigits || got.Numeric != tt.wantNumeric || got.Name == "" {
				t.Errorf("LookupCurrency(%q) = %+v, want digits %d numeric %s", tt.code, got, tt.wantDigits, tt.wantNumeric)
			}
		})
	}
}

// The table is typed by hand, so check the properties a typo would break.
func TestCurrencyTableConsistent(t *testing.T) {
	alpha := regexp.MustCompile(`^[A-Z]{3}$`)
	numeric := regexp.MustCompile(`^[0-9]{3}$`)
	seenNumeric := map[string]string{}
	for key, c := range currencies {
		if key != c.Code {
			t.Errorf("key %s holds code %s", key, c.Code)
		}
		if !alpha.MatchString(c.Code) {
			t.Errorf("%s: code is not three upper-case letters", key)
		}
		if !numeric.MatchString(c.Numeric) {
			t.Errorf("%s: numeric %q is not three digits", key, c.Numeric)
		}
		if other, dup := seenNumeric[c.Numeric]; dup {
			t.Errorf("%s and %s share numeric code %s", key, other, c.Numeric)
		}
		seenNumeric[c.Numeric] = key
		if c.Digits < 0 || c.Digits > 4 {
			t.Errorf("%s: %d minor digits is outside ISO 4217's 0..4", key, c.Digits)
		}
		if c.Name == "" {
			t.Errorf("%s: empty name", key)
		}
	}
	if len(currencies) < 150 {
		t.Errorf("only %d currencies; the active ISO 4217 list has over 150", len(currencies))
	}
}
