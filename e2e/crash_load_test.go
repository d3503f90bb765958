package e2e

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

// TestCrashUnderLoadLosesNothingAcknowledged kills the gateway with
// SIGKILL while sixteen clients create and pay bills as fast as they can,
// so that writes are being committed in groups at the moment of the kill
// (internal/store/writer.go), then restarts it and checks every bill and
// payment that was acknowledged before the kill.
func TestCrashUnderLoadLosesNothingAcknowledged(t *testing.T) {
	t.Parallel()
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Crash Load Shop") })
	s := newShopper(t, g, m)
	ctx := context.Background()
	token, err := s.c.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}

	type ack struct {
		bill   *client.Bill
		paidTx string // the transactionRef of an acknowledged payment
	}
	var mu sync.Mutex
	var acks []ack
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				b, err := s.c.CreateBill(ctx, s.billRequest(fmt.Sprintf("CL%dN%d", w, i), "10.00"))
				if err != nil {
					return // the gateway is gone
				}
				a := ack{bill: b}
				if i%2 == 0 {
					a.paidTx = payQuietly(s.c.PaymentFormAction(), s.paymentFormWith(token, b, testCard("4242424242424242")).Values())
				}
				mu.Lock()
				acks = append(acks, a)
				mu.Unlock()
			}
		}()
	}
	// Killed once the load is under way: after 1.5 s and 100 writes
	// acknowledged, or after 30 s whatever it reached. A fixed time alone
	// left a race-detector run on a busy machine with too few writes to
	// call it a load.
	started := time.Now()
	for {
		mu.Lock()
		n := len(acks)
		mu.Unlock()
		if elapsed := time.Since(started); elapsed >= 30*time.Second || elapsed >= 1500*time.Millisecond && n >= 100 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.Kill()
	close(stop)
	wg.Wait()
	g.Start()

	paid := 0
	for _, a := range acks {
		v, err := s.c.Verify(ctx, a.bill.Reference)
		if err != nil {
			t.Errorf("bill %s acknowledged before the kill: %v", a.bill.Reference, err)
			continue
		}
		if a.paidTx != "" {
			paid++
			if !v.Paid || v.TransactionID != a.paidTx {
				t.Errorf("payment of %s acknowledged (%s) before the kill, after it: paid=%v %q", a.bill.Reference, a.paidTx, v.Paid, v.TransactionID)
			}
		}
	}
	t.Logf("%d bills and %d payments acknowledged before the kill, all there after it", len(acks), paid)
	if len(acks) < 50 || paid < 10 {
		t.Fatalf("only %d bills and %d payments before the kill: not a load", len(acks), paid)
	}
}

// payQuietly posts a card form like a browser (following the 303) and
// returns the transactionRef of an approval, or "" for anything else,
// such as the gateway dying mid-request.
func payQuietly(action string, form url.Values) string {
	resp, err := browserless.PostForm(action, form)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return ""
	}
	for _, f := range parseForms(string(body)) {
		if f.Inputs.Get("orderStatus") == client.StatusSuccessful {
			return f.Inputs.Get("transactionRef")
		}
	}
	return ""
}
