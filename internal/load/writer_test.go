package load

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseWriterStats(t *testing.T) {
	const counters = `# HELP kadi_store_writes_total Writes run by the SQLite group-commit writer.
# TYPE kadi_store_writes_total counter
kadi_store_writes_total 1234
kadi_store_commits_total 95
kadi_store_commit_seconds_total 0.25
kadi_bills_created_total{mode="test"} 7
kadi_http_request_duration_seconds_bucket{method="GET",route="/healthz",le="0.001"} 3
go_goroutines 12
`
	const histograms = `kadi_store_commit_duration_seconds_bucket{le="0.001"} 90
kadi_store_commit_duration_seconds_bucket{le="0.004"} 94
kadi_store_commit_duration_seconds_bucket{le="+Inf"} 95
kadi_store_commit_duration_seconds_sum 0.25
kadi_store_commit_duration_seconds_count 95
kadi_store_write_wait_seconds_bucket{le="0.001"} 1200
kadi_store_write_wait_seconds_bucket{le="+Inf"} 1234
kadi_store_commit_beside_checkpoint_seconds_bucket{le="0.001"} 10
kadi_store_commit_beside_checkpoint_seconds_bucket{le="0.016"} 24
kadi_store_commit_beside_checkpoint_seconds_bucket{le="+Inf"} 25
`
	inf := math.Inf(1)
	for _, c := range []struct {
		name, text string
		want       writerStats
		ok         bool
	}{
		{"the counters and histograms", counters + histograms, writerStats{1234, 95, 250 * time.Millisecond,
			histogram{0.001: 90, 0.004: 94, inf: 95}, histogram{0.001: 1200, inf: 1234}, histogram{0.001: 10, 0.016: 24, inf: 25}}, true},
		{"a gateway without the histograms", counters, writerStats{1234, 95, 250 * time.Millisecond, histogram{}, histogram{}, histogram{}}, true},
		{"PostgreSQL: none", "go_goroutines 12\nkadi_ipn_queue_depth 0\n", writerStats{}, false},
		{"one counter missing", strings.Replace(counters, "kadi_store_commits_total 95\n", "", 1), writerStats{}, false},
		{"a value that is no number", strings.Replace(counters, " 95", " many", 1), writerStats{}, false},
		{"empty", "", writerStats{}, false},
	} {
		got, ok := parseWriterStats(strings.NewReader(c.text))
		if ok != c.ok || (ok && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("%s: %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}

// TestHistogramP99 reads the bucket of the 99th percentile from the change
// of cumulative counts over a scenario.
func TestHistogramP99(t *testing.T) {
	inf := math.Inf(1)
	before := histogram{0.001: 100, 0.004: 100, 0.016: 100, inf: 100}
	for _, c := range []struct {
		name  string
		after histogram
		want  string
	}{
		{"all fast", histogram{0.001: 300, 0.004: 300, 0.016: 300, inf: 300}, "≤1ms"},
		{"one in a hundred slower: still under the p99", histogram{0.001: 298, 0.004: 300, 0.016: 300, inf: 300}, "≤1ms"},
		{"three in two hundred slower", histogram{0.001: 297, 0.004: 300, 0.016: 300, inf: 300}, "≤4ms"},
		{"three in two hundred slower still", histogram{0.001: 297, 0.004: 297, 0.016: 300, inf: 300}, "≤16ms"},
		{"past the last bound", histogram{0.001: 200, 0.004: 200, 0.016: 200, inf: 300}, "more"},
		{"nothing observed", before, "—"},
	} {
		if got := c.after.add(before, -1).p99(); got != c.want {
			t.Errorf("%s: p99 %s, want %s", c.name, got, c.want)
		}
	}
	if got := (histogram(nil)).add(before, 1).p99(); got != "≤1ms" {
		t.Errorf("nil plus a histogram: p99 %s", got)
	}
}

// TestBesideCheckpoint reads, from the change of the histograms over a
// scenario, the share of commits a checkpoint ran beside and the bucket
// of their 99th percentile.
func TestBesideCheckpoint(t *testing.T) {
	inf := math.Inf(1)
	before := writerStats{commitTime: histogram{0.001: 50, inf: 50}, besideTime: histogram{0.001: 10, 0.016: 10, inf: 10}}
	older := writerStats{commitTime: histogram{0.001: 50, inf: 50}}
	for _, c := range []struct {
		name          string
		before, after writerStats
		want          string
	}{
		{"a quarter, slow", before, writerStats{commitTime: histogram{0.001: 120, inf: 150}, besideTime: histogram{0.001: 11, 0.016: 35, inf: 35}}, "25%,≤16ms"},
		{"none beside", before, writerStats{commitTime: histogram{0.001: 150, inf: 150}, besideTime: histogram{0.001: 10, 0.016: 10, inf: 10}}, "0%"},
		{"no commit", before, before, "—"},
		{"a gateway without the series", older, writerStats{commitTime: histogram{0.001: 150, inf: 150}}, "—"},
	} {
		if got := c.after.sub(c.before).beside(); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
