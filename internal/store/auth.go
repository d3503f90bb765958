package store

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/secret"
)

// RecordAuthFailure counts one failure in the current window and locks the
// subject when the count reaches the policy's maximum.
func (s *DB) RecordAuthFailure(ctx context.Context, subject string, now time.Time, p auth.LockoutPolicy) (time.Time, bool, error) {
	var until time.Time
	var newly bool
	err := s.inTx(ctx, func(t tx) error {
		// Claim the subject's row before reading it, so that failures
		// counted at once queue instead of reading the same count (under
		// PostgreSQL's read committed both would, and one would be lost).
		_, err := t.exec(ctx, `INSERT INTO auth_failures (subject, failures, first_at, locked_until) VALUES (?, 0, ?, 0)
			ON CONFLICT (subject) DO UPDATE SET failures = auth_failures.failures`, subject, ms(now))
		if err != nil {
			return err
		}
		var failures int
		var first, locked int64
		err = t.queryRow(ctx, `SELECT failures, first_at, locked_until FROM auth_failures WHERE subject = ?`, subject).Scan(&failures, &first, &locked)
		if err != nil {
			return err
		}
		if locked <= ms(now) {
			locked = 0 // a lock that has ended is no lock, and Clear may forget it
			if now.Sub(fromMS(first)) > p.Window {
				failures, first = 0, ms(now) // the window passed: start counting again
			}
		}
		failures++
		if failures >= p.MaxFailures && locked == 0 {
			locked = ms(now.Add(p.LockFor))
			newly = true
			failures = 0
			first = ms(now)
		}
		until = fromMS(locked)
		_, err = t.exec(ctx, `UPDATE auth_failures SET failures = ?, first_at = ?, locked_until = ? WHERE subject = ?`,
			failures, first, locked, subject)
		return err
	})
	return until, newly, err
}

// AuthLockedUntil returns when subject's lockout ends, or zero.
func (s *DB) AuthLockedUntil(ctx context.Context, subject string, now time.Time) (time.Time, error) {
	var locked int64
	err := s.queryRow(ctx, `SELECT locked_until FROM auth_failures WHERE subject = ?`, subject).Scan(&locked)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	return fromMS(locked), err
}

// ClearAuthFailures forgets subject's failures after a success. It never
// lifts an active lock: the row of a locked subject only loses its count.
func (s *DB) ClearAuthFailures(ctx context.Context, subject string) error {
	return s.inTx(ctx, func(t tx) error {
		if _, err := t.exec(ctx, `DELETE FROM auth_failures WHERE subject = ? AND locked_until = 0`, subject); err != nil {
			return err
		}
		_, err := t.exec(ctx, `UPDATE auth_failures SET failures = 0 WHERE subject = ?`, subject)
		return err
	})
}

// RecordAudit appends to the audit log.
func (s *DB) RecordAudit(ctx context.Context, e audit.Event) error {
	return s.inTx(ctx, func(t tx) error { return insertAudit(ctx, t, e) })
}

// AuditEvents lists a merchant's audit log, newest first.
func (s *DB) AuditEvents(ctx context.Context, merchantCode string, limit int) ([]audit.Event, error) {
	rows, err := s.query(ctx, `SELECT id, at, merchant_code, actor, action, detail FROM audit_events
		WHERE merchant_code = ? ORDER BY at DESC, id DESC LIMIT ?`, merchantCode, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []audit.Event
	for rows.Next() {
		var e audit.Event
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.MerchantCode, &e.Actor, &e.Action, &e.Detail); err != nil {
			return nil, err
		}
		e.At = fromMS(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

func insertAudit(ctx context.Context, t tx, e audit.Event) error {
	if e.ID == "" {
		e.ID = newAuditID()
	}
	_, err := t.exec(ctx, `INSERT INTO audit_events (id, at, merchant_code, actor, action, detail) VALUES (?, ?, ?, ?, ?, ?)`,
		e.ID, ms(e.At), e.MerchantCode, e.Actor, e.Action, e.Detail)
	return err
}

func newAuditID() string { return secret.NewID("aud") }
