package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/outage"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/store"
)

// ipnBackend opens a fresh, migrated database; open may be called again to
// get a second connection pool on the same database, as a second node would.
type ipnBackend struct {
	name string
	dsn  func(t *testing.T) string
}

func ipnBackends() []ipnBackend {
	return []ipnBackend{
		{"SQLite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "kadi.db") }},
		{"PostgreSQL", func(t *testing.T) string { return freshSchema(t, postgresURL(t)) }},
	}
}

func ipnOpen(t testing.TB, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// ipnMerchant onboards a merchant with an IPN URL in test mode.
func ipnMerchant(t testing.TB, db *store.DB, url string) string {
	t.Helper()
	creds, err := merchant.Onboard(t.Context(), db, "Shop", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.SetIPN(t.Context(), creds.MerchantCode, merchant.Test, merchant.IPNConfig{URL: url, Username: "u", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	return creds.MerchantCode
}

// ipnEvent writes a successful payment and its outbox event through the
// same FinishPayment the payment service uses.
func ipnEvent(t testing.TB, db *store.DB, code string, due time.Time) ipn.Event {
	t.Helper()
	ev, err := queueIPNEvent(t.Context(), db, code, due)
	if err != nil {
		t.Fatal(err)
	}
	return ev
}

func queueIPNEvent(ctx context.Context, db *store.DB, code string, due time.Time) (ipn.Event, error) {
	return queueIPNEventAs(ctx, db, code, due, ipn.Pending)
}

// queueIPNEventAs is queueIPNEvent with the event handed to FinishPayment
// as status (pending, or parked when the caller saw no endpoint).
func queueIPNEventAs(ctx context.Context, db *store.DB, code string, due time.Time, status ipn.Status) (ipn.Event, error) {
	amount, _ := money.FromMinor(150000, "KES")
	b := bill.Bill{Reference: secret.RandomUpperAlnum(12), MerchantCode: code, Mode: merchant.Test, OrderReference: secret.RandomUpperAlnum(10),
		RequestHash: "h", CustomerName: "C", BillerCode: "1", Outlet: "1", Amount: amount, Description: "d", State: bill.Open,
		ExpiresAt: due.Add(time.Hour), CreatedAt: due}
	if _, _, err := db.InsertBill(ctx, b); err != nil {
		return ipn.Event{}, err
	}
	p := payment.Payment{ID: secret.NewID("pay"), BillReference: b.Reference, MerchantCode: code, Mode: merchant.Test, Status: payment.Processing,
		Amount: amount, CallbackURL: "https://shop.example/cb", CreatedAt: due, UpdatedAt: due}
	if err := db.StartPayment(ctx, p); err != nil {
		return ipn.Event{}, err
	}
	p.Status = payment.Succeeded
	ev := ipn.Event{ID: secret.NewID("msg"), MerchantCode: code, Mode: merchant.Test, PaymentID: p.ID, Payload: []byte(`{"callbackType":"IPN"}`),
		Status: status, NextAttemptAt: due, CreatedAt: due}
	if status == ipn.Parked {
		ev.LastError = "the caller's note"
	}
	return ev, db.FinishPayment(ctx, p, 5, &ev)
}

func ipnIDs(evs []ipn.Event) []string {
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.ID)
	}
	slices.Sort(ids)
	return ids
}

func sorted(ids ...string) []string { slices.Sort(ids); return ids }

func TestIPNQueue(t *testing.T) {
	for _, be := range ipnBackends() {
		t.Run(be.name, func(t *testing.T) {
			t.Run("claim", func(t *testing.T) { testIPNClaim(t, ipnOpen(t, be.dsn(t))) })
			t.Run("quick claim", func(t *testing.T) { testIPNQuickClaim(t, ipnOpen(t, be.dsn(t))) })
			t.Run("record", func(t *testing.T) { testIPNRecord(t, ipnOpen(t, be.dsn(t))) })
			t.Run("gone", func(t *testing.T) { testIPNGone(t, ipnOpen(t, be.dsn(t))) })
			t.Run("parked", func(t *testing.T) { testIPNParked(t, ipnOpen(t, be.dsn(t))) })
			t.Run("parked as queued", func(t *testing.T) {
				dsn := be.dsn(t)
				testIPNParkedAsQueued(t, ipnOpen(t, dsn), ipnOpen(t, dsn))
			})
			t.Run("paging", func(t *testing.T) { testIPNPaging(t, ipnOpen(t, be.dsn(t))) })
			t.Run("replay and log", func(t *testing.T) { testIPNReplay(t, ipnOpen(t, be.dsn(t))) })
			t.Run("two claimers", func(t *testing.T) {
				dsn := be.dsn(t)
				testIPNTwoClaimers(t, ipnOpen(t, dsn), ipnOpen(t, dsn))
			})
			t.Run("contention", func(t *testing.T) {
				dsn := be.dsn(t)
				testIPNContention(t, ipnOpen(t, dsn), ipnOpen(t, dsn))
			})
			t.Run("lease takeover", func(t *testing.T) {
				dsn := be.dsn(t)
				testIPNLeaseTakeover(t, ipnOpen(t, dsn), ipnOpen(t, dsn))
			})
		})
	}
}

func testIPNClaim(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	a := ipnMerchant(t, db, "https://a.example/ipn")
	b := ipnMerchant(t, db, "https://b.example/ipn")
	a1 := ipnEvent(t, db, a, now.Add(-3*time.Second))
	a2 := ipnEvent(t, db, a, now.Add(-2*time.Second))
	a3 := ipnEvent(t, db, a, now.Add(-time.Second))
	b1 := ipnEvent(t, db, b, now.Add(-time.Second))
	ipnEvent(t, db, b, now.Add(time.Minute)) // not due
	lease := now.Add(time.Minute)

	// At most two of a's: its backlog cannot take all the slots.
	got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "o1", Now: now, LeaseUntil: lease, Limit: 10, PerEndpoint: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := sorted(a1.ID, a2.ID, b1.ID); !slices.Equal(ipnIDs(got), want) {
		t.Fatalf("claimed %v, want %v (per-endpoint cap 2, only due events)", ipnIDs(got), want)
	}
	for i := 1; i < len(got); i++ {
		if got[i].NextAttemptAt.Before(got[i-1].NextAttemptAt) {
			t.Errorf("claimed events not oldest first")
		}
	}
	for _, e := range got {
		if e.LeaseOwner != "o1" || !e.LeaseUntil.Equal(lease) || string(e.Payload) != `{"callbackType":"IPN"}` {
			t.Errorf("claimed event %+v", e)
		}
	}
	// Leased events stay off limits to other claimers.
	got, err = db.ClaimIPN(ctx, ipn.Claim{Owner: "o2", Now: now, LeaseUntil: lease, Limit: 10, PerEndpoint: 10})
	if err != nil || !slices.Equal(ipnIDs(got), []string{a3.ID}) {
		t.Fatalf("second claim got %v (%v), want only %s", ipnIDs(got), err, a3.ID)
	}
	// Release gives back only the owner's.
	if err := db.ReleaseIPN(ctx, "o2", []string{a1.ID, a3.ID}); err != nil {
		t.Fatal(err)
	}
	got, _ = db.ClaimIPN(ctx, ipn.Claim{Owner: "o3", Now: now, LeaseUntil: lease, Limit: 10, PerEndpoint: 10})
	if !slices.Equal(ipnIDs(got), []string{a3.ID}) {
		t.Fatalf("after release claimed %v, want only %s (a1 is o1's)", ipnIDs(got), a3.ID)
	}
	// An expired lease (a crashed worker) can be taken over.
	later := lease.Add(time.Millisecond)
	got, _ = db.ClaimIPN(ctx, ipn.Claim{Owner: "o4", Now: later, LeaseUntil: later.Add(time.Minute), Limit: 10, PerEndpoint: 10,
		Skip: []ipn.Endpoint{{MerchantCode: b, Mode: merchant.Test}}})
	if want := sorted(a1.ID, a2.ID, a3.ID); !slices.Equal(ipnIDs(got), want) {
		t.Fatalf("after lease expiry with b skipped claimed %v, want %v", ipnIDs(got), want)
	}
	// Limit bounds the batch.
	got, _ = db.ClaimIPN(ctx, ipn.Claim{Owner: "o5", Now: later.Add(2 * time.Minute), LeaseUntil: later.Add(3 * time.Minute), Limit: 1, PerEndpoint: 10})
	if len(got) != 1 {
		t.Fatalf("limit 1 claimed %d", len(got))
	}
}

// A quick claim looks at the oldest due events only and stops at a run of
// events it cannot take; the poll's claim reaches every endpoint, however
// long the backlog in front of it.
func testIPNQuickClaim(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	a := ipnMerchant(t, db, "https://a.example/ipn")
	b := ipnMerchant(t, db, "https://b.example/ipn")
	c := ipnMerchant(t, db, "https://c.example/ipn")
	start := now.Add(-time.Hour)
	var as []ipn.Event
	for i := range 80 {
		as = append(as, ipnEvent(t, db, a, start.Add(time.Duration(i)*time.Second)))
	}
	b1 := ipnEvent(t, db, b, start.Add(10500*time.Millisecond)) // after a's tenth
	c1 := ipnEvent(t, db, c, start.Add(100*time.Second))        // after all of a's
	skipA := []ipn.Endpoint{{MerchantCode: a, Mode: merchant.Test}}
	for _, tc := range []struct {
		name      string
		quick     bool
		skip, one []ipn.Endpoint
		limit     int
		want      []string
	}{
		{"quick: stops at a run of a's", true, nil, nil, 4, sorted(as[0].ID, as[1].ID)},
		{"poll: past a's, to every endpoint", false, nil, nil, 4, sorted(as[0].ID, as[1].ID, b1.ID, c1.ID)},
		{"poll, room for two: one each of the oldest endpoints, not a's two", false, nil, nil, 2, sorted(as[0].ID, b1.ID)},
		{"quick, a skipped: not past the oldest", true, skipA, nil, 4, sorted(b1.ID)},
		{"poll, a skipped: every endpoint", false, skipA, nil, 4, sorted(b1.ID, c1.ID)},
		// a's receiver stopped answering: one request at a time.
		{"quick, one of a's at most", true, nil, skipA, 4, sorted(as[0].ID)},
		{"poll, one of a's at most, and every endpoint", false, nil, skipA, 4, sorted(as[0].ID, b1.ID, c1.ID)},
	} {
		got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Limit: tc.limit, PerEndpoint: 2,
			Skip: tc.skip, One: tc.one, Quick: tc.quick})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ipnIDs(got), tc.want) {
			t.Errorf("%s: claimed %v, want %v", tc.name, ipnIDs(got), tc.want)
		}
		if err := db.ReleaseIPN(ctx, "o", ipnIDs(got)); err != nil {
			t.Fatal(err)
		}
	}
}

