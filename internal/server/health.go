package server

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// healthEvery is how long one store ping answers /healthz for: a probe,
// however often it comes (a load balancer, a load test), never loads the
// database it checks, and an outage shows within this long.
const healthEvery = 250 * time.Millisecond

// health is GET /healthz: 200 while the store answers, 503 when it does not.
type health struct {
	ping  func(context.Context) error
	every time.Duration

	mu  sync.Mutex
	at  time.Time
	err error
}

func (h *health) check(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.at.IsZero() && time.Since(h.at) < h.every {
		return h.err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	h.err = h.ping(ctx)
	h.at = time.Now()
	return h.err
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if err := h.check(r.Context()); err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"unavailable"}`))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}
