package keyring

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/secret"
)

var (
	hexA = strings.Repeat("a1", 32)
	hexB = strings.Repeat("b2", 32)
	hexC = strings.Repeat("c3", 32)
)

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		name    string
		text    string
		ids     []string
		pinned  []string
		wantErr string
	}{
		{"old one-line file", hexA + "\n", []string{secret.LegacyKeyID}, nil, ""},
		{"old one-line file, longer key", hexA + hexB, []string{secret.LegacyKeyID}, nil, ""},
		{"ring, current first", "k2 " + hexC + "\nk1 " + hexB + "\nk0 " + hexA + "\n", []string{"k2", "k1", "k0"}, nil, ""},
		{"comments and blank lines", "# a ring\n\n  k1 " + hexB + "  \n# k9 nothing\nk0 " + hexA, []string{"k1", "k0"}, nil, ""},
		{"commas, for one environment variable", "k1 " + hexB + ",k0 " + hexA + ",pinned card-fingerprint " + hexC, []string{"k1", "k0"}, []string{"card-fingerprint"}, ""},
		{"pinned purposes", "k1 " + hexB + "\npinned card-fingerprint " + hexC + "\npinned sim-acquirer " + hexA, []string{"k1"}, []string{"card-fingerprint", "sim-acquirer"}, ""},
		{"a ring of one, with an id", "main " + hexA, []string{"main"}, nil, ""},
		{"empty", "", nil, nil, "holds no key"},
		{"only comments", "# nothing\n", nil, nil, "holds no key"},
		{"only pinned", "pinned card-fingerprint " + hexC, nil, nil, "holds no key"},
		{"short key", "k1 abcd", nil, nil, "at least 32 bytes"},
		{"old format, short key", "abcd", nil, nil, "at least 32 bytes"},
		{"not hex", "k1 " + strings.Repeat("zz", 32), nil, nil, "at least 32 bytes"},
		{"id twice", "k1 " + hexA + "\nk1 " + hexB, nil, nil, "line 2: key id \"k1\" appears twice"},
		{"id with a colon", "k:1 " + hexA, nil, nil, "key id"},
		{"id with a dot", "k.1 " + hexA, nil, nil, "key id"},
		{"id too long", strings.Repeat("k", MaxIDLength+1) + " " + hexA, nil, nil, "key id"},
		// Swapped fields put the key where a name is expected: the error
		// (printed at start, logged at a reload) must not show it.
		{"key and id swapped", hexA + " k1", nil, nil, "line 1: key id"},
		{"pinned key and purpose swapped", "k1 " + hexA + "\npinned " + hexB + " card-fingerprint", nil, nil, "line 2: the purpose"},
		{"id pinned", "pinned " + hexA, nil, nil, "key id"},
		{"bare key among others", hexA + "\nk1 " + hexB, nil, nil, "line 1: want"},
		{"three fields", "k1 " + hexA + " extra", nil, nil, "want"},
		{"pinned unknown purpose", "k1 " + hexA + "\npinned token " + hexB, nil, nil, "the purpose"},
		{"pinned twice", "k1 " + hexA + "\npinned sim-acquirer " + hexB + "\npinned sim-acquirer " + hexB, nil, nil, "pinned twice"},
		{"pinned key of another length", "k1 " + hexA + "\npinned sim-acquirer " + hexA + hexA, nil, nil, "32 bytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Parse = %+v, %v; want an error saying %q", r, err, tt.wantErr)
				}
				if strings.Contains(err.Error(), hexA) || strings.Contains(err.Error(), hexB) {
					t.Errorf("the error shows a key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var ids, pinned []string
			for _, k := range r.Keys {
				ids = append(ids, k.ID)
			}
			for _, p := range Fixed {
				if r.Pinned[p] != nil {
					pinned = append(pinned, p)
				}
			}
			if strings.Join(ids, " ") != strings.Join(tt.ids, " ") || strings.Join(pinned, " ") != strings.Join(tt.pinned, " ") {
				t.Errorf("ids %v pinned %v, want %v and %v", ids, pinned, tt.ids, tt.pinned)
			}
			again, err := Parse(r.Text())
			if err != nil || again.Text() != r.Text() {
				t.Errorf("Parse(Text()) = %q, %v; want the same ring", again.Text(), err)
			}
			if one, err := Parse(r.OneLine()); err != nil || one.Text() != r.Text() {
				t.Errorf("Parse(OneLine()) = %q, %v; want the same ring", one.Text(), err)
			}
		})
	}
}

