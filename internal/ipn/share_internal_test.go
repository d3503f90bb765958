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
