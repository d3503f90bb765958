package store

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParseOnline(t *testing.T) {
	for _, tt := range []struct {
		stmt string
		want onlineStep
		ok   bool
	}{
		{"CREATE INDEX ipn_events_failed ON ipn_events (created_at) WHERE status = 'failed'", onlineStep{"ipn_events_failed",
			"CREATE INDEX CONCURRENTLY ipn_events_failed ON ipn_events (created_at) WHERE status = 'failed'"}, true},
		{"create unique index bills_x\n    on bills (a, b)", onlineStep{"bills_x", "CREATE UNIQUE INDEX CONCURRENTLY bills_x on bills (a, b)"}, true},
		{"DROP INDEX ipn_events_due", onlineStep{index: "ipn_events_due"}, true},
		// A drop that may find nothing would hide a misspelt name.
		{"DROP INDEX IF EXISTS ipn_events_due", onlineStep{}, false},
		{"ALTER TABLE bills ADD COLUMN x TEXT NOT NULL DEFAULT ''", onlineStep{}, false},
		{"CREATE TABLE t (a INT)", onlineStep{}, false},
		{"CREATE INDEX IF NOT EXISTS x ON t (a)", onlineStep{}, false}, // "IF" is no index name
		{"CREATE INDEX ON t (a)", onlineStep{}, false},                 // unnamed: nothing to find after a cut-short build
		{"CREATE INDEX s.x ON t (a)", onlineStep{}, false},
		{"DROP INDEX a, b", onlineStep{}, false},
	} {
		got, err := parseOnline(tt.stmt)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseOnline(%q) = %q, %v; want %q (ok %t)", tt.stmt, got, err, tt.want, tt.ok)
		}
	}
}

// Every migration marked online can be run online: a statement of another
// kind in one would fail every PostgreSQL node's start. And every one that
// could is marked: unmarked, its builds hold the table's writes.
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
		marked := strings.HasPrefix(string(body), onlineMarker+"\n")
		if !marked && strings.Contains(string(body), onlineMarker) {
			t.Errorf("%s: %q must be its first line", name, onlineMarker)
		}
		var refused []error
		for _, stmt := range splitStatements(string(body)) {
			if _, err := parseOnline(stmt); err != nil {
				refused = append(refused, err)
			}
		}
		switch {
		case marked && len(refused) > 0:
			t.Errorf("%s is marked online: %v", name, refused)
		case !marked && len(refused) == 0:
			t.Errorf("%s only builds and drops indexes: mark it online (%q as its first line)", name, onlineMarker)
		}
		if marked {
			online++
		}
	}
	if online == 0 {
		t.Error("no online migration found: the marker's spelling changed?")
	}
}

// An online drop finds nothing to drop silently (a rerun after a migration
// cut short must pass), so a misspelt name would go unseen on PostgreSQL:
// every index a migration drops is one an earlier migration built.
func TestDroppedIndexesWereBuilt(t *testing.T) {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	built := map[string]bool{}
	createAny := regexp.MustCompile(`(?is)^CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)\s+ON\s`)
	dropped := 0
	for _, name := range names {
		body, err := migrations.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range splitStatements(string(body)) {
			if m := createAny.FindStringSubmatch(stmt); m != nil {
				built[strings.ToLower(m[1])] = true
			}
			if m := dropIndex.FindStringSubmatch(stmt); m != nil {
				dropped++
				if !built[strings.ToLower(m[1])] {
					t.Errorf("%s drops index %s, which no earlier migration builds", name, m[1])
				}
			}
		}
	}
	if dropped == 0 {
		t.Error("no dropped index found: the test reads nothing")
	}
}
