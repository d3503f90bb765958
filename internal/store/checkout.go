package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/merchant"
)

// CreateCheckout stores a new checkout session.
func (s *DB) CreateCheckout(ctx context.Context, c checkout.Session) error {
	fields, err := json.Marshal(c.Fields)
	if err != nil {
		return fmt.Errorf("encode checkout fields: %w", err)
	}
	entry := 0
	if c.EntryPage {
		entry = 1
	}
	_, err = s.exec(ctx, `INSERT INTO checkout_sessions (id_hash, merchant_code, mode, bill_ref, fields, payment_id, entry_page, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.IDHash, c.MerchantCode, string(c.Mode), c.BillReference, string(fields), c.PaymentID, entry, ms(c.CreatedAt), ms(c.ExpiresAt))
	if err != nil {
		return fmt.Errorf("insert checkout session: %w", err)
	}
	return nil
}

// CheckoutByHash loads a session that has not expired at now.
func (s *DB) CheckoutByHash(ctx context.Context, idHash string, now time.Time) (checkout.Session, error) {
	var c checkout.Session
	var mode, fields, notice string
	var created, expires, entry int64
	err := s.lookup(ctx, `SELECT id_hash, merchant_code, mode, bill_ref, fields, payment_id, entry_page, notice, created_at, expires_at
		FROM checkout_sessions WHERE id_hash = ? AND expires_at > ?`, idHash, ms(now)).
		Scan(&c.IDHash, &c.MerchantCode, &mode, &c.BillReference, &fields, &c.PaymentID, &entry, &notice, &created, &expires)
	if err != nil {
		return c, notFound(err, checkout.ErrNotFound)
	}
	c.Mode, c.CreatedAt, c.ExpiresAt, c.EntryPage = merchant.Mode(mode), fromMS(created), fromMS(expires), entry == 1
	if err := json.Unmarshal([]byte(fields), &c.Fields); err != nil {
		return c, fmt.Errorf("checkout session fields: %w", err)
	}
	if notice != "" {
		if s.sealer != nil {
			if notice, err = s.sealer.Open(notice, noticeBinding(idHash)); err != nil {
				return c, fmt.Errorf("checkout session notice: %w", err)
			}
		}
		if err := json.Unmarshal([]byte(notice), &c.Notice); err != nil {
			return c, fmt.Errorf("checkout session notice: %w", err)
		}
	}
	return c, nil
}

// SetCheckoutNotice stores what the session's card page shows again. It
// holds the cardholder's name and expiry as typed, so it is sealed like
// the other secrets at rest.
func (s *DB) SetCheckoutNotice(ctx context.Context, idHash string, n checkout.Notice) error {
	raw, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encode checkout notice: %w", err)
	}
	notice := string(raw)
	if s.sealer != nil {
		if notice, err = s.sealer.Seal(notice, noticeBinding(idHash)); err != nil {
			return fmt.Errorf("seal checkout notice: %w", err)
		}
	}
	return s.updateCheckout(ctx, "set checkout notice", `UPDATE checkout_sessions SET notice = ? WHERE id_hash = ?`, notice, idHash)
}

func noticeBinding(idHash string) string { return "checkout/" + idHash + "/notice" }

// EndCheckout expires the session at now.
func (s *DB) EndCheckout(ctx context.Context, idHash string, now time.Time) error {
	return s.updateCheckout(ctx, "end checkout session", `UPDATE checkout_sessions SET expires_at = ? WHERE id_hash = ? AND expires_at > ?`, ms(now), idHash, ms(now))
}

func (s *DB) updateCheckout(ctx context.Context, what, query string, args ...any) error {
	res, err := s.exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return checkout.ErrNotFound
	}
	return nil
}

// BindCheckoutPayment records that the session's shopper now owes a 3-D
// Secure code for paymentID.
func (s *DB) BindCheckoutPayment(ctx context.Context, idHash, paymentID string) error {
	return s.updateCheckout(ctx, "bind checkout session", `UPDATE checkout_sessions SET payment_id = ? WHERE id_hash = ?`, paymentID, idHash)
}

// DeleteExpiredCheckouts forgets sessions that expired before now and
// returns how many.
func (s *DB) DeleteExpiredCheckouts(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.exec(ctx, `DELETE FROM checkout_sessions WHERE expires_at <= ?`, ms(now))
	if err != nil {
		return 0, fmt.Errorf("delete expired checkout sessions: %w", err)
	}
	return res.RowsAffected()
}
