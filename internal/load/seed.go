package load

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/secret"
)

// BillInserter is the store's bulk insert, for filling a store to measure
// it.
type BillInserter interface {
	InsertBills(ctx context.Context, bills []bill.Bill) error
}

// seedBatch bills go in one transaction.
const seedBatch = 10_000

// Seed gives the merchant of c n open test bills over the past year, in
// batched inserts, so that the scenarios can run against a full store.
// progress, if set, hears the count after every batch.
func Seed(ctx context.Context, st BillInserter, c merchant.Credentials, n int, progress func(int)) error {
	amount, err := money.FromMinor(150_000, "KES")
	if err != nil {
		return err
	}
	now := time.Now()
	from := now.Add(-365 * 24 * time.Hour)
	step := 365 * 24 * time.Hour / time.Duration(max(n, 1))
	prefix := secret.RandomString(4, secret.Unambiguous)
	batch := make([]bill.Bill, 0, seedBatch)
	for i := range n {
		at := from.Add(time.Duration(i) * step)
		batch = append(batch, bill.Bill{
			// 12 characters like every reference; the prefix keeps two
			// seedings of one store apart.
			Reference: prefix + fmt.Sprintf("%08d", i), MerchantCode: c.MerchantCode, Mode: merchant.Test,
			OrderReference: "SEED" + prefix + strconv.Itoa(i), RequestHash: "seed", CustomerName: "Seeded Customer",
			BillerCode: c.BillerCode, Outlet: c.OutletCode, Amount: amount, Description: "Seeded bill",
			State: bill.Open, ExpiresAt: now.Add(30 * 24 * time.Hour), CreatedAt: at,
		})
		if len(batch) == seedBatch || i == n-1 {
			if err := st.InsertBills(ctx, batch); err != nil {
				return fmt.Errorf("seed bills: %w", err)
			}
			batch = batch[:0]
			if progress != nil {
				progress(i + 1)
			}
		}
	}
	return nil
}
