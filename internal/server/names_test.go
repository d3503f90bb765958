package server

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/keyring"
	"github.com/kadipay/kadi/internal/store"
)

// What each publish of the node's key found on its name's row, and what
// the node concludes: the first publish may find its own crashed run;
// after it another run's mark is a live twin, held for a while after the
// last time it was found.
func TestNameWatch(t *testing.T) {
	const hold = 30 * time.Second
	start := time.Date(2026, time.November, 26, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		name         string
		after        time.Duration // since start
		last         string        // the run the row bore before the publish
		sole, shared bool
	}{
		{"first publish finds the crashed run", 0, "run-old", false, false},
		{"second finds its own mark", time.Second, "run-1", true, false},
		{"a twin wrote since", 2 * time.Second, "twin", false, true},
		{"its own mark, the twin slower", 3 * time.Second, "run-1", false, true},
		{"the twin again", 10 * time.Second, "twin", false, true},
		{"within hold of the twin's last", 39 * time.Second, "run-1", false, true},
		{"hold over", 40 * time.Second, "run-1", true, false},
	}
	var n nameWatch
	for _, s := range steps {
		sole, shared := n.saw(s.last, "run-1", start.Add(s.after), hold)
		if sole != s.sole || shared != s.shared {
			t.Errorf("%s: sole %t shared %t, want %t %t", s.name, sole, shared, s.sole, s.shared)
		}
	}
	var fresh nameWatch
	if sole, shared := fresh.saw("", "run-1", start, hold); sole || shared {
		t.Errorf("a first publish on an empty row: sole %t shared %t, want neither until a second publish", sole, shared)
	}
}

// A reconciliation pass asks whether the name is this run's alone: only
// when the publishes found no twin and the row still bears this run's
// mark (a twin that started since the last publish has put its own).
func TestSoleNameNow(t *testing.T) {
	st, err := store.Open(t.Context(), filepath.Join(t.TempDir(), "kadi.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	g := &Gateway{Store: st}
	sole := g.soleNameNow("web", "run-1")
	publish := func(run string) {
		t.Helper()
		if _, _, err := st.PublishNodeKey(t.Context(), keyring.NodeKey{Node: "web", ID: "k0", Check: "0000000000000000"}, run, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	publish("run-1")
	if sole(t.Context()) {
		t.Error("sole before any publish found no twin")
	}
	g.soleName.Store(true)
	if !sole(t.Context()) {
		t.Error("not sole with the publishes clean and the row this run's")
	}
	publish("run-2") // a twin, since this run's last publish
	if sole(t.Context()) {
		t.Error("sole with the row bearing another run's mark")
	}
}
