package ipn

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestDefaultSchedule(t *testing.T) {
	// docs/ipn.md: immediately, then these waits, then failed.
	want := "5s,5m0s,30m0s,2h0m0s,5h0m0s,10h0m0s,14h0m0s,20h0m0s,24h0m0s"
	if got := DefaultSchedule().String(); got != want {
		t.Errorf("default schedule %s, want %s", got, want)
	}
	if n := DefaultSchedule().MaxAttempts(); n != 10 {
		t.Errorf("%d attempts, want 10", n)
	}
	if d := DefaultConfig(); d.Timeout != 15*time.Second || d.Jitter != 0.2 {
		t.Errorf("default timeout %s jitter %v, want 15s and 0.2", d.Timeout, d.Jitter)
	}
}

func TestScheduleSet(t *testing.T) {
	var s Schedule
	if err := s.Set("10ms, 2s,1m"); err != nil {
		t.Fatal(err)
	}
	if s.String() != "10ms,2s,1m0s" {
		t.Errorf("parsed %s", s)
	}
	for _, bad := range []string{"", "5", "1s,,2s", "-1s", "0s"} {
		if err := s.Set(bad); err == nil {
			t.Errorf("Set(%q) accepted", bad)
		}
	}
	// An empty schedule says what to give, not "invalid duration".
	if err := s.Set("  "); err == nil || !strings.Contains(err.Error(), "at least one wait") {
		t.Errorf("Set of nothing: %v", err)
	}
}

// Every wait stays within ±20 % of the schedule, the waits actually vary
// (so one outage does not make all retries hit the receiver together), and
// the schedule ends.
func TestRetryWaitJitter(t *testing.T) {
	s := DefaultSchedule()
	for n := 1; n <= len(s); n++ {
		base := s[n-1]
		lo, hi := time.Duration(float64(base)*0.8), time.Duration(float64(base)*1.2)
		seen := map[time.Duration]bool{}
		for range 200 {
			d, ok := s.retryWait(n, 0.2)
			if !ok || d < lo || d > hi {
				t.Fatalf("wait after attempt %d: %s (ok=%v), want within [%s, %s]", n, d, ok, lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("wait after attempt %d barely varies: %d distinct values", n, len(seen))
		}
	}
	if _, ok := s.retryWait(len(s)+1, 0.2); ok {
		t.Error("a wait after the last attempt: the schedule never ends")
	}
	if d, _ := s.retryWait(2, 0); d != 5*time.Minute {
		t.Errorf("without jitter %s, want 5m", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"120", 2 * time.Minute, true},
		{" 0 ", 0, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{"Sat, 21 Nov 2026 11:00:00 GMT", 0, true}, // in the past
		{"Saturday, 21-Nov-26 12:00:30 GMT", 30 * time.Second, true},
		{"", 0, false},
		{"-5", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, err := parseRetryAfter(tt.v, now)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseRetryAfter(%q) = %s, %v; want %s ok=%v", tt.v, got, err, tt.want, tt.ok)
		}
	}
}

// 429 and 503 may postpone beyond the schedule, never shorten it, and only
// up to the cap; other statuses ignore Retry-After.
func TestRetryAt(t *testing.T) {
	c := Config{Schedule: Schedule{10 * time.Second, time.Minute}, MaxRetryAfter: time.Hour}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		n, status  int
		retryAfter string
		want       time.Duration
		more       bool
	}{
		{"500 follows the schedule", 1, 500, "600", 10 * time.Second, true},
		{"no answer follows the schedule", 2, 0, "", time.Minute, true},
		{"429 later than the schedule", 1, 429, "600", 10 * time.Minute, true},
		{"429 sooner than the schedule", 1, 429, "1", 10 * time.Second, true},
		{"503 with a date", 1, 503, now.Add(20 * time.Minute).Format(http.TimeFormat), 20 * time.Minute, true},
		{"503 capped", 1, 503, "864000", time.Hour, true},
		{"429 unreadable", 1, 429, "later", 10 * time.Second, true},
		{"schedule used up", 3, 429, "5", 0, false},
	}
	for _, tt := range tests {
		at, more := c.retryAt(tt.n, tt.status, tt.retryAfter, now)
		if more != tt.more || (more && at.Sub(now) != tt.want) {
			t.Errorf("%s: %s after, more=%v; want %s, %v", tt.name, at.Sub(now), more, tt.want, tt.more)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	bad := map[string]Config{
		"negative workers":      {Workers: -1},
		"negative timeout":      {Timeout: -time.Second},
		"jitter of 100%":        {Jitter: 1},
		"negative jitter":       {Jitter: -0.1},
		"lease under a second":  {Lease: 500 * time.Millisecond},
		"zero wait in schedule": {Schedule: Schedule{time.Second, 0}},
	}
	for name, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, c := range []Config{{}, DefaultConfig(), {Timeout: time.Second, Lease: 2 * time.Second, Jitter: 0},
		{Timeout: 15 * time.Second, Lease: 3 * time.Second}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v refused: %v", c, err)
		}
	}
}

// FuzzParseRetryAfter: a receiver's Retry-After is outside input; any value
// gives a non-negative wait or an error, never a panic or an overflow.
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "0", "-1", "Wed, 21 Oct 2015 07:28:00 GMT", "9999999999999999999", "", " 5 ", "1e3"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, err := parseRetryAfter(v, now)
		if err == nil && d < 0 {
			t.Fatalf("parseRetryAfter(%q) = %v", v, d)
		}
	})
}
