package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
)

const paymentColumns = `id, bill_ref, merchant_code, mode, status, amount_minor, currency, card_brand, card_first6, card_last4,
	card_exp_month, card_exp_year, card_holder, card_fingerprint, network_ref, approval_code, decline_code, message,
	challenge_ref, callback_url, mobile_number, email_address, created_at, updated_at, node`

// StartPayment claims an open bill for p in one transaction.
func (s *DB) StartPayment(ctx context.Context, p payment.Payment) error {
	return s.inTx(ctx, func(t tx) error {
		res, err := t.exec(ctx, `UPDATE bills SET state = ?, updated_at = ? WHERE reference = ? AND state = ?`,
			string(bill.Processing), ms(p.CreatedAt), p.BillReference, string(bill.Open))
		if err != nil {
			return fmt.Errorf("claim bill: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return payment.ErrBillBusy
		}
		_, err = t.exec(ctx, `INSERT INTO payments (`+paymentColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.ID, p.BillReference, p.MerchantCode, string(p.Mode), string(p.Status), p.Amount.Minor, p.Amount.Currency.Code,
			string(p.Card.Brand), p.Card.First6, p.Card.Last4, p.Card.ExpMonth, p.Card.ExpYear, p.Card.Holder, p.Card.Fingerprint,
			p.NetworkRef, p.ApprovalCode, p.DeclineCode, p.Message, p.ChallengeRef, p.CallbackURL, p.MobileNumber, p.EmailAddress,
			ms(p.CreatedAt), ms(p.UpdatedAt), p.Node)
		if err != nil {
			return fmt.Errorf("insert payment: %w", err)
		}
		return nil
	})
}

// SetChallenge records a pending 3-D Secure challenge.
func (s *DB) SetChallenge(ctx context.Context, p payment.Payment) error {
	res, err := s.exec(ctx, `UPDATE payments SET status = ?, challenge_ref = ?, updated_at = ? WHERE id = ? AND status = ?`,
		string(payment.Challenge), p.ChallengeRef, ms(p.UpdatedAt), p.ID, string(payment.Processing))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return payment.ErrStale
	}
	return nil
}

// ClaimChallenge takes a waiting challenge for one answer.
func (s *DB) ClaimChallenge(ctx context.Context, id, node string, at time.Time) error {
	res, err := s.exec(ctx, `UPDATE payments SET status = ?, updated_at = ?, node = ? WHERE id = ? AND status = ?`,
		string(payment.Processing), ms(at), node, id, string(payment.Challenge))
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return payment.ErrStale
	}
	return nil
}

