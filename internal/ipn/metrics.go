package ipn

import (
	"context"
	"time"

	"github.com/kadipay/kadi/internal/metrics"
)

// Metrics are the delivery series on /metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	outcomes *metrics.CounterVec
	latency  *metrics.Histogram
	depth    *metrics.Gauge
	failed   *metrics.Gauge
	oldest   *metrics.Gauge
}

// Outcome labels of kadi_ipn_deliveries_total.
const (
	OutcomeDelivered = "delivered" // a 2xx arrived
	OutcomeRetry     = "retry"     // the attempt failed; another is scheduled
	OutcomeFailed    = "failed"    // the attempt failed and the schedule is used up
	OutcomeGone      = "gone"      // 410: the endpoint was disabled
	OutcomeDeferred  = "deferred"  // no request made: no URL configured
)

// NewMetrics registers the IPN series in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	return &Metrics{
		outcomes: r.Counter("kadi_ipn_deliveries_total", "IPN delivery attempts by outcome.", "outcome"),
		latency: r.Histogram("kadi_ipn_delivery_duration_seconds", "Time from sending an IPN request to its answer or failure.",
			[]float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30}),
		depth:  r.Gauge("kadi_ipn_queue_depth", "IPN events waiting for delivery."),
		failed: r.Gauge("kadi_ipn_failed_events", "IPN events that exhausted their retries, waiting for a replay."),
		oldest: r.Gauge("kadi_ipn_oldest_pending_age_seconds", "Age of the oldest IPN event waiting for delivery; 0 when none waits."),
	}
}

func (m *Metrics) observe(r Result) {
	if m == nil {
		return
	}
	outcome := OutcomeRetry
	switch {
	case r.Attempt == nil:
		outcome = OutcomeDeferred
	case r.Status == Delivered:
		outcome = OutcomeDelivered
	case r.Status == Failed:
		outcome = OutcomeFailed
	case r.DisableURL != "":
		outcome = OutcomeGone
	}
	m.outcomes.With(outcome).Inc()
	if r.Attempt != nil {
		m.latency.Observe(r.Attempt.Latency.Seconds())
	}
}

// Refresh reads the queue's gauges from the database, at scrape time.
func (m *Metrics) Refresh(ctx context.Context, q Queue, now time.Time) error {
	if m == nil {
		return nil
	}
	st, err := q.IPNStats(ctx)
	if err != nil {
		return err
	}
	m.depth.Set(float64(st.Pending))
	m.failed.Set(float64(st.Failed))
	age := 0.0
	if !st.OldestPending.IsZero() {
		age = max(now.Sub(st.OldestPending).Seconds(), 0)
	}
	m.oldest.Set(age)
	return nil
}
