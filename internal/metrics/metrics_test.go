package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

// The exposition must be exactly what a Prometheus scraper parses: HELP and
// TYPE lines, label values escaped, histogram buckets cumulative with a +Inf
// bucket equal to _count.
func TestWriteText(t *testing.T) {
	r := NewRegistry()
	c := r.Counter("jobs_total", "Jobs by outcome.\nSecond line.", "outcome")
	c.With("ok").Add(3)
	c.With(`bad "quoted" \ value` + "\n").Inc()
	plain := r.Counter("plain_total", "No labels.")
	plain.With().Inc()
	g := r.Gauge("depth", "Queue depth.")
	g.Set(2.5)
	h := r.Histogram("latency_seconds", "Latency.", []float64{1, 0.1})
	for _, v := range []float64{0.05, 0.1, 0.5, 3} {
		h.Observe(v)
	}

	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP jobs_total Jobs by outcome.\nSecond line.
# TYPE jobs_total counter
jobs_total{outcome="bad \"quoted\" \\ value\n"} 1
jobs_total{outcome="ok"} 3
# HELP plain_total No labels.
# TYPE plain_total counter
plain_total 1
# HELP depth Queue depth.
# TYPE depth gauge
depth 2.5
# HELP latency_seconds Latency.
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.1"} 2
latency_seconds_bucket{le="1"} 3
latency_seconds_bucket{le="+Inf"} 4
latency_seconds_sum 3.65
latency_seconds_count 4
`
	if got := b.String(); got != want {
		t.Errorf("exposition:\n%s\nwant:\n%s", got, want)
	}
}

func TestHandler(t *testing.T) {
	r := NewRegistry()
	g := r.Gauge("queue_depth", "Depth.")
	g.Set(7)
	h := r.Handler()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	if !strings.Contains(string(body), "queue_depth 7\n") {
		t.Errorf("gauge not written:\n%s", body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != ContentType {
		t.Errorf("Content-Type %q, want %q", ct, ContentType)
	}
}

func TestDuplicateNamePanics(t *testing.T) {
	r := NewRegistry()
	r.Gauge("x", "")
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice did not panic")
		}
	}()
	r.Counter("x", "")
}

func TestWrongLabelCountPanics(t *testing.T) {
	c := NewRegistry().Counter("x_total", "", "a", "b")
	defer func() {
		if recover() == nil {
			t.Error("With with the wrong number of values did not panic")
		}
	}()
	c.With("only-one")
}
