package ipn

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kadipay/kadi/internal/metrics"
)

// Metrics are the delivery series on /metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	outcomes *prometheus.CounterVec
	latency  prometheus.Histogram
	depth    prometheus.Gauge
	failed   prometheus.Gauge
	oldest   prometheus.Gauge
	// read is when the three gauges above were last read: during a
	// database outage they keep their last values, and only this says so.
	read prometheus.Gauge
}

// Outcome labels of kadi_ipn_deliveries_total.
const (
	OutcomeDelivered = "delivered" // a 2xx arrived
	OutcomeRetry     = "retry"     // the attempt failed; another is scheduled
	OutcomeFailed    = "failed"    // the attempt failed and the schedule is used up
	OutcomeGone      = "gone"      // 410: the endpoint was disabled
	OutcomeParked    = "parked"    // no request made: no usable endpoint
	OutcomeDeferred  = "deferred"  // no request made: the gateway could not (settings unreadable)
)

// NewMetrics registers the IPN series in r. Their names are what operators'
// dashboards and alerts read: they do not change.
func NewMetrics(r *metrics.Registry) *Metrics {
	m := &Metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kadi_ipn_deliveries_total",
			Help: "IPN delivery attempts by outcome."}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kadi_ipn_delivery_duration_seconds",
			Help: "Time from sending an IPN request to its answer or failure.", Buckets: metrics.DurationBuckets}),
		depth:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "kadi_ipn_queue_depth", Help: "IPN events waiting for delivery."}),
		failed: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kadi_ipn_failed_events", Help: "IPN events that exhausted their retries, waiting for a replay."}),
		oldest: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kadi_ipn_oldest_pending_age_seconds",
			Help: "Age of the oldest IPN event waiting for delivery; 0 when none waits."}),
		read: prometheus.NewGauge(prometheus.GaugeOpts{Name: "kadi_ipn_queue_read_timestamp_seconds",
			Help: "When the IPN queue gauges were last read from the database (Unix seconds): they keep their values while it cannot be read."}),
	}
	r.MustRegister(m.outcomes, m.latency, m.depth, m.failed, m.oldest, m.read)
	return m
}

func (m *Metrics) observe(r Result) {
	if m == nil {
		return
	}
	outcome := OutcomeRetry
	switch {
	case r.Status == Parked:
		outcome = OutcomeParked
	case r.Attempt == nil:
		outcome = OutcomeDeferred
	case r.Status == Delivered:
		outcome = OutcomeDelivered
	case r.Status == Failed:
		outcome = OutcomeFailed
	case r.DisableURL != "":
		outcome = OutcomeGone
	}
	m.outcomes.WithLabelValues(outcome).Inc()
	if r.Attempt != nil {
		m.latency.Observe(r.Attempt.Latency.Seconds())
	}
}

// Parked counts a notification stored parked as it was queued: its
// merchant had no endpoint (NoEndpoint), so no worker took it.
func (m *Metrics) Parked() {
	if m != nil {
		m.outcomes.WithLabelValues(OutcomeParked).Inc()
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
	m.read.Set(float64(now.UnixMilli()) / 1000)
	return nil
}
