package payment

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/metrics"
)

// Metrics are the payment series on /metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	payments *prometheus.CounterVec
	acquirer *prometheus.HistogramVec
}

// NewMetrics registers the payment series in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	m := &Metrics{
		payments: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kadi_payments_total",
			Help: "Charge attempts recorded, by mode, outcome (succeeded, failed, unknown, challenge) and card brand."},
			[]string{"mode", "outcome", "brand"}),
		acquirer: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kadi_acquirer_duration_seconds",
			Help:    "Time the acquirer took to answer, by mode, call (charge, challenge, lookup) and answer (its outcome, or no_answer).",
			Buckets: metrics.DurationBuckets}, []string{"mode", "call", "answer"}),
	}
	r.MustRegister(m.payments, m.acquirer)
	return m
}

// recorded counts a payment whose outcome was stored.
func (m *Metrics) recorded(p Payment) {
	if m == nil {
		return
	}
	brand := string(p.Card.Brand)
	if brand == "" {
		brand = "unknown"
	}
	m.payments.WithLabelValues(string(p.Mode), string(p.Status), brand).Inc()
}

// answered times one call to the acquirer.
func (m *Metrics) answered(mode merchant.Mode, call string, res Result, err error, took time.Duration) {
	if m == nil {
		return
	}
	answer := string(res.Outcome)
	if err != nil || answer == "" {
		answer = "no_answer"
	}
	m.acquirer.WithLabelValues(string(mode), call, answer).Observe(took.Seconds())
}
