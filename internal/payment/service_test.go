package payment_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server/servertest"
)

const visa = "4242424242424242"

// fakeAcquirer answers as each test tells it and records every call, so a
// test can prove a payment was never charged twice.
type fakeAcquirer struct {
	mu       sync.Mutex
	charge   func(ctx context.Context, req payment.ChargeRequest) (payment.Result, error)
	lookup   func(ctx context.Context, id string) (payment.Result, error)
	complete func(ctx context.Context, ref, code string) (payment.Result, error)

	charges, lookups, completions []string
}

func (f *fakeAcquirer) Charge(ctx context.Context, req payment.ChargeRequest) (payment.Result, error) {
	f.mu.Lock()
	f.charges = append(f.charges, req.PaymentID)
	fn := f.charge
	f.mu.Unlock()
	if fn == nil {
		return approved("NET" + req.PaymentID), nil
	}
	return fn(ctx, req)
}

func (f *fakeAcquirer) Lookup(ctx context.Context, id string) (payment.Result, error) {
	f.mu.Lock()
	f.lookups = append(f.lookups, id)
	fn := f.lookup
	f.mu.Unlock()
	if fn == nil {
		return payment.Result{}, errors.New("lookup not expected")
	}
	return fn(ctx, id)
}

func (f *fakeAcquirer) CompleteChallenge(ctx context.Context, ref, code string) (payment.Result, error) {
	f.mu.Lock()
	f.completions = append(f.completions, ref)
	fn := f.complete
	f.mu.Unlock()
	if fn == nil {
		return payment.Result{}, errors.New("challenge completion not expected")
	}
	return fn(ctx, ref, code)
}

func (f *fakeAcquirer) calls() (charges, lookups, completions int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.charges), len(f.lookups), len(f.completions)
}

func approved(ref string) payment.Result {
	return payment.Result{Outcome: payment.Approved, NetworkRef: ref, ApprovalCode: "123456", Message: "Approved by the fake"}
}

// env is a real gateway store with a payment.Service around a fake acquirer.
type env struct {
	g   *servertest.Gateway
	svc *payment.Service
	acq *fakeAcquirer
	c   merchant.Credentials
	m   merchant.Merchant
	tok string
	n   int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Fake Acquirer Shop")
	m, err := g.Store.MerchantByCode(context.Background(), c.MerchantCode)
	if err != nil {
		t.Fatal(err)
	}
	acq := &fakeAcquirer{}
	svc := &payment.Service{
		Repo: g.Store, Acquirers: map[merchant.Mode]payment.Acquirer{merchant.Test: acq},
		FingerprintKey: secret.RandomBytes(32), Now: g.Clock.Now, Location: time.UTC,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxFailures: 5,
		AcquirerTimeout: 100 * time.Millisecond, ChallengeTTL: 15 * time.Minute, WaitInFlight: 300 * time.Millisecond,
	}
	return &env{g: g, svc: svc, acq: acq, c: c, m: m, tok: g.Token(c, merchant.Test)}
}

// bill creates a bill through the API and loads it from the store.
func (e *env) bill(t *testing.T) bill.Bill {
	t.Helper()
	e.n++
	br := e.g.CreateBill(e.c, e.tok, "UNIT"+strconv.Itoa(e.n), "1500.00")
	return e.load(t, br.Reference)
}

