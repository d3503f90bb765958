package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
)

// On the node that holds the data directory, a lookup of a bill that does
// not exist is answered without a read, and every bill that does is found:
// those stored before the node started (more than one chunk of the
// filling), and those added after, one by one or in bulk.
func TestKnownBillsAnswerNoSuchBillWithoutARead(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kadi.db")
	at := time.UnixMilli(1_800_000_000_000)
	kes, err := money.FromMinor(150_000, "KES")
	if err != nil {
		t.Fatal(err)
	}
	m := merchant.Merchant{Code: "1234567890", Name: "Duka", PasswordHash: "h", BillerCode: "B1", Outlets: []string{"OUT1"}, CreatedAt: at}
	newBill := func(i int) bill.Bill {
		return bill.Bill{Reference: fmt.Sprintf("B%011d", i), MerchantCode: m.Code, Mode: merchant.Test, OrderReference: fmt.Sprintf("order-%d", i),
			RequestHash: "h", Amount: kes, State: bill.Open, ExpiresAt: at.Add(time.Hour), CreatedAt: at}
	}
	const before = 2*knownChunk + 7
	var stored []bill.Bill
	for i := range before {
		stored = append(stored, newBill(i))
	}

	cli, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.CreateMerchant(ctx, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := cli.InsertBills(ctx, stored); err != nil {
		t.Fatal(err)
	}
	cli.Close()

	s, err := Open(ctx, path, WithDataDirHeld())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for deadline := time.Now().Add(10 * time.Second); !s.known.ready.Load(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stored bills were not listed in 10 s")
		}
	}
	one := newBill(before)
	if _, created, err := s.InsertBill(ctx, one); err != nil || !created {
		t.Fatalf("insert: created %v, %v", created, err)
	}
	// Added before it is written, so that no reader sees a bill the
	// filter lacks: a bill whose write fails (a merchant that does not
	// exist) was added all the same, and its lookup reads.
	orphan := newBill(before + 3)
	orphan.MerchantCode = "0000000000"
	if _, _, err := s.InsertBill(ctx, orphan); err == nil {
		t.Fatal("a bill of no merchant was stored")
	}
	bulk := []bill.Bill{newBill(before + 1), newBill(before + 2)}
	if err := s.InsertBills(ctx, bulk); err != nil {
		t.Fatal(err)
	}

	var reads int
	OnPrepare(s, func(string) { reads++ })
	found := func(b bill.Bill) {
		t.Helper()
		for _, ref := range []string{b.Reference, b.OrderReference} {
			if v, err := s.Verification(ctx, m.Code, merchant.Test, ref); err != nil || v.BillReference != b.Reference {
				t.Fatalf("verification of %s: %s, %v", ref, v.BillReference, err)
			}
		}
		if _, err := s.BillByReference(ctx, m.Code, merchant.Test, b.Reference); err != nil {
			t.Fatalf("bill %s: %v", b.Reference, err)
		}
		if _, err := s.BillByOrderReference(ctx, m.Code, merchant.Test, b.OrderReference); err != nil {
			t.Fatalf("bill of order %s: %v", b.OrderReference, err)
		}
	}
	if _, err := s.BillByOrderReference(ctx, orphan.MerchantCode, orphan.Mode, orphan.OrderReference); !errors.Is(err, bill.ErrNotFound) || reads == 0 {
		t.Errorf("the lookup of a bill whose write failed: %v after %d reads, want a read and bill.ErrNotFound", err, reads)
	}
	for i := 0; i < before; i += 997 {
		found(stored[i])
	}
	found(stored[before-1])
	found(one)
	found(bulk[0])
	found(bulk[1])

	// Each lookup of something never stored: false positives (about 1 %)
	// read, and still find nothing.
	const asked = 400
	unread := 0
	for i := range asked {
		b := stored[i]
		lookups := []func() error{
			func() error {
				_, err := s.Verification(ctx, m.Code, merchant.Test, fmt.Sprintf("NOSUCH-%d", i))
				return err
			},
			func() error {
				_, err := s.Verification(ctx, m.Code, merchant.Test, fmt.Sprintf("Z%011d", i))
				return err
			},
			func() error { _, err := s.Verification(ctx, m.Code, merchant.Live, b.Reference); return err },
			func() error { _, err := s.Verification(ctx, "0987654321", merchant.Test, b.OrderReference); return err },
			func() error { _, err := s.BillByReference(ctx, m.Code, merchant.Live, b.Reference); return err },
			func() error {
				_, err := s.BillByOrderReference(ctx, m.Code, merchant.Live, b.OrderReference)
				return err
			},
		}
		for _, lookup := range lookups {
			before := reads
			if err := lookup(); !errors.Is(err, bill.ErrNotFound) {
				t.Fatalf("a lookup of no bill: %v, want bill.ErrNotFound", err)
			}
			if reads == before {
				unread++
			}
		}
	}
	if unread < asked*6*95/100 {
		t.Errorf("%d of %d lookups of no bill answered without a read, want nearly all", unread, asked*6)
	}
}

// A store opened without holding the data directory (the CLI's, a node
// on a file system without locks) reads every lookup: another process may
// be adding bills.
func TestKnownBillsOnlyOnTheNodeHoldingTheDataDir(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "kadi.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var reads int
	OnPrepare(s, func(string) { reads++ })
	if _, err := s.Verification(ctx, "1234567890", merchant.Test, "NOSUCHBILL"); !errors.Is(err, bill.ErrNotFound) {
		t.Fatalf("%v, want bill.ErrNotFound", err)
	}
	if reads == 0 {
		t.Error("a lookup of no bill was answered without a read by a store that does not hold its data dir")
	}
}

// Until the stored bills are listed, every lookup is read: the filter
// does not yet have them.
func TestKnownBillsReadUntilListed(t *testing.T) {
	k := &knownBills{keys: newBloom(1)}
	if !k.mayHave(true, "1234567890", merchant.Test, "ORDER1") {
		t.Error("a bill was said not to exist before the stored bills were listed")
	}
	k.ready.Store(true)
	if k.mayHave(true, "1234567890", merchant.Test, "ORDER1") {
		t.Error("a bill never added was perhaps there in an empty filter")
	}
	var none *knownBills
	if !none.mayHave(false, "1234567890", merchant.Test, "ABCDEFGHJKLM") {
		t.Error("a store without the filter said a bill does not exist")
	}
}
