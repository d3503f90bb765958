package card

import (
	"errors"
	"testing"
	"time"
)

func TestParseExpiry(t *testing.T) {
	nairobi := time.FixedZone("EAT", 3*60*60)
	now := time.Date(2026, time.March, 15, 12, 0, 0, 0, nairobi)
	tests := []struct {
		name    string
		month   string
		year    string
		now     time.Time
		want    Expiry
		wantErr error
	}{
		{"this month is still valid", "03", "26", now, Expiry{3, 2026}, nil},
		{"this month, four-digit year", "3", "2026", now, Expiry{3, 2026}, nil},
		{"next month", "04", "26", now, Expiry{4, 2026}, nil},
		{"single-digit month", "9", "27", now, Expiry{9, 2027}, nil},
		{"month 1", "1", "27", now, Expiry{1, 2027}, nil},
		{"month 12", "12", "2030", now, Expiry{12, 2030}, nil},
		{"exactly 20 years ahead", "03", "2046", now, Expiry{3, 2046}, nil},
		{"two-digit year 46 is 2046", "03", "46", now, Expiry{3, 2046}, nil},

		{"last month", "02", "26", now, Expiry{}, ErrExpired},
		{"december last year", "12", "25", now, Expiry{}, ErrExpired},
		{"long ago", "01", "2000", now, Expiry{}, ErrExpired},
		{"two-digit 99 is 2099, too far", "01", "99", now, Expiry{}, ErrExpiryFormat},
		{"20 years and a month ahead", "04", "2046", now, Expiry{}, ErrExpiryFormat},

		{"month 00", "00", "27", now, Expiry{}, ErrExpiryFormat},
		{"month 0", "0", "27", now, Expiry{}, ErrExpiryFormat},
		{"month 13", "13", "27", now, Expiry{}, ErrExpiryFormat},
		{"month 99", "99", "27", now, Expiry{}, ErrExpiryFormat},
		{"month three digits", "003", "27", now, Expiry{}, ErrExpiryFormat},
		{"month empty", "", "27", now, Expiry{}, ErrExpiryFormat},
		{"month with space", " 3", "27", now, Expiry{}, ErrExpiryFormat},
		{"month with sign", "+3", "27", now, Expiry{}, ErrExpiryFormat},
		{"month negative", "-1", "27", now, Expiry{}, ErrExpiryFormat},
		{"month word", "mar", "27", now, Expiry{}, ErrExpiryFormat},
		{"year one digit", "03", "7", now, Expiry{}, ErrExpiryFormat},
		{"year three digits", "03", "027", now, Expiry{}, ErrExpiryFormat},
		{"year five digits", "03", "20270", now, Expiry{}, ErrExpiryFormat},
		{"year empty", "03", "", now, Expiry{}, ErrExpiryFormat},
		{"year letters", "03", "2O27", now, Expiry{}, ErrExpiryFormat},
		{"year with slash", "03", "/27", now, Expiry{}, ErrExpiryFormat},

		// The same instant is March in one place and April in another; the
		// customer's month is the one that counts.
		{"valid through the last evening of the month",
			"03", "26", time.Date(2026, time.March, 31, 23, 59, 59, 0, time.FixedZone("EST", -5*60*60)), Expiry{3, 2026}, nil},
		{"expired from the first minute of the next month",
			"03", "26", time.Date(2026, time.April, 1, 0, 0, 30, 0, nairobi), Expiry{}, ErrExpired},
		{"year boundary, december still valid",
			"12", "26", time.Date(2026, time.December, 31, 23, 59, 0, 0, nairobi), Expiry{12, 2026}, nil},
		{"year boundary, january after",
			"12", "26", time.Date(2027, time.January, 1, 0, 0, 0, 0, nairobi), Expiry{}, ErrExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseExpiry(tt.month, tt.year, tt.now)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("ParseExpiry(%q, %q) error = %v, want %v", tt.month, tt.year, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseExpiry(%q, %q) = %+v, want %+v", tt.month, tt.year, got, tt.want)
			}
		})
	}
}

func FuzzParseExpiry(f *testing.F) {
	base := time.Date(2026, time.March, 15, 12, 0, 0, 0, time.UTC).Unix()
	for _, seed := range []struct{ month, year string }{
		{"03", "26"}, {"3", "2026"}, {"00", "26"}, {"13", "26"}, {"12", "99"},
		{"", ""}, {"1", "1"}, {"01", "0000"}, {"-1", "-1"}, {"١", "٢٦"},
	} {
		f.Add(seed.month, seed.year, base)
	}
	f.Fuzz(func(t *testing.T, month, year string, unix int64) {
		// Keep now within years a server could plausibly see, where
		// time.Time arithmetic is exact.
		const century = 100 * 365 * 24 * 60 * 60
		now := time.Unix(base+unix%century, 0).In(time.FixedZone("X", int(unix%(14*60*60))))
		got, err := ParseExpiry(month, year, now)
		if err != nil {
			if !errors.Is(err, ErrExpiryFormat) && !errors.Is(err, ErrExpired) {
				t.Fatalf("ParseExpiry(%q, %q) error %v matches no sentinel", month, year, err)
			}
			if got != (Expiry{}) {
				t.Fatalf("ParseExpiry returned %+v alongside an error", got)
			}
			return
		}
		if got.Month < 1 || got.Month > 12 {
			t.Fatalf("ParseExpiry(%q, %q) month %d", month, year, got.Month)
		}
		// The first instant after the card's month, in now's location, must
		// still be ahead of now, and no more than 20 years and a month out.
		end := time.Date(got.Year, time.Month(got.Month)+1, 1, 0, 0, 0, 0, now.Location())
		if !now.Before(end) {
			t.Fatalf("ParseExpiry(%q, %q) at %v accepted a card that ended %v", month, year, now, end)
		}
		if end.After(now.AddDate(20, 1, 1)) {
			t.Fatalf("ParseExpiry(%q, %q) at %v accepted a card more than 20 years out", month, year, now)
		}
	})
}

func TestSplitExpiry(t *testing.T) {
	for in, want := range map[string][2]string{
		"12/29": {"12", "29"}, "12 / 29": {"12", "29"}, " 1/2029 ": {"1", "2029"}, "1229": {"12", "29"},
		"122029": {"12", "2029"}, "12-29": {"12", "29"}, "12.29": {"12", "29"}, "": {"", ""}, "12": {"12", ""},
		"ab/cd": {"ab", "cd"},
	} {
		if m, y := SplitExpiry(in); m != want[0] || y != want[1] {
			t.Errorf("SplitExpiry(%q) = %q, %q; want %q, %q", in, m, y, want[0], want[1])
		}
	}
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	m, y := SplitExpiry("12 / 29")
	if e, err := ParseExpiry(m, y, now); err != nil || e.Year != 2029 || e.Month != 12 {
		t.Errorf("12 / 29: %v %v", e, err)
	}
}
