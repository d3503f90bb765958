package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/kadipay/kadi/internal/keyring"
)

// PublishNodeKey records that run run of node k.Node signs with k's key
// now, by the database's clock, and returns the keys of every node (this
// one too) that said so within live, and the run that published for k.Node
// before this call ("" if none did, or a release before runs were kept).
func (s *DB) PublishNodeKey(ctx context.Context, k keyring.NodeKey, run string, live time.Duration) ([]keyring.NodeKey, string, error) {
	now, _, err := s.DatabaseNow(ctx)
	if err != nil {
		return nil, "", err
	}
	// Read and written in one transaction, the row locked on PostgreSQL
	// (SQLite's one writer orders them already): two nodes of one name
	// publishing in step each read before either wrote, and one of them
	// never saw the other's mark.
	lock := ""
	if s.d.name == "postgres" {
		lock = " FOR UPDATE"
	}
	var last string
	err = s.inTx(ctx, func(t tx) error {
		var err error
		if last, err = scanNodeRun(t.queryRow(ctx, nodeRunQuery+lock, k.Node)); err != nil {
			return err
		}
		if _, err := t.exec(ctx, `INSERT INTO node_keys (node, key_id, key_check, seen_at, run) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (node) DO UPDATE SET key_id = excluded.key_id, key_check = excluded.key_check, seen_at = excluded.seen_at, run = excluded.run`,
			k.Node, k.ID, k.Check, ms(now), run); err != nil {
			return fmt.Errorf("publish this node's key: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	rows, err := s.query(ctx, `SELECT node, key_id, key_check FROM node_keys WHERE seen_at >= ? ORDER BY node`, ms(now.Add(-live)))
	if err != nil {
		return nil, "", fmt.Errorf("read the nodes' keys: %w", err)
	}
	peers, err := collect(rows, func(row scanner) (keyring.NodeKey, error) {
		var nk keyring.NodeKey
		err := row.Scan(&nk.Node, &nk.ID, &nk.Check)
		return nk, err
	})
	return peers, last, err
}

// RetireNodeKey marks run run of node as stopped, so that the other nodes
// stop counting its key at once rather than after their live window: a
// node whose ring was behind a stopped node's reported ready for up to
// 30 s. The row stays until ForgetNodeKeys drops it with the other
// silent nodes' (its run says nothing a next start needs: the first
// publish reads it and sets it aside); a run that is no longer the row's
// (another node of the name wrote since) is left alone.
func (s *DB) RetireNodeKey(ctx context.Context, node, run string) error {
	if _, err := s.exec(ctx, `UPDATE node_keys SET seen_at = 0 WHERE node = ? AND run = ?`, node, run); err != nil {
		return fmt.Errorf("retire this node's key: %w", err)
	}
	return nil
}

// NodeRun is the run that last published for node ("" if none did).
func (s *DB) NodeRun(ctx context.Context, node string) (string, error) {
	return scanNodeRun(s.queryRow(ctx, nodeRunQuery, node))
}

// nodeRunQuery reads the run that last published for a node.
const nodeRunQuery = `SELECT run FROM node_keys WHERE node = ?`

// scanNodeRun reads nodeRunQuery's answer: "" when no run published.
func scanNodeRun(row *sql.Row) (string, error) {
	var run string
	if err := row.Scan(&run); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("read this node's last run: %w", err)
	}
	return run, nil
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
