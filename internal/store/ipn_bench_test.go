package store_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
)

// BenchmarkClaimIPN measures one claim as the worker makes it: against a
// backlog of one merchant's 5,000 due events (up to 240 events in all and
// 32 of the endpoint), and against the few a claim finds while payments
// flow and their notifications are delivered as they come. Each claimed
// share is given back, so every claim sees the same backlog. The poll's
// claim and a quick one (a delivery ended, a payment nudged), each with
// the endpoint taking events and with it skipped (saturated, as behind a
// hung endpoint).
//
//	go test -run '^$' -bench ClaimIPN ./internal/store/
func BenchmarkClaimIPN(b *testing.B) {
	for _, backlog := range []int{5000, 6} {
		b.Run(fmt.Sprintf("%d due", backlog), func(b *testing.B) { benchmarkClaimIPN(b, backlog) })
	}
}

func benchmarkClaimIPN(b *testing.B, backlog int) {
	db := ipnOpen(b, filepath.Join(b.TempDir(), "kadi.db"))
	code := ipnMerchant(b, db, "http://127.0.0.1:9/ipn")
	due := time.Now().Add(-time.Minute)
	// Sixteen at once, for the writer to commit them in groups.
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < backlog; i += 16 {
				if _, err := queueIPNEvent(b.Context(), db, code, due); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	ep := ipn.Endpoint{MerchantCode: code, Mode: merchant.Test}
	taken := min(backlog, 32)
	for _, bc := range []struct {
		name  string
		quick bool
		skip  []ipn.Endpoint
		want  int
	}{
		{"poll", false, nil, taken},
		{"quick", true, nil, taken},
		{"poll, endpoint skipped", false, []ipn.Endpoint{ep}, 0},
		{"quick, endpoint skipped", true, []ipn.Endpoint{ep}, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for i := range b.N {
				now := time.Now()
				owner := fmt.Sprintf("bench#%d", i)
				evs, err := db.ClaimIPN(b.Context(), ipn.Claim{Owner: owner, Now: now, LeaseUntil: now.Add(time.Minute), Limit: 240, PerEndpoint: 32,
					Quick: bc.quick, Skip: bc.skip})
				if err != nil || len(evs) != bc.want {
					b.Fatalf("claimed %d, %v", len(evs), err)
				}
				ids := make([]string, len(evs))
				for j, ev := range evs {
					ids[j] = ev.ID
				}
				if err := db.ReleaseIPN(b.Context(), owner, ids); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkClaimIPNManyMerchants is the poll's cost when 1,000 merchants
// each hold a retry not yet due and one merchant has events due: the poll
// walks every merchant with pending events (docs/ipn.md, performance.md).
//
//	go test -run '^$' -bench ClaimIPNManyMerchants ./internal/store/
func BenchmarkClaimIPNManyMerchants(b *testing.B) {
	db := ipnOpen(b, filepath.Join(b.TempDir(), "kadi.db"))
	code := ipnMerchant(b, db, "http://127.0.0.1:9/ipn")
	now := time.Now()
	ev := ipnEvent(b, db, code, now.Add(-time.Minute))
	for i := range 1000 {
		// Other merchants' retries, an hour off: the poll meets them
		// and takes none.
		if err := db.ExecRaw(b.Context(), `INSERT INTO ipn_events (id, merchant_code, mode, payment_id, payload, status, next_attempt_at, created_at)
			VALUES (?, ?, 'test', ?, '{}', 'pending', ?, ?)`,
			fmt.Sprintf("msg_%024x", i), fmt.Sprintf("M%09d", i), ev.PaymentID, now.Add(time.Hour).UnixMilli(), now.UnixMilli()); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range b.N {
		now := time.Now()
		owner := fmt.Sprintf("bench#%d", i)
		evs, err := db.ClaimIPN(b.Context(), ipn.Claim{Owner: owner, Now: now, LeaseUntil: now.Add(time.Minute), Limit: 240, PerEndpoint: 32})
		if err != nil || len(evs) != 1 {
			b.Fatalf("claimed %d, %v", len(evs), err)
		}
		if err := db.ReleaseIPN(b.Context(), owner, []string{evs[0].ID}); err != nil {
			b.Fatal(err)
		}
	}
}
