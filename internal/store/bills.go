package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
)

const billColumns = `reference, merchant_code, mode, order_ref, request_hash, customer_name, biller_code, outlet,
	amount_minor, currency, description, state, failed_attempts, expires_at, created_at`

// InsertBill stores b unless its order reference is taken.
func (s *DB) InsertBill(ctx context.Context, b bill.Bill) (bill.Bill, bool, error) {
	s.known.add(b)
	res, err := s.exec(ctx, `INSERT INTO bills (`+billColumns+`, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		b.Reference, b.MerchantCode, string(b.Mode), b.OrderReference, b.RequestHash, b.CustomerName, b.BillerCode, b.Outlet,
		b.Amount.Minor, b.Amount.Currency.Code, b.Description, string(b.State), b.FailedAttempts, ms(b.ExpiresAt), ms(b.CreatedAt), ms(b.CreatedAt))
	if err != nil {
		return bill.Bill{}, false, fmt.Errorf("insert bill: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return b, true, nil
	}
	existing, err := s.BillByOrderReference(ctx, b.MerchantCode, b.Mode, b.OrderReference)
	if errors.Is(err, bill.ErrNotFound) {
		return bill.Bill{}, false, bill.ErrDuplicateReference
	}
	return existing, false, err
}

// BillByReference finds a merchant's bill by our reference.
func (s *DB) BillByReference(ctx context.Context, merchantCode string, mode merchant.Mode, ref string) (bill.Bill, error) {
	if !s.known.mayHave(false, merchantCode, mode, ref) {
		return bill.Bill{}, bill.ErrNotFound
	}
	return scanBill(s.lookup(ctx, `SELECT `+billColumns+` FROM bills WHERE reference = ? AND merchant_code = ? AND mode = ?`,
		ref, merchantCode, string(mode)))
}

// BillByOrderReference finds a merchant's bill by the merchant's reference.
func (s *DB) BillByOrderReference(ctx context.Context, merchantCode string, mode merchant.Mode, orderRef string) (bill.Bill, error) {
	if !s.known.mayHave(true, merchantCode, mode, orderRef) {
		return bill.Bill{}, bill.ErrNotFound
	}
	return scanBill(s.lookup(ctx, `SELECT `+billColumns+` FROM bills WHERE order_ref = ? AND merchant_code = ? AND mode = ?`,
		orderRef, merchantCode, string(mode)))
}

// BillByID finds any bill by reference, for internal use where the caller
// has already established whose it is.
func (s *DB) BillByID(ctx context.Context, ref string) (bill.Bill, error) {
	return scanBill(s.lookup(ctx, `SELECT `+billColumns+` FROM bills WHERE reference = ?`, ref))
}

func scanBill(row scanner) (bill.Bill, error) {
	var b bill.Bill
	var mode, currency, state string
	var minor, expires, created int64
	err := row.Scan(&b.Reference, &b.MerchantCode, &mode, &b.OrderReference, &b.RequestHash, &b.CustomerName, &b.BillerCode, &b.Outlet,
		&minor, &currency, &b.Description, &state, &b.FailedAttempts, &expires, &created)
	if err != nil {
		return bill.Bill{}, notFound(err, bill.ErrNotFound)
	}
	b.Mode, b.State, b.ExpiresAt, b.CreatedAt = merchant.Mode(mode), bill.State(state), fromMS(expires), fromMS(created)
	if b.Amount, err = money.FromMinor(minor, currency); err != nil {
		return bill.Bill{}, fmt.Errorf("bill %s: %w", b.Reference, err)
	}
	return b, nil
}
