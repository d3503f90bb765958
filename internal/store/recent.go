package store

import (
	"sync"
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

// getOr returns key's value from memory, or loads and keeps it. It is
// kept as of before the load: a value read before a change and kept after
// that change's forget is still dropped once it is maxAge old.
func (r *recent[T]) getOr(key string, load func() (T, error)) (T, error) {
	if v, ok := r.get(key); ok {
		return v, nil
	}
	at := time.Now()
	v, err := load()
	if err == nil {
		r.m.Store(key, recentValue[T]{v, at})
	}
	return v, err
}

func (r *recent[T]) forget(key string) { r.m.Delete(key) }

func (r *recent[T]) forgetAll() { r.m.Clear() }
