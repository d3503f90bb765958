package load

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/store"
)

func TestSeed(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "kadi.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	c := merchant.Credentials{MerchantCode: "1234567890", BillerCode: "B1", OutletCode: "O1"}
	if err := st.CreateMerchant(ctx, merchant.Merchant{Code: c.MerchantCode, Name: "Seed", PasswordHash: "x", BillerCode: "B1", Outlets: []string{"O1"}, CreatedAt: time.Now()}, nil, nil); err != nil {
		t.Fatal(err)
	}
	var progress []int
	if err := Seed(ctx, st, c, 25_000, func(n int) { progress = append(progress, n) }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(progress, []int{10_000, 20_000, 25_000}) {
		t.Errorf("progress %v", progress)
	}
	// Seeding again adds as many, without colliding.
	if err := Seed(ctx, st, c, 5, nil); err != nil {
		t.Fatalf("a second seeding: %v", err)
	}
	page, err := st.BillsPage(ctx, bill.ListFilter{MerchantCode: c.MerchantCode, Mode: merchant.Test, Limit: 3, Now: time.Now()})
	if err != nil || len(page) != 3 {
		t.Fatalf("BillsPage: %d bills, %v", len(page), err)
	}
	for _, b := range page {
		if len(b.Reference) != 12 || b.State != bill.Open || b.Outlet != "O1" {
			t.Errorf("seeded bill %+v", b)
		}
	}
	if _, err := st.BillByReference(ctx, c.MerchantCode, merchant.Test, page[0].Reference); err != nil {
		t.Errorf("a seeded bill is not found by its reference: %v", err)
	}
}
