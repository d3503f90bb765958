package store

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
)

func TestSettledKeepsOnlyWhatCannotChange(t *testing.T) {
	const billRef = "ABCDEFGHJKLM"
	with := func(s payment.Status) payment.Verification {
		return payment.Verification{BillReference: billRef, OrderReference: "ORDER1", Payment: payment.Payment{ID: "pay_1", Status: s}}
	}
	for _, c := range []struct {
		name string
		ref  string
		v    payment.Verification
		kept bool
	}{
		{"paid, asked for by bill reference", billRef, with(payment.Succeeded), true},
		{"paid, asked for by an order reference no bill reference can be", "ORDER1", with(payment.Succeeded), true},
		// Looked up as a bill reference first and not found: a bill drawn
		// later may have it as its reference, and would then be the answer.
		{"paid, asked for by an order reference shaped like a bill reference", "ZZZZZZZZZZZZ", with(payment.Succeeded), false},
		{"declined", billRef, with(payment.Failed), false},
		{"in flight", billRef, with(payment.Processing), false},
		{"unknown", billRef, with(payment.Unknown), false},
		{"waiting for 3-D Secure", billRef, with(payment.Challenge), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cache := newSettled(4)
			key := refKey("1234567890", merchant.Test, c.ref)
			cache.keep(key, c.ref, c.v)
			if _, ok := cache.get(key); ok != c.kept {
				t.Errorf("kept = %v, want %v", ok, c.kept)
			}
		})
	}
}

func TestSettledDropsTheOldest(t *testing.T) {
	cache := newSettled(2)
	paid := func(ref string) payment.Verification {
		return payment.Verification{BillReference: ref, Payment: payment.Payment{ID: "pay_" + ref, Status: payment.Succeeded}}
	}
	keep := func(ref string) { cache.keep(ref, ref, paid(ref)) }
	keep("AAAAAAAAAAAA")
	keep("AAAAAAAAAAAA") // kept once, in one place
	keep("BBBBBBBBBBBB")
	for _, ref := range []string{"AAAAAAAAAAAA", "BBBBBBBBBBBB"} {
		if v, ok := cache.get(ref); !ok || v.BillReference != ref {
			t.Errorf("%s: %+v, %v; want it kept", ref, v, ok)
		}
	}
	keep("CCCCCCCCCCCC")
	if _, ok := cache.get("AAAAAAAAAAAA"); ok {
		t.Error("the oldest is still kept in a full cache")
	}
	if _, ok := cache.get("CCCCCCCCCCCC"); !ok {
		t.Error("the newest is not kept")
	}
	if len(cache.m) != 2 {
		t.Errorf("%d kept, want at most 2", len(cache.m))
	}
}

// A paid bill's verification is read from the database once; an unpaid
// one's at every query, as its attempts change it.
func TestPaidVerificationIsReadOnce(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "kadi.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	at := time.UnixMilli(1_800_000_000_000)
	m := merchant.Merchant{Code: "1234567890", Name: "Duka", PasswordHash: "h", BillerCode: "B1", Outlets: []string{"OUT1"}, CreatedAt: at}
	if err := s.CreateMerchant(ctx, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	kes, err := money.FromMinor(150_000, "KES")
	if err != nil {
		t.Fatal(err)
	}
	newBill := func(ref string) bill.Bill {
		b := bill.Bill{Reference: ref, MerchantCode: m.Code, Mode: merchant.Test, OrderReference: "ORDER" + ref, RequestHash: "h",
			Amount: kes, State: bill.Open, ExpiresAt: at.Add(time.Hour), CreatedAt: at}
		if _, _, err := s.InsertBill(ctx, b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	pay := func(b bill.Bill, status payment.Status) {
		p := payment.Payment{ID: "pay_" + b.Reference, BillReference: b.Reference, MerchantCode: m.Code, Mode: merchant.Test,
			Status: payment.Processing, Amount: kes, CreatedAt: at, UpdatedAt: at}
		if err := s.StartPayment(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status, p.NetworkRef = status, "NET"+b.Reference
		if err := s.FinishPayment(ctx, p, 5, nil); err != nil {
			t.Fatal(err)
		}
	}
	paid, declined := newBill("PAIDPAIDPAID"), newBill("DECLINEDBILL")
	pay(paid, payment.Succeeded)
	pay(declined, payment.Failed)

	var reads int
	OnPrepare(s, func(string) { reads++ })
	readsOf := func(ref string) int {
		t.Helper()
		before := reads
		if _, err := s.Verification(ctx, m.Code, merchant.Test, ref); err != nil {
			t.Fatal(err)
		}
		return reads - before
	}
	for _, ref := range []string{paid.Reference, paid.OrderReference} {
		if n := readsOf(ref); n == 0 {
			t.Fatalf("%s: the first verification read nothing", ref)
		}
		if n := readsOf(ref); n != 0 {
			t.Errorf("%s: a paid bill's second verification read the database %d times", ref, n)
		}
	}
	readsOf(declined.Reference)
	if n := readsOf(declined.Reference); n == 0 {
		t.Error("a declined bill's second verification came from memory")
	}
}

// BenchmarkSettledSize reports what a full cache of paid verifications
// holds in memory, per entry (the figure maxSettled's comment gives):
//
//	go test -run '^$' -bench SettledSize ./internal/store
func BenchmarkSettledSize(b *testing.B) {
	kes, err := money.FromMinor(150_000, "KES")
	if err != nil {
		b.Fatal(err)
	}
	at := time.UnixMilli(1_800_000_000_000)
	for range b.N {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cache := newSettled(maxSettled)
		for i := range maxSettled {
			ref := fmt.Sprintf("%012d", i)
			cache.keep(refKey("1234567890", merchant.Test, ref), ref, payment.Verification{
				BillReference: ref, OrderReference: "ORDER-" + ref, Amount: kes, CreatedAt: at, State: bill.Paid, ExpiresAt: at,
				Payment: payment.Payment{ID: "pay_" + ref + "abcdefghijklmnop", Status: payment.Succeeded, NetworkRef: "NET" + ref, Amount: kes,
					UpdatedAt: at, Message: "Payment approved"}})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/maxSettled, "B/entry")
		runtime.KeepAlive(cache)
	}
}
