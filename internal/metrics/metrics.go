// Package metrics is a small Prometheus text-exposition registry: counters
// with labels, gauges and histograms, written in the format version 0.0.4
// that every Prometheus-compatible scraper reads. It exists so the gateway
// can expose a handful of series without taking a dependency.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// ContentType is what the exposition is served as.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Registry holds metric families in registration order.
type Registry struct {
	mu       sync.Mutex
	families []family
	names    map[string]bool
}

type family interface {
	write(w *bufio.Writer)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{names: map[string]bool{}} }

func (r *Registry) add(name string, f family) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[name] {
		panic("metrics: " + name + " registered twice")
	}
	r.names[name] = true
	r.families = append(r.families, f)
}

// WriteText writes every family in the text exposition format.
func (r *Registry) WriteText(w io.Writer) error {
	r.mu.Lock()
	fams := append([]family(nil), r.families...)
	r.mu.Unlock()
	bw := bufio.NewWriter(w)
	for _, f := range fams {
		f.write(bw)
	}
	return bw.Flush()
}

// Handler serves the exposition. It only reads: gauges that come from
// elsewhere (a database) are refreshed in the background, so a scrape, or a
// flood of them, costs the database nothing.
func (r *Registry) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Cache-Control", "no-store")
		_ = r.WriteText(w)
	})
}

func header(w *bufio.Writer, name, help, kind string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, escapeHelp(help), name, kind)
}

// CounterVec is a counter family split by label values.
type CounterVec struct {
	name, help string
	labels     []string
	mu         sync.Mutex
	series     map[string]*Counter
}

// Counter is one monotonically increasing series.
type Counter struct {
	labelValues []string
	n           atomic.Uint64
}

// Inc adds one.
func (c *Counter) Inc() { c.n.Add(1) }

// Add adds n.
func (c *Counter) Add(n uint64) { c.n.Add(n) }

// Value is the current count.
func (c *Counter) Value() uint64 { return c.n.Load() }

// Counter registers a counter family. Without label names it has a single
// series, reached with With().
func (r *Registry) Counter(name, help string, labelNames ...string) *CounterVec {
	v := &CounterVec{name: name, help: help, labels: labelNames, series: map[string]*Counter{}}
	r.add(name, v)
	return v
}

// With returns the series for labelValues, given in the order of the label
// names, creating it at zero.
func (v *CounterVec) With(labelValues ...string) *Counter {
	if len(labelValues) != len(v.labels) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", v.name, len(v.labels), len(labelValues)))
	}
	key := strings.Join(labelValues, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.series[key]
	if c == nil {
		c = &Counter{labelValues: append([]string(nil), labelValues...)}
		v.series[key] = c
	}
	return c
}

func (v *CounterVec) write(w *bufio.Writer) {
	header(w, v.name, v.help, "counter")
	v.mu.Lock()
	keys := make([]string, 0, len(v.series))
	for k := range v.series {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	series := make([]*Counter, len(keys))
	for i, k := range keys {
		series[i] = v.series[k]
	}
	v.mu.Unlock()
	for _, c := range series {
		fmt.Fprintf(w, "%s%s %d\n", v.name, labelSet(v.labels, c.labelValues), c.Value())
	}
}

// Gauge is a value that goes up and down.
type Gauge struct {
	name, help string
	bits       atomic.Uint64
}

// Gauge registers a gauge.
func (r *Registry) Gauge(name, help string) *Gauge {
	g := &Gauge{name: name, help: help}
	r.add(name, g)
	return g
}

// Set stores v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Value is the stored value.
func (g *Gauge) Value() float64 { return math.Float64frombits(g.bits.Load()) }

func (g *Gauge) write(w *bufio.Writer) {
	header(w, g.name, g.help, "gauge")
	fmt.Fprintf(w, "%s %s\n", g.name, formatFloat(g.Value()))
}

// Histogram counts observations into cumulative buckets.
type Histogram struct {
	name, help string
	bounds     []float64 // upper bounds, ascending, without +Inf
	mu         sync.Mutex
	counts     []uint64 // per bucket, not cumulative; last is +Inf
	sum        float64
	count      uint64
}

// Histogram registers a histogram with the given upper bounds.
func (r *Registry) Histogram(name, help string, bounds []float64) *Histogram {
	b := append([]float64(nil), bounds...)
	sort.Float64s(b)
	h := &Histogram{name: name, help: help, bounds: b, counts: make([]uint64, len(b)+1)}
	r.add(name, h)
	return h
}

// Observe records one value.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.bounds, v) // first bound >= v: buckets are "less or equal"
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

func (h *Histogram) write(w *bufio.Writer) {
	header(w, h.name, h.help, "histogram")
	h.mu.Lock()
	counts := append([]uint64(nil), h.counts...)
	sum, count := h.sum, h.count
	h.mu.Unlock()
	var cum uint64
	for i, b := range h.bounds {
		cum += counts[i]
		fmt.Fprintf(w, "%s_bucket{le=\"%s\"} %d\n", h.name, formatFloat(b), cum)
	}
	fmt.Fprintf(w, "%s_bucket{le=\"+Inf\"} %d\n", h.name, count)
	fmt.Fprintf(w, "%s_sum %s\n%s_count %d\n", h.name, formatFloat(sum), h.name, count)
}

func labelSet(names, values []string) string {
	if len(names) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(n)
		b.WriteString(`="`)
		b.WriteString(escapeLabel(values[i]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
