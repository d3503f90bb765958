package store_test

import (
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/keyring"
	"github.com/kadipay/kadi/internal/store"
)

// bothDatabases opens a fresh store of each kind (PostgreSQL skips
// without KADI_TEST_DATABASE_URL).
var bothDatabases = map[string]func(t *testing.T) *store.DB{
	"SQLite":     func(t *testing.T) *store.DB { return openSQLite(t, filepath.Join(t.TempDir(), "kadi.db")) },
	"PostgreSQL": func(t *testing.T) *store.DB { return openStore(t, freshSchema(t, postgresURL(t))) },
}

// Each node's published key replaces its last; a node silent for longer
// than the live window is not among the answer, and ForgetNodeKeys drops
// the rows of the long silent.
func TestPublishNodeKey(t *testing.T) {
	for name, open := range bothDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			ctx := t.Context()
			a := keyring.NodeKey{Node: "a", ID: "k0", Check: "0000000000000000"}
			b := keyring.NodeKey{Node: "b", ID: "k0", Check: "0000000000000000"}
			if _, _, err := db.PublishNodeKey(ctx, a, "run-a", time.Minute); err != nil {
				t.Fatal(err)
			}
			got, _, err := db.PublishNodeKey(ctx, b, "run-b", time.Minute)
			if err != nil || len(got) != 2 || got[0] != a || got[1] != b {
				t.Fatalf("after a and b: %+v, %v", got, err)
			}
			a.ID, a.Check = "k1", "1111111111111111"
			if got, _, err = db.PublishNodeKey(ctx, a, "run-a", time.Minute); err != nil || len(got) != 2 || got[0] != a {
				t.Fatalf("after a's rotation: %+v, %v", got, err)
			}
			time.Sleep(20 * time.Millisecond)
			if got, _, err = db.PublishNodeKey(ctx, b, "run-b", 10*time.Millisecond); err != nil || len(got) != 1 || got[0] != b {
				t.Errorf("with a silent for longer than the window: %+v, %v", got, err)
			}
			// A silent node's row, once forgotten, is gone whatever the
			// window asked.
			time.Sleep(20 * time.Millisecond)
			if err := db.ForgetNodeKeys(ctx, 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if got, _, err = db.PublishNodeKey(ctx, a, "run-a", time.Hour); err != nil || len(got) != 1 || got[0] != a {
				t.Errorf("after forgetting the silent: %+v, %v", got, err)
			}
		})
	}
}

// A node that stops says so: the others stop counting its key at once,
// its row (and its run) kept; a retirement by a run the row no longer
// bears changes nothing.
func TestRetireNodeKey(t *testing.T) {
	for name, open := range bothDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			ctx := t.Context()
			a := keyring.NodeKey{Node: "a", ID: "k0", Check: "0000000000000000"}
			b := keyring.NodeKey{Node: "b", ID: "k0", Check: "0000000000000000"}
			for _, k := range []keyring.NodeKey{a, b} {
				if _, _, err := db.PublishNodeKey(ctx, k, "run-"+k.Node, time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.RetireNodeKey(ctx, "a", "run-other"); err != nil {
				t.Fatal(err)
			}
			if got, _, err := db.PublishNodeKey(ctx, b, "run-b", time.Minute); err != nil || len(got) != 2 {
				t.Fatalf("after another run's retirement: %+v, %v; want both nodes", got, err)
			}
			if err := db.RetireNodeKey(ctx, "a", "run-a"); err != nil {
				t.Fatal(err)
			}
			if got, _, err := db.PublishNodeKey(ctx, b, "run-b", time.Minute); err != nil || len(got) != 1 || got[0] != b {
				t.Errorf("after a retired: %+v, %v; want b alone", got, err)
			}
			if run, err := db.NodeRun(ctx, "a"); err != nil || run != "run-a" {
				t.Errorf("a's last run after retiring: %q, %v", run, err)
			}
		})
	}
}

// The run that published last under a node's name: the node's own after
// its first publish, another's when a node of the same name runs too.
func TestPublishNodeKeyTellsTheLastRun(t *testing.T) {
	for name, open := range bothDatabases {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			k := keyring.NodeKey{Node: "web", ID: "k0", Check: "0000000000000000"}
			for i, step := range []struct{ run, wantLast string }{
				{"run-1", ""}, {"run-1", "run-1"}, // one run, then its next beat
				{"run-2", "run-1"}, // a restart, or a twin
				{"run-1", "run-2"}, // the twin: run-1 sees run-2's mark
			} {
				if _, last, err := db.PublishNodeKey(t.Context(), k, step.run, time.Minute); err != nil || last != step.wantLast {
					t.Errorf("publish %d by %s: last run %q, %v; want %q", i+1, step.run, last, err, step.wantLast)
				}
			}
		})
	}
}

// Two nodes of one name publishing in step: each publish reads the last
// run and writes its own in one transaction, the row locked, so the
// second to publish sees the first's mark. Read apart from the write,
// both read the mark from before and neither saw the other.
func TestPublishNodeKeyInStep(t *testing.T) {
	url := freshSchema(t, postgresURL(t))
	db := openStore(t, url)
	k := keyring.NodeKey{Node: "web", ID: "k0", Check: "0000000000000000"}
	if _, _, err := db.PublishNodeKey(t.Context(), k, "run-0", time.Minute); err != nil {
		t.Fatal(err)
	}
	// A third connection holds the row, so that both publishes are under
	// way before either can write.
	raw, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	hold, err := raw.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.ExecContext(t.Context(), `SELECT run FROM node_keys WHERE node = 'web' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, run := range []string{"run-a", "run-b"} {
		wg.Go(func() {
			_, l, err := db.PublishNodeKey(t.Context(), k, run, time.Minute)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			last[run] = l
			mu.Unlock()
		})
	}
	time.Sleep(200 * time.Millisecond)
	if err := hold.Commit(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !(last["run-a"] == "run-0" && last["run-b"] == "run-a" || last["run-b"] == "run-0" && last["run-a"] == "run-b") {
		t.Errorf("the last runs the two publishes read: %v; want one to have read the other's", last)
	}
}