// FinishPayment records p's outcome, moves its bill on and, for a success,
// writes the IPN outbox row, all in one transaction. An event handed in
// parked is stored parked only if the saved configuration still gives it
// no endpoint, else pending; event then says which.
func (s *DB) FinishPayment(ctx context.Context, p payment.Payment, maxFailures int, event *ipn.Event) error {
	var status ipn.Status
	var lastError string
	err := s.inTx(ctx, func(t tx) error {
		res, err := t.exec(ctx, `UPDATE payments SET status = ?, network_ref = ?, approval_code = ?, decline_code = ?, message = ?, updated_at = ?
			WHERE id = ? AND status IN (?, ?, ?)`,
			string(p.Status), p.NetworkRef, p.ApprovalCode, p.DeclineCode, p.Message, ms(p.UpdatedAt),
			p.ID, string(payment.Processing), string(payment.Challenge), string(payment.Unknown))
		if err != nil {
			return fmt.Errorf("update payment: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return payment.ErrStale
		}
		switch p.Status {
		case payment.Succeeded:
			_, err = t.exec(ctx, `UPDATE bills SET state = ?, updated_at = ? WHERE reference = ?`, string(bill.Paid), ms(p.UpdatedAt), p.BillReference)
		case payment.Failed:
			_, err = t.exec(ctx, `UPDATE bills SET failed_attempts = failed_attempts + 1, updated_at = ?,
				state = CASE WHEN failed_attempts + 1 >= ? THEN ? ELSE ? END WHERE reference = ?`,
				ms(p.UpdatedAt), maxFailures, string(bill.Blocked), string(bill.Open), p.BillReference)
		}
		if err != nil {
			return fmt.Errorf("update bill: %w", err)
		}
		if event == nil {
			return nil
		}
		status, lastError = event.Status, event.LastError
		if status == ipn.Parked {
			why, parked, err := s.noEndpoint(ctx, t, event.MerchantCode, event.Mode)
			if err != nil {
				return err
			}
			if parked {
				lastError = ipn.ParkedNote(why)
			} else {
				status, lastError = ipn.Pending, ""
			}
		}
		_, err = t.exec(ctx, `INSERT INTO ipn_events (id, merchant_code, mode, payment_id, payload, status, next_attempt_at, created_at, last_error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, event.ID, event.MerchantCode, string(event.Mode), event.PaymentID, string(event.Payload),
			string(status), ms(event.NextAttemptAt), ms(event.CreatedAt), lastError)
		if err != nil {
			return fmt.Errorf("insert IPN event: %w", err)
		}
		return nil
	})
	if err != nil || event == nil {
		return err
	}
	if event.Status == ipn.Parked && status == ipn.Pending {
		// Parked on settings this DB kept in memory while another
		// process or node saved an endpoint: they are stale.
		s.settings.forgetAll()
	}
	event.Status, event.LastError = status, lastError
	if status == ipn.Pending {
		s.notifyIPNQueued(ipn.Endpoint{MerchantCode: event.MerchantCode, Mode: event.Mode})
	}
	return nil
}

// noEndpoint says why the endpoint's saved IPN configuration, read inside
// t (savedIPN), gives a notification nowhere to go, if it does.
func (s *DB) noEndpoint(ctx context.Context, t tx, code string, mode merchant.Mode) (string, bool, error) {
	cfg, _, err := s.savedIPN(ctx, t, `merchant_code = ? AND mode = ?`, code, string(mode))
	if err != nil {
		return "", false, err
	}
	why, ok := ipn.NoEndpoint(cfg, mode)
	return why, ok, nil
}

// PaymentByID loads one payment.
func (s *DB) PaymentByID(ctx context.Context, id string) (payment.Payment, error) {
	return scanPayment(s.lookup(ctx, `SELECT `+paymentColumns+` FROM payments WHERE id = ?`, id))
}

// LatestPayment loads a bill's most recent attempt.
func (s *DB) LatestPayment(ctx context.Context, billRef string) (payment.Payment, error) {
	return scanPayment(s.lookup(ctx, `SELECT `+paymentColumns+` FROM payments WHERE bill_ref = ? ORDER BY created_at DESC, id DESC LIMIT 1`, billRef))
}

// SuccessfulPayment loads a bill's one successful charge. The status is
// written as payments_one_success's own condition: SQLite's planner
// compares a bound status with a partial index's condition by reading the
// bound value, and a statement whose plan read a bound value is prepared
// again at every run (see rebind).
func (s *DB) SuccessfulPayment(ctx context.Context, billRef string) (payment.Payment, error) {
	return scanPayment(s.lookup(ctx, `SELECT `+paymentColumns+` FROM payments WHERE bill_ref = ? AND status = 'succeeded'`, billRef))
}

// Verification finds a merchant's bill by its reference or order reference
// (bill.FindEither) with the payment its query answers from: the bill's one
// successful payment, read in the same statement (payments_one_success);
// only for a bill not paid, its latest attempt, in a second. A join that
// picked "the success, else the latest" in one statement was tried: on
// PostgreSQL its generic plan hashed the whole payments table. Only the
// columns a query shows are read: the SQLite driver looks up every
// column's name and type on each read.
func (s *DB) Verification(ctx context.Context, merchantCode string, mode merchant.Mode, ref string) (payment.Verification, error) {
	key := refKey(merchantCode, mode, ref)
	if v, ok := s.paid.get(key); ok {
		return v, nil
	}
	v, err := bill.FindEither(ref, func(byOrderReference bool) (payment.Verification, error) {
		if !s.known.mayHave(byOrderReference, merchantCode, mode, ref) {
			return payment.Verification{}, bill.ErrNotFound
		}
		var v payment.Verification
		var minor, created, expires int64
		var currency, state string
		row := s.lookup(ctx, verificationQuery(byOrderReference), ref, merchantCode, string(mode))
		shown, err := scanShownPayment(row, &v.BillReference, &v.OrderReference, &minor, &currency, &created, &state, &expires)
		if err != nil {
			return payment.Verification{}, notFound(err, bill.ErrNotFound)
		}
		v.Payment, v.CreatedAt, v.State, v.ExpiresAt = shown, fromMS(created), bill.State(state), fromMS(expires)
		if v.Amount, err = money.FromMinor(minor, currency); err != nil {
			return payment.Verification{}, fmt.Errorf("bill %s: %w", v.BillReference, err)
		}
		return v, nil
	})
	if err != nil || v.Payment.ID != "" {
		if err == nil {
			s.paid.keep(key, ref, v)
		}
		return v, err
	}
	// Not paid: the latest attempt, if any, says why.
	v.Payment, err = scanShownPayment(s.lookup(ctx, `SELECT `+shownPaymentColumns+` FROM payments p
		WHERE p.bill_ref = ? ORDER BY p.created_at DESC, p.id DESC LIMIT 1`, v.BillReference))
	if errors.Is(err, sql.ErrNoRows) {
		v.Payment, err = payment.Payment{Amount: money.Amount{Currency: v.Amount.Currency}}, nil // nothing paid
	}
	return v, err
}

// verificationQuery reads a bill by reference or order reference, with its
// successful payment if it has one; its arguments are the reference, the
// merchant code and the mode. Both texts are constants: the statement
// cache is keyed by text, and a query's text built per request cost an
// allocation and a hash of it on every verification.
func verificationQuery(byOrderReference bool) string {
	if byOrderReference {
		return verificationByOrderReference
	}
	return verificationByReference
}

const (
	verificationSelect = `SELECT b.reference, b.order_ref, b.amount_minor, b.currency, b.created_at, b.state, b.expires_at, ` + shownPaymentColumns + `
		FROM bills b LEFT JOIN payments p ON p.bill_ref = b.reference AND p.status = 'succeeded'
		WHERE `
	verificationByReference      = verificationSelect + `b.reference = ? AND b.merchant_code = ? AND b.mode = ?`
	verificationByOrderReference = verificationSelect + `b.order_ref = ? AND b.merchant_code = ? AND b.mode = ?`
)

// shownPaymentColumns are what a query shows of payment p, or zero values
// when an outer join found none.
const shownPaymentColumns = `COALESCE(p.id, ''), COALESCE(p.status, ''), COALESCE(p.network_ref, ''),
	COALESCE(p.amount_minor, 0), COALESCE(p.currency, ''), COALESCE(p.updated_at, 0), COALESCE(p.message, '')`

// scanShownPayment reads shownPaymentColumns after the columns into
// leading; a payment of no id is none.
func scanShownPayment(row scanner, leading ...any) (payment.Payment, error) {
	var p payment.Payment
	var status, currency string
	var minor, updated int64
	if err := row.Scan(append(leading, &p.ID, &status, &p.NetworkRef, &minor, &currency, &updated, &p.Message)...); err != nil {
		return payment.Payment{}, err
	}
	if p.ID == "" {
		return payment.Payment{}, nil
	}
	p.Status, p.UpdatedAt = payment.Status(status), fromMS(updated)
	var err error
	if p.Amount, err = money.FromMinor(minor, currency); err != nil {
		return payment.Payment{}, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	return p, nil
}

// UnsettledPayments lists a page of the payments q selects
// (payment.Unsettled), by updated_at then id.
func (s *DB) UnsettledPayments(ctx context.Context, q payment.Unsettled) ([]payment.Payment, error) {
	if len(q.Modes) == 0 {
		q.Modes = []merchant.Mode{""} // no charges: a mode no payment has
	}
	args := []any{string(payment.Processing), string(payment.Unknown)}
	for _, m := range q.Modes {
		args = append(args, string(m))
	}
	after := ms(q.AfterUpdated)
	// substr counts characters on both databases, not bytes.
	args = append(args, ms(q.Before), string(payment.Processing), q.NodePrefix, utf8.RuneCountInString(q.NodePrefix), q.NodePrefix, q.Self,
		string(payment.Challenge), ms(q.ChallengesBefore), after, after, q.AfterID, max(q.Limit, 1))
	rows, err := s.query(ctx, `SELECT `+paymentColumns+` FROM payments
		WHERE ((status IN (?, ?) AND mode IN (`+placeholders(len(q.Modes))+`)
			AND (updated_at < ? OR (status = ? AND ? <> '' AND substr(node, 1, ?) = ? AND node <> ?)))
		OR (status = ? AND updated_at < ?))
		AND (updated_at > ? OR (updated_at = ? AND id > ?))
		ORDER BY updated_at, id LIMIT ?`, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanPayment)
}

type scanner interface{ Scan(...any) error }

func scanPayment(row scanner) (payment.Payment, error) {
	var p payment.Payment
	var mode, status, currency, brand string
	var minor, created, updated int64
	err := row.Scan(&p.ID, &p.BillReference, &p.MerchantCode, &mode, &status, &minor, &currency, &brand, &p.Card.First6, &p.Card.Last4,
		&p.Card.ExpMonth, &p.Card.ExpYear, &p.Card.Holder, &p.Card.Fingerprint, &p.NetworkRef, &p.ApprovalCode, &p.DeclineCode, &p.Message,
		&p.ChallengeRef, &p.CallbackURL, &p.MobileNumber, &p.EmailAddress, &created, &updated, &p.Node)
	if err != nil {
		return payment.Payment{}, notFound(err, payment.ErrNotFound)
	}
	p.Mode, p.Status, p.Card.Brand = merchant.Mode(mode), payment.Status(status), card.Brand(brand)
	p.CreatedAt, p.UpdatedAt = fromMS(created), fromMS(updated)
	if p.Amount, err = money.FromMinor(minor, currency); err != nil {
		return payment.Payment{}, fmt.Errorf("payment %s: %w", p.ID, err)
	}
	return p, nil
}

var _ scanner = (*sql.Row)(nil)
