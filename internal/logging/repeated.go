package logging

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Repeated logs a background loop's failure that repeats every second or
// few while a dependency is down (the database, say): the first at once,
// then at most once every Every with how many came meanwhile, and once
// when the loop works again. Logged at every turn, an outage buried the
// log under three or four identical lines a second a node.
type Repeated struct {
	Log   *slog.Logger
	Every time.Duration    // 0: a minute
	Now   func() time.Time // nil: time.Now

	mu      sync.Mutex
	failing bool
	since   time.Time // the first failure of this run of them
	said    time.Time // when a failure was last logged
	unsaid  int       // failures since then, not logged
}

// Fail records a failure of msg with args (its error among them).
func (r *Repeated) Fail(ctx context.Context, msg string, args ...any) {
	r.mu.Lock()
	now := r.now()
	first := !r.failing
	if first {
		r.failing, r.since = true, now
	}
	every := r.Every
	if every <= 0 {
		every = time.Minute
	}
	if !first && now.Sub(r.said) < every {
		r.unsaid++
		r.mu.Unlock()
		return
	}
	unsaid, since := r.unsaid, r.since
	r.said, r.unsaid = now, 0
	r.mu.Unlock()
	if !first {
		args = append(args, "failing_since", since, "not_logged", unsaid)
	}
	r.Log.WarnContext(ctx, msg, args...)
}

// OK records that the loop worked; after failures it says so once.
func (r *Repeated) OK(ctx context.Context, msg string) {
	r.mu.Lock()
	if !r.failing {
		r.mu.Unlock()
		return
	}
	since, unsaid := r.since, r.unsaid
	r.failing, r.unsaid = false, 0
	r.mu.Unlock()
	r.Log.InfoContext(ctx, msg+": working again", "failing_since", since, "not_logged", unsaid)
}

func (r *Repeated) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
