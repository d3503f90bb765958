package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/store"
)

// BenchmarkBillLookup is the read behind GET /payment/v2/query, found and
// not found, with the cancellable context a request carries.
func BenchmarkBillLookup(b *testing.B) {
	s, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "kadi.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	code, refs, _ := seedBills(b, s, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct{ name, ref string }{{"found", refs[50].order}, {"not found", "NOSUCHBILL"}} {
		b.Run(c.name, func(b *testing.B) {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					_, _ = s.BillByOrderReference(ctx, code, merchant.Test, c.ref)
				}
			})
		})
	}
}

// TestLookupCancellation: a read by key on SQLite runs without the
// caller's cancellation (it is local and short, and a cancellable context
// doubled its cost), while on PostgreSQL it still gives up with the caller.
func TestLookupCancellation(t *testing.T) {
	for _, c := range []struct {
		name    string
		open    func(t *testing.T) *store.DB
		obeyCtx bool
	}{
		{"SQLite", func(t *testing.T) *store.DB { return openSQLite(t, filepath.Join(t.TempDir(), "kadi.db")) }, false},
		{"PostgreSQL", func(t *testing.T) *store.DB { return openStore(t, freshSchema(t, postgresURL(t))) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.open(t)
			code, refs, _ := seedBills(t, s, 10)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			b, err := s.BillByOrderReference(ctx, code, merchant.Test, refs[0].order)
			if c.obeyCtx {
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("a cancelled lookup: %v, %v; want context.Canceled", b.Reference, err)
				}
				return
			}
			if err != nil || b.Reference != refs[0].ref {
				t.Fatalf("a cancelled caller's lookup: %q, %v; want bill %s", b.Reference, err, refs[0].ref)
			}
		})
	}
}

// The verification's statement text is a constant, not built per query:
// the statement cache is keyed by text, so a text built per request
// costs an allocation and a hash of it on every verification.
func TestVerificationQueryIsNotBuiltPerRequest(t *testing.T) {
	for _, byOrderReference := range []bool{false, true} {
		if n := testing.AllocsPerRun(100, func() { _ = store.VerificationQuery(byOrderReference) }); n != 0 {
			t.Errorf("VerificationQuery(%v): %v allocations a call, want 0", byOrderReference, n)
		}
	}
	if store.VerificationQuery(false) == store.VerificationQuery(true) {
		t.Error("one text for both lookups")
	}
}

// No statement text on the hot paths is built per call (issue 9): a bill,
// a payment started and finished with its notification, the queries a
// merchant makes, the claims of the IPN worker. Each text is a constant or
// built once, so a second round of the same calls asks for no text in a
// string the first round had not already used; a text built per call
// would come in a new string every time.
func TestHotPathStatementsAreNotBuiltPerCall(t *testing.T) {
	db := ipnOpen(t, filepath.Join(t.TempDir(), "kadi.db"))
	code := ipnMerchant(t, db, "http://127.0.0.1:9/ipn")
	ctx := t.Context()
	var mu sync.Mutex
	seen := map[*byte]string{} // keeps each string alive, so no address is reused
	var fresh []string
	store.OnPrepare(db, func(q string) {
		mu.Lock()
		defer mu.Unlock()
		if p := unsafe.StringData(q); seen[p] == "" {
			seen[p] = q
			fresh = append(fresh, q)
		}
	})
	round := func() {
		ev := ipnEvent(t, db, code, time.Now())
		p, err := db.PaymentByID(ctx, ev.PaymentID)
		if err != nil {
			t.Fatal(err)
		}
		b, err := db.BillByReference(ctx, code, merchant.Test, p.BillReference)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range []string{b.Reference, b.OrderReference, "NOSUCHBILL"} {
			if _, err := db.Verification(ctx, code, merchant.Test, ref); err != nil && ref != "NOSUCHBILL" {
				t.Fatalf("verify %s: %v", ref, err)
			}
		}
		for _, quick := range []bool{true, false} {
			claimed, err := db.ClaimIPN(ctx, ipn.Claim{Owner: secret.NewID("own"), Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute),
				Limit: 10, PerEndpoint: 10, Quick: quick})
			if err != nil {
				t.Fatal(err)
			}
			if quick && len(claimed) == 0 {
				t.Fatal("the quick claim took nothing: its update did not run")
			}
		}
	}
	round()
	mu.Lock()
	first := len(fresh)
	fresh = nil
	mu.Unlock()
	round()
	if first == 0 {
		t.Fatal("no statement seen: the test sees nothing")
	}
	if len(fresh) > 0 {
		t.Errorf("%d texts built again in the second round, e.g. %q", len(fresh), fresh[0])
	}
}