func testIPNRecord(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	m := ipnMerchant(t, db, "https://a.example/ipn")
	ev := ipnEvent(t, db, m, now)
	if _, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "mine", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 1}); err != nil {
		t.Fatal(err)
	}
	a := &ipn.Attempt{At: now, URL: "https://a.example/ipn", StatusCode: 500, Latency: 1500 * time.Microsecond, Error: "HTTP 500", Response: "oops ✓"}
	next := now.Add(5 * time.Second)

	err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "not-mine", Attempt: a, Status: ipn.Pending, NextAttemptAt: next, LastError: "x"})
	if !errors.Is(err, ipn.ErrLeaseLost) {
		t.Fatalf("record by a non-owner: %v, want ErrLeaseLost", err)
	}
	if atts, _ := db.IPNAttempts(ctx, ev.ID); len(atts) != 0 {
		t.Fatalf("a refused record left %d attempt rows", len(atts))
	}

	if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "mine", Attempt: a, Status: ipn.Pending, NextAttemptAt: next, LastError: "HTTP 500"}); err != nil {
		t.Fatal(err)
	}
	got, err := db.IPNEvent(ctx, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ipn.Pending || got.Attempts != 1 || !got.NextAttemptAt.Equal(next) || got.LastError != "HTTP 500" || got.LeaseOwner != "" || !got.LeaseUntil.IsZero() {
		t.Fatalf("after a failed attempt: %+v", got)
	}
	// The lease went with the record: the owner cannot record again.
	if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "mine", Status: ipn.Delivered, At: now}); !errors.Is(err, ipn.ErrLeaseLost) {
		t.Fatalf("second record on a released lease: %v", err)
	}
	// A deferral (no request made) does not count as an attempt.
	claimed, _ := db.ClaimIPN(ctx, ipn.Claim{Owner: "again", Now: next, LeaseUntil: next.Add(time.Minute), Limit: 1})
	if len(claimed) != 1 {
		t.Fatal("rescheduled event not claimable when due")
	}
	if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "again", Status: ipn.Pending, NextAttemptAt: next.Add(time.Minute), LastError: "no URL"}); err != nil {
		t.Fatal(err)
	}
	claimed, _ = db.ClaimIPN(ctx, ipn.Claim{Owner: "third", Now: next.Add(time.Minute), LeaseUntil: next.Add(2 * time.Minute), Limit: 1})
	if len(claimed) != 1 || claimed[0].Attempts != 1 {
		t.Fatalf("after a deferral: %+v", claimed)
	}
	delivered := next.Add(time.Minute + time.Second)
	a2 := &ipn.Attempt{At: delivered, URL: "https://a.example/ipn", StatusCode: 204, Latency: time.Millisecond}
	if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "third", Attempt: a2, Status: ipn.Delivered, At: delivered}); err != nil {
		t.Fatal(err)
	}
	got, _ = db.IPNEvent(ctx, ev.ID)
	if got.Status != ipn.Delivered || got.Attempts != 2 || !got.DeliveredAt.Equal(delivered) || got.LastError != "" {
		t.Fatalf("after delivery: %+v", got)
	}
	atts, err := db.IPNAttempts(ctx, ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 2 || atts[0].Seq != 1 || atts[1].Seq != 2 {
		t.Fatalf("attempts %+v", atts)
	}
	first := atts[0]
	if !first.At.Equal(now) || first.StatusCode != 500 || first.Latency != 1500*time.Microsecond || first.Error != "HTTP 500" ||
		first.Response != "oops ✓" || first.URL != "https://a.example/ipn" || first.EventID != ev.ID {
		t.Errorf("first attempt stored as %+v", first)
	}
	if c, _ := db.ClaimIPN(ctx, ipn.Claim{Owner: "x", Now: delivered.Add(time.Hour), LeaseUntil: delivered.Add(2 * time.Hour), Limit: 5}); len(c) != 0 {
		t.Errorf("a delivered event was claimed again")
	}
}

