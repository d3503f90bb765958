// Package keyring holds the master key ring: the master keys with their
// ids, the current one first, from which every purpose's key is derived.
// Rotating the master key puts a new key first and keeps the previous
// ones, so what they signed and sealed keeps working (docs/operations.md,
// "Rotating the master key").
package keyring

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kadipay/kadi/internal/secret"
)

// Key is one master key of the ring.
type Key struct {
	ID     string
	Secret []byte
}

// Ring is an ordered list of master keys, the current one first, and the
// pinned keys of the purposes that must never change.
type Ring struct {
	Keys []Key
	// Pinned holds, per fixed purpose, its derived key as it was before
	// the first rotation, so the master key it came from can be retired.
	Pinned map[string][]byte
}

// Fixed are the purposes whose keys never rotate: card fingerprints are
// compared with those of payments made years ago, and the simulated
// acquirer's signed challenge references outlive a rotation. Their keys
// derive from the oldest master key until a rotation pins them.
var Fixed = []string{"card-fingerprint", "sim-acquirer"}

// MaxIDLength bounds a key id: it travels in every token and sealed value.
const MaxIDLength = 16

var (
	errEmpty = errors.New("the key ring holds no key")
	errShort = errors.New("a master key must be at least 32 bytes, as hex (64 characters)")
)

// Parse reads a ring in its text form: one "ID HEX" per line, the current
// key first; "pinned PURPOSE HEX" lines for the fixed purposes; blank
// lines and lines starting with # ignored. Commas separate lines too, so a
// ring fits one environment variable. A lone hex key (the format of
// before rotation) is a ring of one key with secret.LegacyKeyID.
func Parse(text string) (Ring, error) {
	// kadi secret rotate prints KADI_SECRET_KEY='…' for a shell; docker's
	// --env-file, Kubernetes secrets and .env loaders keep the quotes.
	if t := strings.TrimSpace(text); len(t) >= 2 && (t[0] == '\'' || t[0] == '"') && t[len(t)-1] == t[0] {
		text = t[1 : len(t)-1]
	}
	var r Ring
	type line struct {
		n int
		f []string
	}
	var lines []line
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "#") {
			continue
		}
		for _, part := range strings.Split(l, ",") {
			if f := strings.Fields(part); len(f) > 0 {
				lines = append(lines, line{i + 1, f})
			}
		}
	}
	if len(lines) == 1 && len(lines[0].f) == 1 {
		key, err := decodeKey(lines[0].f[0])
		if err != nil {
			return Ring{}, err
		}
		return Ring{Keys: []Key{{ID: secret.LegacyKeyID, Secret: key}}}, nil
	}
	seen := map[string]bool{}
	for _, l := range lines {
		f, n := l.f, l.n
		switch {
		case len(f) == 3 && f[0] == "pinned":
			if !isFixed(f[1]) {
				// Not quoted: fields in the wrong order put the key here.
				return Ring{}, fmt.Errorf("line %d: the purpose of a pinned key is one of %s", n, strings.Join(Fixed, ", "))
			}
			if r.Pinned[f[1]] != nil {
				return Ring{}, fmt.Errorf("line %d: %s pinned twice", n, f[1])
			}
			key, err := hex.DecodeString(f[2])
			if err != nil || len(key) != 32 {
				return Ring{}, fmt.Errorf("line %d: a pinned key is 32 bytes as hex (64 characters)", n)
			}
			if r.Pinned == nil {
				r.Pinned = map[string][]byte{}
			}
			r.Pinned[f[1]] = key
		case len(f) == 2:
			if err := checkID(f[0]); err != nil {
				return Ring{}, fmt.Errorf("line %d: %w", n, err)
			}
			if seen[f[0]] {
				return Ring{}, fmt.Errorf("line %d: key id %q appears twice", n, f[0])
			}
			seen[f[0]] = true
			key, err := decodeKey(f[1])
			if err != nil {
				return Ring{}, fmt.Errorf("line %d: %w", n, err)
			}
			r.Keys = append(r.Keys, Key{ID: f[0], Secret: key})
		default:
			return Ring{}, fmt.Errorf(`line %d: want "ID HEX" or "pinned PURPOSE HEX"`, n)
		}
	}
	if len(r.Keys) == 0 {
		return Ring{}, errEmpty
	}
	return r, nil
}

func decodeKey(s string) ([]byte, error) {
	key, err := hex.DecodeString(s)
	if err != nil || len(key) < 32 {
		return nil, errShort
	}
	return key, nil
}

func checkID(id string) error {
	if len(id) == 0 || len(id) > MaxIDLength || id == "pinned" || strings.IndexFunc(id, notIDChar) >= 0 {
		// Not quoted: fields in the wrong order put the key here.
		return fmt.Errorf("key id: 1 to %d letters, digits, - or _ (and not \"pinned\"), then the key", MaxIDLength)
	}
	return nil
}

func notIDChar(r rune) bool {
	return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

func isFixed(purpose string) bool {
	for _, p := range Fixed {
		if p == purpose {
			return true
		}
	}
	return false
}

// Text is the ring in the form Parse reads, with a header saying what it
// is. It holds every secret: it goes to a 0600 file or to the operator,
// never to a log.
func (r Ring) Text() string {
	var b strings.Builder
	b.WriteString("# Kadi master key ring: one \"ID HEX\" per line, the current key first; keep every line\n" +
		"# until docs/operations.md (\"Rotating the master key\") says a key may go. Secret: keep it 0600.\n")
	for _, k := range r.Keys {
		b.WriteString(k.ID + " " + hex.EncodeToString(k.Secret) + "\n")
	}
	for _, p := range Fixed {
		if k := r.Pinned[p]; k != nil {
			b.WriteString("pinned " + p + " " + hex.EncodeToString(k) + "\n")
		}
	}
	return b.String()
}

// OneLine is Text without its comments, lines joined by commas: the value
// for KADI_SECRET_KEY.
func (r Ring) OneLine() string {
	var parts []string
	for _, l := range strings.Split(r.Text(), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, ",")
}

// Current is the key new tokens and seals use.
func (r Ring) Current() Key { return r.Keys[0] }

// FixedKey is purpose's key that never rotates: pinned, or derived from
// the oldest master key.
func (r Ring) FixedKey(purpose string) []byte {
	if k := r.Pinned[purpose]; k != nil {
		return k
	}
	return secret.Derive(r.Keys[len(r.Keys)-1].Secret, purpose)
}

// Rotate returns the ring with master first as its current key, under a
// new id, every previous key kept, and the fixed purposes pinned.
func (r Ring) Rotate(master []byte, used ...string) Ring {
	next := Ring{Keys: append([]Key{{ID: r.nextID(used), Secret: master}}, r.Keys...), Pinned: map[string][]byte{}}
	for _, p := range Fixed {
		next.Pinned[p] = r.FixedKey(p)
	}
	return next
}

// nextID is "k" and one more than the highest number of a "kN" id, of the
// ring's and of used (the ids a database has seen: a ring restored from a
// copy older than a rotation lacks the newer ones): ids never come back,
// so a value naming a retired key never meets another.
func (r Ring) nextID(used []string) string {
	highest := 0
	for _, k := range r.Keys {
		used = append(used, k.ID)
	}
	for _, id := range used {
		if n, err := strconv.Atoi(strings.TrimPrefix(id, "k")); err == nil && strings.HasPrefix(id, "k") && n > highest {
			highest = n
		}
	}
	return "k" + strconv.Itoa(highest+1)
}
