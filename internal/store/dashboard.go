package store

import (
	"context"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/payment"
)

// BillsPage lists bills as f asks, newest first, paged by keyset on
// (created_at, reference): the hundred-thousandth page costs what the
// first does.
func (s *DB) BillsPage(ctx context.Context, f bill.ListFilter) ([]bill.Bill, error) {
	q := `SELECT ` + billColumns + ` FROM bills WHERE merchant_code = ? AND mode = ?`
	args := []any{f.MerchantCode, string(f.Mode)}
	switch f.State {
	case "":
	case bill.Expired:
		q += ` AND state = ? AND expires_at <= ?`
		args = append(args, string(bill.Open), ms(f.Now))
	case bill.Open:
		q += ` AND state = ? AND expires_at > ?`
		args = append(args, string(bill.Open), ms(f.Now))
	default:
		q += ` AND state = ?`
		args = append(args, string(f.State))
	}
	if !f.From.IsZero() {
		q += ` AND created_at >= ?`
		args = append(args, ms(f.From))
	}
	if !f.To.IsZero() {
		q += ` AND created_at < ?`
		args = append(args, ms(f.To))
	}
	if v := strings.TrimSpace(f.Search); v != "" {
		q += ` AND (reference = ? OR order_ref = ? OR reference IN
			(SELECT bill_ref FROM payments WHERE merchant_code = ? AND mode = ? AND card_last4 = ?))`
		args = append(args, strings.ToUpper(v), v, f.MerchantCode, string(f.Mode), v)
	}
	if f.After != nil {
		q += ` AND (created_at < ? OR (created_at = ? AND reference < ?))`
		c := ms(f.After.CreatedAt)
		args = append(args, c, c, f.After.Reference)
	}
	q += ` ORDER BY created_at DESC, reference DESC LIMIT ?`
	args = append(args, max(f.Limit, 1))
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanBill)
}

// PaymentsOfBill lists every attempt on a bill, oldest first.
func (s *DB) PaymentsOfBill(ctx context.Context, billRef string) ([]payment.Payment, error) {
	rows, err := s.query(ctx, `SELECT `+paymentColumns+` FROM payments WHERE bill_ref = ? ORDER BY created_at, id`, billRef)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanPayment)
}

// PaymentTotals sums a merchant's finished payments since since, by day
// (days since the epoch, shifted by offset, the operator's zone offset),
// currency and outcome. Plain integer arithmetic keeps it portable and one
// index range scan.
func (s *DB) PaymentTotals(ctx context.Context, merchantCode, mode string, since time.Time, offset time.Duration) ([]payment.DayTotal, error) {
	rows, err := s.query(ctx, `SELECT (updated_at + ?) / 86400000 AS day, currency, status, COUNT(*), SUM(amount_minor)
		FROM payments WHERE merchant_code = ? AND mode = ? AND updated_at >= ? AND status IN (?, ?)
		GROUP BY day, currency, status ORDER BY day`,
		offset.Milliseconds(), merchantCode, mode, ms(since), string(payment.Succeeded), string(payment.Failed))
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r scanner) (payment.DayTotal, error) {
		var t payment.DayTotal
		var status string
		err := r.Scan(&t.Day, &t.Currency, &status, &t.Count, &t.SumMinor)
		t.Status = payment.Status(status)
		return t, err
	})
}
