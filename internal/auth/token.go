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
)

// Claims are what a token asserts.
type Claims struct {
	MerchantCode string
	Mode         merchant.Mode
	KeyID        string // the API key it was issued with: rotating the key kills the token
	IssuedAt     time.Time
	ExpiresAt    time.Time
}

// ErrInvalidToken covers missing, malformed, forged, expired and revoked
// tokens alike: RFC 6750 gives them all one answer.
var ErrInvalidToken = errors.New("the access token is missing, malformed, expired or revoked")

const tokenVersion = 1

// Signer issues and checks tokens with an HMAC key, so any node holding the
// key verifies a token without a database round trip.
type Signer struct{ key []byte }

// NewSigner returns a Signer; key should be derived from the master key.
func NewSigner(key []byte) Signer { return Signer{key: key} }

// Issue encodes and signs c.
func (s Signer) Issue(c Claims) string {
	buf := make([]byte, 0, 80)
	buf = append(buf, tokenVersion, modeByte(c.Mode))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.IssuedAt.UnixMilli()))
	buf = binary.BigEndian.AppendUint64(buf, uint64(c.ExpiresAt.UnixMilli()))
	buf = append(buf, byte(len(c.KeyID)))
	buf = append(buf, c.KeyID...)
	buf = append(buf, byte(len(c.MerchantCode)))
	buf = append(buf, c.MerchantCode...)
	m := hmac.New(sha256.New, s.key)
	m.Write(buf)
	return base64.RawURLEncoding.EncodeToString(m.Sum(buf))
}

// Parse checks the signature and expiry and returns the claims.
func (s Signer) Parse(token string, now time.Time) (Claims, error) {
	// base64 decoders skip CR and LF even in strict mode: refuse anything
	// outside the alphabet, so one token has exactly one spelling.
	if len(token) > 512 || strings.IndexFunc(token, notBase64URL) >= 0 {
		return Claims{}, ErrInvalidToken
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(raw) < sha256.Size+20 {
		return Claims{}, ErrInvalidToken
	}
	body, sig := raw[:len(raw)-sha256.Size], raw[len(raw)-sha256.Size:]
	m := hmac.New(sha256.New, s.key)
	m.Write(body)
	if !hmac.Equal(sig, m.Sum(nil)) || body[0] != tokenVersion {
		return Claims{}, ErrInvalidToken
	}
	var c Claims
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
	var ok bool
	if c.KeyID, rest, ok = cutLengthPrefixed(rest); !ok {
		return Claims{}, ErrInvalidToken
	}
	if c.MerchantCode, rest, ok = cutLengthPrefixed(rest); !ok || len(rest) != 0 {
		return Claims{}, ErrInvalidToken
	}
	if !now.Before(c.ExpiresAt) {
		return Claims{}, ErrInvalidToken
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
