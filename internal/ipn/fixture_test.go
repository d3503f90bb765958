package ipn_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/store"
)

// approver is a fake acquirer that approves every charge.
type approver struct{}

func (approver) Charge(context.Context, payment.ChargeRequest) (payment.Result, error) {
	return payment.Result{Outcome: payment.Approved, NetworkRef: "NETREF0000000001", ApprovalCode: "123456", Message: payment.MsgApproved}, nil
}

func (approver) CompleteChallenge(context.Context, string, string) (payment.Result, error) {
	return payment.Result{Outcome: payment.Declined}, nil
}

func (approver) Lookup(context.Context, string) (payment.Result, error) {
	return payment.Result{Outcome: payment.NotFoundAtBank}, nil
}

// fixture is a real SQLite store with the real payment service in front
// of it: notifications come from the outbox rows real payments write.
type fixture struct {
	db  *store.DB
	loc *time.Location
	// metrics are the last worker's: its payments count into them the
	// notifications they store parked, as a node's do.
	metrics *ipn.Metrics
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureOn(t, filepath.Join(t.TempDir(), "kadi.db"))
}

// newFixtureOn is a fixture on the database at dsn.
func newFixtureOn(t testing.TB, dsn string) *fixture {
	t.Helper()
	db, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	loc, err := time.LoadLocation("Africa/Nairobi")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{db: db, loc: loc}
}

// paymentsAt is a payment service on db whose clock is now, approving in
// both modes.
func paymentsAt(db *store.DB, loc *time.Location, now func() time.Time) *payment.Service {
	return &payment.Service{
		Repo: db, Acquirers: map[merchant.Mode]payment.Acquirer{merchant.Test: approver{}, merchant.Live: approver{}},
		FingerprintKey: []byte("fingerprint key for tests 32 byt"), Now: now, Location: loc,
		Log: slog.New(slog.DiscardHandler), MaxFailures: 5, AcquirerTimeout: 5 * time.Second,
		ChallengeTTL: time.Minute, WaitInFlight: 5 * time.Second,
	}
}

// twoNodes is a fixture on the database at dsn and a second store on it,
// as another node or process would open it.
func twoNodes(t testing.TB, dsn string) (*fixture, *store.DB) {
	t.Helper()
	f := newFixtureOn(t, dsn)
	other, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	return f, other
}

// shop is an onboarded merchant with the test-mode IPN secret.
type shop struct {
	merchant.Merchant
	secret string
}

