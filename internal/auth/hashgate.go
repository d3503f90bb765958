package auth

import (
	"context"
	"sync/atomic"
	"time"
)

// HashGate bounds the password hashes running at once. An argon2id check
// holds 19 MiB for its whole run, so a hundred parallel logins would take
// gigabytes; with the gate they take Slots × 19 MiB and the rest wait a
// short while in line, then are told to come back (ErrBusy, a 503).
type HashGate struct {
	slots   chan struct{}
	waiting atomic.Int64
	maxWait time.Duration
	maxLine int64
}

// NewHashGate lets slots hashes run at once; a request waits at most wait
// for a slot, and at most line requests wait at all.
func NewHashGate(slots, line int, wait time.Duration) *HashGate {
	return &HashGate{slots: make(chan struct{}, max(slots, 1)), maxWait: wait, maxLine: int64(line)}
}

// acquire takes a slot and returns its release. A nil gate admits everyone.
func (g *HashGate) acquire(ctx context.Context) (func(), error) {
	if g == nil {
		return func() {}, nil
	}
	select {
	case g.slots <- struct{}{}:
		return g.release, nil
	default:
	}
	if g.waiting.Add(1) > g.maxLine {
		g.waiting.Add(-1)
		return nil, ErrBusy
	}
	defer g.waiting.Add(-1)
	t := time.NewTimer(g.maxWait)
	defer t.Stop()
	select {
	case g.slots <- struct{}{}:
		return g.release, nil
	case <-t.C:
		return nil, ErrBusy
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (g *HashGate) release() { <-g.slots }
