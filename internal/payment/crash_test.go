package payment_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
)

// TestCrashInterleavingsSettleToTheAcquirersRecord: a node crashes at each
// point of a charge, with the simulated acquirer keeping its ledger in the
// database as a bank keeps its own. The node's next run reconciles what its
// earlier run left processing at once, to what the acquirer recorded,
// never charging again; a payment another node has in flight is left to it.
func TestCrashInterleavingsSettleToTheAcquirersRecord(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	key := secret.RandomBytes(32)
	// The run that crashes, and the acquirer it charged through.
	before := sim.New(key, e.g.Store.SimLedger())
	start := func(t *testing.T, node string) (bill.Bill, payment.Payment) {
		t.Helper()
		b := e.bill(t)
		now := e.g.Clock.Now()
		p := payment.Payment{ID: secret.NewID("pay"), BillReference: b.Reference, MerchantCode: b.MerchantCode, Mode: b.Mode,
			Status: payment.Processing, Amount: b.Amount, CreatedAt: now, UpdatedAt: now, Node: node}
		if err := e.g.Store.StartPayment(ctx, p); err != nil {
			t.Fatal(err)
		}
		return b, p
	}
	charge := func(t *testing.T, p payment.Payment, number string) payment.Result {
		t.Helper()
		a := attempt(t, number)
		res, err := before.Charge(ctx, payment.ChargeRequest{PaymentID: p.ID, Amount: p.Amount, PAN: a.PAN, Expiry: a.Expiry, CVV: a.CVV})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// Crashed before the charge reached the acquirer.
	bNever, pNever := start(t, "node-1/run-1")
	// Crashed after the acquirer approved, before the gateway recorded it.
	bApproved, pApproved := start(t, "node-1/run-1")
	approved := charge(t, pApproved, visa)
	// Crashed after a decline.
	bDeclined, pDeclined := start(t, "node-1/run-1")
	charge(t, pDeclined, "4000000000000002")
	// In flight on another node, which is alive: not this node's to settle.
	bOther, pOther := start(t, "node-2/run-1")

	// The node's next run: a new acquirer value on the same ledger, as
	// after a restart, and its own run id.
	e.svc.Acquirers = map[merchant.Mode]payment.Acquirer{merchant.Test: sim.New(key, e.g.Store.SimLedger())}
	e.svc.NodeName, e.svc.Node = "node-1", payment.NodeID("node-1", "run-2")
	if err := e.svc.Reconcile(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}

	if p := e.stored(t, pNever.ID); p.Status != payment.Failed {
		t.Errorf("never charged: %s %q, want failed", p.Status, p.Message)
	}
	if st := e.load(t, bNever.Reference).State; st != bill.Open {
		t.Errorf("never charged: bill %s, want open again", st)
	}
	p := e.stored(t, pApproved.ID)
	if p.Status != payment.Succeeded || p.NetworkRef != approved.NetworkRef || p.ApprovalCode != approved.ApprovalCode {
		t.Errorf("approved at the acquirer: %s %q %q, want succeeded with the acquirer's %q %q",
			p.Status, p.NetworkRef, p.ApprovalCode, approved.NetworkRef, approved.ApprovalCode)
	}
	if st := e.load(t, bApproved.Reference).State; st != bill.Paid {
		t.Errorf("approved at the acquirer: bill %s, want paid", st)
	}
	if evs, err := e.g.Store.IPNEvents(ctx, ipn.Filter{MerchantCode: bApproved.MerchantCode, PaymentID: pApproved.ID, Limit: 5}); err != nil || len(evs) != 1 {
		t.Errorf("approved at the acquirer: %d notifications (%v), want 1", len(evs), err)
	}
	if p := e.stored(t, pDeclined.ID); p.Status != payment.Failed || p.DeclineCode != "generic_decline" {
		t.Errorf("declined: %s %q, want failed with the acquirer's decline", p.Status, p.DeclineCode)
	}
	if st := e.load(t, bDeclined.Reference).State; st != bill.Open {
		t.Errorf("declined: bill %s, want open again", st)
	}
	if p := e.stored(t, pOther.ID); p.Status != payment.Processing {
		t.Errorf("another node's payment in flight: %s, want left processing", p.Status)
	}
	if st := e.load(t, bOther.Reference).State; st != bill.Processing {
		t.Errorf("another node's payment in flight: bill %s", st)
	}

	// The shopper pays again the bill whose approval was reconciled: the
	// one charge stands; the acquirer is not asked again.
	m, err := e.g.Store.MerchantByCode(ctx, bApproved.MerchantCode)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.svc.Pay(ctx, e.load(t, bApproved.Reference), m, attempt(t, visa))
	if err != nil || again.ID != pApproved.ID {
		t.Errorf("paying a reconciled bill again: %s, %v; want the reconciled payment %s", again.ID, err, pApproved.ID)
	}
	if entry, ok, err := e.g.Store.SimLedger().Entry(ctx, pNever.ID); err != nil || ok {
		t.Errorf("the acquirer recorded a charge that never reached it: %+v, %v", entry, err)
	}
}

// While another running node may share this node's name, the name's other
// runs' payments are not settled at once: a twin's charge in flight would
// be taken for a crashed run's, its bill reopened while the card is being
// charged. Once the name is known to be this node's alone they are.
func TestEarlierRunsWaitWhileTheNameMayBeShared(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.bill(t)
	now := e.g.Clock.Now()
	p := payment.Payment{ID: secret.NewID("pay"), BillReference: b.Reference, MerchantCode: b.MerchantCode, Mode: b.Mode,
		Status: payment.Processing, Amount: b.Amount, CreatedAt: now, UpdatedAt: now, Node: "node-1/run-1"}
	if err := e.g.Store.StartPayment(ctx, p); err != nil {
		t.Fatal(err)
	}
	sole := false
	e.svc.Acquirers = map[merchant.Mode]payment.Acquirer{merchant.Test: sim.New(secret.RandomBytes(32), e.g.Store.SimLedger())}
	e.svc.NodeName, e.svc.Node, e.svc.SoleName = "node-1", payment.NodeID("node-1", "run-2"), func(context.Context) bool { return sole }
	if err := e.svc.Reconcile(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := e.stored(t, p.ID); got.Status != payment.Processing {
		t.Errorf("with the name maybe shared: %s, want left processing", got.Status)
	}
	sole = true
	if err := e.svc.Reconcile(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := e.stored(t, p.ID); got.Status != payment.Failed {
		t.Errorf("with the name this node's alone: %s, want failed (it never reached the acquirer)", got.Status)
	}
}

// clockBehind is a shared database whose clock is behind this machine's.
type clockBehind time.Duration

func (c clockBehind) DatabaseNow(context.Context) (time.Time, bool, error) {
	return time.Now().Add(-time.Duration(c)), true, nil
}

// A node whose clock runs 20 s ahead of the database the nodes share
// stamps its payments, and takes charges for abandoned, by the database's
// clock: another node's charge stamped 26 s ago by it is still in flight
// (the acquirer timeout is 30 s) and is left, where by this node's own
// clock it looked 46 s old and was settled while the card could still be
// being charged; one stamped 50 s ago is settled.
func TestPaymentsFollowTheDatabaseClock(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const ahead = 20 * time.Second
	e.svc.Now, e.svc.Database = time.Now, clockBehind(ahead)
	e.svc.Acquirers = map[merchant.Mode]payment.Acquirer{merchant.Test: sim.New(secret.RandomBytes(32), e.g.Store.SimLedger())}
	e.svc.NodeName, e.svc.Node = "node-1", payment.NodeID("node-1", "run-1")
	start := func(age time.Duration) payment.Payment {
		t.Helper()
		b := e.bill(t)
		at := time.Now().Add(-ahead - age) // by the database's clock
		p := payment.Payment{ID: secret.NewID("pay"), BillReference: b.Reference, MerchantCode: b.MerchantCode, Mode: b.Mode,
			Status: payment.Processing, Amount: b.Amount, CreatedAt: at, UpdatedAt: at, Node: "node-2/run-1"}
		if err := e.g.Store.StartPayment(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	inFlight, abandoned := start(26*time.Second), start(50*time.Second)
	if err := e.svc.Reconcile(ctx, 45*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := e.stored(t, inFlight.ID); got.Status != payment.Processing {
		t.Errorf("another node's charge 26 s old by the database's clock: %s, want left processing", got.Status)
	}
	if got := e.stored(t, abandoned.ID); got.Status != payment.Failed {
		t.Errorf("one 50 s old: %s, want settled (failed: it never reached the acquirer)", got.Status)
	}
	// And this node's own payments are stamped by the database's clock.
	b := e.bill(t)
	p, err := e.svc.Pay(ctx, b, e.m, attempt(t, visa))
	if err != nil {
		t.Fatal(err)
	}
	if off := time.Now().Add(-ahead).Sub(e.stored(t, p.ID).CreatedAt); off < -time.Second || off > time.Second {
		t.Errorf("a payment stamped %s off the database's clock", off)
	}
}

// A node ahead of the database makes its notifications due by the
// database's clock, so that the other nodes, should it die, do not wait
// the difference (they waited 90 s for a node 90 s ahead).
func TestNotificationDueAtOnceOnANodeAheadOfTheDatabase(t *testing.T) {
	e := newEnv(t)
	const ahead = 90 * time.Second
	e.svc.Now, e.svc.Database = time.Now, clockBehind(ahead) // the others keep the database's time
	_, ev := payWithTheDatabasesClock(t, e)
	if wait := ev.NextAttemptAt.Sub(time.Now().Add(-ahead)); wait > time.Second {
		t.Errorf("the notification is due in %s by the other nodes' (the database's) clock, want at once", wait)
	}
}

// payWithTheDatabasesClock reads the database's clock, as reconciliation
// does, then pays a bill and returns the payment and its notification.
func payWithTheDatabasesClock(t *testing.T, e *env) (payment.Payment, ipn.Event) {
	t.Helper()
	ctx := context.Background()
	e.svc.Acquirers = map[merchant.Mode]payment.Acquirer{merchant.Test: sim.New(secret.RandomBytes(32), e.g.Store.SimLedger())}
	if err := e.svc.Reconcile(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	p, err := e.svc.Pay(ctx, e.bill(t), e.m, attempt(t, visa))
	if err != nil || p.Status != payment.Succeeded {
		t.Fatalf("Pay: %s, %v", p.Status, err)
	}
	evs, err := e.g.Store.IPNEvents(ctx, ipn.Filter{MerchantCode: p.MerchantCode, PaymentID: p.ID, Limit: 1})
	if err != nil || len(evs) != 1 {
		t.Fatalf("the payment's notification: %d, %v", len(evs), err)
	}
	return p, evs[0]
}

// A node behind the database's clock stamps a payment by the database's
// time, and its notification is due at once all the same: the IPN worker
// tells what is due by its node's clock.
func TestNotificationDueAtOnceOnANodeBehindTheDatabase(t *testing.T) {
	e := newEnv(t)
	e.svc.Now, e.svc.Database = time.Now, clockBehind(-20*time.Second) // the database 20 s ahead
	p, ev := payWithTheDatabasesClock(t, e)
	if wait := time.Until(ev.NextAttemptAt); wait > time.Second {
		t.Errorf("the notification is due in %s by this node's clock, want at once", wait)
	}
	if off := p.UpdatedAt.Sub(time.Now().Add(20 * time.Second)); off < -time.Second || off > time.Second {
		t.Errorf("the payment is stamped %s off the database's clock", off)
	}
}

// A database whose clock cannot be read is said once, then once a minute,
// and once when it can be again: every reconciliation pass (a few seconds
// apart through an outage) said it before.
func TestUnreadableClockIsSaidOnce(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var logs strings.Builder
	e.svc.Log = slog.New(slog.NewTextHandler(&logs, nil))
	e.svc.Database = unreadableClock{}
	for range 3 {
		if err := e.svc.Reconcile(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "read the database's clock; payments keep the last reading"); n != 1 {
		t.Errorf("an unreadable clock said %d times in three passes, want once:\n%s", n, logs.String())
	}
	e.svc.Database = clockBehind(0)
	if err := e.svc.Reconcile(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "read the database's clock: working again") {
		t.Errorf("the clock read again is not said:\n%s", logs.String())
	}
}

// unreadableClock is a shared database whose clock does not answer.
type unreadableClock struct{}

func (unreadableClock) DatabaseNow(context.Context) (time.Time, bool, error) {
	return time.Time{}, true, errors.New("read clock: connection reset by peer")
}
