package secret

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
)

// Sealed values name the key they were sealed under, so that the master
// key can rotate (docs/operations.md, "Rotating the master key"): version 2
// is "sealed:v2:KEYID:…"; version 1, written before key ids existed, has
// no id and reads as sealed under LegacyKeyID.
const (
	sealedPrefixV1 = "sealed:v1:"
	sealedPrefix   = "sealed:v2:"
)

// LegacyKeyID is the id of the master key that signed and sealed
// everything written before keys had ids: the single key of a key file of
// the old one-line format, and of KADI_SECRET_KEY given as bare hex.
const LegacyKeyID = "k0"

var (
	// ErrNoSealingKey: a sealed value was read, or a secret written, by a
	// process that was given no key.
	ErrNoSealingKey = errors.New("secrets at rest are sealed: this process needs the master key (KADI_SECRET_KEY or KADI_SECRET_KEY_FILE)")
	// ErrUnseal: the value is damaged or was sealed under another key.
	ErrUnseal = errors.New("a sealed secret could not be opened: damaged, or sealed under another master key")
)

// KeySource gives one purpose's keys of the master key ring: the current
// one, which new values use, and any by its id, to check or open values
// made under a previous one.
type KeySource interface {
	Current() (id string, key []byte)
	Key(id string) (key []byte, ok bool)
}

// StaticKey is a KeySource of one key with LegacyKeyID: what a process
// given a single key (tests, the old key file format) has.
type StaticKey []byte

// Current returns the key.
func (k StaticKey) Current() (string, []byte) { return LegacyKeyID, k }

// Key returns the key for LegacyKeyID only.
func (k StaticKey) Key(id string) ([]byte, bool) { return k, id == LegacyKeyID }

// Sealer encrypts secrets that must be stored usable (notification
// secrets, IPN passwords) with AES-256-GCM, so a copy of the database alone
// does not let anyone forge a merchant's IPN.
type Sealer struct {
	keys  KeySource
	aeads sync.Map // key id → cachedAEAD
}

type cachedAEAD struct {
	key  []byte
	aead cipher.AEAD
}

// NewSealer returns a Sealer keyed with the 32-byte key; derive it from the
// master key with Derive(master, "sealed-secrets").
func NewSealer(key []byte) (*Sealer, error) {
	if _, err := newAEAD(key); err != nil {
		return nil, err
	}
	return &Sealer{keys: StaticKey(key)}, nil
}

// NewRingSealer returns a Sealer that seals under keys' current key and
// opens values sealed under any key keys still holds.
func NewRingSealer(keys KeySource) (*Sealer, error) {
	_, key := keys.Current()
	if _, err := newAEAD(key); err != nil {
		return nil, err
	}
	return &Sealer{keys: keys}, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// aead returns the cipher of key id; the cache is checked against the key
// itself, so an id given another key (a hand-edited ring) is never served
// the old cipher.
func (s *Sealer) aead(id string, key []byte) (cipher.AEAD, error) {
	if c, ok := s.aeads.Load(id); ok && bytes.Equal(c.(cachedAEAD).key, key) {
		return c.(cachedAEAD).aead, nil
	}
	a, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	s.aeads.Store(id, cachedAEAD{key: key, aead: a})
	return a, nil
}

func (s *Sealer) current() (string, cipher.AEAD, error) {
	id, key := s.keys.Current()
	a, err := s.aead(id, key)
	return id, a, err
}

func (s *Sealer) byID(id string) (cipher.AEAD, error) {
	key, ok := s.keys.Key(id)
	if !ok {
		return nil, ErrUnseal
	}
	a, err := s.aead(id, key)
	if err != nil {
		return nil, ErrUnseal
	}
	return a, nil
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
	id, aead, err := s.current()
	if err != nil {
		return "", err
	}
	nonce := RandomBytes(aead.NonceSize())
	out := aead.Seal(nonce, nonce, []byte(plain), []byte(additional))
	return sealedPrefix + id + ":" + base64.RawStdEncoding.EncodeToString(out), nil
}

// CurrentKeyID is the id of the key Seal uses now.
func (s *Sealer) CurrentKeyID() string {
	id, _ := s.keys.Current()
	return id
}

// HasKey reports whether the ring holds a key of that id.
func (s *Sealer) HasKey(id string) bool {
	_, ok := s.keys.Key(id)
	return ok
}

// KeyCheck is a fingerprint of the key id names, false when the ring
// lacks it. Stored beside the sealed values, it tells a key from another
// install's key under the same id, and reveals neither.
func (s *Sealer) KeyCheck(id string) (string, bool) {
	key, ok := s.keys.Key(id)
	if !ok {
		return "", false
	}
	return keyCheck(key), true
}

// KeyIDs lists the ids of the ring's keys: all of them when the key source
// can list them (keyring.Purpose can), else the current one.
func (s *Sealer) KeyIDs() []string {
	if l, ok := s.keys.(interface{ IDs() []string }); ok {
		return l.IDs()
	}
	id, _ := s.keys.Current()
	return []string{id}
}

func keyCheck(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("kadi sealing key check"))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// SealedKeyID says which key v was sealed under; ok is false for a value
// that is not sealed (empty, or stored before sealing existed).
func SealedKeyID(v string) (id string, ok bool) {
	if strings.HasPrefix(v, sealedPrefixV1) {
		return LegacyKeyID, true
	}
	rest, sealed := strings.CutPrefix(v, sealedPrefix)
	if !sealed {
		return "", false
	}
	id, _, ok = strings.Cut(rest, ":")
	return id, ok
}

// Open decrypts a value Seal made. A value without the sealed prefix is
// returned as it is: databases written before sealing keep working.
func (s *Sealer) Open(v, additional string) (string, error) {
	var id, rest string
	if r, ok := strings.CutPrefix(v, sealedPrefixV1); ok {
		id, rest = LegacyKeyID, r
	} else if r, ok := strings.CutPrefix(v, sealedPrefix); ok {
		if id, rest, ok = strings.Cut(r, ":"); !ok {
			return "", ErrUnseal
		}
	} else {
		return v, nil
	}
	if s == nil {
		return "", ErrNoSealingKey
	}
	aead, err := s.byID(id)
	if err != nil {
		return "", err
	}
	raw, err := base64.RawStdEncoding.DecodeString(rest)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", ErrUnseal
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(additional))
	if err != nil {
		return "", ErrUnseal
	}
	return string(plain), nil
}

// SealURL encrypts plain into text that can travel in a URL path: the key
// id, a dot and base64url without padding (a dot is outside that
// alphabet, so values from before key ids, which have none, read apart).
// additional binds it to its use, as for Seal.
func (s *Sealer) SealURL(plain []byte, additional string) string {
	id, aead, err := s.current()
	if err != nil {
		// NewRingSealer checked the current key; a ring reloaded since is
		// parsed for 32-byte keys, so this cannot happen.
		panic("secret: current sealing key unusable: " + err.Error())
	}
	nonce := RandomBytes(aead.NonceSize())
	return id + "." + base64.RawURLEncoding.EncodeToString(aead.Seal(nonce, nonce, plain, []byte(additional)))
}

// OpenURL decrypts what SealURL made; anything else is ErrUnseal.
func (s *Sealer) OpenURL(v, additional string) ([]byte, error) {
	id, rest, ok := strings.Cut(v, ".")
	if !ok {
		id, rest = LegacyKeyID, v
	}
	aead, err := s.byID(id)
	if err != nil {
		return nil, err
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(raw) < aead.NonceSize() {
		return nil, ErrUnseal
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(additional))
	if err != nil {
		return nil, ErrUnseal
	}
	return plain, nil
}
