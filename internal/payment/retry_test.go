package payment

import (
	"testing"
	"time"
)

// The wait before a payment that could not be settled is asked about
// again: half its age, within the bounds docs/operations.md states.
func TestRetryWait(t *testing.T) {
	for _, tt := range []struct{ age, want time.Duration }{
		{0, 30 * time.Second},
		{45 * time.Second, 30 * time.Second},
		{2 * time.Minute, time.Minute},
		{10 * time.Minute, 5 * time.Minute},
		{time.Hour, 10 * time.Minute},
	} {
		if got := retryWait(tt.age); got != tt.want {
			t.Errorf("retryWait(%v) = %v, want %v", tt.age, got, tt.want)
		}
	}
}