func testIPNGone(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	m := ipnMerchant(t, db, "https://a.example/ipn")
	other := ipnMerchant(t, db, "https://b.example/ipn")
	ev := ipnEvent(t, db, m, now)
	behind := ipnEvent(t, db, m, now.Add(time.Millisecond))
	otherEv := ipnEvent(t, db, other, now)
	claim := func(owner string, at time.Time) []ipn.Event {
		got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: owner, Now: at, LeaseUntil: at.Add(time.Minute), Limit: 10, PerEndpoint: 1})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := claim("o1", now)
	if !slices.Equal(ipnIDs(got), sorted(ev.ID, otherEv.ID)) {
		t.Fatalf("claimed %v", ipnIDs(got))
	}
	_ = db.ReleaseIPN(ctx, "o1", []string{otherEv.ID})
	// Read once before the 410, as a delivery does: the worker's next
	// attempt must see the endpoint disabled at once, not once the
	// settings kept in memory are a second old.
	if st, _ := db.RecentSettings(ctx, m, merchant.Test); !st.IPN.DisabledAt.IsZero() {
		t.Fatal("endpoint disabled before any 410")
	}
	a := &ipn.Attempt{At: now, URL: "https://a.example/ipn", StatusCode: 410, Error: "410 Gone"}
	if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "o1", Attempt: a, Status: ipn.Pending, NextAttemptAt: now,
		LastError: "410 Gone", DisableURL: "https://a.example/ipn"}); err != nil {
		t.Fatal(err)
	}
	st, _ := db.RecentSettings(ctx, m, merchant.Test)
	if !st.IPN.DisabledAt.Equal(now) {
		t.Fatalf("410 did not disable the endpoint: %+v", st.IPN)
	}
	if st, _ := db.Settings(ctx, other, merchant.Test); !st.IPN.DisabledAt.IsZero() {
		t.Fatal("410 disabled another merchant's endpoint")
	}
	// The disabled endpoint's events are claimed once more, to be parked.
	got = claim("o2", now.Add(time.Second))
	if !slices.Equal(ipnIDs(got), sorted(ev.ID, otherEv.ID)) {
		t.Fatalf("with the endpoint disabled claimed %v", ipnIDs(got))
	}
	_ = db.ReleaseIPN(ctx, "o2", []string{otherEv.ID})
	if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "o2", Status: ipn.Parked, NextAttemptAt: now, Saw: st.IPN,
		LastError: "disabled"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.IPNEvent(ctx, ev.ID); got.Status != ipn.Parked {
		t.Fatalf("event after the 410 is %s, want parked", got.Status)
	}
	if got := claim("o2b", now.Add(time.Second)); !slices.Equal(ipnIDs(got), sorted(behind.ID, otherEv.ID)) {
		t.Fatalf("with one event parked claimed %v", ipnIDs(got))
	}
	_ = db.ReleaseIPN(ctx, "o2b", []string{behind.ID, otherEv.ID})
	// Saving the configuration again re-enables it.
	if _, err := db.SetIPN(ctx, m, merchant.Test, merchant.IPNConfig{URL: "https://a.example/ipn2", Username: "u", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.IPNEvent(ctx, ev.ID); got.Status != ipn.Pending || got.LastError != "" {
		t.Fatalf("the parked event after saving the configuration: %s %q", got.Status, got.LastError)
	}
	// A stale 410 from the old URL does not disable the new configuration.
	got = slices.DeleteFunc(claim("o4", now.Add(3*time.Second)), func(e ipn.Event) bool { return e.MerchantCode != m })
	if len(got) != 1 {
		t.Fatalf("claimed %d of the endpoint's", len(got))
	}
	if err := db.RecordIPN(ctx, ipn.Result{EventID: got[0].ID, Owner: "o4", Attempt: a, Status: ipn.Pending, NextAttemptAt: now,
		DisableURL: "https://a.example/ipn"}); err != nil {
		t.Fatal(err)
	}
	if st, _ := db.Settings(ctx, m, merchant.Test); !st.IPN.DisabledAt.IsZero() {
		t.Fatal("a 410 from the old URL disabled the newly saved one")
	}
}

// An event without a usable endpoint is parked: out of the claims and the
// queue's gauges. Saving a URL sends the parked events of the last
// ParkedResendWindow; a park that raced with such a save leaves the event
// due instead.
func testIPNParked(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	m := ipnMerchant(t, db, "")
	recent := ipnEvent(t, db, m, now.Add(-time.Hour))
	old := ipnEvent(t, db, m, now.Add(-ipn.ParkedResendWindow-time.Hour))
	got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "o1", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10})
	if err != nil || !slices.Equal(ipnIDs(got), sorted(recent.ID, old.ID)) {
		t.Fatalf("claimed %v, %v", ipnIDs(got), err)
	}
	st, err := db.RecentSettings(ctx, m, merchant.Test)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range got {
		if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "o1", Status: ipn.Parked, NextAttemptAt: now, Saw: st.IPN,
			LastError: "no IPN URL"}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "o2", Now: now.Add(time.Hour), LeaseUntil: now.Add(2 * time.Hour), Limit: 10}); err != nil || len(got) != 0 {
		t.Fatalf("parked events claimed: %v, %v", ipnIDs(got), err)
	}
	if stats, err := db.IPNStats(ctx); err != nil || stats.Pending != 0 || !stats.OldestPending.IsZero() {
		t.Fatalf("stats with only parked events: %+v, %v", stats, err)
	}
	if parked, err := db.IPNEvents(ctx, ipn.Filter{MerchantCode: m, Status: ipn.Parked}); err != nil || len(parked) != 2 {
		t.Fatalf("listed %d parked, %v", len(parked), err)
	}

	// Saved again without a URL: nothing to send to.
	if _, err := db.SetIPN(ctx, m, merchant.Test, merchant.IPNConfig{}); err != nil {
		t.Fatal(err)
	}
	if ev, _ := db.IPNEvent(ctx, recent.ID); ev.Status != ipn.Parked {
		t.Fatalf("saving no URL made the event %s", ev.Status)
	}

	// A worker read the settings before a URL was saved elsewhere, and
	// parks after the save: the event is due, not parked for good.
	late := ipnEvent(t, db, m, now)
	if got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "o3", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 10}); err != nil || len(got) != 1 {
		t.Fatalf("claimed %v, %v", ipnIDs(got), err)
	}
	if _, err := db.SetIPN(ctx, m, merchant.Test, merchant.IPNConfig{URL: "https://a.example/ipn", Username: "u", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	if err := db.RecordIPN(ctx, ipn.Result{EventID: late.ID, Owner: "o3", Status: ipn.Parked, NextAttemptAt: now, Saw: st.IPN,
		LastError: "no IPN URL"}); !errors.Is(err, ipn.ErrConfigChanged) {
		t.Fatalf("a park on a stale view: %v, want ErrConfigChanged", err)
	}
	if ev, _ := db.IPNEvent(ctx, late.ID); ev.Status != ipn.Pending || !ev.NextAttemptAt.Equal(now) {
		t.Fatalf("parked after the save: %s due %s", ev.Status, ev.NextAttemptAt)
	}
	// That save sent the recent parked event, not the one older than the window.
	if ev, _ := db.IPNEvent(ctx, recent.ID); ev.Status != ipn.Pending || ev.Attempts != 0 || ev.LastError != "" {
		t.Fatalf("recent parked event after the save: %+v", ev)
	}
	if ev, _ := db.IPNEvent(ctx, old.ID); ev.Status != ipn.Parked {
		t.Fatalf("event older than the window after the save: %s", ev.Status)
	}
	if evs, err := db.AuditEvents(ctx, m, 1); err != nil || len(evs) == 0 || !strings.Contains(evs[0].Detail, "1 parked notification sent") {
		t.Fatalf("audit of the save: %+v, %v", evs, err)
	}
	if got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "o4", Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute), Limit: 10}); err != nil ||
		!slices.Equal(ipnIDs(got), sorted(recent.ID, late.ID)) {
		t.Fatalf("claimed after the save %v, %v", ipnIDs(got), err)
	}
}

