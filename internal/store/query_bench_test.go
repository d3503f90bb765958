package store_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/store"
)

// BenchmarkVerification is what a merchant's query reads on the SQLite
// store: "paid" asks for 256 paid bills in turn, read from the database
// each time (a paid bill's first verification), "paid, from memory" the
// same bills once kept (every later one), "none" for a reference that
// names nothing, read, and "none, listed" the same on the node that holds
// the data dir, answered from the bills it listed without a read (the two
// side by side in one run); "paid, two reads" is the same bills read the way the
// query read them before Store.Verification (the bill, then its successful
// payment), the baseline for "paid" in the same run.
//
//	go test -run '^$' -bench Verification ./internal/store/
func BenchmarkVerification(b *testing.B) {
	path := filepath.Join(b.TempDir(), "kadi.db")
	db := ipnOpen(b, path)
	code := ipnMerchant(b, db, "http://127.0.0.1:9/ipn")
	refs := make([]string, 256)
	for i := range refs {
		ev, err := queueIPNEvent(b.Context(), db, code, time.Now())
		if err != nil {
			b.Fatal(err)
		}
		p, err := db.PaymentByID(b.Context(), ev.PaymentID)
		if err != nil {
			b.Fatal(err)
		}
		refs[i] = p.BillReference
	}
	var turn atomic.Uint64
	next := func() string { return refs[turn.Add(1)%uint64(len(refs))] }
	verifyPaid := func(b *testing.B) {
		underLoad(b, func() error {
			v, err := db.Verification(b.Context(), code, merchant.Test, next())
			if err == nil && v.Payment.Status != payment.Succeeded {
				b.Errorf("a paid bill's verification: %+v", v)
			}
			return err
		})
	}
	// A cache of one, asked for 256 bills in turn, reads every time: what
	// a paid bill's first verification costs.
	store.KeepPaidVerifications(db, 1)
	b.Run("paid", verifyPaid)
	store.KeepPaidVerifications(db, store.MaxPaidVerifications)
	b.Run("paid, from memory", verifyPaid)
	b.Run("paid, two reads", func(b *testing.B) {
		underLoad(b, func() error {
			bl, err := db.BillByReference(b.Context(), code, merchant.Test, next())
			if err != nil {
				return err
			}
			_, err = db.SuccessfulPayment(b.Context(), bl.Reference)
			return err
		})
	})
	none := func(db *store.DB) func(b *testing.B) {
		return func(b *testing.B) {
			underLoad(b, func() error {
				if _, err := db.Verification(b.Context(), code, merchant.Test, "NOSUCHBILL"); err == nil {
					b.Error("a verification of no such bill found one")
				}
				return nil
			})
		}
	}
	b.Run("none", none(db))
	held, err := store.Open(b.Context(), path, store.WithDataDirHeld())
	if err != nil {
		b.Fatal(err)
	}
	defer held.Close()
	for deadline := time.Now().Add(10 * time.Second); !store.BillsListed(held); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the stored bills were not listed in 10 s")
		}
	}
	b.Run("none, listed", none(held))
}
