package auth

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/outage"
)

// Revocations is each node's in-memory copy of recently revoked API keys.
// Token checks read it without touching the database; Watch refreshes it
// from the database on a short interval, so a key rotated on any node (or by
// the CLI) stops working everywhere within that interval.
type Revocations struct {
	mu      sync.RWMutex
	revoked map[string]struct{}
	// read is when the set was last read from the database, on the
	// monotonic clock (since epoch): a test's clock moved ahead, or the
	// wall clock stepped, does not age it. staleAfter, set by Watch, is
	// how old it may be before Known says no.
	read       atomic.Int64
	staleAfter atomic.Int64
}

var epoch = time.Now()

// ErrRevocationsUnknown is a token check on a node that has not read the
// revoked keys for a while: it cannot tell whether the token's key was
// revoked since (a leaked key is rotated precisely so that its tokens stop
// working at once), so it answers as for the database it cannot reach.
var ErrRevocationsUnknown = fmt.Errorf("this node could not read which API keys were revoked lately: %w", outage.ErrTimedOut)

// NewRevocations returns an empty set.
func NewRevocations() *Revocations { return &Revocations{revoked: map[string]struct{}{}} }

// Revoked reports whether keyID was revoked.
func (r *Revocations) Revoked(keyID string) bool {
	r.mu.RLock()
	_, ok := r.revoked[keyID]
	r.mu.RUnlock()
	return ok
}

// Known reports whether the set is recent enough to refuse every
// revoked key: always, unless Watch keeps it and its last read is older
// than a few of Watch's intervals (a database outage). Before this, a
// node cut off from its database went on honouring the tokens of keys
// rotated meanwhile on other nodes, for whatever it could answer from
// memory.
func (r *Revocations) Known() bool {
	stale := r.staleAfter.Load()
	return stale == 0 || int64(time.Since(epoch))-r.read.Load() <= stale
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
	r.read.Store(int64(time.Since(epoch)))
	return nil
}

// staleAfter is how long Watch lets the set go unread before token checks
// fail: several of its intervals, each refresh's own wait included, so
// that one slow or failed read does not turn tokens away.
func staleAfter(interval time.Duration) time.Duration {
	return max(5*interval, 5*time.Second)
}

// Watch refreshes every interval until ctx ends. Each refresh has twice
// the interval (a second at least) to answer: a query left hanging on a
// connection a database failover had cut stopped every refresh after it,
// silently, and a key revoked elsewhere kept working on this node.
func (r *Revocations) Watch(ctx context.Context, repo Repo, interval time.Duration, now func() time.Time, log *slog.Logger) {
	r.staleAfter.Store(int64(staleAfter(interval)))
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
