package bill

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/metrics"
)

// Metrics are the bill series on /metrics. A nil *Metrics records nothing.
type Metrics struct {
	bills *prometheus.CounterVec
}

// NewMetrics registers the bill series in r.
func NewMetrics(r *metrics.Registry) *Metrics {
	m := &Metrics{bills: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kadi_bills_created_total",
		Help: "Bills created (not their idempotent retries), by mode."}, []string{"mode"})}
	r.MustRegister(m.bills)
	return m
}

func (m *Metrics) created(mode merchant.Mode) {
	if m != nil {
		m.bills.WithLabelValues(string(mode)).Inc()
	}
}
