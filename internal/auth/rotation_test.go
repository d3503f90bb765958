package auth

import (
	"encoding/base64"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/keyring"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// testKeys is a KeySource of one key under any id.
type testKeys struct {
	id  string
	key []byte
}

func (k testKeys) Current() (string, []byte) { return k.id, k.key }
func (k testKeys) Key(id string) ([]byte, bool) {
	return k.key, id == k.id
}

// legacyMaster and legacyToken were made by the code of before key ids
// (auth.NewSigner(secret.Derive(legacyMaster, "token")).Issue): a token
// every node issued until the upgrade. It expires in 2100.
var (
	legacyMaster = []byte("legacy-master-key-0123456789abcd")
	legacyToken  = "AnQAAAABoe5WXgAAAAO7LMPYAAVrZXlfMQVNQzEyM2umUZKAPOy5C8th1cEuLO7krZoqGYc3E8oMbdhNcpok"
	legacyClaims = Claims{MerchantCode: "MC123", Mode: merchant.Test, KeyID: "key_1", Scope: ScopeAPI,
		IssuedAt: time.UnixMilli(1795000000000), ExpiresAt: time.UnixMilli(4102444800000)}
)

// masterKeyID reads which master key signed tok.
func masterKeyID(t *testing.T, tok string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) < 2 {
		t.Fatalf("token %q: %v", tok, err)
	}
	if raw[0] != tokenV3 {
		return "(none: version " + string('0'+raw[0]) + ")"
	}
	return string(raw[2 : 2+raw[1]])
}

// TestRotationKeepsTokensUntilExpiry: after `kadi secret rotate`, new
// tokens are signed by the new key, and tokens of the previous key (and of
// the code of before key ids) verify until they expire, and not after, nor
// once that key has left the ring.
func TestRotationKeepsTokensUntilExpiry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	before := keyring.Ring{Keys: []keyring.Key{{ID: secret.LegacyKeyID, Secret: legacyMaster}}}
	if err := keyring.WriteFile(path, before); err != nil {
		t.Fatal(err)
	}
	kr, err := keyring.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s := NewRingSigner(kr.Purpose("token"))
	c := testClaims()
	old := s.Issue(c)
	if id := masterKeyID(t, old); id != secret.LegacyKeyID {
		t.Fatalf("token before rotation signed by %q, want %q", id, secret.LegacyKeyID)
	}

	rotated := before.Rotate(secret.RandomBytes(32))
	if err := keyring.WriteFile(path, rotated); err != nil {
		t.Fatal(err)
	}
	if _, err := kr.Reload(); err != nil {
		t.Fatal(err)
	}
	fresh := s.Issue(c)
	if id := masterKeyID(t, fresh); id != rotated.Current().ID || id == secret.LegacyKeyID {
		t.Errorf("token after rotation signed by %q, want the new key %q", id, rotated.Current().ID)
	}

	retired := rotated
	retired.Keys = rotated.Keys[:1]
	retiredSigner := NewRingSigner(keyring.New(retired).Purpose("token"))
	for _, tt := range []struct {
		name   string
		s      Signer
		token  string
		now    time.Time
		want   Claims
		wantOK bool
	}{
		{"previous key's token before expiry", s, old, tokenNow, c, true},
		{"previous key's token at expiry", s, old, c.ExpiresAt, c, false},
		{"new key's token", s, fresh, tokenNow, c, true},
		{"token of the code before key ids", s, legacyToken, tokenNow, legacyClaims, true},
		{"token of the code before key ids, expired", s, legacyToken, legacyClaims.ExpiresAt, legacyClaims, false},
		{"previous key's token once the key is retired", retiredSigner, old, tokenNow, c, false},
		{"pre-key-id token once the key is retired", retiredSigner, legacyToken, tokenNow, legacyClaims, false},
		{"new key's token after retiring the old", retiredSigner, fresh, tokenNow, c, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.s.Parse(tt.token, tt.now)
			if tt.wantOK && (err != nil || !sameClaims(got, tt.want)) {
				t.Errorf("Parse = %+v, %v; want %+v", got, err, tt.want)
			}
			if !tt.wantOK && !errors.Is(err, ErrInvalidToken) {
				t.Errorf("Parse = %+v, %v; want ErrInvalidToken", got, err)
			}
		})
	}
}

// TestSecondNodeFollowsRotation: node B loaded the ring before node A's
// rotation and has not polled since; a token A signs with the new key
// verifies on B at once, because an unknown key id makes B re-read the
// file.
func TestSecondNodeFollowsRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring")
	ring := keyring.Ring{Keys: []keyring.Key{{ID: secret.LegacyKeyID, Secret: secret.RandomBytes(32)}}}
	if err := keyring.WriteFile(path, ring); err != nil {
		t.Fatal(err)
	}
	krA, err := keyring.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	krB, err := keyring.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := keyring.WriteFile(path, ring.Rotate(secret.RandomBytes(32))); err != nil {
		t.Fatal(err)
	}
	if _, err := krA.Reload(); err != nil {
		t.Fatal(err)
	}
	tok := NewRingSigner(krA.Purpose("token")).Issue(testClaims())
	if id := masterKeyID(t, tok); id != "k1" {
		t.Fatalf("A signs with %q after rotation, want k1", id)
	}
	if got, err := NewRingSigner(krB.Purpose("token")).Parse(tok, tokenNow); err != nil || !sameClaims(got, testClaims()) {
		t.Errorf("B, not yet polled, refuses A's new token: %+v, %v", got, err)
	}
	if cur := krB.Ring().Current().ID; cur != "k1" {
		t.Errorf("B's current key after meeting k1 is %q", cur)
	}
}
