package store

import (
	"path/filepath"
	"testing"
	"time"
)

// TestRebind: PostgreSQL gets numbered placeholders; SQLite gets each
// bound LIMIT as an expression, so that its planner does not read the
// value and the statement is not prepared again at every run.
func TestRebind(t *testing.T) {
	sqlite, postgres := dialect{name: "sqlite"}, dialect{name: "postgres", numbered: true}
	for _, c := range []struct {
		d        dialect
		in, want string
	}{
		{sqlite, `SELECT a FROM t WHERE b = ? LIMIT ?`, `SELECT a FROM t WHERE b = ? LIMIT (? + 0)`},
		{sqlite, `SELECT a FROM (SELECT a FROM t LIMIT ?) ORDER BY a LIMIT ?`, `SELECT a FROM (SELECT a FROM t LIMIT (? + 0)) ORDER BY a LIMIT (? + 0)`},
		{sqlite, `SELECT a FROM t LIMIT 1`, `SELECT a FROM t LIMIT 1`},
		{sqlite, `UPDATE t SET a = ? WHERE b = ?`, `UPDATE t SET a = ? WHERE b = ?`},
		{postgres, `SELECT a FROM t WHERE b = ? LIMIT ?`, `SELECT a FROM t WHERE b = $1 LIMIT $2`},
		{postgres, `SELECT 1`, `SELECT 1`},
	} {
		if got := c.d.rebind(c.in); got != c.want {
			t.Errorf("%s: rebind(%q) = %q, want %q", c.d.name, c.in, got, c.want)
		}
	}
}

// BenchmarkBoundLimit runs the quick IPN claim's inner scan, prepared once,
// as written and as rebind gives it to SQLite: the bare "LIMIT ?" is
// prepared again at every run.
//
//	go test -run '^$' -bench BoundLimit ./internal/store/
func BenchmarkBoundLimit(b *testing.B) {
	s, err := Open(b.Context(), filepath.Join(b.TempDir(), "kadi.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const q = `SELECT id, merchant_code, mode, next_attempt_at, lease_until FROM ipn_events
		WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?`
	for _, c := range []struct{ name, text string }{{"LIMIT ?", q}, {"rebound", s.d.rebind(q)}} {
		b.Run(c.name, func(b *testing.B) {
			st, err := s.db.PrepareContext(b.Context(), c.text)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			for b.Loop() {
				rows, err := st.Query(time.Now().UnixMilli(), 64)
				if err != nil {
					b.Fatal(err)
				}
				rows.Close()
			}
		})
	}
}
