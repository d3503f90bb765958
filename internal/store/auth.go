package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/secret"
)

// authRow is one subject's failure bookkeeping, read and written inside a
// transaction that holds the row.
type authRow struct {
	failures     int
	first, until int64 // unix ms; until is the lock's end (merchants) or the throttle's (addresses)
}

// lockAuthRow claims subject's row before reading it, so that attempts
// counted at once queue instead of reading the same count (under
// PostgreSQL's read committed both would, and one would be lost).
func lockAuthRow(ctx context.Context, t tx, subject string, now time.Time) (authRow, error) {
	_, err := t.exec(ctx, `INSERT INTO auth_failures (subject, failures, first_at, locked_until) VALUES (?, 0, ?, 0)
		ON CONFLICT (subject) DO UPDATE SET failures = auth_failures.failures`, subject, ms(now))
	if err != nil {
		return authRow{}, err
	}
	var r authRow
	err = t.queryRow(ctx, `SELECT failures, first_at, locked_until FROM auth_failures WHERE subject = ?`, subject).Scan(&r.failures, &r.first, &r.until)
	return r, err
}

func saveAuthRow(ctx context.Context, t tx, subject string, r authRow) error {
	_, err := t.exec(ctx, `UPDATE auth_failures SET failures = ?, first_at = ?, locked_until = ? WHERE subject = ?`,
		r.failures, r.first, r.until, subject)
	return err
}

// restart forgets an ended lock and a passed window: the next failure is
// the first of a new count.
func (r *authRow) restart(now time.Time, window time.Duration) {
	if r.until != 0 && r.until <= ms(now) {
		r.until, r.failures, r.first = 0, 0, ms(now)
	}
	if now.Sub(fromMS(r.first)) > window {
		r.failures, r.first = 0, ms(now)
	}
}

// ReserveAuthAttempt counts an attempt against subject before its password
// is checked, so that parallel guesses cannot all pass the check before any
// of them is counted. It refuses while the subject is locked (returning the
// lock's end), and while the attempts counted in the window — failed, or
// still being checked — already use up the policy's allowance.
func (s *DB) ReserveAuthAttempt(ctx context.Context, subject string, now time.Time, p auth.LockoutPolicy) (time.Time, bool, error) {
	var until time.Time
	var reserved bool
	err := s.inTx(ctx, func(t tx) error {
		r, err := lockAuthRow(ctx, t, subject, now)
		if err != nil {
			return err
		}
		if r.until > ms(now) {
			until = fromMS(r.until)
			return nil
		}
		r.restart(now, p.Window)
		if r.failures < p.MaxFailures {
			r.failures++
			reserved = true
		}
		return saveAuthRow(ctx, t, subject, r)
	})
	return until, reserved, err
}

// RecordAuthFailure settles a reserved attempt that failed: it was counted
// when reserved, so this only locks the subject once the count reaches the
// policy's maximum. newlyLocked is true exactly once per lockout.
func (s *DB) RecordAuthFailure(ctx context.Context, subject string, now time.Time, p auth.LockoutPolicy) (time.Time, bool, error) {
	var until time.Time
	var newly bool
	err := s.inTx(ctx, func(t tx) error {
		r, err := lockAuthRow(ctx, t, subject, now)
		if err != nil {
			return err
		}
		if r.until > ms(now) {
			until = fromMS(r.until)
			return nil
		}
		if r.failures < p.MaxFailures {
			return nil
		}
		r.until, r.failures, r.first = ms(now.Add(p.LockFor)), 0, ms(now)
		until, newly = fromMS(r.until), true
		return saveAuthRow(ctx, t, subject, r)
	})
	return until, newly, err
}

// ReleaseAuthAttempt gives back one reserved attempt whose password was
// never checked. Only that one: clearing the count here would let anyone
// who can make checks fail (a full hash gate) wipe a merchant's failures.
func (s *DB) ReleaseAuthAttempt(ctx context.Context, subject string) error {
	_, err := s.exec(ctx, `UPDATE auth_failures SET failures = failures - 1 WHERE subject = ? AND failures > 0 AND locked_until = 0`, subject)
	return err
}

// ThrottleAuthFailure counts a failure against subject and returns when it
// may try again: never a long lock, only the policy's growing delay.
func (s *DB) ThrottleAuthFailure(ctx context.Context, subject string, now time.Time, p auth.ThrottlePolicy) (time.Time, error) {
	var next time.Time
	err := s.inTx(ctx, func(t tx) error {
		r, err := lockAuthRow(ctx, t, subject, now)
		if err != nil {
			return err
		}
		if now.Sub(fromMS(r.first)) > p.Window {
			r.failures, r.first = 0, ms(now)
		}
		r.failures++
		r.until = 0
		if d := p.Delay(r.failures); d > 0 {
			next = now.Add(d)
			r.until = ms(next)
		}
		return saveAuthRow(ctx, t, subject, r)
	})
	return next, err
}

// PruneAuthFailures forgets the counts that no longer matter at now: no
// lock or wait running, and counting began more than two windows ago, so
// the next failure would start a new count anyway. Two: an attempt
// reserved just before its window ended may still be having its password
// checked, and its failure must land on its count, which could lock the
// subject. Every subject ever tried (an address, a merchant code that is
// no merchant's) kept its row for good. It returns how many it forgot.
func (s *DB) PruneAuthFailures(ctx context.Context, now time.Time, window time.Duration) (int64, error) {
	res, err := s.exec(ctx, `DELETE FROM auth_failures WHERE locked_until <= ? AND first_at < ?`, ms(now), ms(now.Add(-2*window)))
	if err != nil {
		return 0, fmt.Errorf("prune auth failures: %w", err)
	}
	return res.RowsAffected()
}

// AuthLockedUntil returns when subject's lock or throttle ends, or zero.
func (s *DB) AuthLockedUntil(ctx context.Context, subject string, now time.Time) (time.Time, error) {
	var locked int64
	err := s.lookup(ctx, `SELECT locked_until FROM auth_failures WHERE subject = ?`, subject).Scan(&locked)
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
	return scanAuditEvents(rows)
}

// AuditEventsBefore is AuditEvents past the event at, id: the next page of
// a log whose last row that was.
func (s *DB) AuditEventsBefore(ctx context.Context, merchantCode string, at time.Time, id string, limit int) ([]audit.Event, error) {
	rows, err := s.query(ctx, `SELECT id, at, merchant_code, actor, action, detail FROM audit_events
		WHERE merchant_code = ? AND (at < ? OR (at = ? AND id < ?)) ORDER BY at DESC, id DESC LIMIT ?`,
		merchantCode, ms(at), ms(at), id, limit)
	if err != nil {
		return nil, err
	}
	return scanAuditEvents(rows)
}

func scanAuditEvents(rows *sql.Rows) ([]audit.Event, error) {
	return collect(rows, func(row scanner) (audit.Event, error) {
		var e audit.Event
		var at int64
		err := row.Scan(&e.ID, &at, &e.MerchantCode, &e.Actor, &e.Action, &e.Detail)
		e.At = fromMS(at)
		return e, err
	})
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
