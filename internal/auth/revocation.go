package auth

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/kadipay/kadi/internal/logging"
)

// Revocations is each node's in-memory copy of recently revoked API keys.
// Token checks read it without touching the database; Watch refreshes it
// from the database on a short interval, so a key rotated on any node (or by
// the CLI) stops working everywhere within that interval.
type Revocations struct {
	mu      sync.RWMutex
	revoked map[string]struct{}
}

// NewRevocations returns an empty set.
func NewRevocations() *Revocations { return &Revocations{revoked: map[string]struct{}{}} }

// Revoked reports whether keyID was revoked.
func (r *Revocations) Revoked(keyID string) bool {
	r.mu.RLock()
	_, ok := r.revoked[keyID]
	r.mu.RUnlock()
	return ok
}

// Add marks keyID revoked on this node at once.
func (r *Revocations) Add(keyID string) {
	r.mu.Lock()
	r.revoked[keyID] = struct{}{}
	r.mu.Unlock()
}

// RevocationWindow is how far back revocations are kept: longer than any
// token can live (MaxTokenTTL, whatever --token-ttl says today), so a token
// of a key revoked earlier has expired anyway, and a restart with another
// TTL forgets nothing that matters. The minute covers clock skew between
// nodes.
const RevocationWindow = MaxTokenTTL + time.Minute

// Refresh replaces the set with the keys revoked within RevocationWindow
// before now.
func (r *Revocations) Refresh(ctx context.Context, repo Repo, now time.Time) error {
	ids, err := repo.RevokedKeys(ctx, now.Add(-RevocationWindow))
	if err != nil {
		return err
	}
	next := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		next[id] = struct{}{}
	}
	r.mu.Lock()
	r.revoked = next
	r.mu.Unlock()
	return nil
}

// Watch refreshes every interval until ctx ends. Each refresh has twice
// the interval (a second at least) to answer: a query left hanging on a
// connection a database failover had cut stopped every refresh after it,
// silently, and a key revoked elsewhere kept working on this node.
func (r *Revocations) Watch(ctx context.Context, repo Repo, interval time.Duration, now func() time.Time, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	said := &logging.Repeated{Log: log}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, max(2*interval, time.Second))
			err := r.Refresh(rctx, repo, now())
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				said.Fail(ctx, "refresh revoked keys", "err", err)
			case err == nil:
				said.OK(ctx, "refresh revoked keys")
			}
		}
	}
}
