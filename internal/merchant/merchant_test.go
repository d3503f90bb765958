package merchant

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestParseMode(t *testing.T) {
	tests := []struct {
		in   string
		want Mode
		ok   bool
	}{
		{"test", Test, true},
		{"live", Live, true},
		{"Test", "", false},
		{"LIVE", "", false},
		{" test", "", false},
		{"prod", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, err := ParseMode(tt.in)
		if tt.ok && (err != nil || got != tt.want) {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
		if !tt.ok && (!errors.Is(err, ErrBadMode) || got != "") {
			t.Errorf("ParseMode(%q) = %q, %v; want ErrBadMode", tt.in, got, err)
		}
	}
}

func TestHasOutlet(t *testing.T) {
	m := Merchant{Outlets: []string{"80010001", "80010002"}}
	tests := []struct {
		code string
		want bool
	}{
		{"80010001", true},
		{"80010002", true},
		{"80010003", false},
		{"8001000", false},
		{"800100011", false},
		{" 80010001", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := m.HasOutlet(tt.code); got != tt.want {
			t.Errorf("HasOutlet(%q) = %v, want %v", tt.code, got, tt.want)
		}
	}
	if (Merchant{}).HasOutlet("") {
		t.Error("a merchant without outlets has the empty outlet")
	}
}

func TestSigningSecrets(t *testing.T) {
	until := time.Date(2026, time.November, 27, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		previous string
		until    time.Time
		at       time.Time
		want     []string
	}{
		{"no rotation", "", time.Time{}, until, []string{"new"}},
		{"within the overlap", "old", until, until.Add(-time.Nanosecond), []string{"new", "old"}},
		{"at its end", "old", until, until, []string{"new"}},
		{"after it", "old", until, until.Add(time.Hour), []string{"new"}},
		{"an overlap without a secret", "", until, until.Add(-time.Hour), []string{"new"}},
	}
	for _, tt := range tests {
		st := Settings{NotificationSecret: "new", PreviousSecret: tt.previous, PreviousUntil: tt.until}
		if got := st.SigningSecrets(tt.at); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
