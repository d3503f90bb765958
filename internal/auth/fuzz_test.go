package auth_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/merchant"
)

// FuzzSignerParse: a bearer token is outside input. Parsing never panics,
// and nothing but the exact issued token is accepted: today's spelling, or
// the version 1 spelling of the same claims that tokens issued before
// scopes have (read as access tokens), or the version 2 spelling of
// before key ids.
func FuzzSignerParse(f *testing.F) {
	key := []byte("fuzz-key-0123456789abcdef0123456")
	s := auth.NewSigner(key)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	issued := s.Issue(auth.Claims{MerchantCode: "1234567890", Mode: merchant.Test, KeyID: "key_abc",
		IssuedAt: now, ExpiresAt: now.Add(time.Hour)})
	// Version 1: no scope byte after the mode.
	v1 := []byte{1, 't'}
	v1 = binary.BigEndian.AppendUint64(v1, uint64(now.UnixMilli()))
	v1 = binary.BigEndian.AppendUint64(v1, uint64(now.Add(time.Hour).UnixMilli()))
	v1 = append(append(v1, 7), "key_abc"...)
	v1 = append(append(v1, 10), "1234567890"...)
	m := hmac.New(sha256.New, key)
	m.Write(v1)
	issuedV1 := base64.RawURLEncoding.EncodeToString(m.Sum(v1))
	if c, err := s.Parse(issuedV1, now); err != nil || c.Scope != auth.ScopeAPI {
		f.Fatalf("the version 1 token: %+v, %v", c, err)
	}
	// Version 2: the layout of before key ids, signed by the key every
	// token without an id is read as (secret.LegacyKeyID's).
	raw, _ := base64.RawURLEncoding.DecodeString(issued)
	v2 := append([]byte{2}, raw[2+int(raw[1]):len(raw)-sha256.Size]...)
	m = hmac.New(sha256.New, key)
	m.Write(v2)
	issuedV2 := base64.RawURLEncoding.EncodeToString(m.Sum(v2))
	if c, err := s.Parse(issuedV2, now); err != nil || c.MerchantCode != "1234567890" {
		f.Fatalf("the version 2 token: %+v, %v", c, err)
	}
	f.Add(issued)
	f.Add(issuedV1)
	f.Add(issuedV2)
	f.Add(issued[:len(issued)-1])
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := s.Parse(token, now)
		if err == nil && token != issued && token != issuedV1 && token != issuedV2 {
			t.Fatalf("forged token accepted: %q → %+v", token, c)
		}
	})
}
