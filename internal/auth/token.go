// Package auth checks merchants' credentials and issues and verifies the
// bearer tokens every other operation needs.
package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// Claims are what a credential asserts: a bearer token, or an API key
// presented directly.
type Claims struct {
	MerchantCode string
	Mode         merchant.Mode
	KeyID        string // the API key it was issued with: rotating the key kills the token
	Scope        Scope
	IssuedAt     time.Time
	ExpiresAt    time.Time
}

// Scope says what a credential may be used for. The spec puts bearer
// tokens into every shopper's browser (the form's token field), so what a
// token may do is kept to what the spec asks of it; anything that shows or
// acts on other customers' data takes the API key itself (docs/security.md).
type Scope byte

const (
	// ScopeAPI is an access token of POST /identity/v2/token: the spec's
	// endpoints (bills, verification) and the hosted form.
	ScopeAPI Scope = iota
	// ScopePay is the payment-token of POST /token: the hosted form of its
	// merchant and mode, nothing else.
	ScopePay
	// ScopeKey is the API key presented as HTTP Basic: never in a browser,
	// so it alone reaches the notification log and replay. No token has it.
	ScopeKey
)

// MaxTokenTTL is the longest lifetime --token-ttl may give. Revocations are
// kept for at least this long, so no setting can bring a revoked token back.
const MaxTokenTTL = 24 * time.Hour

// ErrInvalidToken covers missing, malformed, forged, expired and revoked
// tokens alike: RFC 6750 gives them all one answer.
var ErrInvalidToken = errors.New("the access token is missing, malformed, expired or revoked")

// ErrTokenExpired and ErrTokenRevoked are ErrInvalidToken for a genuine
// token (its signature checked) past its life or of a regenerated key:
// saying which saves an integrator hunting a signing bug, and tells
// nothing to anyone who does not already hold the token.
var (
	ErrTokenExpired error = tokenError("the access token has expired: request a new one")
	ErrTokenRevoked error = tokenError("the access token was revoked: its API key was regenerated; request a new one with the new key")
)

type tokenError string

func (e tokenError) Error() string        { return string(e) }
func (e tokenError) Is(target error) bool { return target == ErrInvalidToken }

// Token layout versions. Version 1 had no scope byte; such tokens (issued
// before scopes existed, for at most MaxTokenTTL) read as ScopeAPI.
// Version 3 is version 2 with the id of the master key that signed it
// after the version byte; tokens without one were signed by
// secret.LegacyKeyID.
const (
	tokenV1 = 1
	tokenV2 = 2
	tokenV3 = 3
)

// maxTokenLength bounds what Parse reads: the longest token Issue makes
// (a 16-character master key id, a 255-byte API key id and a 76-digit
// merchant code) is 535 characters.
const maxTokenLength = 540

// Signer issues and checks tokens with an HMAC key, so any node holding the
// key verifies a token without a database round trip.
type Signer struct{ keys secret.KeySource }

// NewSigner returns a Signer of one key; key should be derived from the
// master key.
func NewSigner(key []byte) Signer { return Signer{keys: secret.StaticKey(key)} }

// NewRingSigner returns a Signer that signs with keys' current key and
// checks tokens signed by any key keys still holds, so tokens issued
// before a rotation verify until they expire.
func NewRingSigner(keys secret.KeySource) Signer { return Signer{keys: keys} }

// Issue encodes and signs c with the current key.
func (s Signer) Issue(c Claims) string {
	id, key := s.keys.Current()
	buf := make([]byte, 0, 112)
	buf = append(buf, tokenV3, byte(len(id)))
	buf = append(buf, id...)
	buf = append(buf, modeByte(c.Mode), byte(c.Scope))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.IssuedAt.UnixMilli()))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.ExpiresAt.UnixMilli()))
	buf = append(buf, byte(len(c.KeyID)))
	buf = append(buf, c.KeyID...)
	buf = append(buf, byte(len(c.MerchantCode)))
	buf = append(buf, c.MerchantCode...)
	m := hmac.New(sha256.New, key)
	m.Write(buf)
	return base64.RawURLEncoding.EncodeToString(m.Sum(buf))
}

// Parse checks the signature and expiry and returns the claims.
func (s Signer) Parse(token string, now time.Time) (Claims, error) {
	// base64 decoders skip CR and LF even in strict mode: refuse anything
	// outside the alphabet, so one token has exactly one spelling.
	if len(token) > maxTokenLength || strings.IndexFunc(token, notBase64URL) >= 0 {
		return Claims{}, ErrInvalidToken
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) < sha256.Size+20 {
		return Claims{}, ErrInvalidToken
	}
	body, sig := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	keyID := secret.LegacyKeyID
	if body[0] == tokenV3 {
		// Which key to check with is read before the check; the id is
		// signed too, so naming another key only fails the check.
		id, rest, ok := cutLengthPrefixed(body[1:])
		if !ok || len(rest) < 20 {
			return Claims{}, ErrInvalidToken
		}
		keyID = id
		body = append([]byte{tokenV2}, rest...)
	}
	key, ok := s.keys.Key(keyID)
	if !ok {
		return Claims{}, ErrInvalidToken
	}
	m := hmac.New(sha256.New, key)
	m.Write(raw[:len(raw)-sha256.Size])
	if !hmac.Equal(sig, m.Sum(nil)) {
		return Claims{}, ErrInvalidToken
	}
	c := Claims{Scope: ScopeAPI}
	switch body[0] {
	case tokenV1:
	case tokenV2:
		// A version 2 token has a scope byte after the mode: move it out of
		// the way so both versions read alike from here on.
		switch Scope(body[2]) {
		case ScopeAPI, ScopePay:
			c.Scope = Scope(body[2])
		default:
			return Claims{}, ErrInvalidToken
		}
		body = append([]byte{body[0], body[1]}, body[3:]...)
	default:
		return Claims{}, ErrInvalidToken
	}
	switch body[1] {
	case 't':
		c.Mode = merchant.Test
	case 'l':
		c.Mode = merchant.Live
	default:
		return Claims{}, ErrInvalidToken
	}
	c.IssuedAt = time.UnixMilli(int64(binary.BigEndian.Uint64(body[2:10])))
	c.ExpiresAt = time.UnixMilli(int64(binary.BigEndian.Uint64(body[10:18])))
	rest := body[18:]
	if c.KeyID, rest, ok = cutLengthPrefixed(rest); !ok {
		return Claims{}, ErrInvalidToken
	}
	if c.MerchantCode, rest, ok = cutLengthPrefixed(rest); !ok || len(rest) != 0 {
		return Claims{}, ErrInvalidToken
	}
	if !now.Before(c.ExpiresAt) {
		return Claims{}, ErrTokenExpired
	}
	return c, nil
}

func notBase64URL(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}

func cutLengthPrefixed(b []byte) (string, []byte, bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return "", nil, false
	}
	n := int(b[0])
	return string(b[1 : 1+n]), b[1+n:], true
}

func modeByte(m merchant.Mode) byte {
	if m == merchant.Live {
		return 'l'
	}
	return 't'
}
