package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
)

// CreateMerchant stores a new merchant with its outlets, settings and keys.
func (s *DB) CreateMerchant(ctx context.Context, m merchant.Merchant, settings []merchant.Settings, keys []merchant.APIKey) error {
	return s.inTx(ctx, func(t tx) error {
		_, err := t.exec(ctx, `INSERT INTO merchants (code, name, password_hash, biller_code, service_id, system_code, settlement_account, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			m.Code, m.Name, m.PasswordHash, m.BillerCode, m.ServiceID, m.SystemCode, m.SettlementAccount, ms(m.CreatedAt))
		if err != nil {
			return fmt.Errorf("insert merchant: %w", err)
		}
		for _, o := range m.Outlets {
			if _, err := t.exec(ctx, `INSERT INTO outlets (code, merchant_code) VALUES (?, ?)`, o, m.Code); err != nil {
				return fmt.Errorf("insert outlet: %w", err)
			}
		}
		for _, st := range settings {
			secretAtRest, err := s.seal(st.NotificationSecret, m.Code, st.Mode, "notification_secret")
			if err != nil {
				return err
			}
			passwordAtRest, err := s.seal(st.IPN.Password, m.Code, st.Mode, "ipn_password")
			if err != nil {
				return err
			}
			_, err = t.exec(ctx, `INSERT INTO merchant_settings (merchant_code, mode, notification_secret, ipn_url, ipn_username, ipn_password)
				VALUES (?, ?, ?, ?, ?, ?)`, m.Code, string(st.Mode), secretAtRest, st.IPN.URL, st.IPN.Username, passwordAtRest)
			if err != nil {
				return fmt.Errorf("insert settings: %w", err)
			}
		}
		for _, k := range keys {
			if err := insertKey(ctx, t, k); err != nil {
				return err
			}
		}
		return insertAudit(ctx, t, audit.Event{At: m.CreatedAt, MerchantCode: m.Code, Actor: "cli", Action: audit.MerchantAdded, Detail: m.Name})
	})
}

func insertKey(ctx context.Context, t tx, k merchant.APIKey) error {
	_, err := t.exec(ctx, `INSERT INTO api_keys (id, merchant_code, mode, key_hash, prefix, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, k.MerchantCode, string(k.Mode), k.Hash, k.Prefix, ms(k.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert api key: %w", err)
	}
	return nil
}

// MerchantByCode loads a merchant and its outlets.
//
// Every API call and payment needs its merchant, so merchants are served
// from memory: a change made through this DB is seen at once, one made by
// another node or process within merchantMaxAge, as revoked keys are.
func (s *DB) MerchantByCode(ctx context.Context, code string) (merchant.Merchant, error) {
	m, err := s.merchants.getOr(code, func() (merchant.Merchant, error) { return s.loadMerchant(ctx, code) })
	m.Outlets = slices.Clone(m.Outlets) // the kept value's own slice stays unshared
	return m, err
}

// merchantMaxAge bounds how stale a merchant or its settings kept in
// memory may be.
const merchantMaxAge = time.Second

// MerchantsAfter lists up to limit merchants whose codes sort after
// after, in code order: the operator's list, a page at a time. Only what
// a list shows is read (no outlets, no password hash).
func (s *DB) MerchantsAfter(ctx context.Context, after string, limit int) ([]merchant.Merchant, error) {
	rows, err := s.query(ctx, `SELECT code, name, biller_code, created_at FROM merchants WHERE code > ? ORDER BY code LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list merchants: %w", err)
	}
	return collect(rows, func(r scanner) (merchant.Merchant, error) {
		var m merchant.Merchant
		var created int64
		err := r.Scan(&m.Code, &m.Name, &m.BillerCode, &created)
		m.CreatedAt = fromMS(created)
		return m, err
	})
}

func (s *DB) loadMerchant(ctx context.Context, code string) (merchant.Merchant, error) {
	var m merchant.Merchant
	var created int64
	err := s.lookup(ctx, `SELECT code, name, password_hash, biller_code, service_id, system_code, settlement_account, created_at
		FROM merchants WHERE code = ?`, code).
		Scan(&m.Code, &m.Name, &m.PasswordHash, &m.BillerCode, &m.ServiceID, &m.SystemCode, &m.SettlementAccount, &created)
	if err != nil {
		return m, notFound(err, merchant.ErrNotFound)
	}
	m.CreatedAt = fromMS(created)
	rows, err := s.query(ctx, `SELECT code FROM outlets WHERE merchant_code = ? ORDER BY code`, code)
	if err != nil {
		return m, err
	}
	defer rows.Close()
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			return m, err
		}
		m.Outlets = append(m.Outlets, o)
	}
	return m, rows.Err()
}

// RecentSettings is Settings as this DB read it within the last second
// (merchantMaxAge), for the IPN worker, which reads them at every delivery.
// A change saved through this DB, and a 410's disabling, show at once.
//
// Everything else reads Settings: issuing a token opens the sealed
// secrets, which is how a node learns at once of a master key rotated by
// another process (a value sealed under a key it lacks).
func (s *DB) RecentSettings(ctx context.Context, code string, mode merchant.Mode) (merchant.Settings, error) {
	return s.settings.getOr(endpointKey(code, mode), func() (merchant.Settings, error) { return s.Settings(ctx, code, mode) })
}

// Settings loads one mode's secrets and IPN configuration.
func (s *DB) Settings(ctx context.Context, code string, mode merchant.Mode) (merchant.Settings, error) {
	st := merchant.Settings{MerchantCode: code, Mode: mode}
	var disabled, previousUntil int64
	var origins string
	err := s.lookup(ctx, `SELECT notification_secret, previous_notification_secret, previous_secret_until, ipn_url, ipn_username, ipn_password,
		ipn_disabled_at, callback_origins FROM merchant_settings WHERE merchant_code = ? AND mode = ?`, code, string(mode)).
		Scan(&st.NotificationSecret, &st.PreviousSecret, &previousUntil, &st.IPN.URL, &st.IPN.Username, &st.IPN.Password, &disabled, &origins)
	if err != nil {
		return st, notFound(err, merchant.ErrNotFound)
	}
	st.IPN.DisabledAt, st.PreviousUntil = fromMS(disabled), fromMS(previousUntil)
	if origins != "" {
		st.CallbackOrigins = strings.Fields(origins)
	}
	if st.NotificationSecret, err = s.open(st.NotificationSecret, code, mode, "notification_secret"); err != nil {
		return st, fmt.Errorf("merchant %s %s notification secret: %w", code, mode, err)
	}
	// The previous secret is the current one's sealed value moved aside,
	// so it opens under the same binding; once its overlap is over it is
	// not opened at all: a value nobody signs with must not make the
	// settings unreadable.
	if !time.Now().Before(st.PreviousUntil) {
		st.PreviousSecret, st.PreviousUntil = "", time.Time{}
	} else if st.PreviousSecret, err = s.open(st.PreviousSecret, code, mode, "notification_secret"); err != nil {
		return st, fmt.Errorf("merchant %s %s previous notification secret: %w", code, mode, err)
	}
	if st.IPN.Password, err = s.open(st.IPN.Password, code, mode, "ipn_password"); err != nil {
		return st, fmt.Errorf("merchant %s %s IPN password: %w", code, mode, err)
	}
	return st, nil
}

// SetIPN saves a mode's IPN target and re-enables it. With a URL it also
// sends the mode's parked events up to ipn.ParkedResendWindow old, and
// says how many.
func (s *DB) SetIPN(ctx context.Context, code string, mode merchant.Mode, cfg merchant.IPNConfig) (int, error) {
	passwordAtRest, err := s.seal(cfg.Password, code, mode, "ipn_password")
	if err != nil {
		return 0, err
	}
	// Forgotten before (no delivery reads the old configuration from
	// memory between the commit and the forget after it) and after, before
	// the claim a resend wakes.
	s.settings.forget(endpointKey(code, mode))
	now := time.Now()
	var resent int64
	err = s.inTx(ctx, func(t tx) error {
		res, err := t.exec(ctx, `UPDATE merchant_settings SET ipn_url = ?, ipn_username = ?, ipn_password = ?, ipn_disabled_at = 0
			WHERE merchant_code = ? AND mode = ?`, cfg.URL, cfg.Username, passwordAtRest, code, string(mode))
		if err != nil {
			return fmt.Errorf("update ipn: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return merchant.ErrNotFound
		}
		detail := fmt.Sprintf("%s: %s as %s", mode, cfg.URL, cfg.Username)
		if cfg.URL != "" {
			// A new round for each, as a replay would start.
			res, err := t.exec(ctx, `UPDATE ipn_events SET status = 'pending', attempts = 0, next_attempt_at = ?, last_error = ''
				WHERE merchant_code = ? AND mode = ? AND status = 'parked' AND created_at >= ?`,
				ms(now), code, string(mode), ms(now.Add(-ipn.ParkedResendWindow)))
			if err != nil {
				return fmt.Errorf("send parked IPN events: %w", err)
			}
			switch resent, _ = res.RowsAffected(); resent {
			case 0:
			case 1:
				detail += "; 1 parked notification sent"
			default:
				detail += fmt.Sprintf("; %d parked notifications sent", resent)
			}
		}
		return insertAudit(ctx, t, audit.Event{ID: newAuditID(), At: now, MerchantCode: code, Actor: audit.ActorFrom(ctx, "cli"), Action: audit.IPNChanged,
			Detail: detail})
	})
	s.settings.forget(endpointKey(code, mode))
	if err != nil {
		return 0, err
	}
	if resent > 0 {
		s.notifyIPNQueued(ipn.Endpoint{MerchantCode: code, Mode: mode})
	}
	return int(resent), nil
}

// SetCallbackOrigins saves the origins a mode's hosted-form results may go
// back to (none: any), audited. Each node sees it within a second.
func (s *DB) SetCallbackOrigins(ctx context.Context, code string, mode merchant.Mode, origins []string) error {
	s.settings.forget(endpointKey(code, mode))
	err := s.inTx(ctx, func(t tx) error {
		res, err := t.exec(ctx, `UPDATE merchant_settings SET callback_origins = ? WHERE merchant_code = ? AND mode = ?`,
			strings.Join(origins, " "), code, string(mode))
		if err != nil {
			return fmt.Errorf("update callback origins: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return merchant.ErrNotFound
		}
		detail := string(mode) + ": any callbackUrl"
		if len(origins) > 0 {
			detail = string(mode) + ": " + strings.Join(origins, " ")
		}
		return insertAudit(ctx, t, audit.Event{ID: newAuditID(), At: time.Now(), MerchantCode: code, Actor: audit.ActorFrom(ctx, "cli"),
			Action: audit.CallbacksChanged, Detail: detail})
	})
	s.settings.forget(endpointKey(code, mode))
	return err
}

// RotateAPIKey revokes the mode's active keys and stores key, atomically.
func (s *DB) RotateAPIKey(ctx context.Context, k merchant.APIKey) error {
	return s.inTx(ctx, func(t tx) error {
		// Lock the merchant's row first so two rotations at once queue up
		// instead of each revoking only the keys it can see.
		if _, err := t.exec(ctx, `UPDATE merchants SET code = code WHERE code = ?`, k.MerchantCode); err != nil {
			return fmt.Errorf("lock merchant: %w", err)
		}
		if _, err := t.exec(ctx, `UPDATE api_keys SET revoked_at = ? WHERE merchant_code = ? AND mode = ? AND revoked_at = 0`,
			ms(k.CreatedAt), k.MerchantCode, string(k.Mode)); err != nil {
			return fmt.Errorf("revoke keys: %w", err)
		}
		if err := insertKey(ctx, t, k); err != nil {
			return err
		}
		return insertAudit(ctx, t, audit.Event{ID: newAuditID(), At: k.CreatedAt, MerchantCode: k.MerchantCode, Actor: audit.ActorFrom(ctx, "cli"), Action: audit.KeyRotated,
			Detail: keyReplaced(k)})
	})
}

// keyReplaced is the audit detail of a rotation: the new key by the
// prefix the Developers page shows it by, and by its id.
func keyReplaced(k merchant.APIKey) string {
	if k.Prefix == "" {
		return fmt.Sprintf("%s key replaced by %s", k.Mode, k.ID)
	}
	return fmt.Sprintf("%s key replaced by %s… (%s)", k.Mode, k.Prefix, k.ID)
}

// APIKeyByHash finds an active key.
func (s *DB) APIKeyByHash(ctx context.Context, hash string) (merchant.APIKey, error) {
	var k merchant.APIKey
	var mode string
	var created int64
	err := s.lookup(ctx, `SELECT id, merchant_code, mode, key_hash, created_at FROM api_keys WHERE key_hash = ? AND revoked_at = 0`, hash).
		Scan(&k.ID, &k.MerchantCode, &mode, &k.Hash, &created)
	k.Mode, k.CreatedAt = merchant.Mode(mode), fromMS(created)
	return k, notFound(err, merchant.ErrNotFound)
}

// RevokedKeys lists keys revoked at or after since.
func (s *DB) RevokedKeys(ctx context.Context, since time.Time) ([]string, error) {
	rows, err := s.query(ctx, `SELECT id FROM api_keys WHERE revoked_at >= ? AND revoked_at > 0`, ms(since))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// ActiveAPIKey loads a mode's current key (its hash and prefix only).
func (s *DB) ActiveAPIKey(ctx context.Context, code string, mode merchant.Mode) (merchant.APIKey, error) {
	k := merchant.APIKey{MerchantCode: code, Mode: mode}
	var created int64
	err := s.lookup(ctx, `SELECT id, key_hash, prefix, created_at FROM api_keys WHERE merchant_code = ? AND mode = ? AND revoked_at = 0
		ORDER BY created_at DESC LIMIT 1`, code, string(mode)).Scan(&k.ID, &k.Hash, &k.Prefix, &created)
	k.CreatedAt = fromMS(created)
	return k, notFound(err, merchant.ErrNotFound)
}

// SetNotificationSecret replaces a mode's IPN signing secret. The one it
// replaces keeps signing beside it until previousUntil; a zero time ends
// it at once (and any earlier rotation's with it).
func (s *DB) SetNotificationSecret(ctx context.Context, code string, mode merchant.Mode, secret string, previousUntil time.Time) error {
	sealed, err := s.seal(secret, code, mode, "notification_secret")
	if err != nil {
		return err
	}
	until := ms(previousUntil)
	if previousUntil.IsZero() {
		until = 0
	}
	defer s.settings.forget(endpointKey(code, mode))
	return s.inTx(ctx, func(t tx) error {
		// Every right-hand side reads the row as it was: the previous
		// secret is the one being replaced.
		res, err := t.exec(ctx, `UPDATE merchant_settings SET
			previous_notification_secret = CASE WHEN CAST(? AS BIGINT) > 0 THEN notification_secret ELSE '' END,
			previous_secret_until = ?, notification_secret = ?
			WHERE merchant_code = ? AND mode = ?`, until, until, sealed, code, string(mode))
		if err != nil {
			return fmt.Errorf("update notification secret: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return merchant.ErrNotFound
		}
		detail := string(mode) + ": the replaced secret no longer signs"
		if until > 0 {
			detail = string(mode) + ": the replaced secret signs until " + previousUntil.UTC().Format(time.RFC3339)
		}
		return insertAudit(ctx, t, audit.Event{ID: newAuditID(), At: time.Now(), MerchantCode: code, Actor: audit.ActorFrom(ctx, "cli"),
			Action: audit.SecretRotated, Detail: detail})
	})
}

// EndSecretOverlap stops the secret a rotation replaced from signing
// before the time the rotation gave it, once the merchant's receivers
// check the new one. A non-zero until names the overlap meant (its end,
// as Settings read it): another rotation since then is not ended in its
// place, which would drop the secret the receivers were just given.
// at is the moment of the change by the caller's clock, the one its page
// judged "still signing" by. ended is false when no such replaced secret
// was signing at that moment.
func (s *DB) EndSecretOverlap(ctx context.Context, code string, mode merchant.Mode, until, at time.Time) (ended bool, err error) {
	defer s.settings.forget(endpointKey(code, mode))
	meant := int64(0)
	if !until.IsZero() {
		meant = ms(until)
	}
	err = s.inTx(ctx, func(t tx) error {
		res, err := t.exec(ctx, `UPDATE merchant_settings SET previous_notification_secret = '', previous_secret_until = 0
			WHERE merchant_code = ? AND mode = ? AND previous_secret_until > ?
			AND (CAST(? AS BIGINT) = 0 OR previous_secret_until = ?)`, code, string(mode), ms(at), meant, meant)
		if err != nil {
			return fmt.Errorf("end the notification secret's overlap: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		ended = true
		return insertAudit(ctx, t, audit.Event{ID: newAuditID(), At: at, MerchantCode: code, Actor: audit.ActorFrom(ctx, "cli"),
			Action: audit.SecretOverlapEnded, Detail: string(mode) + ": the replaced secret no longer signs"})
	})
	return ended, err
}

// SetPassword replaces a merchant's password hash.
func (s *DB) SetPassword(ctx context.Context, code, hash string) error {
	res, err := s.exec(ctx, `UPDATE merchants SET password_hash = ? WHERE code = ?`, hash, code)
	s.merchants.forget(code)
	if err != nil {
		return fmt.Errorf("update password: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return merchant.ErrNotFound
	}
	return nil
}

// ResetAccess is the operator's way back in for a merchant who lost it
// (kadi merchant reset-access): the password hash replaced when
// passwordHash is not empty, two-step verification turned off (its
// secret and recovery codes gone) when twoStep; either way every dashboard
// session ends and the dashboard's locks are lifted, in one transaction,
// audited.
func (s *DB) ResetAccess(ctx context.Context, code, passwordHash string, twoStep bool, at time.Time) error {
	var what []string
	err := s.inTx(ctx, func(t tx) error {
		what = what[:0] // a retried group commit starts over
		var found int
		if err := t.queryRow(ctx, `SELECT COUNT(*) FROM merchants WHERE code = ?`, code).Scan(&found); err != nil {
			return err
		}
		if found == 0 {
			return merchant.ErrNotFound
		}
		if passwordHash != "" {
			if _, err := t.exec(ctx, `UPDATE merchants SET password_hash = ? WHERE code = ?`, passwordHash, code); err != nil {
				return fmt.Errorf("reset password: %w", err)
			}
			what = append(what, "password replaced")
		}
		if twoStep {
			if _, err := t.exec(ctx, `UPDATE merchants SET totp_secret = '', totp_enabled_at = 0, totp_last_step = 0 WHERE code = ?`, code); err != nil {
				return fmt.Errorf("turn off two-step verification: %w", err)
			}
			if _, err := t.exec(ctx, `DELETE FROM recovery_codes WHERE merchant_code = ?`, code); err != nil {
				return fmt.Errorf("delete recovery codes: %w", err)
			}
			what = append(what, "two-step verification off")
		}
		if _, err := t.exec(ctx, `DELETE FROM dashboard_sessions WHERE merchant_code = ?`, code); err != nil {
			return fmt.Errorf("end sessions: %w", err)
		}
		locks := auth.AccessLocks(code)
		subjects := make([]any, len(locks))
		for i, l := range locks {
			subjects[i] = l
		}
		if _, err := t.exec(ctx, `DELETE FROM auth_failures WHERE subject IN (`+placeholders(len(locks))+`)`, subjects...); err != nil {
			return fmt.Errorf("lift access locks: %w", err)
		}
		return insertAudit(ctx, t, audit.Event{ID: newAuditID(), At: at, MerchantCode: code, Actor: audit.ActorFrom(ctx, "cli"),
			Action: audit.AccessReset, Detail: strings.Join(append(what, "sessions ended"), ", ")})
	})
	s.merchants.forget(code)
	return err
}

// TOTP loads a merchant's second factor: the secret (empty when never
// enrolled) and when it was turned on (zero while enrolment is pending).
func (s *DB) TOTP(ctx context.Context, code string) (string, time.Time, error) {
	var sealed string
	var enabled int64
	err := s.lookup(ctx, `SELECT totp_secret, totp_enabled_at FROM merchants WHERE code = ?`, code).Scan(&sealed, &enabled)
	if err != nil {
		return "", time.Time{}, notFound(err, merchant.ErrNotFound)
	}
	if sealed == "" {
		return "", time.Time{}, nil
	}
	secret, err := s.open(sealed, code, "account", "totp_secret")
	return secret, fromMS(enabled), err
}

// EnableTOTP turns the second factor on with secret and replaces the
// recovery codes (their hashes); merchant.ErrTwoStepOn when it is on.
func (s *DB) EnableTOTP(ctx context.Context, code, secret string, recoveryHashes []string, at time.Time) error {
	sealed, err := s.seal(secret, code, "account", "totp_secret")
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(t tx) error {
		// Conditional: two sessions confirming at once must not both win,
		// the second replacing the secret and recovery codes the first
		// was just shown.
		res, err := t.exec(ctx, `UPDATE merchants SET totp_secret = ?, totp_enabled_at = ?, totp_last_step = 0 WHERE code = ? AND totp_enabled_at = 0`, sealed, ms(at), code)
		if err != nil {
			return fmt.Errorf("enable totp: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var found int
			if err := t.queryRow(ctx, `SELECT COUNT(*) FROM merchants WHERE code = ?`, code).Scan(&found); err != nil {
				return err
			}
			if found == 0 {
				return merchant.ErrNotFound
			}
			return merchant.ErrTwoStepOn
		}
		if _, err := t.exec(ctx, `DELETE FROM recovery_codes WHERE merchant_code = ?`, code); err != nil {
			return err
		}
		for _, h := range recoveryHashes {
			if _, err := t.exec(ctx, `INSERT INTO recovery_codes (merchant_code, code_hash) VALUES (?, ?)`, code, h); err != nil {
				return fmt.Errorf("insert recovery code: %w", err)
			}
		}
		return insertAudit(ctx, t, audit.Event{ID: newAuditID(), At: at, MerchantCode: code, Actor: audit.ActorFrom(ctx, "cli"), Action: audit.TOTPEnabled})
	})
}

// UseTOTPStep spends TOTP time step step for a merchant: true when no code
// of that step or a later one has been accepted yet, so that one code
// opens one sign-in (RFC 6238, 5.2), whichever node checks it.
func (s *DB) UseTOTPStep(ctx context.Context, code string, step int64) (bool, error) {
	res, err := s.exec(ctx, `UPDATE merchants SET totp_last_step = ? WHERE code = ? AND totp_last_step < ?`, step, code, step)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}

// UseRecoveryCode spends one unused recovery code; false when there is no
// such unused code.
func (s *DB) UseRecoveryCode(ctx context.Context, code, hash string, at time.Time) (bool, error) {
	res, err := s.exec(ctx, `UPDATE recovery_codes SET used_at = ? WHERE merchant_code = ? AND code_hash = ? AND used_at = 0`, ms(at), code, hash)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n == 1, nil
}