// A payment whose merchant has no IPN URL stores its notification parked
// (the payment service asks for it): no worker claims it, and it waits for
// the merchant, not counted as pending. The store checks the saved
// configuration as it inserts: an endpoint saved since the caller read the
// settings (by another node, or another process on the file) makes the
// event pending, due, and the worker is woken for it.
func testIPNParkedAsQueued(t *testing.T, db, other *store.DB) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	m := ipnMerchant(t, db, "")
	queued := make(chan ipn.Endpoint, 10)
	db.OnIPNQueued(func(e ipn.Endpoint) { queued <- e })
	ev, err := queueIPNEventAs(ctx, db, m, now, ipn.Parked)
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) != 0 {
		t.Error("the worker was woken for a parked event")
	}
	note := ipn.ParkedNote("no IPN URL configured for test mode")
	if ev.Status != ipn.Parked || ev.LastError != note {
		t.Errorf("FinishPayment left the event %s, %q", ev.Status, ev.LastError)
	}
	if got, err := db.IPNEvent(ctx, ev.ID); err != nil || got.Status != ipn.Parked || got.LastError != note || got.Attempts != 0 {
		t.Fatalf("stored %+v, %v; want parked with %q", got, err, note)
	}
	if got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "o1", Now: now.Add(time.Hour), LeaseUntil: now.Add(2 * time.Hour), Limit: 10}); err != nil || len(got) != 0 {
		t.Fatalf("a parked event claimed: %v, %v", ipnIDs(got), err)
	}
	if stats, err := db.IPNStats(ctx); err != nil || stats.Pending != 0 {
		t.Fatalf("stats: %+v, %v", stats, err)
	}

	// db holds the settings it read before the save elsewhere, as a
	// node does for a second.
	if st, err := db.RecentSettings(ctx, m, merchant.Test); err != nil || st.IPN.URL != "" {
		t.Fatalf("settings before the save: %+v, %v", st.IPN, err)
	}
	if _, err := other.SetIPN(ctx, m, merchant.Test, merchant.IPNConfig{URL: "https://a.example/ipn", Username: "u", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	late, err := queueIPNEventAs(ctx, db, m, now, ipn.Parked)
	if err != nil {
		t.Fatal(err)
	}
	if late.Status != ipn.Pending || late.LastError != "" {
		t.Errorf("FinishPayment left the event %s, %q after a URL was saved", late.Status, late.LastError)
	}
	if got, err := db.IPNEvent(ctx, late.ID); err != nil || got.Status != ipn.Pending || got.LastError != "" {
		t.Fatalf("stored %+v, %v after a URL was saved; want pending", got, err)
	}
	// The stale settings are dropped: the next payment is not parked on
	// them again, nor is the worker's park of this event.
	if st, err := db.RecentSettings(ctx, m, merchant.Test); err != nil || st.IPN.URL != "https://a.example/ipn" {
		t.Errorf("settings after the refused park: %+v, %v; want the URL saved elsewhere", st.IPN, err)
	}
	select {
	case e := <-queued:
		if e != (ipn.Endpoint{MerchantCode: m, Mode: merchant.Test}) {
			t.Errorf("woke the worker for %+v", e)
		}
	default:
		t.Error("the worker was not woken for the event made pending")
	}
	if got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "o2", Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute), Limit: 10}); err != nil ||
		!slices.Contains(ipnIDs(got), late.ID) {
		t.Fatalf("claimed %v, %v; want the event made pending", ipnIDs(got), err)
	}
}

