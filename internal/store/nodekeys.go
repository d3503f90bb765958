package store

import (
	"context"
	"fmt"
	"time"

	"github.com/kadipay/kadi/internal/keyring"
)

// PublishNodeKey records that node k.Node signs with k's key now, by the
// database's clock, and returns the keys of every node (this one too) that
// said so within live. Rows of nodes gone for a week are dropped.
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
	if _, err := s.exec(ctx, `DELETE FROM node_keys WHERE seen_at < ?`, ms(now.Add(-7*24*time.Hour))); err != nil {
		return nil, fmt.Errorf("forget old nodes' keys: %w", err)
	}
	rows, err := s.query(ctx, `SELECT node, key_id, key_check FROM node_keys WHERE seen_at >= ? ORDER BY node`, ms(now.Add(-live)))
	if err != nil {
		return nil, fmt.Errorf("read the nodes' keys: %w", err)
	}
	defer rows.Close()
	var out []keyring.NodeKey
	for rows.Next() {
		var nk keyring.NodeKey
		if err := rows.Scan(&nk.Node, &nk.ID, &nk.Check); err != nil {
			return nil, fmt.Errorf("read the nodes' keys: %w", err)
		}
		out = append(out, nk)
	}
	return out, rows.Err()
}
