// Package dbclock measures how far a node's clock is from the clock of the
// database the nodes share. What one node stamps and another compares with
// its own time (an IPN lease, a payment's charge in flight) is timed by the
// database's clock: by each node's own, a node whose clock was off took the
// others' work in flight for abandoned.
package dbclock

import (
	"context"
	"sync/atomic"
	"time"
)

// Source tells the time of the database; shared is false when the database
// runs in this process (SQLite), whose clock is this machine's.
type Source interface {
	DatabaseNow(ctx context.Context) (now time.Time, shared bool, err error)
}

// Skew is the database's clock minus this node's, as last measured. The
// zero value is no skew.
type Skew struct{ v atomic.Int64 }

// Get is the skew last measured.
func (s *Skew) Get() time.Duration { return time.Duration(s.v.Load()) }

// Measure reads src's clock between two readings of local and keeps how far
// it is from their midpoint. It returns the skew measured and the one it
// replaced; a database in this process (shared false), or one that does
// not answer, leaves the skew as it was.
func (s *Skew) Measure(ctx context.Context, src Source, local func() time.Time) (skew, was time.Duration, shared bool, err error) {
	before := local()
	db, shared, err := src.DatabaseNow(ctx)
	after := local()
	if err != nil || !shared {
		return s.Get(), s.Get(), shared, err
	}
	skew = db.Sub(before.Add(after.Sub(before) / 2))
	return skew, time.Duration(s.v.Swap(int64(skew))), true, nil
}