// On PostgreSQL a park reads the IPN configuration under a share lock: a
// payment's (FinishPayment with a parked event) and a worker's (RecordIPN
// with a Parked result). A save in progress (the row updated, not yet
// committed, its resend of the parked events still to run) is waited for,
// and its URL seen: the event is left pending. Read without the lock, the
// park saw the old configuration and committed after the save's resend had
// looked, and the event stayed parked with a URL saved.
func TestParkWaitsForASaveInProgress(t *testing.T) {
	for _, tc := range []struct {
		name string
		// park parks an event of m and returns its id and whether it was
		// left pending.
		park func(db *store.DB, m string) (string, bool, error)
	}{
		{"a payment's", func(db *store.DB, m string) (string, bool, error) {
			ev, err := queueIPNEventAs(context.Background(), db, m, time.Now(), ipn.Parked)
			return ev.ID, ev.Status == ipn.Pending, err
		}},
		{"a worker's", func(db *store.DB, m string) (string, bool, error) {
			ctx := context.Background()
			now := time.Now()
			got, err := db.ClaimIPN(ctx, ipn.Claim{Owner: "w", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 1})
			if err != nil || len(got) != 1 {
				return "", false, fmt.Errorf("claim: %d, %v", len(got), err)
			}
			err = db.RecordIPN(ctx, ipn.Result{EventID: got[0].ID, Owner: "w", Status: ipn.Parked, NextAttemptAt: now, LastError: "no IPN URL"})
			if errors.Is(err, ipn.ErrConfigChanged) {
				return got[0].ID, true, nil
			}
			return got[0].ID, false, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			dsn := freshSchema(t, postgresURL(t))
			db := ipnOpen(t, dsn)
			m := ipnMerchant(t, db, "")
			// The worker's park needs an event pending to claim.
			ipnEvent(t, db, m, time.Now())
			raw, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			save, err := raw.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer save.Rollback()
			var savePID int
			if err := save.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&savePID); err != nil {
				t.Fatal(err)
			}
			if _, err := save.ExecContext(ctx, `UPDATE merchant_settings SET ipn_url = 'https://a.example/ipn' WHERE merchant_code = $1 AND mode = 'test'`, m); err != nil {
				t.Fatal(err)
			}
			type parked struct {
				id      string
				pending bool
				err     error
			}
			done := make(chan parked, 1)
			go func() {
				id, pending, err := tc.park(db, m)
				done <- parked{id, pending, err}
			}()
			deadline := time.Now().Add(10 * time.Second)
			for waiting := 0; waiting == 0; {
				select {
				case p := <-done:
					t.Fatalf("the park ended while a save held the settings row: left pending %t, %v", p.pending, p.err)
				case <-time.After(5 * time.Millisecond):
				}
				if time.Now().After(deadline) {
					t.Fatal("the park never waited for the save in progress")
				}
				if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))`, savePID).Scan(&waiting); err != nil {
					t.Fatal(err)
				}
			}
			if err := save.Commit(); err != nil {
				t.Fatal(err)
			}
			var p parked
			select {
			case p = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the park did not go on once the save committed")
			}
			if p.err != nil || !p.pending {
				t.Fatalf("after the save: left pending %t, %v", p.pending, p.err)
			}
			if got, err := db.IPNEvent(ctx, p.id); err != nil || got.Status != ipn.Pending {
				t.Fatalf("stored %s, %v; want pending", got.Status, err)
			}
		})
	}
}

// The log pages by keyset: every event once, newest first, however many
// share a creation time; an id not there (or another merchant's) is the
// end of the list.
func testIPNPaging(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	m := ipnMerchant(t, db, "https://a.example/ipn")
	other := ipnMerchant(t, db, "https://b.example/ipn")
	var want []string
	for i := range 7 {
		at := now.Add(time.Duration(i/3) * time.Second) // three share each second
		want = append(want, ipnEvent(t, db, m, at).ID)
	}
	theirs := ipnEvent(t, db, other, now)
	all, err := db.IPNEvents(ctx, ipn.Filter{MerchantCode: m, Limit: 100})
	if err != nil || len(all) != 7 {
		t.Fatalf("all: %d, %v", len(all), err)
	}
	var paged []string
	before := ""
	for range 10 {
		page, err := db.IPNEvents(ctx, ipn.Filter{MerchantCode: m, Limit: 2, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, e := range page {
			paged = append(paged, e.ID)
		}
		before = page[len(page)-1].ID
	}
	var listed []string
	for _, e := range all {
		listed = append(listed, e.ID)
	}
	if !slices.Equal(paged, listed) || !slices.Equal(sorted(paged...), sorted(want...)) {
		t.Fatalf("pages gave %v, the listing %v", paged, listed)
	}
	for _, stranger := range []string{theirs.ID, "msg_000000000000000000000000"} {
		if page, err := db.IPNEvents(ctx, ipn.Filter{MerchantCode: m, Limit: 10, Before: stranger}); err != nil || len(page) != 0 {
			t.Errorf("before %s: %d events, %v", stranger, len(page), err)
		}
	}
}

func testIPNReplay(t *testing.T, db *store.DB) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	m := ipnMerchant(t, db, "https://a.example/ipn")
	ev := ipnEvent(t, db, m, now.Add(-time.Hour))
	pending := ipnEvent(t, db, m, now.Add(time.Hour))
	got, _ := db.ClaimIPN(ctx, ipn.Claim{Owner: "o", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 1})
	if len(got) != 1 {
		t.Fatal("nothing claimed")
	}
	if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "o", Attempt: &ipn.Attempt{At: now, StatusCode: 500}, Status: ipn.Failed, LastError: "gave up"}); err != nil {
		t.Fatal(err)
	}
	stats, err := db.IPNStats(ctx)
	if err != nil || stats.Pending != 1 || stats.Failed != 1 || !stats.OldestPending.Equal(now.Add(time.Hour)) {
		t.Fatalf("stats %+v %v", stats, err)
	}
	if list, _ := db.IPNEvents(ctx, ipn.Filter{MerchantCode: m, Status: ipn.Failed}); !slices.Equal(ipnIDs(list), []string{ev.ID}) {
		t.Fatalf("failed list %v", ipnIDs(list))
	}
	if list, _ := db.IPNEvents(ctx, ipn.Filter{MerchantCode: m, Mode: merchant.Live}); len(list) != 0 {
		t.Fatalf("live list holds test events: %v", ipnIDs(list))
	}
	if list, _ := db.IPNEvents(ctx, ipn.Filter{MerchantCode: m}); !slices.Equal(ipnIDs(list), sorted(ev.ID, pending.ID)) || list[0].ID != pending.ID {
		t.Fatalf("list %v, want both, newest first", ipnIDs(list))
	}

	at := now.Add(time.Minute)
	rep, err := db.ReplayIPN(ctx, ev.ID, at, "cli")
	if err != nil {
		t.Fatal(err)
	}
	if rep.ID != ev.ID || rep.Status != ipn.Pending || rep.Attempts != 0 || rep.Replays != 1 || !rep.NextAttemptAt.Equal(at) || rep.LastError != "" {
		t.Fatalf("replayed event %+v", rep)
	}
	claimed, _ := db.ClaimIPN(ctx, ipn.Claim{Owner: "p", Now: at, LeaseUntil: at.Add(time.Minute), Limit: 5})
	if !slices.Equal(ipnIDs(claimed), []string{ev.ID}) {
		t.Fatalf("replayed event not due: claimed %v", ipnIDs(claimed))
	}
	if atts, _ := db.IPNAttempts(ctx, ev.ID); len(atts) != 1 {
		t.Errorf("replay lost the attempt log: %d rows", len(atts))
	}
	events, err := db.AuditEvents(ctx, m, 10)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events {
		found = found || (e.Action == audit.IPNReplayed && e.Actor == "cli" && strings.Contains(e.Detail, ev.ID))
	}
	if !found {
		t.Errorf("replay not in the audit log: %+v", events)
	}
	// A replay while an attempt is in flight: that attempt's outcome, even
	// a last failure or a success, does not end the new round.
	if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "p", Attempt: &ipn.Attempt{At: at, StatusCode: 500}, Status: ipn.Pending, NextAttemptAt: at}); err != nil {
		t.Fatal(err)
	}
	for _, outcome := range []ipn.Status{ipn.Failed, ipn.Delivered} {
		inFlight, _ := db.ClaimIPN(ctx, ipn.Claim{Owner: "q", Now: at, LeaseUntil: at.Add(time.Minute), Limit: 5})
		if !slices.Equal(ipnIDs(inFlight), []string{ev.ID}) {
			t.Fatalf("claimed %v", ipnIDs(inFlight))
		}
		if _, err := db.ReplayIPN(ctx, ev.ID, at, "cli"); err != nil {
			t.Fatal(err)
		}
		err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "q", Attempt: &ipn.Attempt{At: at, StatusCode: 200}, Status: outcome, LastError: "the in-flight attempt", At: at})
		if !errors.Is(err, ipn.ErrLeaseLost) {
			t.Errorf("%s recorded over a replay: %v, want the lease lost", outcome, err)
		}
		now, _ := db.IPNEvent(ctx, ev.ID)
		if now.Status != ipn.Pending || now.Attempts != 0 {
			t.Errorf("after a replay and an in-flight %s: %s with %d attempts, want a new round pending", outcome, now.Status, now.Attempts)
		}
		if again, _ := db.ClaimIPN(ctx, ipn.Claim{Owner: "r", Now: at, LeaseUntil: at.Add(time.Minute), Limit: 5}); !slices.Equal(ipnIDs(again), []string{ev.ID}) {
			t.Errorf("the replay is not due: claimed %v", ipnIDs(again))
		}
		if err := db.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "r", Status: ipn.Pending, NextAttemptAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ReplayIPN(ctx, "msg_nope", at, "cli"); !errors.Is(err, ipn.ErrNotFound) {
		t.Errorf("replay of an unknown id: %v", err)
	}
	if _, err := db.IPNEvent(ctx, "msg_nope"); !errors.Is(err, ipn.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
}

// Two nodes claim from one queue at once, again and again: no event may be
// handed to both.
func testIPNTwoClaimers(t *testing.T, n1, n2 *store.DB) {
	now := time.Now().Truncate(time.Millisecond)
	var codes []string
	for range 3 {
		codes = append(codes, ipnMerchant(t, n1, "https://x.example/ipn"))
	}
	const perMerchant = 40
	want := map[string]bool{}
	for i := range perMerchant {
		for _, c := range codes {
			want[ipnEvent(t, n1, c, now.Add(-time.Duration(i)*time.Millisecond)).ID] = true
		}
	}
	var mu sync.Mutex
	owners := map[string][]string{}
	var wg sync.WaitGroup
	for w, db := range []*store.DB{n1, n2, n1, n2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; ; round++ {
				owner := fmt.Sprintf("node%d-claim%d", w, round)
				got, err := db.ClaimIPN(context.Background(), ipn.Claim{Owner: owner, Now: now, LeaseUntil: now.Add(time.Hour), Limit: 7, PerEndpoint: 3})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, e := range got {
					owners[e.ID] = append(owners[e.ID], owner)
					if e.LeaseOwner != owner {
						t.Errorf("event %s returned to %s with lease owner %s", e.ID, owner, e.LeaseOwner)
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for id, os := range owners {
		if len(os) != 1 {
			t.Errorf("event %s claimed by %v", id, os)
		}
	}
	if len(owners) != len(want) {
		t.Errorf("claimed %d of %d events", len(owners), len(want))
	}
}

// testIPNContention: claimers on two nodes claim, record and give back
// events of a few endpoints at once, as busy nodes do, until all are
// delivered. No statement may fail (PostgreSQL answered 40P01 deadlocks
// when claims locked rows in whatever order they met them), no event may be
// held by two claimers at once, and each is delivered exactly once.
// retryOutage runs op again while it fails as an outage, a few times: on
// SQLite the two handles are two writers on one file, and under a loaded
// machine one's BEGIN IMMEDIATE can wait out the busy timeout while the
// other takes the lock back between its groups (SQLite's busy handler
// polls; it does not queue). Nothing is written then, and a worker's next
// round does the same again; what is tested here is who wins an event.
func retryOutage(op func() error) error {
	var err error
	for range 5 {
		if err = op(); !outage.Is(err) {
			return err
		}
	}
	return err
}

func testIPNContention(t *testing.T, n1, n2 *store.DB) {
	now := time.Now().Truncate(time.Millisecond)
	var codes []string
	for range 4 {
		codes = append(codes, ipnMerchant(t, n1, "https://x.example/ipn"))
	}
	const perMerchant = 60
	total := 0
	for i := range perMerchant {
		for _, c := range codes {
			ipnEvent(t, n1, c, now.Add(-time.Duration(i)*time.Millisecond))
			total++
		}
	}
	var mu sync.Mutex
	holder := map[string]string{}
	delivered := map[string]int{}
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(delivered) == total
	}
	var wg sync.WaitGroup
	for w := range 8 {
		db := []*store.DB{n1, n2}[w%2]
		wg.Go(func() {
			ctx := context.Background()
			for round := 0; !done() && round < 10000; round++ {
				owner := fmt.Sprintf("node%d#%d", w, round)
				var got []ipn.Event
				err := retryOutage(func() (err error) {
					got, err = db.ClaimIPN(ctx, ipn.Claim{Owner: owner, Now: now, LeaseUntil: now.Add(time.Hour), Limit: 6, PerEndpoint: 2})
					return err
				})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				var back []string
				mu.Lock()
				for i, e := range got {
					if other := holder[e.ID]; other != "" {
						t.Errorf("event %s claimed by %s while %s holds it", e.ID, owner, other)
					}
					holder[e.ID] = owner
					if i%3 == 2 {
						// Given back, as a node over an endpoint's cap does.
						delete(holder, e.ID)
						back = append(back, e.ID)
					}
				}
				mu.Unlock()
				if err := retryOutage(func() error { return db.ReleaseIPN(ctx, owner, back) }); err != nil {
					t.Errorf("release: %v", err)
					return
				}
				for i, e := range got {
					if i%3 == 2 {
						continue
					}
					mu.Lock()
					delete(holder, e.ID)
					mu.Unlock()
					if err := retryOutage(func() error {
						return db.RecordIPN(ctx, ipn.Result{EventID: e.ID, Owner: owner, Status: ipn.Delivered, At: now})
					}); err != nil {
						t.Errorf("record %s: %v", e.ID, err)
						return
					}
					mu.Lock()
					delivered[e.ID]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(delivered) != total {
		t.Errorf("delivered %d of %d events", len(delivered), total)
	}
	for id, n := range delivered {
		if n != 1 {
			t.Errorf("event %s recorded as delivered %d times", id, n)
		}
	}
}

// testIPNLeaseTakeover: a lease lives while its heartbeat renews it; once a
// node misses its heartbeat (it died), another node takes the event over
// when the lease runs out, and the dead node's late writes are refused.
func testIPNLeaseTakeover(t *testing.T, n1, n2 *store.DB) {
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	code := ipnMerchant(t, n1, "https://x.example/ipn")
	ev := ipnEvent(t, n1, code, now.Add(-time.Second))
	lease := 3 * time.Second
	got, err := n1.ClaimIPN(ctx, ipn.Claim{Owner: "n1#1", Now: now, LeaseUntil: now.Add(lease), Limit: 5})
	if err != nil || len(got) != 1 {
		t.Fatalf("n1 claims: %v, %v", got, err)
	}
	held := map[string]string{ev.ID: "n1#1"}
	// A heartbeat a second later keeps it a lease from then.
	if n, err := n1.RenewIPN(ctx, held, now.Add(time.Second+lease)); err != nil || n != 1 {
		t.Fatalf("renew: %d, %v", n, err)
	}
	if got, err := n2.ClaimIPN(ctx, ipn.Claim{Owner: "n2#1", Now: now.Add(lease + 500*time.Millisecond), LeaseUntil: now.Add(2 * lease), Limit: 5}); err != nil || len(got) != 0 {
		t.Fatalf("n2 took a renewed lease: %v, %v", got, err)
	}
	// n1 dies: no more heartbeats. Past the renewed lease n2 takes over.
	after := now.Add(time.Second + lease + time.Millisecond)
	got, err = n2.ClaimIPN(ctx, ipn.Claim{Owner: "n2#2", Now: after, LeaseUntil: after.Add(lease), Limit: 5})
	if err != nil || len(got) != 1 || got[0].ID != ev.ID {
		t.Fatalf("n2 after the lease ran out: %v, %v", got, err)
	}
	// The dead node's late heartbeat and result change nothing.
	if n, err := n1.RenewIPN(ctx, held, after.Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("a lost lease renewed: %d, %v", n, err)
	}
	if err := n1.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "n1#1", Status: ipn.Delivered, At: after}); !errors.Is(err, ipn.ErrLeaseLost) {
		t.Errorf("the dead node's result: %v, want ErrLeaseLost", err)
	}
	if err := n2.RecordIPN(ctx, ipn.Result{EventID: ev.ID, Owner: "n2#2", Status: ipn.Delivered, At: after}); err != nil {
		t.Errorf("the new owner's result: %v", err)
	}
}
