package secret

import (
	"errors"
	"strings"
	"testing"
)

func TestSealer(t *testing.T) {
	s, err := NewSealer(Derive([]byte("master-key-0123456789abcdef01234"), "sealed-secrets"))
	if err != nil {
		t.Fatal(err)
	}
	const plain = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	sealed, err := s.Seal(plain, "1234567890/test/notification_secret")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sealed, sealedPrefix) || strings.Contains(sealed, "MfKQ9r8G") {
		t.Fatalf("sealed value %q shows the secret or lacks the prefix", sealed)
	}
	again, _ := s.Seal(plain, "1234567890/test/notification_secret")
	if again == sealed {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}
	if got, err := s.Open(sealed, "1234567890/test/notification_secret"); err != nil || got != plain {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Bound to its place: the same ciphertext does not open elsewhere.
	if _, err := s.Open(sealed, "1234567890/live/notification_secret"); !errors.Is(err, ErrUnseal) {
		t.Errorf("opened under another place: %v", err)
	}
	other, _ := NewSealer(Derive([]byte("another-master-key-0123456789abc"), "sealed-secrets"))
	if _, err := other.Open(sealed, "1234567890/test/notification_secret"); !errors.Is(err, ErrUnseal) {
		t.Errorf("opened under another key: %v", err)
	}
	if _, err := s.Open(sealed[:len(sealed)-2], "1234567890/test/notification_secret"); !errors.Is(err, ErrUnseal) {
		t.Errorf("truncated value opened: %v", err)
	}
	// Values from before sealing, and empty ones, pass through.
	if got, err := s.Open("plain-old", "x"); err != nil || got != "plain-old" {
		t.Errorf("unsealed value: %q, %v", got, err)
	}
	if got, err := s.Seal("", "x"); err != nil || got != "" {
		t.Errorf("empty value sealed to %q, %v", got, err)
	}
	// Without a key nothing is sealed or opened by accident.
	var none *Sealer
	if _, err := none.Seal(plain, "x"); !errors.Is(err, ErrNoSealingKey) {
		t.Errorf("Seal without a key: %v", err)
	}
	if _, err := none.Open(sealed, "x"); !errors.Is(err, ErrNoSealingKey) {
		t.Errorf("Open without a key: %v", err)
	}
}

func TestSealURL(t *testing.T) {
	s, err := NewSealer(Derive([]byte("master-key-0123456789abcdef01234"), "hosted-pages"))
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte(`{"k":"result","orderReference":"ORD1"}`)
	v := s.SealURL(plain, "page")
	if strings.ContainsAny(v, "+/=%?#") || strings.Contains(v, "ORD1") {
		t.Fatalf("sealed %q is not URL-safe opaque text", v)
	}
	if got, err := s.OpenURL(v, "page"); err != nil || string(got) != string(plain) {
		t.Fatalf("OpenURL = %q, %v", got, err)
	}
	other, _ := NewSealer(Derive([]byte("master-key-0123456789abcdef01234"), "sealed-secrets"))
	for name, open := range map[string]func() ([]byte, error){
		"other use":    func() ([]byte, error) { return s.OpenURL(v, "other") },
		"other key":    func() ([]byte, error) { return other.OpenURL(v, "page") },
		"tampered":     func() ([]byte, error) { return s.OpenURL(flip(v, 20), "page") },
		"not base64":   func() ([]byte, error) { return s.OpenURL("!!!", "page") },
		"too short":    func() ([]byte, error) { return s.OpenURL("AAAA", "page") },
		"empty":        func() ([]byte, error) { return s.OpenURL("", "page") },
		"std encoding": func() ([]byte, error) { return s.OpenURL(strings.ReplaceAll(v, "-", "+")+"==", "page") },
	} {
		if _, err := open(); !errors.Is(err, ErrUnseal) {
			t.Errorf("%s: OpenURL err = %v, want ErrUnseal", name, err)
		}
	}
}

// flip changes the character at i to another base64url character.
func flip(v string, i int) string {
	c := byte('A')
	if v[i] == 'A' {
		c = 'B'
	}
	return v[:i] + string(c) + v[i+1:]
}
