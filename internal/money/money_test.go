package money

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name      string
		text      string
		code      string
		wantMinor int64
		wantErr   error
	}{
		{"two digits whole", "1500", "KES", 150000, nil},
		{"two digits one place", "1500.5", "KES", 150050, nil},
		{"two digits two places", "1500.00", "KES", 150000, nil},
		{"smallest unit", "0.01", "KES", 1, nil},
		{"leading zeros", "0100.00", "KES", 10000, nil},
		{"many leading zeros", strings.Repeat("0", 40) + "1", "KES", 100, nil},
		{"zero digits", "1500", "UGX", 1500, nil},
		{"three digits", "1.5", "BHD", 1500, nil},
		{"three digits full", "1.500", "BHD", 1500, nil},
		{"three digits smallest", "0.001", "KWD", 1, nil},
		{"four digits", "1.2345", "CLF", 12345, nil},
		{"largest two digits", "92233720368547758.07", "KES", math.MaxInt64, nil},
		{"largest zero digits", "9223372036854775807", "JPY", math.MaxInt64, nil},

		{"unknown code", "1", "XYZ", 0, ErrUnknownCurrency},
		{"lower-case code", "1", "kes", 0, ErrUnknownCurrency},
		{"empty code", "1", "", 0, ErrUnknownCurrency},

		{"empty", "", "KES", 0, ErrFormat},
		{"dot only", ".", "KES", 0, ErrFormat},
		{"no whole part", ".50", "KES", 0, ErrFormat},
		{"no fraction after dot", "1500.", "KES", 0, ErrFormat},
		{"two dots", "1.2.3", "KES", 0, ErrFormat},
		{"minus", "-1500", "KES", 0, ErrNotPositive},
		{"minus, badly written", "-1,500", "KES", 0, ErrFormat},
		{"plus", "+1500", "KES", 0, ErrFormat},
		{"exponent", "1e3", "KES", 0, ErrFormat},
		{"upper exponent", "1E3", "KES", 0, ErrFormat},
		{"leading space", " 1500", "KES", 0, ErrFormat},
		{"trailing space", "1500 ", "KES", 0, ErrFormat},
		{"inner space", "1 500", "KES", 0, ErrFormat},
		{"thousands comma", "1,500.00", "KES", 0, ErrFormat},
		{"thousands underscore", "1_500", "KES", 0, ErrFormat},
		{"decimal comma", "1500,00", "KES", 0, ErrFormat},
		{"hex", "0x10", "KES", 0, ErrFormat},
		{"currency prefix", "KES1500", "KES", 0, ErrFormat},
		{"infinity", "Inf", "KES", 0, ErrFormat},
		{"nan", "NaN", "KES", 0, ErrFormat},
		{"arabic-indic digit", "١٥٠٠", "KES", 0, ErrFormat},
		{"fullwidth digit", "１", "KES", 0, ErrFormat},
		{"newline", "1500\n", "KES", 0, ErrFormat},

		{"surplus place", "10.001", "KES", 0, ErrPrecision},
		{"surplus zero", "10.000", "KES", 0, ErrPrecision},
		{"any place on zero-digit currency", "1500.0", "UGX", 0, ErrPrecision},
		{"four places for three-digit currency", "1.0000", "BHD", 0, ErrPrecision},

		{"zero", "0", "KES", 0, ErrNotPositive},
		{"zero with places", "0.00", "KES", 0, ErrNotPositive},
		{"zero with zero digits", "000", "UGX", 0, ErrNotPositive},

		{"one past max", "92233720368547758.08", "KES", 0, ErrTooLarge},
		{"one past max zero digits", "9223372036854775808", "JPY", 0, ErrTooLarge},
		{"huge", strings.Repeat("9", 100), "KES", 0, ErrTooLarge},
		{"whole part overflows only once scaled", "92233720368547759", "KES", 0, ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.text, tt.code)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Parse(%q, %q) error = %v, want %v", tt.text, tt.code, err, tt.wantErr)
			}
			if err != nil {
				if got != (Amount{}) {
					t.Errorf("Parse(%q, %q) = %+v alongside an error, want zero Amount", tt.text, tt.code, got)
				}
				return
			}
			if got.Minor != tt.wantMinor || got.Currency.Code != tt.code {
				t.Errorf("Parse(%q, %q) = %d %s, want %d %s", tt.text, tt.code, got.Minor, got.Currency.Code, tt.wantMinor, tt.code)
			}
		})
	}
}

func TestParseErrorsGiveContext(t *testing.T) {
	_, err := Parse("1.001", "KES")
	if err == nil || !strings.Contains(err.Error(), "KES") {
		t.Errorf("Parse error %v should name the currency", err)
	}
	_, err = Parse("junk-with-a-secret", "KES")
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("Parse error %v should not echo the input", err)
	}
}

func TestFromMinor(t *testing.T) {
	tests := []struct {
		name    string
		minor   int64
		code    string
		wantErr error
	}{
		{"positive", 150000, "KES", nil},
		{"one", 1, "BHD", nil},
		{"max", math.MaxInt64, "UGX", nil},
		{"zero", 0, "KES", ErrNotPositive},
		{"negative", -1, "KES", ErrNotPositive},
		{"min", math.MinInt64, "KES", ErrNotPositive},
		{"unknown", 100, "ABC", ErrUnknownCurrency},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromMinor(tt.minor, tt.code)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("FromMinor(%d, %q) error = %v, want %v", tt.minor, tt.code, err, tt.wantErr)
			}
			if err == nil && (got.Minor != tt.minor || got.Currency.Code != tt.code) {
				t.Errorf("FromMinor(%d, %q) = %+v", tt.minor, tt.code, got)
			}
		})
	}
}

