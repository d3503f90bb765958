package store

import (
	"sync"
	"sync/atomic"
	"time"
)

// recent keeps values read from the database for a short while, for
// reads that every request or delivery makes and that seldom change
// (merchants, their settings). A change made through the same DB forgets
// the value at once; one made by another node or process is seen once
// the value is older than maxAge, as revoked keys are.
type recent[T any] struct {
	maxAge time.Duration
	m      sync.Map // key → recentValue[T]
	// forgets counts forget calls: a load that a forget overtook read
	// what may be the old value, and is not kept.
	forgets atomic.Uint64
}

type recentValue[T any] struct {
	v  T
	at time.Time
}

func (r *recent[T]) get(key string) (T, bool) {
	if e, ok := r.m.Load(key); ok {
		if e := e.(recentValue[T]); time.Since(e.at) < r.maxAge {
			return e.v, true
		}
	}
	var zero T
	return zero, false
}

// getOr returns key's value from memory, or loads and keeps it. A value
// whose load a forget overtook is returned but not kept: it may have been
// read before the change that forget announced, and kept it would hide
// the change for maxAge (a 410's disabling of an endpoint, here, for a
// second of deliveries to it).
func (r *recent[T]) getOr(key string, load func() (T, error)) (T, error) {
	if v, ok := r.get(key); ok {
		return v, nil
	}
	at, forgets := time.Now(), r.forgets.Load()
	v, err := load()
	if err == nil && r.forgets.Load() == forgets {
		r.m.Store(key, recentValue[T]{v, at})
		if r.forgets.Load() != forgets { // a forget came between the check and the store
			r.m.Delete(key)
		}
	}
	return v, err
}

func (r *recent[T]) forget(key string) {
	r.forgets.Add(1)
	r.m.Delete(key)
}

func (r *recent[T]) forgetAll() {
	r.forgets.Add(1)
	r.m.Clear()
}
