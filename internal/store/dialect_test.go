package store

import "testing"

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
