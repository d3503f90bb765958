package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// However many probes come at once, one store ping answers them for a
// while; an outage shows within that while, and so does the recovery.
func TestHealthPingsAtMostEveryPeriod(t *testing.T) {
	var pings atomic.Int32
	var down atomic.Bool
	// An hour for the burst, so that a slow machine cannot stretch it
	// past the period; then short, to see an outage and a recovery.
	h := &health{every: time.Hour, ping: func(context.Context) error {
		pings.Add(1)
		if down.Load() {
			return errors.New("database unreachable")
		}
		return nil
	}}
	probe := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code
	}
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if code := probe(); code != http.StatusOK {
				t.Errorf("healthy store: %d", code)
			}
		}()
	}
	wg.Wait()
	if n := pings.Load(); n != 1 {
		t.Errorf("200 probes at once pinged the store %d times, want 1", n)
	}
	h.every = 50 * time.Millisecond
	down.Store(true)
	time.Sleep(h.every)
	if code := probe(); code != http.StatusServiceUnavailable {
		t.Errorf("store down for a period: %d, want 503", code)
	}
	down.Store(false)
	time.Sleep(h.every)
	if code := probe(); code != http.StatusOK {
		t.Errorf("store back for a period: %d, want 200", code)
	}
}