// TestRotateKeepsFixedKeys: each rotation adds a key under a new id, keeps
// the others, and pins the fixed purposes' keys as the original key gave
// them, so card fingerprints stay comparable even once that key is gone.
func TestRotateKeepsFixedKeys(t *testing.T) {
	orig, err := Parse(hexA)
	if err != nil {
		t.Fatal(err)
	}
	r1 := orig.Rotate(mustHex(hexB))
	r2 := r1.Rotate(mustHex(hexC))
	retired := r2
	retired.Keys = r2.Keys[:1]
	retired, err = Parse(retired.Text()) // as an operator's edited file reads
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		r       Ring
		ids     string
		current string
	}{
		{"original", orig, "k0", hexA},
		{"rotated once", r1, "k1 k0", hexB},
		{"rotated twice", r2, "k2 k1 k0", hexC},
		{"previous keys retired", retired, "k2", hexC},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var ids []string
			for _, k := range tt.r.Keys {
				ids = append(ids, k.ID)
			}
			if strings.Join(ids, " ") != tt.ids || hex.EncodeToString(tt.r.Current().Secret) != tt.current {
				t.Errorf("keys %v current %x, want %s current %s", ids, tt.r.Current().Secret, tt.ids, tt.current)
			}
			for _, p := range Fixed {
				if want := secret.Derive(mustHex(hexA), p); !bytes.Equal(tt.r.FixedKey(p), want) {
					t.Errorf("%s key changed: %x, want %x (the original key's)", p, tt.r.FixedKey(p), want)
				}
			}
		})
	}
	if id := retired.Rotate(mustHex(hexA)).Current().ID; id != "k3" {
		t.Errorf("next id after k2 is %q, want k3: an id never comes back", id)
	}
}

// TestReload: a node takes a rotated file, and refuses one that does not
// parse or would change the fixed purposes' keys, keeping what it has.
func TestReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	orig, _ := Parse(hexA)
	if err := WriteFile(path, orig); err != nil {
		t.Fatal(err)
	}
	kr, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tokens := kr.Purpose("token")
	rotated := orig.Rotate(mustHex(hexB))
	lostPins := rotated
	lostPins.Pinned = nil
	lostPins.Keys = rotated.Keys[:1]
	for _, tt := range []struct {
		name        string
		write       string
		wantChanged bool
		wantErr     string
		current     string
	}{
		{"unchanged", hexA + "\n", false, "", "k0"},
		{"rotated", rotated.Text(), true, "", "k1"},
		{"the same again", rotated.Text(), false, "", "k1"},
		{"damaged", "k1 abc\n", false, "keeping the previous ring", "k1"},
		{"pins lost with the oldest key", lostPins.Text(), false, "changed the card-fingerprint and sim-acquirer keys", "k1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(tt.write)
			if err == nil {
				err = WriteFile(path, r)
			} else {
				err = os.WriteFile(path, []byte(tt.write), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			changed, err := kr.Reload()
			if changed != tt.wantChanged || (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Reload = %v, %v; want %v and an error saying %q", changed, err, tt.wantChanged, tt.wantErr)
			}
			if id, key := tokens.Current(); id != tt.current || !bytes.Equal(key, secret.Derive(keyOf(kr.Ring(), id), "token")) {
				t.Errorf("current token key %q, want %q", id, tt.current)
			}
		})
	}
	if _, ok := tokens.Key(secret.LegacyKeyID); !ok {
		t.Error("the previous key left the ring after rotation")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("ring file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".secret.key.*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func keyOf(r Ring, id string) []byte {
	for _, k := range r.Keys {
		if k.ID == id {
			return k.Secret
		}
	}
	return nil
}

// TestUnknownIDReloads: a key id the ring lacks makes the ring re-read its
// file before it says no; an id the file lacks too is refused.
func TestUnknownIDReloads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring")
	orig, _ := Parse(hexA)
	if err := WriteFile(path, orig); err != nil {
		t.Fatal(err)
	}
	kr, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p := kr.Purpose("sealed-secrets")
	if _, ok := p.Key("k1"); ok {
		t.Fatal("k1 known before any rotation")
	}
	if err := WriteFile(path, orig.Rotate(mustHex(hexB))); err != nil {
		t.Fatal(err)
	}
	key, ok := p.Key("k1")
	if !ok || !bytes.Equal(key, secret.Derive(mustHex(hexB), "sealed-secrets")) {
		t.Errorf("k1 after the file was rotated: %x, %v", key, ok)
	}
	if _, ok := p.Key("k7"); ok {
		t.Error("an id no ring has was accepted")
	}
	if _, ok := New(orig).Purpose("x").Key("k1"); ok {
		t.Error("a fixed ring found a key it never had")
	}
}

// The ring kadi secret rotate prints is quoted for a shell; loaders that
// keep the quotes (docker --env-file, Kubernetes secrets) still work.
func TestParseQuoted(t *testing.T) {
	plain := "k1 " + strings.Repeat("ab", 32) + ",k0 " + strings.Repeat("cd", 32)
	want, err := Parse(plain)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"'" + plain + "'", `"` + plain + `"`, " '" + plain + "'\n"} {
		got, err := Parse(in)
		if err != nil || got.Text() != want.Text() {
			t.Errorf("Parse(%.12q…): %v", in, err)
		}
	}
	if _, err := Parse("'" + plain); err == nil {
		t.Error("an unmatched quote was read")
	}
}
