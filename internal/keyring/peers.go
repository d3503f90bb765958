package keyring

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/kadipay/kadi/internal/secret"
)

// Nodes sharing a database must share the ring's keys: a token signed by
// one node is checked by whichever node the next request reaches, and a
// value sealed by one is opened by all. A node that missed a rotation, or
// was given another key under the same id, refuses what the others issue.
// So each node publishes the key it signs with, as an id and a check (a
// derived value that says which key it is and reveals nothing of it), and
// reads the others'.

// NodeKey is the key a node signs and seals with now.
type NodeKey struct {
	Node  string // the node's name
	ID    string // the master key's id
	Check string // KeyCheck of that key
}

// KeyCheck identifies master key secret among keys that share its id;
// like every derived key it is an HMAC of it and reveals nothing of it.
func KeyCheck(master []byte) string {
	return hex.EncodeToString(secret.Derive(master, "key-check")[:8])
}

// NodeKey is this node's current key, as published for its peers.
func (k *Keyring) NodeKey(node string) NodeKey {
	cur := k.Ring().Current()
	return NodeKey{Node: node, ID: cur.ID, Check: KeyCheck(cur.Secret)}
}

// Lacking returns the peers whose signing key this ring does not hold
// (by id, or under that id another key), re-reading the file first when
// one is missing: the file may already have the rotation.
func (k *Keyring) Lacking(peers []NodeKey) []NodeKey {
	missing := k.lacking(peers)
	if len(missing) == 0 {
		return nil
	}
	if changed, _ := k.reload("another node signs with a key this node lacked"); changed {
		missing = k.lacking(peers)
	}
	return missing
}

func (k *Keyring) lacking(peers []NodeKey) []NodeKey {
	held := map[[2]string]bool{}
	for _, key := range k.Ring().Keys {
		held[[2]string{key.ID, KeyCheck(key.Secret)}] = true
	}
	var missing []NodeKey
	for _, p := range peers {
		if !held[[2]string{p.ID, p.Check}] {
			missing = append(missing, p)
		}
	}
	return missing
}

// LackingError says which peers' keys a ring lacks, and what to do.
type LackingError struct{ Peers []NodeKey }

func (e *LackingError) Error() string {
	names := make([]string, len(e.Peers))
	for i, p := range e.Peers {
		names[i] = fmt.Sprintf("%q (key %s)", p.Node, p.ID)
	}
	return "this node's master key ring lacks the key that node " + strings.Join(names, ", ") +
		" signs with, or holds another key under that id: tokens issued there are refused here and values sealed there do not open;" +
		" give this node the current ring (docs/operations.md, \"Rotating the master key\")"
}
