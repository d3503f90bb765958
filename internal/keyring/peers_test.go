package keyring

import (
	"path/filepath"
	"strings"
	"testing"
)

// A ring holds a peer's key only when it has that id with that very key:
// an id it lacks, or another key under the id, is lacking; a file that
// has caught up is read before the answer.
func TestLacking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring")
	orig, _ := Parse(hexA)
	if err := WriteFile(path, orig); err != nil {
		t.Fatal(err)
	}
	kr, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rotated := orig.Rotate(mustHex(hexB))
	other, _ := Parse(hexB) // another key under k0
	self := kr.NodeKey("self")
	if self.ID != "k0" || self.Check != KeyCheck(mustHex(hexA)) || strings.Contains(self.Check, hexA[:8]) {
		t.Fatalf("NodeKey = %+v", self)
	}
	ahead := NodeKey{Node: "ahead", ID: "k1", Check: KeyCheck(mustHex(hexB))}
	for _, tt := range []struct {
		name  string
		peers []NodeKey
		want  []string
	}{
		{"itself", []NodeKey{self}, nil},
		{"a peer with the same key", []NodeKey{self, {Node: "twin", ID: "k0", Check: self.Check}}, nil},
		{"another key under the same id", []NodeKey{{Node: "impostor", ID: "k0", Check: New(other).NodeKey("").Check}}, []string{"impostor"}},
		{"a peer a rotation ahead", []NodeKey{self, ahead}, []string{"ahead"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, p := range kr.Lacking(tt.peers) {
				got = append(got, p.Node)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("Lacking = %v, want %v", got, tt.want)
			}
		})
	}

	// The file catches up: the peer ahead is held, read at once.
	if err := WriteFile(path, rotated); err != nil {
		t.Fatal(err)
	}
	if got := kr.Lacking([]NodeKey{self, ahead}); len(got) != 0 {
		t.Errorf("after the file took the rotation, Lacking = %+v", got)
	}
	msg := (&LackingError{Peers: []NodeKey{ahead}}).Error()
	for _, want := range []string{`"ahead" (key k1)`, "current ring", "Rotating the master key"} {
		if !strings.Contains(msg, want) {
			t.Errorf("LackingError does not say %q: %s", want, msg)
		}
	}
}
