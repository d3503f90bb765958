package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/kadipay/kadi/internal/secret"
)

// sealedValue is one stored secret: where it lives (its table, column and
// key columns) and what it is bound to when sealed.
type sealedValue struct {
	table, column string
	where         string // "a = ? AND b = ?"
	keys          []any
	binding       string
	value         string
}

// ResealStats says what Reseal did.
type ResealStats struct {
	Resealed int // values now sealed under the current key that were not
	Current  int // values already under it
	Changed  int // values another writer replaced meanwhile (sealed by it)
}

// Reseal seals every stored secret again under the sealer's current key,
// in one transaction: notification secrets, IPN passwords, TOTP secrets
// and checkout notices. After a rotation it lets the previous key be
// retired (docs/operations.md, "Rotating the master key"); values from
// before sealing existed are sealed too. Each row is replaced only if it
// still holds what was read, so a secret changed by a node meanwhile is
// left as that node wrote it.
func (s *DB) Reseal(ctx context.Context) (ResealStats, error) {
	var stats ResealStats
	if s.sealer == nil {
		return stats, secret.ErrNoSealingKey
	}
	current := s.sealer.CurrentKeyID()
	err := s.inTx(ctx, func(t tx) error {
		stats = ResealStats{} // a retried group commit starts over
		values, err := sealedValues(ctx, t)
		if err != nil {
			return err
		}
		for _, v := range values {
			if v.value == "" {
				continue
			}
			if id, ok := secret.SealedKeyID(v.value); ok && id == current {
				stats.Current++
				continue
			}
			plain, err := s.sealer.Open(v.value, v.binding)
			if err != nil {
				return fmt.Errorf("%s.%s where %s %v: %w", v.table, v.column, v.where, v.keys, err)
			}
			sealed, err := s.sealer.Seal(plain, v.binding)
			if err != nil {
				return err
			}
			res, err := t.exec(ctx, `UPDATE `+v.table+` SET `+v.column+` = ? WHERE `+v.where+` AND `+v.column+` = ?`,
				append(append([]any{sealed}, v.keys...), v.value)...)
			if err != nil {
				return fmt.Errorf("reseal %s.%s: %w", v.table, v.column, err)
			}
			if n, _ := res.RowsAffected(); n == 1 {
				stats.Resealed++
			} else {
				stats.Changed++
			}
		}
		return nil
	})
	return stats, err
}

// sealedValues reads every sealed column. A new sealed column must be
// added here, or a rotation's old key can never be retired: the store
// test of Reseal checks that none is left under an old key.
func sealedValues(ctx context.Context, t tx) ([]sealedValue, error) {
	var out []sealedValue
	read := func(q string, scan func(scan func(...any) error) ([]sealedValue, error)) error {
		rows, err := t.query(ctx, q)
		if err != nil {
			return fmt.Errorf("read sealed values: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			vs, err := scan(rows.Scan)
			if err != nil {
				return fmt.Errorf("read sealed values: %w", err)
			}
			out = append(out, vs...)
		}
		return rows.Err()
	}
	err := errors.Join(
		read(`SELECT merchant_code, mode, notification_secret, previous_notification_secret, ipn_password FROM merchant_settings
			ORDER BY merchant_code, mode`,
			func(scan func(...any) error) ([]sealedValue, error) {
				var code, mode, secretValue, previous, password string
				if err := scan(&code, &mode, &secretValue, &previous, &password); err != nil {
					return nil, err
				}
				where, keys := "merchant_code = ? AND mode = ?", []any{code, mode}
				// The previous secret was the current one, moved aside
				// sealed: it keeps that binding.
				return []sealedValue{
					{"merchant_settings", "notification_secret", where, keys, code + "/" + mode + "/notification_secret", secretValue},
					{"merchant_settings", "previous_notification_secret", where, keys, code + "/" + mode + "/notification_secret", previous},
					{"merchant_settings", "ipn_password", where, keys, code + "/" + mode + "/ipn_password", password},
				}, nil
			}),
		read(`SELECT code, totp_secret FROM merchants WHERE totp_secret <> '' ORDER BY code`,
			func(scan func(...any) error) ([]sealedValue, error) {
				var code, totp string
				if err := scan(&code, &totp); err != nil {
					return nil, err
				}
				return []sealedValue{{"merchants", "totp_secret", "code = ?", []any{code}, code + "/account/totp_secret", totp}}, nil
			}),
		read(`SELECT id_hash, notice FROM checkout_sessions WHERE notice <> '' ORDER BY id_hash`,
			func(scan func(...any) error) ([]sealedValue, error) {
				var idHash, notice string
				if err := scan(&idHash, &notice); err != nil {
					return nil, err
				}
				return []sealedValue{{"checkout_sessions", "notice", "id_hash = ?", []any{idHash}, noticeBinding(idHash), notice}}, nil
			}),
	)
	return out, err
}
