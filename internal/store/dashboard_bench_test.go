package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/store"
)

// BenchmarkPaymentsList measures the dashboard's payments list and its
// searches with KADI_BENCH_BILLS bills (default 1,000,000) of one merchant
// in the store, on SQLite and, with KADI_TEST_DATABASE_URL, PostgreSQL.
// The figure to read is ns/op per query: the bound is 50 ms.
//
//	go test -run '^$' -bench PaymentsList -benchtime 200x ./internal/store
func BenchmarkPaymentsList(b *testing.B) {
	n := 1_000_000
	if v := os.Getenv("KADI_BENCH_BILLS"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	b.Run("SQLite", func(b *testing.B) {
		s, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "kadi.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchList(b, s, n)
	})
	b.Run("PostgreSQL", func(b *testing.B) {
		u := os.Getenv(postgresEnv)
		if u == "" {
			b.Skip(postgresEnv + " is not set")
		}
		s, err := store.Open(context.Background(), freshSchema(b, u))
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		benchList(b, s, n)
	})
}

func benchList(b *testing.B, s *store.DB, n int) {
	ctx := context.Background()
	start := time.Now()
	code, refs, last4 := seedBills(b, s, n)
	b.Logf("seeded %d bills in %s", n, time.Since(start).Round(time.Millisecond))
	now := time.Now()
	base := bill.ListFilter{MerchantCode: code, Mode: merchant.Test, Limit: 50, Now: now}
	mid := refs[len(refs)/2]
	cases := []struct {
		name string
		f    func() bill.ListFilter
	}{
		{"first page", func() bill.ListFilter { return base }},
		{"deep page (keyset)", func() bill.ListFilter {
			f := base
			f.After = &bill.Cursor{CreatedAt: mid.at, Reference: mid.ref}
			return f
		}},
		{"status paid", func() bill.ListFilter { f := base; f.State = bill.Paid; return f }},
		{"date range", func() bill.ListFilter { f := base; f.From, f.To = mid.at.Add(-time.Hour), mid.at; return f }},
		{"search bill reference", func() bill.ListFilter { f := base; f.Search = mid.ref; return f }},
		{"search order reference", func() bill.ListFilter { f := base; f.Search = mid.order; return f }},
		{"search last four", func() bill.ListFilter { f := base; f.Search = last4; return f }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			f := c.f()
			for b.Loop() {
				if _, err := s.BillsPage(ctx, f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type seeded struct {
	ref, order string
	at         time.Time
}

// seedBills gives one merchant n test bills over the past year (every
// tenth paid), and a few real payments to search by card.
func seedBills(b testing.TB, s *store.DB, n int) (string, []seeded, string) {
	ctx := context.Background()
	code := secret.RandomDigits(10)
	m := merchant.Merchant{Code: code, Name: "Bench", PasswordHash: "x", BillerCode: "1", Outlets: []string{"2"}, ServiceID: "3", SystemCode: "4", SettlementAccount: "5", CreatedAt: time.Now()}
	if err := s.CreateMerchant(ctx, m, nil, nil); err != nil {
		b.Fatal(err)
	}
	amount, _ := money.FromMinor(150_000, "KES")
	from := time.Now().Add(-365 * 24 * time.Hour)
	step := 365 * 24 * time.Hour / time.Duration(n)
	var refs []seeded
	batch := make([]bill.Bill, 0, 10_000)
	flush := func() {
		if err := s.InsertBills(ctx, batch); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for i := range n {
		at := from.Add(time.Duration(i) * step)
		st := bill.Open
		if i%10 == 0 {
			st = bill.Paid
		}
		bl := bill.Bill{Reference: secret.RandomUpperAlnum(12), MerchantCode: code, Mode: merchant.Test, OrderReference: fmt.Sprintf("ORD%d", i),
			RequestHash: "h", CustomerName: "Wanjiku Kamau", BillerCode: "1", Outlet: "2", Amount: amount, Description: "Coffee",
			State: st, ExpiresAt: at.Add(24 * time.Hour), CreatedAt: at}
		batch = append(batch, bl)
		if i%(n/100+1) == 0 {
			refs = append(refs, seeded{bl.Reference, bl.OrderReference, at})
		}
		if len(batch) == cap(batch) {
			flush()
		}
	}
	flush()
	// A hundred bills with a card tried on them.
	for i, r := range refs[:min(100, len(refs))] {
		bl, err := s.BillByReference(ctx, code, merchant.Test, r.ref)
		if err != nil {
			b.Fatal(err)
		}
		if bl.State != bill.Open {
			continue
		}
		p := payment.Payment{ID: secret.NewID("pay"), BillReference: bl.Reference, MerchantCode: code, Mode: merchant.Test, Status: payment.Processing,
			Amount: amount, Card: payment.CardSummary{Brand: "VISA", First6: "424242", Last4: fmt.Sprintf("%04d", 1000+i%3), ExpMonth: 12, ExpYear: 2030, Fingerprint: "f"},
			CallbackURL: "https://shop.example/cb", CreatedAt: r.at, UpdatedAt: r.at}
		if err := s.StartPayment(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	return code, refs, "1001"
}
