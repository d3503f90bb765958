package load

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writerStats are a SQLite gateway's group-commit counters, read from its
// /metrics (open to loopback peers by default). Their change over a
// scenario says how many writes shared each commit and how busy the one
// writer was (near 100 % it is the gateway's ceiling), and, from the
// histograms, how long the slowest commits took, the slowest writes
// waited for theirs to begin, and how many commits had a WAL checkpoint
// running beside them and how long the slowest of those took.
type writerStats struct {
	writes, commits                  int64
	busy                             time.Duration
	commitTime, waitTime, besideTime histogram
}

func (a writerStats) sub(b writerStats) writerStats { return a.add(b, -1) }

// add is a plus sign times b.
func (a writerStats) add(b writerStats, sign int64) writerStats {
	return writerStats{a.writes + sign*b.writes, a.commits + sign*b.commits, a.busy + time.Duration(sign)*b.busy,
		a.commitTime.add(b.commitTime, float64(sign)), a.waitTime.add(b.waitTime, float64(sign)), a.besideTime.add(b.besideTime, float64(sign))}
}

// beside says "27%,≤16ms": the share of commits a checkpoint ran beside,
// and the bucket of their 99th percentile.
func (a writerStats) beside() string {
	all, ok := a.commitTime[math.Inf(1)]
	if !ok || all <= 0 {
		return "—"
	}
	n, ok := a.besideTime[math.Inf(1)]
	switch {
	case !ok:
		return "—" // a gateway older than the series
	case n <= 0:
		return "0%"
	}
	return fmt.Sprintf("%.0f%%,%s", 100*n/all, a.besideTime.p99())
}

// histogram is a Prometheus histogram's cumulative counts by upper bound,
// +Inf (every observation) included; empty for a gateway that has none.
type histogram map[float64]float64

// add is h plus sign times g, bound by bound.
func (h histogram) add(g histogram, sign float64) histogram {
	out := maps.Clone(h)
	if out == nil {
		out = histogram{}
	}
	for le, n := range g {
		out[le] += sign * n
	}
	return out
}

// quantile is the upper bound of the bucket holding the q-th quantile
// (0–1), +Inf past the last finite bound; ok is false with no
// observations.
func (h histogram) quantile(q float64) (le float64, ok bool) {
	total := h[math.Inf(1)]
	if total <= 0 {
		return 0, false
	}
	for _, le := range slices.Sorted(maps.Keys(h)) {
		if h[le] >= q*total {
			return le, true
		}
	}
	return math.Inf(1), true
}

// p99 says "≤ 4ms": the bucket a histogram's 99th percentile falls in.
func (h histogram) p99() string {
	le, ok := h.quantile(0.99)
	switch {
	case !ok:
		return "—"
	case math.IsInf(le, 1):
		return "more"
	}
	return "≤" + time.Duration(le*float64(time.Second)).String()
}

// readWriterStats sums the counters of every node; ok is false when a node
// has none (PostgreSQL) or its metrics could not be read.
func readWriterStats(ctx context.Context, c *http.Client, urls []string) (writerStats, bool) {
	var sum writerStats
	for _, u := range urls {
		st, ok, err := scrapeWriterStats(ctx, c, u)
		if err != nil || !ok {
			return writerStats{}, false
		}
		sum = sum.add(st, 1)
	}
	return sum, true
}

// scrapeWriterStats reads one node's counters. An error says the metrics
// could not be read at all; ok false with no error, that they hold no
// writer (PostgreSQL).
func scrapeWriterStats(ctx context.Context, c *http.Client, u string) (writerStats, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return writerStats{}, false, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return writerStats{}, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return writerStats{}, false, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	st, ok := parseWriterStats(resp.Body)
	return st, ok, nil
}

// parseWriterStats reads the three kadi_store_* counters from a text
// exposition, and the histograms where the gateway has them.
func parseWriterStats(r io.Reader) (writerStats, bool) {
	st := writerStats{commitTime: histogram{}, waitTime: histogram{}, besideTime: histogram{}}
	seen := 0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		if h, le, ok := st.bucket(name); ok {
			h[le] = v
			continue
		}
		switch name {
		case "kadi_store_writes_total":
			st.writes = int64(v)
		case "kadi_store_commits_total":
			st.commits = int64(v)
		case "kadi_store_commit_seconds_total":
			st.busy = time.Duration(v * float64(time.Second))
		default:
			continue
		}
		seen++
	}
	return st, seen == 3 && sc.Err() == nil
}

// bucket finds, for a series name such as
// kadi_store_write_wait_seconds_bucket{le="0.004"}, the histogram it
// belongs to and its upper bound.
func (st writerStats) bucket(series string) (histogram, float64, bool) {
	name, rest, ok := strings.Cut(series, `_bucket{le="`)
	if !ok {
		return nil, 0, false
	}
	le, err := strconv.ParseFloat(strings.TrimSuffix(rest, `"}`), 64)
	if err != nil {
		return nil, 0, false
	}
	switch name {
	case "kadi_store_commit_duration_seconds":
		return st.commitTime, le, true
	case "kadi_store_write_wait_seconds":
		return st.waitTime, le, true
	case "kadi_store_commit_beside_checkpoint_seconds":
		return st.besideTime, le, true
	}
	return nil, 0, false
}
