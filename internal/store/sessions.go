package store

import (
	"context"
	"fmt"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/session"
)

// CreateSession stores a new dashboard session, in the same statement
// that checks the merchant's password hash is still checked (see
// session.Repo).
func (s *DB) CreateSession(ctx context.Context, ss session.Session, checked string) error {
	res, err := s.exec(ctx, `INSERT INTO dashboard_sessions (id_hash, merchant_code, mode, csrf, second_factor, created_at, last_seen_at)
		SELECT ?, ?, ?, ?, ?, ?, ? FROM merchants WHERE code = ? AND password_hash = ?`,
		ss.IDHash, ss.MerchantCode, string(ss.Mode), ss.CSRF, ms(ss.SecondFactor), ms(ss.CreatedAt), ms(ss.LastSeenAt), ss.MerchantCode, checked)
	if err != nil {
		return fmt.Errorf("insert session: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("insert session: %w", err)
	} else if n == 0 {
		return session.ErrPasswordChanged
	}
	return nil
}

// SessionByHash loads a session alive at now.
func (s *DB) SessionByHash(ctx context.Context, idHash string, now time.Time) (session.Session, error) {
	var ss session.Session
	var mode string
	var second, created, seen int64
	err := s.lookup(ctx, `SELECT id_hash, merchant_code, mode, csrf, second_factor, created_at, last_seen_at
		FROM dashboard_sessions WHERE id_hash = ? AND last_seen_at > ? AND created_at > ?`,
		idHash, ms(now.Add(-session.IdleTimeout)), ms(now.Add(-session.MaxAge))).
		Scan(&ss.IDHash, &ss.MerchantCode, &mode, &ss.CSRF, &second, &created, &seen)
	if err != nil {
		return ss, notFound(err, session.ErrNotFound)
	}
	ss.Mode, ss.SecondFactor, ss.CreatedAt, ss.LastSeenAt = merchant.Mode(mode), fromMS(second), fromMS(created), fromMS(seen)
	return ss, nil
}

// TouchSession saves a session's activity, mode and second factor.
func (s *DB) TouchSession(ctx context.Context, ss session.Session) error {
	res, err := s.exec(ctx, `UPDATE dashboard_sessions SET mode = ?, second_factor = ?, last_seen_at = ? WHERE id_hash = ?`,
		string(ss.Mode), ms(ss.SecondFactor), ms(ss.LastSeenAt), ss.IDHash)
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return session.ErrNotFound
	}
	return nil
}

// SeenSession records a session's activity alone.
func (s *DB) SeenSession(ctx context.Context, idHash string, at time.Time) error {
	res, err := s.exec(ctx, `UPDATE dashboard_sessions SET last_seen_at = ? WHERE id_hash = ?`, ms(at), idHash)
	if err != nil {
		return fmt.Errorf("touch session: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return session.ErrNotFound
	}
	return nil
}

// DeleteSession ends one session.
func (s *DB) DeleteSession(ctx context.Context, idHash string) error {
	_, err := s.exec(ctx, `DELETE FROM dashboard_sessions WHERE id_hash = ?`, idHash)
	return err
}

// DeleteSessions ends every session of merchantCode except keep.
func (s *DB) DeleteSessions(ctx context.Context, merchantCode, keep string) error {
	_, err := s.exec(ctx, `DELETE FROM dashboard_sessions WHERE merchant_code = ? AND id_hash <> ?`, merchantCode, keep)
	return err
}
