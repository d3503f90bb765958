package secret

import "testing"

// FuzzOpenURL: a hosted page id comes from the address bar. Opening never
// panics, whatever key id it names, and nothing opens but what SealURL
// made (the seeds' contents: each fuzz worker seals its own).
func FuzzOpenURL(f *testing.F) {
	s, err := NewRingSealer(newTestRing("hosted-pages", "k1="+newMaster, LegacyKeyID+"="+legacyMaster))
	if err != nil {
		f.Fatal(err)
	}
	made := s.SealURL([]byte("page"), "page")
	f.Add(made)
	f.Add(legacyPage)
	f.Add("k9." + made[3:])
	f.Add(".")
	f.Add("k1.")
	f.Add("")
	f.Fuzz(func(t *testing.T, v string) {
		plain, err := s.OpenURL(v, "page")
		if err == nil && string(plain) != "page" && string(plain) != `{"k":1}` {
			t.Fatalf("OpenURL(%q) = %q: opened something SealURL did not make", v, plain)
		}
	})
}
