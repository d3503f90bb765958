package ipn

import (
	"log/slog"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
)

// A slow endpoint gets its share back after inTimeToRecover answers in
// time in a row, not at the first: a late answer or a timeout among them
// starts the count again. So a receiver that hangs on every other request
// stays at one request at a time.
func TestShareComesBackAfterAnswersInTimeInARow(t *testing.T) {
	w := &Worker{Log: slog.New(slog.DiscardHandler)}
	w.init()
	ep := Endpoint{MerchantCode: "1234567890", Mode: merchant.Test}
	slow := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.slow[ep]
	}
	w.answered(ep, inTime, time.Millisecond)
	if slow() {
		t.Fatal("an endpoint that answered in time is slow")
	}
	w.answered(ep, late, 6*time.Second)
	for range 10 { // every other request hangs
		w.answered(ep, inTime, time.Millisecond)
		if !slow() {
			t.Fatal("an endpoint that hangs on every other request got its share back")
		}
		w.answered(ep, noAnswer, 15*time.Second)
	}
	// A late answer starts the count again too.
	for range inTimeToRecover - 1 {
		w.answered(ep, inTime, time.Millisecond)
	}
	w.answered(ep, late, 6*time.Second)
	for i := 1; i < inTimeToRecover; i++ {
		w.answered(ep, inTime, time.Millisecond)
		if !slow() {
			t.Fatalf("share back after %d answers in time, want %d", i, inTimeToRecover)
		}
	}
	w.answered(ep, inTime, time.Millisecond)
	if slow() {
		t.Fatalf("still slow after %d answers in time in a row", inTimeToRecover)
	}
}

// A slow endpoint is held to one request at a time only while half the
// node's slots or more are taken: the cut is for fairness when slots run
// short, and an idle node gives even a slow receiver its share.
func TestSlowEndpointIsCutOnlyWhenSlotsRunShort(t *testing.T) {
	for _, tc := range []struct {
		slow   bool
		active int
		want   int
	}{
		{slow: false, active: 0, want: 2},
		{slow: false, active: 8, want: 2},
		{slow: true, active: 0, want: 2},
		{slow: true, active: 3, want: 2},
		{slow: true, active: 4, want: 1},
		{slow: true, active: 8, want: 1},
	} {
		w := &Worker{Config: Config{Workers: 8, PerEndpoint: 2}, Log: slog.New(slog.DiscardHandler)}
		w.init()
		ep := Endpoint{MerchantCode: "1234567890", Mode: merchant.Test}
		w.slow[ep] = tc.slow
		w.active = tc.active
		if got := w.limit(ep); got != tc.want {
			t.Errorf("slow %v with %d of 8 slots taken: limit %d, want %d", tc.slow, tc.active, got, tc.want)
		}
	}
}