func amount(t *testing.T, minor int64, code string) Amount {
	t.Helper()
	cur, ok := LookupCurrency(code)
	if !ok {
		t.Fatalf("no currency %s", code)
	}
	return Amount{Minor: minor, Currency: cur}
}

func TestAmountString(t *testing.T) {
	tests := []struct {
		minor int64
		code  string
		want  string
	}{
		{150000, "KES", "1500.00"},
		{150050, "KES", "1500.50"},
		{1, "KES", "0.01"},
		{10, "KES", "0.10"},
		{0, "KES", "0.00"},
		{1500, "UGX", "1500"},
		{0, "UGX", "0"},
		{1500, "BHD", "1.500"},
		{1, "BHD", "0.001"},
		{12345, "CLF", "1.2345"},
		{1, "CLF", "0.0001"},
		{math.MaxInt64, "KES", "92233720368547758.07"},
		{math.MaxInt64, "JPY", "9223372036854775807"},
		// Negative amounts cannot come from Parse or FromMinor, but the
		// fields are exported, so String must still tell the truth.
		{-150050, "KES", "-1500.50"},
		{-1, "KES", "-0.01"},
		{math.MinInt64, "KES", "-92233720368547758.08"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := amount(t, tt.minor, tt.code).String(); got != tt.want {
				t.Errorf("Amount{%d %s}.String() = %q, want %q", tt.minor, tt.code, got, tt.want)
			}
		})
	}
}

func TestAmountEqualText(t *testing.T) {
	tests := []struct {
		minor int64
		code  string
		text  string
		want  bool
	}{
		{150000, "KES", "1500", true},
		{150000, "KES", "1500.0", true},
		{150000, "KES", "1500.00", true},
		{150000, "KES", "1500.000", true},
		{150000, "KES", "01500.00", true},
		{150050, "KES", "1500.5", true},
		{150050, "KES", "1500.50000", true},
		{1500, "UGX", "1500", true},
		{1500, "UGX", "1500.00", true},
		{1500, "BHD", "1.5", true},
		{1500, "BHD", "1.5000", true},

		{150000, "KES", "1500.01", false},
		{150000, "KES", "1500.001", false},
		{150000, "KES", "150000", false},
		{150000, "KES", "15", false},
		{1500, "UGX", "1500.5", false},
		{150000, "KES", "", false},
		{150000, "KES", "1500.", false},
		{150000, "KES", ".00", false},
		{150000, "KES", "+1500", false},
		{150000, "KES", "1500 ", false},
		{150000, "KES", "1,500", false},
		{150000, "KES", "1.5e3", false},
		{150000, "KES", "KES 1500", false},
		{150000, "KES", "1500.00.00", false},
		{150000, "KES", strings.Repeat("9", 30), false},
	}
	for _, tt := range tests {
		a := amount(t, tt.minor, tt.code)
		if got := a.EqualText(tt.text); got != tt.want {
			t.Errorf("(%s %s).EqualText(%q) = %v, want %v", a, tt.code, tt.text, got, tt.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []struct{ text, code string }{
		{"1500", "KES"}, {"1500.00", "KES"}, {"0.01", "KES"}, {"1500", "UGX"},
		{"1.500", "BHD"}, {"1.2345", "CLF"}, {"0100.00", "KES"}, {"10.000", "KES"},
		{"-1", "KES"}, {"1e3", "KES"}, {"92233720368547758.07", "KES"},
		{"92233720368547758.08", "KES"}, {"", ""}, {".", "USD"}, {"1.", "USD"},
	} {
		f.Add(seed.text, seed.code)
	}
	f.Fuzz(func(t *testing.T, text, code string) {
		a, err := Parse(text, code)
		if err != nil {
			for _, sentinel := range []error{ErrUnknownCurrency, ErrFormat, ErrPrecision, ErrNotPositive, ErrTooLarge} {
				if errors.Is(err, sentinel) {
					return
				}
			}
			t.Fatalf("Parse(%q, %q) error %v matches no sentinel", text, code, err)
		}
		if a.Minor <= 0 {
			t.Fatalf("Parse(%q, %q) accepted non-positive %d", text, code, a.Minor)
		}
		if !a.EqualText(text) {
			t.Fatalf("Parse(%q, %q) = %s, which does not EqualText its own input", text, code, a)
		}
		again, err := Parse(a.String(), code)
		if err != nil || again != a {
			t.Fatalf("round trip of %q %s: Parse(%q) = %+v, %v; want %+v", text, code, a.String(), again, err, a)
		}
	})
}

func TestGrouped(t *testing.T) {
	for _, tt := range []struct {
		minor    int64
		currency string
		want     string
	}{
		{150_000, "KES", "1,500.00"}, {123_456_750, "USD", "1,234,567.50"}, {250_000, "UGX", "250,000"},
		{99, "KES", "0.99"}, {100_000, "KES", "1,000.00"}, {999, "UGX", "999"},
	} {
		a, err := FromMinor(tt.minor, tt.currency)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Grouped(); got != tt.want {
			t.Errorf("%d %s: %q, want %q", tt.minor, tt.currency, got, tt.want)
		}
	}
}
