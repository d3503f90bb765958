package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"strings"
)

// sealedPrefix marks a value sealed by a Sealer; the version lets the
// scheme change without guessing.
const sealedPrefix = "sealed:v1:"

var (
	// ErrNoSealingKey: a sealed value was read, or a secret written, by a
	// process that was given no key.
	ErrNoSealingKey = errors.New("secrets at rest are sealed: this process needs the master key (KADI_SECRET_KEY or KADI_SECRET_KEY_FILE)")
	// ErrUnseal: the value is damaged or was sealed under another key.
	ErrUnseal = errors.New("a sealed secret could not be opened: damaged, or sealed under another master key")
)

// Sealer encrypts secrets that must be stored usable (notification
// secrets, IPN passwords) with AES-256-GCM, so a copy of the database alone
// does not let anyone forge a merchant's IPN.
type Sealer struct{ aead cipher.AEAD }

// NewSealer returns a Sealer keyed with the 32-byte key; derive it from the
// master key with Derive(master, "sealed-secrets").
func NewSealer(key []byte) (*Sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plain; the empty string stays empty (nothing configured).
// additional binds the value to its place (e.g. "merchant/mode/field"), so
// a sealed value copied to another row does not open there.
func (s *Sealer) Seal(plain, additional string) (string, error) {
	if plain == "" {
		return "", nil
	}
	if s == nil {
		return "", ErrNoSealingKey
	}
	nonce := RandomBytes(s.aead.NonceSize())
	out := s.aead.Seal(nonce, nonce, []byte(plain), []byte(additional))
	return sealedPrefix + base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts a value Seal made. A value without the sealed prefix is
// returned as it is: databases written before sealing keep working.
func (s *Sealer) Open(v, additional string) (string, error) {
	rest, sealed := strings.CutPrefix(v, sealedPrefix)
	if !sealed {
		return v, nil
	}
	if s == nil {
		return "", ErrNoSealingKey
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return "", ErrUnseal
	}
	plain, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], []byte(additional))
	if err != nil {
		return "", ErrUnseal
	}
	return string(plain), nil
}

// SealURL encrypts plain into text that can travel in a URL path
// (base64url, no padding). additional binds it to its use, as for Seal.
func (s *Sealer) SealURL(plain []byte, additional string) string {
	nonce := RandomBytes(s.aead.NonceSize())
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(additional)))
}

// OpenURL decrypts what SealURL made; anything else is ErrUnseal.
func (s *Sealer) OpenURL(v, additional string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return nil, ErrUnseal
	}
	plain, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], []byte(additional))
	if err != nil {
		return nil, ErrUnseal
	}
	return plain, nil
}
