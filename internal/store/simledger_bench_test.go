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
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
)

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
