package phone

import (
	"errors"
	"testing"
)

func TestMobile(t *testing.T) {
	tests := []struct {
		raw, region, want string
	}{
		// The three forms integrations send, for one Safaricom number.
		{"+254 712345678", "KE", "+254 712345678"},
		{"+254712345678", "KE", "+254 712345678"},
		{"0712345678", "KE", "+254 712345678"},
		{"  0712 345 678 ", "KE", "+254 712345678"},
		{"+254-712-345-678", "KE", "+254 712345678"},
		{"(0712) 345678", "KE", "+254 712345678"},
		// Airtel Kenya's newer 01x prefix is mobile too.
		{"0110123456", "KE", "+254 110123456"},
		// International form ignores the default region.
		{"+256 772123456", "KE", "+256 772123456"},
		{"+255 754123456", "KE", "+255 754123456"},
		{"+250 788123456", "KE", "+250 788123456"},
		// National form in another operator's region.
		{"0772123456", "UG", "+256 772123456"},
		{"0772123456", "ug", "+256 772123456"},
	}
	for _, tt := range tests {
		got, err := Mobile(tt.raw, tt.region)
		if err != nil || got != tt.want {
			t.Errorf("Mobile(%q, %s) = %q, %v; want %q", tt.raw, tt.region, got, err, tt.want)
		}
	}
}

func TestMobileRefuses(t *testing.T) {
	for _, raw := range []string{
		"",
		"+254 20 2222222",            // a Nairobi landline
		"+254 7123456789012",         // too long
		"+254 71234",                 // too short
		"+254 7123ABC",               // letters, which libphonenumber would read as keypad digits
		"0712345678 ext. 5",          // an extension
		"+999 712345678",             // no such country code
		"+254 712345678 and more",    // trailing words
		"+++254712345678",            // garbage
		"254+712345678",              // a plus inside
		"+2547123456789012345678901", // absurdly long
	} {
		if got, err := Mobile(raw, "KE"); !errors.Is(err, ErrInvalid) {
			t.Errorf("Mobile(%q) = %q, %v; want ErrInvalid", raw, got, err)
		}
	}
}

func TestValidRegion(t *testing.T) {
	for region, want := range map[string]bool{"KE": true, "ke": true, "UG": true, "RW": true, "XX": false, "": false, "KEN": false} {
		if got := ValidRegion(region); got != want {
			t.Errorf("ValidRegion(%q) = %t, want %t", region, got, want)
		}
	}
}

func FuzzMobile(f *testing.F) {
	for _, s := range []string{"+254 712345678", "0712345678", "+254712345678", "+1 (415) 555-2671", "", "+", "0", "++", "()"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := Mobile(raw, "KE")
		if err != nil {
			return
		}
		// What Mobile writes, it reads back unchanged.
		again, err := Mobile(got, "TZ")
		if err != nil || again != got {
			t.Fatalf("Mobile(%q) = %q, which reads back as %q, %v", raw, got, again, err)
		}
	})
}
