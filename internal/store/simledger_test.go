package store_test

import (
	"testing"

	"github.com/kadipay/kadi/internal/payment"
)

// The simulated acquirer's ledger on both stores: the first charge of a
// payment id wins, a challenge is answered once, nothing else is replaced.
func TestSimLedger(t *testing.T) {
	for _, be := range ipnBackends() {
		t.Run(be.name, func(t *testing.T) {
			dsn := be.dsn(t)
			l, other := ipnOpen(t, dsn).SimLedger(), ipnOpen(t, dsn).SimLedger()
			ctx := t.Context()
			if _, ok, err := l.Entry(ctx, "pay_none"); ok || err != nil {
				t.Fatalf("an entry for a payment never charged: %v, %v", ok, err)
			}
			first := payment.Result{Outcome: payment.Approved, NetworkRef: "SIMA", ApprovalCode: "123456", Message: "Payment approved"}
			if got, err := l.Record(ctx, "pay_1", first); err != nil || got != first {
				t.Fatalf("Record: %+v, %v", got, err)
			}
			// A second charge of the same payment, from another node: the
			// first stands.
			if got, err := other.Record(ctx, "pay_1", payment.Result{Outcome: payment.Approved, NetworkRef: "SIMB"}); err != nil || got != first {
				t.Errorf("a second Record: %+v, %v; want the first", got, err)
			}
			if got, err := other.Settle(ctx, "pay_1", payment.Result{Outcome: payment.Declined}); err != nil || got != first {
				t.Errorf("Settle of a settled charge: %+v, %v; want it unchanged", got, err)
			}
			challenge := payment.Result{Outcome: payment.ChallengeNeeded, ChallengeRef: "pay_2.abc"}
			if got, err := l.Record(ctx, "pay_2", challenge); err != nil || got != challenge {
				t.Fatalf("Record a challenge: %+v, %v", got, err)
			}
			answer := payment.Result{Outcome: payment.Approved, NetworkRef: "SIMC", ApprovalCode: "654321"}
			if got, err := other.Settle(ctx, "pay_2", answer); err != nil || got != answer {
				t.Errorf("Settle a challenge: %+v, %v", got, err)
			}
			if got, err := l.Settle(ctx, "pay_2", payment.Result{Outcome: payment.Declined}); err != nil || got != answer {
				t.Errorf("a second answer: %+v, %v; want the first", got, err)
			}
			if got, ok, err := l.Entry(ctx, "pay_2"); !ok || err != nil || got != answer {
				t.Errorf("Entry: %+v, %v, %v", got, ok, err)
			}
		})
	}
}
