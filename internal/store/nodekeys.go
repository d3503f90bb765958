package store

import (
	"context"
	"fmt"
	"time"

	"github.com/kadipay/kadi/internal/keyring"
)

// PublishNodeKey records that node k.Node signs with k's key now, by the
// database's clock, and returns the keys of every node (this one too) that
// said so within live.
func (s *DB) PublishNodeKey(ctx context.Context, k keyring.NodeKey, live time.Duration) ([]keyring.NodeKey, error) {
	now, _, err := s.DatabaseNow(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := s.exec(ctx, `INSERT INTO node_keys (node, key_id, key_check, seen_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (node) DO UPDATE SET key_id = excluded.key_id, key_check = excluded.key_check, seen_at = excluded.seen_at`,
		k.Node, k.ID, k.Check, ms(now)); err != nil {
		return nil, fmt.Errorf("publish this node's key: %w", err)
	}
	rows, err := s.query(ctx, `SELECT node, key_id, key_check FROM node_keys WHERE seen_at >= ? ORDER BY node`, ms(now.Add(-live)))
	if err != nil {
		return nil, fmt.Errorf("read the nodes' keys: %w", err)
	}
	return collect(rows, func(row scanner) (keyring.NodeKey, error) {
		var nk keyring.NodeKey
		err := row.Scan(&nk.Node, &nk.ID, &nk.Check)
		return nk, err
	})
}

// ForgetNodeKeys drops the rows of nodes silent for longer than gone (by
// the database's clock): a node named after its host leaves one behind at
// every redeploy.
func (s *DB) ForgetNodeKeys(ctx context.Context, gone time.Duration) error {
	now, _, err := s.DatabaseNow(ctx)
	if err != nil {
		return err
	}
	if _, err := s.exec(ctx, `DELETE FROM node_keys WHERE seen_at < ?`, ms(now.Add(-gone))); err != nil {
		return fmt.Errorf("forget old nodes' keys: %w", err)
	}
	return nil
}