// A dashboard search's statement has a placeholder a hit, so it is not
// kept prepared: each count of hits took a place in the bounded statement
// cache, and once it was full, statements first run later were prepared
// on every call.
func TestSearchesDoNotFillTheStatementCache(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "kadi.db"))
	code, _, last4 := seedBills(t, s, 2_000)
	f := bill.ListFilter{MerchantCode: code, Mode: merchant.Test, Search: last4, Limit: 50, Now: time.Now()}
	first, err := s.BillsPage(t.Context(), f)
	if err != nil || len(first) == 0 {
		t.Fatalf("search by the last four %s: %d bills, %v", last4, len(first), err)
	}
	// One more hit: another bill with a card ending so.
	b := bill.Bill{Reference: "SEARCHHIT234", MerchantCode: code, Mode: merchant.Test, OrderReference: "SEARCHHIT", RequestHash: "h",
		CustomerName: "Wanjiku Kamau", BillerCode: "1", Outlet: "2", Amount: first[0].Amount, Description: "Coffee", State: bill.Open,
		ExpiresAt: time.Now().Add(time.Hour), CreatedAt: time.Now()}
	if _, _, err := s.InsertBill(t.Context(), b); err != nil {
		t.Fatal(err)
	}
	p := payment.Payment{ID: secret.NewID("pay"), BillReference: b.Reference, MerchantCode: code, Mode: merchant.Test, Status: payment.Processing,
		Amount: b.Amount, Card: payment.CardSummary{Brand: "VISA", First6: "424242", Last4: last4, ExpMonth: 12, ExpYear: 2030, Fingerprint: "f"},
		CallbackURL: "https://shop.example/cb", CreatedAt: b.CreatedAt, UpdatedAt: b.CreatedAt}
	if err := s.StartPayment(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	kept := store.Statements(s)
	second, err := s.BillsPage(t.Context(), f)
	if err != nil || len(second) != len(first)+1 {
		t.Fatalf("the second search: %d bills, want %d: %v", len(second), len(first)+1, err)
	}
	if got := store.Statements(s); got != kept {
		t.Errorf("a search with one more hit kept %d statements prepared, %d before", got, kept)
	}
}

// Renewing and releasing leases names the events in an IN list whose
// length follows the count of events held: each count was a text of its
// own, one more of the statement cache's bounded places, on a node that
// renews every few seconds. Counts that round to the same power of two
// share a text, and the padding renews nothing.
func TestLeaseStatementsDoNotFillTheStatementCache(t *testing.T) {
	db := ipnOpen(t, filepath.Join(t.TempDir(), "kadi.db"))
	code := ipnMerchant(t, db, "http://127.0.0.1:9/ipn")
	ctx := t.Context()
	now := time.Now()
	for range 7 {
		ipnEvent(t, db, code, now.Add(-time.Second))
	}
	claimed, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10, PerEndpoint: 10})
	if err != nil || len(claimed) != 7 {
		t.Fatalf("claim: %d events, %v", len(claimed), err)
	}
	held := func(n int) (map[string]string, []string) {
		m, ids := map[string]string{}, []string{}
		for _, ev := range claimed[:n] {
			m[ev.ID] = "o"
			ids = append(ids, ev.ID)
		}
		return m, ids
	}
	var kept int32
	for i, n := range []int{5, 7} {
		m, _ := held(n)
		if renewed, err := db.RenewIPN(ctx, m, now.Add(2*time.Minute)); err != nil || renewed != n {
			t.Fatalf("renew %d: %d renewed, %v", n, renewed, err)
		}
		if i == 0 {
			kept = store.Statements(db)
		}
	}
	if got := store.Statements(db); got != kept {
		t.Errorf("renewing 7 events after 5 kept %d statements prepared, %d before", got, kept)
	}
	for i, n := range []int{5, 7} {
		_, ids := held(n)
		if err := db.ReleaseIPN(ctx, "o", ids); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			kept = store.Statements(db)
		}
	}
	if got := store.Statements(db); got != kept {
		t.Errorf("releasing 7 events after 5 kept %d statements prepared, %d before", got, kept)
	}
	again, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "p", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10, PerEndpoint: 10})
	if err != nil || len(again) != 7 {
		t.Errorf("after the releases, %d of 7 events claimable: %v", len(again), err)
	}
}
