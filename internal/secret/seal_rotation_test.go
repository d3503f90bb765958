package secret

import (
	"errors"
	"strings"
	"testing"
)

// testRing is a KeySource of several keys, the current first.
type testRing struct {
	ids  []string
	keys map[string][]byte
}

func newTestRing(purpose string, masters ...string) *testRing {
	r := &testRing{keys: map[string][]byte{}}
	for _, m := range masters {
		id, master, _ := strings.Cut(m, "=")
		r.ids = append(r.ids, id)
		r.keys[id] = Derive([]byte(master), purpose)
	}
	return r
}

func (r *testRing) Current() (string, []byte) { return r.ids[0], r.keys[r.ids[0]] }
func (r *testRing) Key(id string) ([]byte, bool) {
	k, ok := r.keys[id]
	return k, ok
}

// Made by the code of before key ids (NewSealer(Derive(legacyMaster, …)).Seal
// and .SealURL): values stored, and page URLs handed out, until the upgrade.
const (
	legacyMaster = "legacy-master-key-0123456789abcd"
	legacySealed = "sealed:v1:Jsgg2X9S/nnVAnZJF8/1TrHm7GWVfVTRZmE+529F9r5rAQERtv2C2w" // "whsec_legacy" at MC123/test/notification_secret
	legacyPage   = "B6B4XQCBDHx5Hd2GMhmJ_esrf1hn7T-gihSr1kSzynxwSIY"                  // {"k":1} for "page"
	newMaster    = "new-master-key-0123456789abcdef0"
)

// TestSealerAcrossRotation: values name the key they were sealed under;
// after a rotation new values use the new key, and values of the previous
// key, including those of before key ids, open until that key leaves the
// ring.
func TestSealerAcrossRotation(t *testing.T) {
	const at = "MC123/test/notification_secret"
	before, _ := NewRingSealer(newTestRing("sealed-secrets", LegacyKeyID+"="+legacyMaster))
	after, _ := NewRingSealer(newTestRing("sealed-secrets", "k1="+newMaster, LegacyKeyID+"="+legacyMaster))
	retired, _ := NewRingSealer(newTestRing("sealed-secrets", "k1="+newMaster))
	sealedBefore, err := before.Seal("whsec_before", at)
	if err != nil {
		t.Fatal(err)
	}
	sealedAfter, err := after.Seal("whsec_after", at)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		s      *Sealer
		value  string
		keyID  string
		want   string
		wantOK bool
	}{
		{"pre-key-id value after rotation", after, legacySealed, LegacyKeyID, "whsec_legacy", true},
		{"previous key's value after rotation", after, sealedBefore, LegacyKeyID, "whsec_before", true},
		{"new key's value", after, sealedAfter, "k1", "whsec_after", true},
		{"new key's value on a node without it", before, sealedAfter, "k1", "", false},
		{"pre-key-id value once its key is retired", retired, legacySealed, LegacyKeyID, "", false},
		{"previous key's value once it is retired", retired, sealedBefore, LegacyKeyID, "", false},
		{"new key's value once the old is retired", retired, sealedAfter, "k1", "whsec_after", true},
		{"id naming another key", after, strings.Replace(sealedAfter, ":k1:", ":"+LegacyKeyID+":", 1), LegacyKeyID, "", false},
		{"no id", after, strings.Replace(sealedAfter, ":k1:", ":", 1), "", "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if id, _ := SealedKeyID(tt.value); id != tt.keyID && tt.keyID != "" {
				t.Errorf("SealedKeyID = %q, want %q", id, tt.keyID)
			}
			got, err := tt.s.Open(tt.value, at)
			if tt.wantOK && (err != nil || got != tt.want) {
				t.Errorf("Open = %q, %v; want %q", got, err, tt.want)
			}
			if !tt.wantOK && !errors.Is(err, ErrUnseal) {
				t.Errorf("Open = %q, %v; want ErrUnseal", got, err)
			}
		})
	}
	if id, ok := SealedKeyID("plain"); ok || id != "" {
		t.Errorf("SealedKeyID of an unsealed value = %q, %v", id, ok)
	}
}

func TestSealURLAcrossRotation(t *testing.T) {
	before, _ := NewRingSealer(newTestRing("hosted-pages", LegacyKeyID+"="+legacyMaster))
	after, _ := NewRingSealer(newTestRing("hosted-pages", "k1="+newMaster, LegacyKeyID+"="+legacyMaster))
	retired, _ := NewRingSealer(newTestRing("hosted-pages", "k1="+newMaster))
	pageBefore := before.SealURL([]byte("before"), "page")
	pageAfter := after.SealURL([]byte("after"), "page")
	if !strings.HasPrefix(pageBefore, LegacyKeyID+".") || !strings.HasPrefix(pageAfter, "k1.") {
		t.Fatalf("page ids %q and %q do not name their keys", pageBefore, pageAfter)
	}
	for _, tt := range []struct {
		name   string
		s      *Sealer
		value  string
		want   string
		wantOK bool
	}{
		{"pre-key-id page after rotation", after, legacyPage, `{"k":1}`, true},
		{"previous key's page after rotation", after, pageBefore, "before", true},
		{"new key's page", after, pageAfter, "after", true},
		{"pre-key-id page once its key is retired", retired, legacyPage, "", false},
		{"previous key's page once it is retired", retired, pageBefore, "", false},
		{"unknown id", after, "k9." + strings.TrimPrefix(pageAfter, "k1."), "", false},
		{"empty id", after, strings.TrimPrefix(pageAfter, "k1"), "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.s.OpenURL(tt.value, "page")
			if tt.wantOK && (err != nil || string(got) != tt.want) {
				t.Errorf("OpenURL = %q, %v; want %q", got, err, tt.want)
			}
			if !tt.wantOK && !errors.Is(err, ErrUnseal) {
				t.Errorf("OpenURL = %q, %v; want ErrUnseal", got, err)
			}
		})
	}
}
