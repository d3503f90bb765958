package load

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// writerStats are a SQLite gateway's group-commit counters, read from its
// /metrics (open to loopback peers by default). Their change over a
// scenario says how many writes shared each commit and how busy the one
// writer was: near 100 % it is the gateway's ceiling.
type writerStats struct {
	writes, commits int64
	busy            time.Duration
}

func (a writerStats) sub(b writerStats) writerStats {
	return writerStats{a.writes - b.writes, a.commits - b.commits, a.busy - b.busy}
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
		sum.writes, sum.commits, sum.busy = sum.writes+st.writes, sum.commits+st.commits, sum.busy+st.busy
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
// exposition.
func parseWriterStats(r io.Reader) (writerStats, bool) {
	var st writerStats
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