func (e *env) load(t *testing.T, ref string) bill.Bill {
	t.Helper()
	b, err := e.g.Store.BillByID(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func attempt(t *testing.T, number string) payment.Attempt {
	t.Helper()
	pan, err := card.ParsePAN(number)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := card.ParseExpiry("12", strconv.Itoa(time.Now().Year()+1), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return payment.Attempt{PAN: pan, Expiry: exp, CVV: "737", Holder: "Jane Wanjiru", CallbackURL: servertest.CallbackURL}
}

// challenged is a new bill whose payment waits for its 3-D Secure code.
func (e *env) challenged(t *testing.T) (bill.Bill, payment.Payment) {
	t.Helper()
	b := e.bill(t)
	e.acq.charge = func(_ context.Context, req payment.ChargeRequest) (payment.Result, error) {
		return payment.Result{Outcome: payment.ChallengeNeeded, ChallengeRef: "ch-" + req.PaymentID}, nil
	}
	p, err := e.svc.Pay(context.Background(), b, e.m, attempt(t, visa))
	if err != nil || p.Status != payment.Challenge {
		t.Fatalf("Pay: %+v, %v", p, err)
	}
	return b, p
}

// unknown is a payment on a new bill whose charge the acquirer never
// answered.
func (e *env) unknown(t *testing.T) payment.Payment {
	t.Helper()
	e.acq.charge = func(context.Context, payment.ChargeRequest) (payment.Result, error) {
		return payment.Result{}, errors.New("connection reset by peer")
	}
	p, err := e.svc.Pay(context.Background(), e.bill(t), e.m, attempt(t, visa))
	if err != nil || p.Status != payment.Unknown {
		t.Fatalf("Pay: %+v, %v", p, err)
	}
	return p
}

func (e *env) stored(t *testing.T, id string) payment.Payment {
	t.Helper()
	p, err := e.g.Store.PaymentByID(context.Background(), id)
	if err != nil {
		t.Fatalf("load payment %s: %v", id, err)
	}
	return p
}

func TestApprovedChargeIsRecorded(t *testing.T) {
	e := newEnv(t)
	b := e.bill(t)
	var got payment.ChargeRequest
	e.acq.charge = func(_ context.Context, req payment.ChargeRequest) (payment.Result, error) {
		got = req
		return approved("NET-OK-1"), nil
	}
	p, err := e.svc.Pay(context.Background(), b, e.m, attempt(t, visa))
	if err != nil {
		t.Fatal(err)
	}
	if p.Status != payment.Succeeded || p.NetworkRef != "NET-OK-1" {
		t.Fatalf("payment %+v", p)
	}
	if got.PaymentID != p.ID || got.Amount != b.Amount || got.PAN.Reveal() != visa || got.CVV != "737" {
		t.Errorf("charge request %+v for payment %s of %s", got, p.ID, b.Amount)
	}
	s := e.stored(t, p.ID)
	if s.Status != payment.Succeeded || s.Card.First6 != "424242" || s.Card.Last4 != "4242" || s.Card.Brand != card.Visa ||
		s.Card.Fingerprint == "" || strings.Contains(s.Card.Fingerprint, visa) {
		t.Errorf("stored %+v", s)
	}
	if st := e.load(t, b.Reference).State; st != bill.Paid {
		t.Errorf("bill is %s", st)
	}
	if n := e.g.Count(`SELECT COUNT(*) FROM ipn_events WHERE payment_id = ?`, p.ID); n != 1 {
		t.Errorf("%d IPN events for the success, want 1 written with it", n)
	}

	// A paid bill answers with its success and is not charged again.
	again, err := e.svc.Pay(context.Background(), e.load(t, b.Reference), e.m, attempt(t, "5555555555554444"))
	if err != nil || again.ID != p.ID || again.NetworkRef != "NET-OK-1" {
		t.Errorf("second Pay: %+v, %v", again, err)
	}
	if charges, _, _ := e.acq.calls(); charges != 1 {
		t.Errorf("acquirer charged %d times", charges)
	}
}

// docs/hosted-form.md: an acquirer that does not answer leaves the payment
// unknown, never failed, and it is resolved by asking, never by charging
// again.
func TestAcquirerSilenceLeavesPaymentUnknown(t *testing.T) {
	failures := map[string]func(ctx context.Context, req payment.ChargeRequest) (payment.Result, error){
		"error": func(context.Context, payment.ChargeRequest) (payment.Result, error) {
			return payment.Result{}, errors.New("connection reset by peer")
		},
		"timeout": func(ctx context.Context, _ payment.ChargeRequest) (payment.Result, error) {
			<-ctx.Done() // AcquirerTimeout must end the call
			return payment.Result{}, ctx.Err()
		},
	}
	lookups := []struct {
		name      string
		result    payment.Result
		err       error
		status    payment.Status
		billState bill.State
		failures  int
	}{
		{"approved at the bank", approved("NET-LATE-1"), nil, payment.Succeeded, bill.Paid, 0},
		{"not found at the bank", payment.Result{Outcome: payment.NotFoundAtBank}, nil, payment.Failed, bill.Open, 1},
		{"declined at the bank", payment.Result{Outcome: payment.Declined, DeclineCode: "do_not_honor", Message: "Declined"}, nil, payment.Failed, bill.Open, 1},
		{"lookup fails", payment.Result{}, errors.New("bank unreachable"), payment.Unknown, bill.Processing, 0},
	}
	for name, charge := range failures {
		for _, lk := range lookups {
			t.Run(name+", "+lk.name, func(t *testing.T) {
				e := newEnv(t)
				b := e.bill(t)
				e.acq.charge = charge
				p, err := e.svc.Pay(context.Background(), b, e.m, attempt(t, visa))
				if err != nil {
					t.Fatal(err)
				}
				if p.Status != payment.Unknown || p.Message != payment.MsgUnknown || p.NetworkRef != "" {
					t.Fatalf("Pay: %+v", p)
				}
				if s := e.stored(t, p.ID); s.Status != payment.Unknown {
					t.Errorf("stored status %s", s.Status)
				}
				if st := e.load(t, b.Reference); st.State != bill.Processing || st.FailedAttempts != 0 {
					t.Errorf("bill %s with %d failures, want processing", st.State, st.FailedAttempts)
				}
				// Another submit for the bill waits and is told it is in
				// flight; it never reaches the acquirer.
				e.acq.charge = nil
				again, err := e.svc.Pay(context.Background(), e.load(t, b.Reference), e.m, attempt(t, visa))
				if err != nil || again.Status == payment.Succeeded {
					t.Errorf("second Pay on an unknown payment: %+v, %v", again, err)
				}
				if charges, _, _ := e.acq.calls(); charges != 1 {
					t.Fatalf("acquirer charged %d times", charges)
				}

				e.acq.lookup = func(_ context.Context, id string) (payment.Result, error) {
					if id != p.ID {
						t.Errorf("lookup of %s, want %s", id, p.ID)
					}
					return lk.result, lk.err
				}
				// Too fresh for Reconcile: it is left alone.
				if err := e.svc.Reconcile(context.Background(), time.Minute); err != nil {
					t.Fatal(err)
				}
				if _, lookups, _ := e.acq.calls(); lookups != 0 {
					t.Fatalf("Reconcile looked up a payment younger than its cutoff")
				}
				e.g.Clock.Advance(2 * time.Minute)
				if err := e.svc.Reconcile(context.Background(), time.Minute); err != nil {
					t.Fatal(err)
				}
				s := e.stored(t, p.ID)
				st := e.load(t, b.Reference)
				if s.Status != lk.status || st.State != lk.billState || st.FailedAttempts != lk.failures {
					t.Errorf("after Reconcile: payment %s, bill %s with %d failures; want %s, %s, %d",
						s.Status, st.State, st.FailedAttempts, lk.status, lk.billState, lk.failures)
				}
				if lk.status == payment.Succeeded {
					won, err := e.g.Store.SuccessfulPayment(context.Background(), b.Reference)
					if err != nil || won.ID != p.ID || won.NetworkRef != "NET-LATE-1" {
						t.Errorf("successful payment %+v, %v", won, err)
					}
					if n := e.g.Count(`SELECT COUNT(*) FROM ipn_events WHERE payment_id = ?`, p.ID); n != 1 {
						t.Errorf("%d IPN events after a reconciled success", n)
					}
				}
				if charges, _, _ := e.acq.calls(); charges != 1 {
					t.Errorf("Reconcile charged again: %d charges", charges)
				}
			})
		}
	}
}

// A crash between claiming the bill and calling the acquirer leaves a
// processing payment; Reconcile asks the acquirer about it.
func TestReconcileSettlesAPaymentLeftProcessing(t *testing.T) {
	e := newEnv(t)
	b := e.bill(t)
	now := e.g.Clock.Now()
	p := payment.Payment{ID: secret.NewID("pay"), BillReference: b.Reference, MerchantCode: b.MerchantCode, Mode: b.Mode,
		Status: payment.Processing, Amount: b.Amount, CallbackURL: servertest.CallbackURL, CreatedAt: now, UpdatedAt: now}
	if err := e.g.Store.StartPayment(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	e.acq.lookup = func(context.Context, string) (payment.Result, error) {
		return payment.Result{Outcome: payment.NotFoundAtBank}, nil
	}
	e.g.Clock.Advance(2 * time.Minute)
	if err := e.svc.Reconcile(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	if s := e.stored(t, p.ID); s.Status != payment.Failed || s.Message == "" {
		t.Errorf("payment %s %q", s.Status, s.Message)
	}
	if st := e.load(t, b.Reference).State; st != bill.Open {
		t.Errorf("bill %s, want open again", st)
	}
	if charges, _, _ := e.acq.calls(); charges != 0 {
		t.Errorf("Reconcile charged: %d", charges)
	}
}

func TestChallenge(t *testing.T) {
	challenge := func(t *testing.T) (*env, bill.Bill, payment.Payment) {
		e := newEnv(t)
		b, p := e.challenged(t)
		if s := e.stored(t, p.ID); s.Status != payment.Challenge || s.ChallengeRef != "ch-"+p.ID {
			t.Fatalf("stored %s %q", s.Status, s.ChallengeRef)
		}
		return e, b, p
	}

	t.Run("answered", func(t *testing.T) {
		e, b, p := challenge(t)
		e.acq.complete = func(_ context.Context, ref, code string) (payment.Result, error) {
			if ref != "ch-"+p.ID || code != "123456" {
				t.Errorf("CompleteChallenge(%q, %q)", ref, code)
			}
			return approved("NET-3DS-1"), nil
		}
		got, err := e.svc.CompleteChallenge(context.Background(), p.ID, "123456")
		if err != nil || got.Status != payment.Succeeded || got.NetworkRef != "NET-3DS-1" {
			t.Fatalf("CompleteChallenge: %+v, %v", got, err)
		}
		// A replayed answer gets the first result without asking again.
		again, err := e.svc.CompleteChallenge(context.Background(), p.ID, "999999")
		if err != nil || again.Status != payment.Succeeded || again.NetworkRef != "NET-3DS-1" {
			t.Errorf("replay: %+v, %v", again, err)
		}
		if _, _, completions := e.acq.calls(); completions != 1 {
			t.Errorf("%d completions, want 1", completions)
		}
		if st := e.load(t, b.Reference).State; st != bill.Paid {
			t.Errorf("bill %s", st)
		}
	})

	t.Run("abandoned", func(t *testing.T) {
		e, b, p := challenge(t)
		e.g.Clock.Advance(2 * time.Minute)
		if err := e.svc.Reconcile(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if s := e.stored(t, p.ID); s.Status != payment.Challenge {
			t.Fatalf("a challenge younger than ChallengeTTL was settled: %s", s.Status)
		}
		e.g.Clock.Advance(e.svc.ChallengeTTL)
		if err := e.svc.Reconcile(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		s := e.stored(t, p.ID)
		if s.Status != payment.Failed || s.Message != payment.MsgChallengeStale {
			t.Errorf("abandoned challenge: %s %q", s.Status, s.Message)
		}
		if st := e.load(t, b.Reference); st.State != bill.Open || st.FailedAttempts != 1 {
			t.Errorf("bill %s with %d failures, want open with 1", st.State, st.FailedAttempts)
		}
		// The customer's late answer gets the recorded failure.
		late, err := e.svc.CompleteChallenge(context.Background(), p.ID, "123456")
		if err != nil || late.Status != payment.Failed {
			t.Errorf("late answer: %+v, %v", late, err)
		}
		if charges, lookups, completions := e.acq.calls(); charges != 1 || lookups != 0 || completions != 0 {
			t.Errorf("acquirer calls: %d charges, %d lookups, %d completions", charges, lookups, completions)
		}
		// The bill can be paid again.
		e.acq.charge = nil
		if again, err := e.svc.Pay(context.Background(), e.load(t, b.Reference), e.m, attempt(t, visa)); err != nil || again.Status != payment.Succeeded {
			t.Errorf("paying the reopened bill: %+v, %v", again, err)
		}
	})

	t.Run("cancelled by the shopper", func(t *testing.T) {
		e, b, p := challenge(t)
		got, err := e.svc.AbandonChallenge(context.Background(), p.ID, "Payment cancelled by the customer")
		if err != nil || got.Status != payment.Failed || got.Message != "Payment cancelled by the customer" {
			t.Fatalf("AbandonChallenge: %+v, %v", got, err)
		}
		if st := e.load(t, b.Reference); st.State != bill.Open || st.FailedAttempts != 1 {
			t.Errorf("bill %s with %d failures, want open with 1", st.State, st.FailedAttempts)
		}
		// The code arriving afterwards reaches nobody; cancelling again
		// changes nothing.
		late, err := e.svc.CompleteChallenge(context.Background(), p.ID, "123456")
		if err != nil || late.Status != payment.Failed {
			t.Errorf("answer after cancel: %+v, %v", late, err)
		}
		again, err := e.svc.AbandonChallenge(context.Background(), p.ID, "again")
		if err != nil || again.Message != "Payment cancelled by the customer" {
			t.Errorf("second cancel: %+v, %v", again, err)
		}
		if _, _, completions := e.acq.calls(); completions != 0 {
			t.Errorf("%d completions sent to the acquirer, want 0", completions)
		}
	})

	t.Run("cancel after the answer", func(t *testing.T) {
		e, b, p := challenge(t)
		e.acq.complete = func(context.Context, string, string) (payment.Result, error) { return approved("NET-3DS-2"), nil }
		if _, err := e.svc.CompleteChallenge(context.Background(), p.ID, "123456"); err != nil {
			t.Fatal(err)
		}
		got, err := e.svc.AbandonChallenge(context.Background(), p.ID, "cancelled")
		if err != nil || got.Status != payment.Succeeded {
			t.Errorf("cancel after approval: %+v, %v; the approval must stand", got, err)
		}
		if st := e.load(t, b.Reference).State; st != bill.Paid {
			t.Errorf("bill %s", st)
		}
	})

	t.Run("answered too late", func(t *testing.T) {
		e, _, p := challenge(t)
		e.g.Clock.Advance(e.svc.ChallengeTTL + time.Second)
		got, err := e.svc.CompleteChallenge(context.Background(), p.ID, "123456")
		if err != nil || got.Status != payment.Failed || got.Message != payment.MsgChallengeStale {
			t.Errorf("late answer: %+v, %v", got, err)
		}
		if _, _, completions := e.acq.calls(); completions != 0 {
			t.Error("a stale challenge was sent to the acquirer")
		}
	})

	// A bill's expiry is the shop's deadline (its stock freed, its order
	// cancelled): an answer after it charges nothing, however recently the
	// challenge began.
	t.Run("answered after the bill expired", func(t *testing.T) {
		e, b, p := challenge(t)
		e.svc.ChallengeTTL = 48 * time.Hour
		e.g.Clock.Advance(b.ExpiresAt.Sub(e.g.Clock.Now()) + time.Second)
		got, err := e.svc.CompleteChallenge(context.Background(), p.ID, "123456")
		if err != nil || got.Status != payment.Failed || got.Message != payment.MsgExpired {
			t.Errorf("answer after expiry: %+v, %v", got, err)
		}
		if _, _, completions := e.acq.calls(); completions != 0 {
			t.Error("a challenge of an expired bill was sent to the acquirer")
		}
		if st := e.load(t, b.Reference).State; st == bill.Paid {
			t.Errorf("bill %s", st)
		}
	})

	t.Run("unknown payment", func(t *testing.T) {
		e := newEnv(t)
		if _, err := e.svc.CompleteChallenge(context.Background(), "pay_nope", "123456"); !errors.Is(err, payment.ErrNotFound) {
			t.Errorf("err %v, want ErrNotFound", err)
		}
	})
}

func TestDeclinesBlockTheBill(t *testing.T) {
	e := newEnv(t)
	b := e.bill(t)
	e.acq.charge = func(context.Context, payment.ChargeRequest) (payment.Result, error) {
		return payment.Result{Outcome: payment.Declined, DeclineCode: "generic_decline", Message: "Declined by the fake"}, nil
	}
	for i := 1; i <= 5; i++ {
		p, err := e.svc.Pay(context.Background(), e.load(t, b.Reference), e.m, attempt(t, visa))
		if err != nil || p.Status != payment.Failed {
			t.Fatalf("attempt %d: %+v, %v", i, p, err)
		}
		want := bill.Open
		if i == 5 {
			want = bill.Blocked
		}
		if st := e.load(t, b.Reference); st.State != want || st.FailedAttempts != i {
			t.Errorf("after %d declines: %s with %d failures", i, st.State, st.FailedAttempts)
		}
	}
	e.acq.charge = nil
	p, err := e.svc.Pay(context.Background(), e.load(t, b.Reference), e.m, attempt(t, visa))
	if err != nil || p.Status != payment.Failed || p.Message != payment.MsgBlocked {
		t.Errorf("Pay on a blocked bill: %+v, %v", p, err)
	}
	if charges, _, _ := e.acq.calls(); charges != 5 {
		t.Errorf("%d charges, want 5", charges)
	}
}

func TestRefusedWithoutCharging(t *testing.T) {
	e := newEnv(t)

	expired := e.bill(t)
	e.g.Clock.Advance(25 * time.Hour) // past the default 24 h bill lifetime
	p, err := e.svc.Pay(context.Background(), expired, e.m, attempt(t, visa))
	if err != nil || p.Status != payment.Failed || p.Message != payment.MsgExpired {
		t.Errorf("expired bill: %+v, %v", p, err)
	}

	live := expired
	live.Mode = merchant.Live
	if _, err := e.svc.Pay(context.Background(), live, e.m, attempt(t, visa)); !errors.Is(err, payment.ErrLiveDisabled) {
		t.Errorf("live bill without a live acquirer: %v", err)
	}
	if charges, _, _ := e.acq.calls(); charges != 0 {
		t.Errorf("%d charges", charges)
	}
}

// Concurrent Pay calls on one bill: one charge, one answer for all.
func TestConcurrentPayChargesOnce(t *testing.T) {
	e := newEnv(t)
	e.svc.WaitInFlight = 30 * time.Second
	e.svc.AcquirerTimeout = 30 * time.Second
	b := e.bill(t)
	release := make(chan struct{})
	e.acq.charge = func(_ context.Context, req payment.ChargeRequest) (payment.Result, error) {
		<-release // hold the first charge until everyone has submitted
		return approved("NET-" + req.PaymentID), nil
	}
	const n = 12
	a := attempt(t, visa)
	results := make([]payment.Payment, n)
	errs := make([]error, n)
	var started, done sync.WaitGroup
	for i := range n {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			results[i], errs[i] = e.svc.Pay(context.Background(), b, e.m, a)
		}()
	}
	started.Wait()
	// Wait (by polling the store, not by sleeping blind) until one attempt
	// holds the bill, then let the acquirer answer.
	deadline := time.Now().Add(10 * time.Second)
	for e.load(t, b.Reference).State != bill.Processing {
		if time.Now().After(deadline) {
			t.Fatal("no attempt claimed the bill")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	done.Wait()
	for i := range n {
		if errs[i] != nil || results[i].Status != payment.Succeeded || results[i].NetworkRef != results[0].NetworkRef {
			t.Errorf("Pay %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if charges, _, _ := e.acq.calls(); charges != 1 {
		t.Errorf("%d charges, want 1", charges)
	}
	if got := e.g.CountPayments(b.Reference, ""); got != 1 {
		t.Errorf("%d payment rows, want 1", got)
	}
}

// Concurrent answers to one challenge (two tabs, a double click) reach the
// acquirer once; every answer reports that one result.
func TestConcurrentChallengeAnswersAskOnce(t *testing.T) {
	e := newEnv(t)
	e.svc.WaitInFlight = time.Minute
	// As TestConcurrentPayChargesOnce: on a loaded machine the claim's
	// write outlasted the test's 100 ms, and the answer, rightly, never
	// asked the acquirer ("no time left") and came back unknown.
	e.svc.AcquirerTimeout = 30 * time.Second
	_, p := e.challenged(t)
	release := make(chan struct{})
	e.acq.complete = func(_ context.Context, ref, code string) (payment.Result, error) {
		<-release
		return approved("NET-3DS-ONCE"), nil
	}
	const n = 8
	results := make([]payment.Payment, n)
	errs := make([]error, n)
	var done sync.WaitGroup
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			results[i], errs[i] = e.svc.CompleteChallenge(context.Background(), p.ID, "123456")
		}()
	}
	// Generous: on a loaded machine (-race, two cores shared with a
	// browser suite) the eight answers once took over ten seconds to get
	// there.
	deadline := time.Now().Add(45 * time.Second)
	for e.stored(t, p.ID).Status != payment.Processing {
		if time.Now().After(deadline) {
			t.Fatal("no answer claimed the challenge")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	done.Wait()
	for i := range n {
		if errs[i] != nil || results[i].Status != payment.Succeeded || results[i].NetworkRef != "NET-3DS-ONCE" {
			t.Errorf("answer %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if _, _, completions := e.acq.calls(); completions != 1 {
		t.Errorf("the acquirer was asked %d times, want 1", completions)
	}
}

// hookedRepo runs a test's step right after a read, to put a concurrent
// answer between a read and what is done with it.
type hookedRepo struct {
	payment.Repo
	mu                      sync.Mutex
	afterList, afterPayment func()
	beforeStart             func()
	listHangs               bool // as on a connection a failover cut
	finishHangs             bool
}

func (h *hookedRepo) FinishPayment(ctx context.Context, p payment.Payment, maxFailures int, ev *ipn.Event) error {
	if h.finishHangs {
		<-ctx.Done()
		return ctx.Err()
	}
	return h.Repo.FinishPayment(ctx, p, maxFailures, ev)
}

func (h *hookedRepo) take(f *func()) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn := *f
	*f = nil
	return fn
}

func (h *hookedRepo) UnsettledPayments(ctx context.Context, q payment.Unsettled) ([]payment.Payment, error) {
	if h.listHangs {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ps, err := h.Repo.UnsettledPayments(ctx, q)
	if fn := h.take(&h.afterList); fn != nil {
		fn()
	}
	return ps, err
}

func (h *hookedRepo) StartPayment(ctx context.Context, p payment.Payment) error {
	if fn := h.take(&h.beforeStart); fn != nil {
		fn()
	}
	return h.Repo.StartPayment(ctx, p)
}

func (h *hookedRepo) PaymentByID(ctx context.Context, id string) (payment.Payment, error) {
	p, err := h.Repo.PaymentByID(ctx, id)
	if fn := h.take(&h.afterPayment); fn != nil {
		fn()
	}
	return p, err
}

// A challenge expires (the reconciler's sweep, or a late second answer)
// only through the claim an answer takes: an answer claimed a moment before
// the 15 minutes ran out is with the acquirer, and failing the payment
// under it reopened the bill while the acquirer approved: a bill that
// could be charged twice, and a shopper told it failed.
func TestAChallengeExpiresOnlyThroughAClaim(t *testing.T) {
	for _, tt := range []struct {
		name   string
		expire func(e *env, h *hookedRepo, id string, race func()) (payment.Payment, error)
	}{
		{"reconciler", func(e *env, h *hookedRepo, id string, race func()) (payment.Payment, error) {
			h.afterList = race
			return payment.Payment{}, e.svc.Reconcile(context.Background(), time.Minute)
		}},
		{"a second answer", func(e *env, h *hookedRepo, id string, race func()) (payment.Payment, error) {
			h.afterPayment = race
			return e.svc.CompleteChallenge(context.Background(), id, "123456")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			e.svc.WaitInFlight = 30 * time.Second
			b, p := e.challenged(t)
			e.g.Clock.Advance(e.svc.ChallengeTTL - time.Second)
			entered, release := make(chan struct{}), make(chan struct{})
			e.acq.complete = func(context.Context, string, string) (payment.Result, error) {
				close(entered)
				<-release
				return approved("NET-3DS-LATE"), nil
			}
			h := &hookedRepo{Repo: e.g.Store}
			e.svc.Repo = h
			type answer struct {
				p   payment.Payment
				err error
			}
			first := make(chan answer, 1)
			race := func() {
				// Read as still waiting; now the shopper's answer claims it
				// and is with the acquirer, and the 15 minutes run out.
				go func() {
					p, err := e.svc.CompleteChallenge(context.Background(), p.ID, "123456")
					first <- answer{p, err}
				}()
				<-entered
				e.g.Clock.Advance(2 * time.Second)
				go func() { time.Sleep(50 * time.Millisecond); close(release) }()
			}
			other, err := tt.expire(e, h, p.ID, race)
			if err != nil {
				t.Fatal(err)
			}
			got := <-first
			if got.err != nil || got.p.Status != payment.Succeeded {
				t.Errorf("the claimed answer: %+v, %v; want succeeded", got.p, got.err)
			}
			if other.ID != "" && other.Status != payment.Succeeded {
				t.Errorf("the second answer: %s %q; want the first answer's success", other.Status, other.Message)
			}
			if s, bl := e.stored(t, p.ID), e.load(t, b.Reference); s.Status != payment.Succeeded || bl.State != bill.Paid {
				t.Errorf("approved by the acquirer, stored %s with the bill %s", s.Status, bl.State)
			}
		})
	}
}

// The charge's deadline counts from the payment's stamp: the reconciler
// takes a processing payment as abandoned once its stamp is older than
// AcquirerTimeout and a margin, so a store slow to record it must not
// leave the charge running past that. With no time left it is not made,
// and the payment is unknown, for the reconciler to ask the bank.
func TestChargeEndsAcquirerTimeoutAfterItsStamp(t *testing.T) {
	e := newEnv(t)
	h := &hookedRepo{Repo: e.g.Store, beforeStart: func() { time.Sleep(2 * e.svc.AcquirerTimeout) }}
	e.svc.Repo = h
	p, err := e.svc.Pay(context.Background(), e.bill(t), e.m, attempt(t, visa))
	if err != nil {
		t.Fatal(err)
	}
	if charges, _, _ := e.acq.calls(); charges != 0 || p.Status != payment.Unknown {
		t.Errorf("recorded after its whole AcquirerTimeout: %d charges, payment %s; want none, unknown", charges, p.Status)
	}

	// Recorded at once, the charge has the rest of the time.
	var left time.Duration
	e.acq.charge = func(ctx context.Context, req payment.ChargeRequest) (payment.Result, error) {
		d, _ := ctx.Deadline()
		left = time.Until(d)
		return approved("NET" + req.PaymentID), nil
	}
	h.beforeStart = func() { time.Sleep(e.svc.AcquirerTimeout / 2) }
	if p, err := e.svc.Pay(context.Background(), e.bill(t), e.m, attempt(t, visa)); err != nil || p.Status != payment.Succeeded {
		t.Fatalf("Pay: %+v, %v", p, err)
	}
	if left <= 0 || left > e.svc.AcquirerTimeout/2 {
		t.Errorf("the charge had %v of the acquirer's %v, half of it spent recording the payment", left, e.svc.AcquirerTimeout)
	}
}

// A lookup is bounded like a charge: one acquirer call left hanging held
// up every payment after it.
func TestReconcileLookupEnds(t *testing.T) {
	e := newEnv(t)
	p := e.unknown(t)
	e.acq.lookup = func(ctx context.Context, _ string) (payment.Result, error) {
		<-ctx.Done()
		return payment.Result{}, ctx.Err()
	}
	e.g.Clock.Advance(2 * time.Minute)
	done := make(chan error, 1)
	go func() { done <- e.svc.Reconcile(context.Background(), time.Minute) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(100 * e.svc.AcquirerTimeout):
		t.Fatal("Reconcile still waits for a lookup that never answers")
	}
	if s := e.stored(t, p.ID); s.Status != payment.Unknown {
		t.Errorf("payment %s after an unanswered lookup, want unknown", s.Status)
	}
}

// One payment Reconcile cannot settle is passed over, not the end of the
// pass, and a challenge expires whatever the acquirers configured.
func TestReconcilePassesOverWhatItCannotSettle(t *testing.T) {
	e := newEnv(t)
	odd := e.unknown(t)
	e.g.Clock.Advance(time.Second)
	next := e.unknown(t)
	e.acq.lookup = func(_ context.Context, id string) (payment.Result, error) {
		if id == odd.ID {
			// Nothing an unknown payment can become: settling it fails.
			return payment.Result{Outcome: payment.ChallengeNeeded, ChallengeRef: "ch-late"}, nil
		}
		return approved("NET-LATE-2"), nil
	}
	e.g.Clock.Advance(2 * time.Minute)
	if err := e.svc.Reconcile(context.Background(), time.Minute); err == nil || !strings.Contains(err.Error(), odd.ID) {
		t.Errorf("Reconcile: %v; want the payment it could not settle named", err)
	}
	if s := e.stored(t, next.ID); s.Status != payment.Succeeded {
		t.Errorf("the payment after the one that could not be settled: %s, want succeeded", s.Status)
	}
	// Nor is it asked about again at the next pass.
	_, before, _ := e.acq.calls()
	e.g.Clock.Advance(10 * time.Second)
	_ = e.svc.Reconcile(context.Background(), time.Minute)
	if _, after, _ := e.acq.calls(); after != before {
		t.Errorf("a payment that could not be settled was asked about again 10 s later")
	}

	b, ch := e.challenged(t)
	e.g.Clock.Advance(e.svc.ChallengeTTL + time.Minute)
	e.svc.Acquirers = map[merchant.Mode]payment.Acquirer{}
	_ = e.svc.Reconcile(context.Background(), time.Minute)
	if s, bl := e.stored(t, ch.ID), e.load(t, b.Reference); s.Status != payment.Failed || bl.State != bill.Open {
		t.Errorf("an expired challenge, no acquirer configured: payment %s, bill %s; want failed, open", s.Status, bl.State)
	}
}

// A payment whose lookup failed is asked about again after a wait, not at
// every pass; and the payments behind those Reconcile passes over are
// reached in the same pass: during an acquirer's outage its payments
// filled every page and held up the ones behind them.
func TestFailedLookupIsAskedAgainLater(t *testing.T) {
	e := newEnv(t)
	e.svc.ReconcilePage = 2
	var ps []payment.Payment
	for range 3 {
		ps = append(ps, e.unknown(t))
		e.g.Clock.Advance(time.Second)
	}
	last := ps[2].ID
	e.acq.lookup = func(_ context.Context, id string) (payment.Result, error) {
		if id == last {
			return approved("NET-LATE-3"), nil
		}
		return payment.Result{}, errors.New("bank unreachable")
	}
	for i, step := range []struct {
		advance time.Duration
		lookups int
	}{
		{2 * time.Minute, 3},  // past the cutoff: all asked, two fail
		{10 * time.Second, 3}, // the two postponed by half their age
		{2 * time.Minute, 5},  // asked again
	} {
		e.g.Clock.Advance(step.advance)
		if err := e.svc.Reconcile(context.Background(), time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, lookups, _ := e.acq.calls(); lookups != step.lookups {
			t.Fatalf("pass %d: %d lookups, want %d", i, lookups, step.lookups)
		}
		if s := e.stored(t, last); s.Status != payment.Succeeded {
			t.Fatalf("pass %d: the payment behind a page of failing lookups is %s, want succeeded", i, s.Status)
		}
	}
}

// Reconcile's listing is bounded too.
func TestReconcileListingEnds(t *testing.T) {
	e := newEnv(t)
	e.svc.Repo = &hookedRepo{Repo: e.g.Store, listHangs: true}
	done := make(chan error, 1)
	go func() { done <- e.svc.Reconcile(context.Background(), time.Minute) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Reconcile over a listing that hangs: %v, want its deadline", err)
		}
	case <-time.After(100 * e.svc.AcquirerTimeout):
		t.Fatal("Reconcile still waits for a listing that never answers")
	}
}

// Recording an outcome is bounded too: an approved charge whose record
// hangs is told unrecorded (the page follows it, the reconciler asks the
// acquirer), not a page that never answers.
func TestRecordingAnOutcomeEnds(t *testing.T) {
	e := newEnv(t)
	e.svc.Repo = &hookedRepo{Repo: e.g.Store, finishHangs: true}
	done := make(chan error, 1)
	go func() {
		_, err := e.svc.Pay(context.Background(), e.bill(t), e.m, attempt(t, visa))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, payment.ErrUnrecorded) {
			t.Errorf("Pay with a record that hangs: %v, want ErrUnrecorded", err)
		}
	case <-time.After(100 * e.svc.AcquirerTimeout):
		t.Fatal("Pay still waits for a record that never answers")
	}
}
