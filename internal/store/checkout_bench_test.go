package store_test

import (
	"fmt"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/load"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
)

// BenchmarkCheckoutWrites is the gateway's own writes for one paid bill on
// the SQLite store, as a checkout makes them: the bill, the payment
// started, the payment finished with its IPN outbox row.
//
//	go test -run '^$' -bench CheckoutWrites ./internal/store/
func BenchmarkCheckoutWrites(b *testing.B) {
	db := ipnOpen(b, filepath.Join(b.TempDir(), "kadi.db"))
	code := ipnMerchant(b, db, "http://127.0.0.1:9/ipn")
	underLoad(b, func() error {
		_, err := queueIPNEvent(b.Context(), db, code, time.Now())
		return err
	})
}

// BenchmarkSimCharge is the simulated bank's part of a checkout on the
// SQLite store: one approved charge of a payment it never saw.
//
//	go test -run '^$' -bench SimCharge ./internal/store/
func BenchmarkSimCharge(b *testing.B) {
	db := ipnOpen(b, filepath.Join(b.TempDir(), "kadi.db"))
	acq := sim.New([]byte("benchmark key"), db.SimLedger())
	pan, err := card.ParsePAN("4111111111111111")
	if err != nil {
		b.Fatal(err)
	}
	exp, err := card.ParseExpiry("12", strconv.Itoa(time.Now().Year()+2), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	amount, err := money.Parse("100.00", "KES")
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	underLoad(b, func() error {
		req := payment.ChargeRequest{PaymentID: fmt.Sprintf("pay_bench%d", n.Add(1)), PAN: pan, Expiry: exp, Amount: amount}
		res, err := acq.Charge(b.Context(), req)
		if err == nil && res.Outcome != payment.Approved {
			err = fmt.Errorf("charge: %+v, want approved", res)
		}
		return err
	})
}

// underLoad runs op from 32 goroutines at once, as under load, so that the
// group-commit writer shares each fsync and what each write costs inside
// it (its statements, the index entries they move) shows. Beside the wall
// time it reports the process's CPU time per op (cpu-ns/op): on a shared
// machine whose disk sets the pace the first swings by a fifth from run to
// run, the second holds within a few percent.
func underLoad(b *testing.B, op func() error) {
	b.SetParallelism(16) // 32 goroutines on two cores
	before, err := load.OwnCPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	after, err := load.OwnCPU()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(after-before)/float64(b.N), "cpu-ns/op")
}
