package load

import (
	"strings"
	"testing"
	"time"
)

func TestParseWriterStats(t *testing.T) {
	const scrape = `# HELP kadi_store_writes_total Writes run by the SQLite group-commit writer.
# TYPE kadi_store_writes_total counter
kadi_store_writes_total 1234
kadi_store_commits_total 95
kadi_store_commit_seconds_total 0.25
kadi_bills_created_total{mode="test"} 7
go_goroutines 12
`
	for _, c := range []struct {
		name, text string
		want       writerStats
		ok         bool
	}{
		{"all three", scrape, writerStats{1234, 95, 250 * time.Millisecond}, true},
		{"PostgreSQL: none", "go_goroutines 12\nkadi_ipn_queue_depth 0\n", writerStats{}, false},
		{"one missing", strings.Replace(scrape, "kadi_store_commits_total 95\n", "", 1), writerStats{}, false},
		{"a value that is no number", strings.Replace(scrape, " 95", " many", 1), writerStats{}, false},
		{"empty", "", writerStats{}, false},
	} {
		got, ok := parseWriterStats(strings.NewReader(c.text))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("%s: %+v, %v; want %+v, %v", c.name, got, ok, c.want, c.ok)
		}
	}
}
