package ipn

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Schedule lists the waits before each retry. The first attempt is
// immediate; after the n-th failed attempt the event waits Schedule[n-1],
// and once the schedule is used up the next failure marks it failed. It is
// a flag.Value: "5s,5m,30m".
type Schedule []time.Duration

// DefaultSchedule is docs/ipn.md: immediately, then 5 s, 5 min, 30 min,
// 2 h, 5 h, 10 h, 14 h, 20 h and 24 h, about three days in all.
func DefaultSchedule() Schedule {
	return Schedule{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour,
		10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}
}

func (s Schedule) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

// Set parses a comma-separated list of positive durations.
func (s *Schedule) Set(v string) error {
	if strings.TrimSpace(v) == "" {
		return errors.New("give at least one wait, such as 1m,5m,30m")
	}
	var out Schedule
	for _, p := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		if d <= 0 {
			return fmt.Errorf("retry wait %s must be positive", d)
		}
		out = append(out, d)
	}
	*s = out
	return nil
}

// MaxAttempts is how many requests one round makes before failing.
func (s Schedule) MaxAttempts() int { return len(s) + 1 }

// retryWait is the jittered wait after the n-th failed attempt (n from 1),
// and false when the schedule is used up. jitter is a fraction (0.2 is
// ±20 %), spreading the retries of many events failed by one outage.
func (s Schedule) retryWait(n int, jitter float64) (time.Duration, bool) {
	if n < 1 || n > len(s) {
		return 0, false
	}
	d := s[n-1]
	if jitter > 0 {
		d = time.Duration(float64(d) * (1 + jitter*(2*rand.Float64()-1)))
	}
	return max(d, 0), true
}

var errNoRetryAfter = errors.New("no Retry-After")

// parseRetryAfter reads RFC 9110's Retry-After: delay seconds or an HTTP
// date, as a wait from now. A date in the past means no wait.
func parseRetryAfter(v string, now time.Time) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, errNoRetryAfter
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, fmt.Errorf("negative Retry-After %q", v)
		}
		if secs > int64((100*365*24*time.Hour)/time.Second) {
			secs = int64((100 * 365 * 24 * time.Hour) / time.Second) // keep the Duration from overflowing
		}
		return time.Duration(secs) * time.Second, nil
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, fmt.Errorf("unreadable Retry-After %q", v)
	}
	return max(at.Sub(now), 0), nil
}
