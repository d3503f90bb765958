package keyring

import (
	"strings"
	"testing"
)

// FuzzParse: a key file is written by hand as often as by `kadi secret
// rotate`. Parsing never panics, a ring it accepts has a current key of
// at least 32 bytes under a valid id, and what Text writes reads back as
// the same ring.
func FuzzParse(f *testing.F) {
	f.Add(hexA)
	f.Add("k1 " + hexB + "\nk0 " + hexA + "\npinned card-fingerprint " + hexC + "\n")
	f.Add("k1 " + hexB + ",k0 " + hexA)
	f.Add("# comment, with a comma\nk1 " + hexB)
	f.Add("pinned sim-acquirer " + hexA)
	f.Add("k1 " + hexA + "\nk1 " + hexA)
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		r, err := Parse(text)
		if err != nil {
			return
		}
		if len(r.Keys) == 0 || len(r.Current().Secret) < 32 || checkID(r.Current().ID) != nil {
			t.Fatalf("accepted a ring without a usable current key: %q", text)
		}
		again, err := Parse(r.Text())
		if err != nil || again.Text() != r.Text() || !strings.HasPrefix(r.Text(), "#") {
			t.Fatalf("Text of %q does not read back: %q, %v", text, r.Text(), err)
		}
	})
}
