package server

import (
	"testing"
	"time"
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
