package store

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/kadipay/kadi/internal/metrics"
)

// RegisterMetrics adds the connection pool's series to r (go_sql_*,
// db_name="kadi": connections open, in use and idle, and how often and how
// long requests waited for one, which is how an operator sees a pool too
// small for the load or a database slow to answer), and the SQLite
// group-commit writer's: writes over commits is how many writes share an
// fsync, and the commit seconds' rate is how busy the one writer is (1 is
// saturated). PostgreSQL has no writer of ours. The first two histograms
// say where a slow write's time went: waiting for the writer, or in a
// slow commit; the third, whether the slow commits are those a WAL
// checkpoint ran beside.
func (s *DB) RegisterMetrics(r *metrics.Registry) {
	r.MustRegister(collectors.NewDBStatsCollector(s.db, "kadi"))
	w := s.writes
	if w == nil {
		return
	}
	counter := func(name, help string, value func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, value)
	}
	r.MustRegister(
		counter("kadi_store_writes_total", "Writes run by the SQLite group-commit writer.",
			func() float64 { return float64(w.writes.Load()) }),
		counter("kadi_store_commits_total", "Transactions the SQLite group-commit writer committed or rolled back, each carrying one or more writes.",
			func() float64 { return float64(w.commits.Load()) }),
		counter("kadi_store_commit_seconds_total", "Time the SQLite group-commit writer spent running and committing its transactions.",
			func() float64 { return float64(w.busy.Load()) / 1e9 }),
		w.commitTime, w.waitTime, w.besideCheckpoint,
		counter("kadi_store_checkpoints_total", "WAL checkpoints run beside the SQLite writer.",
			func() float64 { return float64(w.checkpoints.Load()) }),
		counter("kadi_store_checkpoint_failures_total", "WAL checkpoints beside the SQLite writer that failed; SQLite's own checkpoint, inside a commit, then copies the WAL.",
			func() float64 { return float64(w.checkpointFailures.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kadi_store_wal_frames_behind",
			Help: "WAL frames the last checkpoint left uncopied into the SQLite database file: growing, checkpoints are not keeping up."},
			func() float64 { return float64(w.behindFrames.Load()) }),
	)
}
