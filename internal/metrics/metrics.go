// Package metrics is a gateway's Prometheus registry: the standard Go and
// process series every dashboard already reads, beside the series Kadi's
// packages register in it (ipn, payment, bill, the HTTP middleware). Each
// gateway has its own registry, never the global one: tests build many
// gateways in one process.
package metrics

import (
	"bytes"
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Registry holds a gateway's series.
type Registry struct {
	*prometheus.Registry
}

// New returns a registry with the Go runtime and process collectors.
func New() *Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &Registry{r}
}

// Handler serves the exposition, in whatever format the scraper asks for.
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.Registry, promhttp.HandlerOpts{})
}

// WriteText writes every series in the text format, as a scrape shows
// them (tests and the CLI read it).
func (r *Registry) WriteText(w io.Writer) error {
	families, err := r.Gather()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// DurationBuckets are latency buckets from 5 ms to 30 s: API calls, the
// acquirer, IPN receivers.
var DurationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30}
