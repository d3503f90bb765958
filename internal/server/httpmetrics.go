package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kadipay/kadi/internal/metrics"
)

// httpMetrics are the per-route series. The route is the ServeMux pattern
// that served the request, never its path: paths carry bill references and
// page ids, and a label per value would grow without bound.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(r *metrics.Registry) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kadi_http_requests_total",
			Help: "HTTP requests by route (the pattern that served them), method and status."}, []string{"route", "method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kadi_http_request_duration_seconds",
			Help: "Time to answer an HTTP request, by route and method.", Buckets: metrics.DurationBuckets}, []string{"route", "method"}),
	}
	r.MustRegister(m.requests, m.duration)
	return m
}

// unmatched is the route of requests no endpoint took (404, 405).
const unmatched = "unmatched"

func (m *httpMetrics) observe(r *http.Request, status int, took time.Duration) {
	if m == nil {
		return
	}
	route := unmatched
	if _, path, _ := strings.Cut(r.Pattern, " "); path != "" && path != "/" {
		route = path
	} else if r.Pattern != "" && !strings.Contains(r.Pattern, " ") && r.Pattern != "/" {
		route = r.Pattern
	}
	method := r.Method
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
	default:
		method = "other" // a method is whatever the client sends
	}
	m.requests.WithLabelValues(route, method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(route, method).Observe(took.Seconds())
}