func (f *fixture) shop(t testing.TB, ipnURL string) shop {
	t.Helper()
	ctx := context.Background()
	creds, err := merchant.Onboard(ctx, f.db, "Duka la Mama", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ipnURL != "" {
		f.setIPN(t, creds.MerchantCode, ipnURL)
	}
	m, err := f.db.MerchantByCode(ctx, creds.MerchantCode)
	if err != nil {
		t.Fatal(err)
	}
	return shop{m, creds.Test.NotificationSecret}
}

func (f *fixture) setIPN(t testing.TB, code, url string) {
	t.Helper()
	if _, err := f.db.SetIPN(context.Background(), code, merchant.Test, merchant.IPNConfig{URL: url, Username: "shop-ipn", Password: "ipn-pass"}); err != nil {
		t.Fatal(err)
	}
}

// payAt makes a successful payment of KES 1500.00 at now; it returns the
// bill, whose notification is now in the outbox.
func (f *fixture) payAt(t testing.TB, s shop, now time.Time) bill.Bill {
	t.Helper()
	return f.payIn(t, s, merchant.Test, now)
}

func (f *fixture) payIn(t testing.TB, s shop, mode merchant.Mode, now time.Time) bill.Bill {
	t.Helper()
	b, err := f.tryPay(s, mode, now)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tryPay is payIn for goroutines other than the test's.
func (f *fixture) tryPay(s shop, mode merchant.Mode, now time.Time) (bill.Bill, error) {
	ctx := context.Background()
	amount, err := money.Parse("1500.00", "KES")
	if err != nil {
		return bill.Bill{}, err
	}
	b := bill.Bill{Reference: secret.RandomUpperAlnum(12), MerchantCode: s.Code, Mode: mode, OrderReference: "ORD" + secret.RandomUpperAlnum(8),
		RequestHash: "hash", CustomerName: "Wanjiku Kamau", BillerCode: s.BillerCode, Outlet: s.Outlets[0], Amount: amount,
		Description: "Two tickets", State: bill.Open, ExpiresAt: now.Add(time.Hour), CreatedAt: now}
	if _, _, err := f.db.InsertBill(ctx, b); err != nil {
		return b, err
	}
	pan, err := card.ParsePAN("4242424242424242")
	if err != nil {
		return b, err
	}
	svc := paymentsAt(f.db, f.loc, func() time.Time { return now })
	svc.IPNMetrics = f.metrics
	p, err := svc.Pay(ctx, b, s.Merchant, payment.Attempt{PAN: pan, Expiry: card.Expiry{Month: 12, Year: now.Year() + 3}, CVV: "123",
		Holder: "Wanjiku Kamau", CallbackURL: "https://shop.example/kadi/callback", MobileNumber: "+254 712345678"})
	if err != nil || p.Status != payment.Succeeded {
		return b, fmt.Errorf("payment: %v %+v", err, p)
	}
	return b, nil
}

func (f *fixture) pay(t testing.TB, s shop) bill.Bill { return f.payAt(t, s, time.Now()) }

// event finds the notification of a bill.
func (f *fixture) event(t testing.TB, s shop, billRef string) ipn.Event {
	t.Helper()
	evs, err := f.db.IPNEvents(context.Background(), ipn.Filter{MerchantCode: s.Code, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		p, err := f.db.PaymentByID(context.Background(), e.PaymentID)
		if err == nil && p.BillReference == billRef {
			return e
		}
	}
	t.Fatalf("no IPN event for bill %s", billRef)
	return ipn.Event{}
}

func (f *fixture) attempts(t testing.TB, id string) []ipn.Attempt {
	t.Helper()
	as, err := f.db.IPNAttempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// fast is a schedule in milliseconds, so a test sees many retries quickly.
func fast(cfg ipn.Config) ipn.Config {
	if cfg.Schedule == nil {
		cfg.Schedule = ipn.Schedule{20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	cfg.Poll = 10 * time.Millisecond
	cfg.AllowPrivate = true // receivers run on loopback
	return cfg
}

// runWorker starts a worker; the returned func stops it and waits for its
// deliveries in flight to be recorded.
func (f *fixture) runWorker(t testing.TB, cfg ipn.Config, m *ipn.Metrics) func() {
	t.Helper()
	f.metrics = m
	return run(t, &ipn.Worker{Queue: f.db, Config: cfg, Log: slog.New(slog.DiscardHandler), Metrics: m})
}

func run(t testing.TB, w *ipn.Worker) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond until it holds; the limit is generous for a loaded
// machine, and a test only waits that long when it is failing.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fixture) statusIs(t testing.TB, id string, want ipn.Status) func() bool {
	return func() bool {
		ev, err := f.db.IPNEvent(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return ev.Status == want
	}
}

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
	note   client.Notification
	err    error // verification by the client package
}

// receiver records every request, verifies it with the client package's
// IPN handler, and answers with respond(n) for the n-th request (from 1);
// a respond returning 0 lets the client handler answer.
type receiver struct {
	*httptest.Server
	mu       sync.Mutex
	got      []received
	n        atomic.Int32
	inFlight atomic.Int32
	maxIn    atomic.Int32
}

func newReceiver(t testing.TB, s shop, respond func(n int, w http.ResponseWriter, r *http.Request) bool) *receiver {
	t.Helper()
	rc := &receiver{}
	verify, err := client.NewIPNHandler(client.IPNConfig{Secret: s.secret, Username: "shop-ipn", Password: "ipn-pass"},
		func(context.Context, client.Notification) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := rc.inFlight.Add(1)
		defer rc.inFlight.Add(-1)
		for {
			m := rc.maxIn.Load()
			if in <= m || rc.maxIn.CompareAndSwap(m, in) {
				break
			}
		}
		body, _ := io.ReadAll(r.Body)
		note, verr := verify.Verify(r.Header, body)
		n := int(rc.n.Add(1))
		rc.mu.Lock()
		rc.got = append(rc.got, received{header: r.Header.Clone(), body: body, note: note, err: verr})
		rc.mu.Unlock()
		if respond != nil && respond(n, w, r) {
			return
		}
		if verr != nil {
			http.Error(w, verr.Error(), http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}
