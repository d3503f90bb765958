package store

import (
	"io/fs"
	"slices"
	"strings"
	"testing"
)

func TestConcurrently(t *testing.T) {
	for _, tt := range []struct {
		stmt string
		want []string // nil: refused
	}{
		{"CREATE INDEX ipn_events_failed ON ipn_events (created_at) WHERE status = 'failed'", []string{
			"DROP INDEX CONCURRENTLY IF EXISTS ipn_events_failed",
			"CREATE INDEX CONCURRENTLY ipn_events_failed ON ipn_events (created_at) WHERE status = 'failed'"}},
		{"create unique index bills_x\n    on bills (a, b)", []string{
			"DROP INDEX CONCURRENTLY IF EXISTS bills_x",
			"CREATE UNIQUE INDEX CONCURRENTLY bills_x on bills (a, b)"}},
		{"DROP INDEX ipn_events_due", []string{"DROP INDEX CONCURRENTLY IF EXISTS ipn_events_due"}},
		{"DROP INDEX IF EXISTS ipn_events_due", []string{"DROP INDEX CONCURRENTLY IF EXISTS ipn_events_due"}},
		{"ALTER TABLE bills ADD COLUMN x TEXT NOT NULL DEFAULT ''", nil},
		{"CREATE TABLE t (a INT)", nil},
		{"CREATE INDEX IF NOT EXISTS x ON t (a)", nil}, // "IF" is no index name
		{"DROP INDEX a, b", nil},
	} {
		got, err := concurrently(tt.stmt)
		if (err != nil) != (tt.want == nil) || !slices.Equal(got, tt.want) {
			t.Errorf("concurrently(%q) = %q, %v; want %q", tt.stmt, got, err, tt.want)
		}
	}
}

// Every migration marked online can be run online: a statement of another
// kind in one would fail every PostgreSQL node's start.
func TestOnlineMigrationsOnlyBuildIndexes(t *testing.T) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	online := 0
	for _, name := range names {
		body, err := migrations.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(body), onlineMarker+"\n") {
			if strings.Contains(string(body), onlineMarker) {
				t.Errorf("%s: %q must be its first line", name, onlineMarker)
			}
			continue
		}
		online++
		for _, stmt := range splitStatements(string(body)) {
			if _, err := concurrently(stmt); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
	}
	if online == 0 {
		t.Error("no online migration found: the marker's spelling changed?")
	}
}
