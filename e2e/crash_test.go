package e2e

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/kadipay/kadi/client"
)

// TestCrashRecovery kills the gateway with SIGKILL right after it
// acknowledged a series of results, restarts it on the same data dir and
// checks that nothing acknowledged was lost (docs/hosted-form.md: payment state is
// durable before the browser sees a result).
func TestCrashRecovery(t *testing.T) {
	t.Parallel()
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Crash Shop") })
	s := newShopper(t, g, m)

	// acked is one acknowledged outcome: what the merchant was told.
	type acked struct {
		orderRef string
		bill     *client.Bill
		paid     bool
		txRef    string
		card     string // "" for a bill nobody tried to pay
	}
	var all []*acked
	cards := []string{
		"4242424242424242", "4000000000000002", "5555555555554444",
		"4000000000009995", "378282246310005", "4111111111111111",
	}
	for i, card := range cards {
		a := &acked{orderRef: fmt.Sprintf("CRASH%d", i+1), card: card}
		a.bill = s.createBill(t, a.orderRef, fmt.Sprintf("%d.50", 100+i))
		cb := s.callback.follow(t, s.submit(t, s.paymentForm(t, a.bill, testCard(card))))
		a.paid, a.txRef = cb.Successful(), cb.TransactionRef
		all = append(all, a)
	}
	unpaid := &acked{orderRef: "CRASHUNPAID"}
	unpaid.bill = s.createBill(t, unpaid.orderRef, "99.00")
	all = append(all, unpaid)

	// A 3-D Secure challenge left open by the crash can be answered after
	// it: the challenge page is all the customer has.
	pending := s.createBill(t, "CRASH3DS", "42.00")
	challenge := s.submit(t, s.paymentForm(t, pending, testCard("4000000000003220")))
	if !challenge.hasForm("/cardPay/3ds") {
		t.Fatalf("want a 3-D Secure challenge page, got HTTP %d:\n%s", challenge.Status, challenge.Body)
	}

	var paidCount int
	for _, a := range all {
		if a.paid {
			paidCount++
		}
	}
	if paidCount != 4 {
		t.Fatalf("%d payments approved before the crash, want 4 (test cards misbehave?)", paidCount)
	}

	g.Kill()
	g.Start()

	ctx := context.Background()
	for _, a := range all {
		t.Run("after restart "+a.orderRef, func(t *testing.T) {
			v := s.verify(t, a.bill.Reference)
			if v.Paid != a.paid || v.TransactionID != a.txRef {
				t.Fatalf("after SIGKILL: verified paid=%v transactionId=%q; acknowledged paid=%v transactionRef=%q",
					v.Paid, v.TransactionID, a.paid, a.txRef)
			}
			again, err := s.c.CreateBill(ctx, s.billRequest(a.orderRef, a.bill.Amount))
			if err != nil {
				t.Fatalf("identical bill retry after restart: %v", err)
			}
			if again.Reference != a.bill.Reference || again.Amount != a.bill.Amount {
				t.Fatalf("identical bill retry after restart gave %s %s, want the original %s %s",
					again.Reference, again.Amount, a.bill.Reference, a.bill.Amount)
			}
			if a.card == "" {
				return
			}
			// Paying again: a paid bill answers with its one charge; a
			// declined one is still open and takes a good card.
			cb := s.callback.follow(t, s.submit(t, s.paymentForm(t, a.bill, testCard("4242424242424242"))))
			if !cb.Successful() {
				t.Fatalf("paying %s again after restart: %+v", a.orderRef, cb)
			}
			if a.paid && cb.TransactionRef != a.txRef {
				t.Fatalf("paid bill charged again after restart: transactionRef %q, first was %q", cb.TransactionRef, a.txRef)
			}
			if v := s.verify(t, a.bill.Reference); !v.Paid || v.TransactionID != cb.TransactionRef {
				t.Fatalf("after paying again: %+v, callback %+v", v, cb)
			}
		})
	}

	t.Run("open challenge answered after restart", func(t *testing.T) {
		cb := s.callback.follow(t, s.answerChallenge(t, challenge, "123456"))
		if !cb.Successful() {
			t.Fatalf("challenge answered after restart: %+v", cb)
		}
		if v := s.verify(t, pending.Reference); !v.Paid || v.TransactionID != cb.TransactionRef {
			t.Fatalf("verification %+v, callback %+v", v, cb)
		}
	})

	t.Run("new payment after restart", func(t *testing.T) {
		// A client that never saw the first process: fresh token included.
		fresh := &shopper{g: g, m: m, c: g.Client(t, m), callback: s.callback}
		b := fresh.createBill(t, "CRASHNEW", "10.00")
		cb := fresh.callback.follow(t, fresh.submit(t, fresh.paymentForm(t, b, testCard("2223003122003222"))))
		if !cb.Successful() {
			t.Fatalf("new payment after restart: %+v", cb)
		}
		if v := fresh.verify(t, b.Reference); !v.Paid || v.TransactionID != cb.TransactionRef {
			t.Fatalf("verification %+v, callback %+v", v, cb)
		}
	})

	t.Run("healthz after restart", func(t *testing.T) {
		resp, err := http.Get(g.BaseURL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("healthz %d", resp.StatusCode)
		}
	})
}
