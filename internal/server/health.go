package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/kadipay/kadi/internal/outage"
)

// healthEvery is how long one store ping answers /healthz (and a round of
// checks /readyz) for: a probe, however often it comes (a load balancer, a
// load test), never loads the database it checks, and an outage shows
// within this long.
const healthEvery = 250 * time.Millisecond

// health is GET /healthz: 200 while the store answers, 503 when it does not.
// It is liveness: a node whose database is down is alive and recovers.
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
		// As every other 503 of an outage: a single-check balancer or a
		// monitor knows when to ask again.
		w.Header().Set("Retry-After", strconv.Itoa(int(outage.RetryAfter.Seconds())))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"status":"unavailable"}`))
		return
	}
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// live is GET /livez, the liveness probe: 200 while the process serves
// requests, whatever its database is doing. /healthz, which the docs named
// for liveness, answers 503 while the database does not, so an
// orchestrator's liveness probe on it restarted every node during a
// database outage, each restart slower to come back than the last, while
// waiting was all that was needed.
func live(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"alive"}`))
}

// readiness is GET /readyz: 200 only when this node can do all its work:
// the store answers, its schema has every migration of this binary, and
// the IPN worker runs. An orchestrator sends traffic on it; /healthz
// decides restarts.
type readiness struct {
	checks []readyCheck
	// stopping, when it says so, fails readiness at once (not at the next
	// round of checks): a shutdown has begun.
	stopping func() bool
	health
}

type readyCheck struct {
	name string
	fn   func(context.Context) error
}

// notReady names the check that failed; its error stays in the logs.
type notReady struct {
	check string
	err   error
}

func (e *notReady) Error() string { return e.check + ": " + e.err.Error() }

func newReadiness(checks ...readyCheck) *readiness {
	r := &readiness{checks: checks}
	r.every = healthEvery
	r.ping = func(ctx context.Context) error {
		for _, c := range r.checks {
			if err := c.fn(ctx); err != nil {
				return &notReady{c.name, err}
			}
		}
		return nil
	}
	return r
}

// state is nil when the node is ready, else why not.
func (rd *readiness) state(ctx context.Context) error {
	if rd.stopping != nil && rd.stopping() {
		return &notReady{"shutting down", errors.New("a shutdown has begun")}
	}
	return rd.check(ctx)
}

// ready is what /readyz answers, as a truth value (kadi_ready).
func (rd *readiness) ready(ctx context.Context) bool { return rd.state(ctx) == nil }

func (rd *readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	err := rd.state(r.Context())
	if err == nil {
		_, _ = w.Write([]byte(`{"status":"ready"}`))
		return
	}
	check := "unknown"
	var nr *notReady
	if errors.As(err, &nr) {
		check = nr.check
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(outage.RetryAfter.Seconds())))
	w.WriteHeader(http.StatusServiceUnavailable)
	body, _ := json.Marshal(map[string]string{"status": "not ready", "failed": check})
	_, _ = w.Write(body)
}
