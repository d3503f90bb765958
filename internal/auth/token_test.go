package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

var (
	signingKey = []byte("0123456789abcdef0123456789abcdef")
	tokenNow   = time.UnixMilli(1_773_566_400_000) // 2026-03-15T09:20:00Z
)

func testClaims() Claims {
	return Claims{
		MerchantCode: "4000000001",
		Mode:         merchant.Test,
		KeyID:        "key_0123456789abcdef01234567",
		IssuedAt:     tokenNow,
		ExpiresAt:    tokenNow.Add(time.Hour),
	}
}

// v3 is where the claims start in a token Issue makes with NewSigner: after
// the version, the length of the master key id and the id (LegacyKeyID).
const v3 = 2 + len(secret.LegacyKeyID)

func sameClaims(a, b Claims) bool {
	return a.MerchantCode == b.MerchantCode && a.Mode == b.Mode && a.KeyID == b.KeyID && a.Scope == b.Scope &&
		a.IssuedAt.Equal(b.IssuedAt) && a.ExpiresAt.Equal(b.ExpiresAt)
}

// resign decodes a token, lets edit change its signed body and signs the
// result with key: a token forged by someone who holds the key, to test the
// checks that come after the signature.
func resign(t *testing.T, key []byte, token string, edit func([]byte) []byte) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatal(err)
	}
	body := edit(append([]byte(nil), raw[:len(raw)-sha256.Size]...))
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return base64.RawURLEncoding.EncodeToString(m.Sum(body))
}

func TestSignerRoundTrip(t *testing.T) {
	s := NewSigner(signingKey)
	long := testClaims()
	long.KeyID = strings.Repeat("k", 255)
	long.MerchantCode = strings.Repeat("9", 76) // the longest token Parse takes
	for _, tt := range []struct {
		name string
		c    func(Claims) Claims
	}{
		{"test mode", func(c Claims) Claims { return c }},
		{"live mode", func(c Claims) Claims { c.Mode = merchant.Live; return c }},
		{"longest key ID", func(Claims) Claims { return long }},
		{"expires in a millisecond", func(c Claims) Claims { c.ExpiresAt = tokenNow.Add(time.Millisecond); return c }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c(testClaims())
			tok := s.Issue(c)
			got, err := s.Parse(tok, tokenNow)
			if err != nil {
				t.Fatalf("Parse(Issue(%+v)): %v", c, err)
			}
			if !sameClaims(got, c) {
				t.Errorf("Parse(Issue(c)) = %+v, want %+v", got, c)
			}
		})
	}
}

func TestSignerRejectsTamperedBytes(t *testing.T) {
	s := NewSigner(signingKey)
	tok := s.Issue(testClaims())
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	for i := range raw {
		for _, bit := range []byte{0x01, 0x80} {
			forged := append([]byte(nil), raw...)
			forged[i] ^= bit
			if c, err := s.Parse(base64.RawURLEncoding.EncodeToString(forged), tokenNow); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("byte %d ^ %#x accepted: %+v, %v", i, bit, c, err)
			}
		}
	}
}

func TestSignerRejectsTamperedCharacters(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	s := NewSigner(signingKey)
	tok := s.Issue(testClaims())
	orig, _ := base64.RawURLEncoding.DecodeString(tok)
	for i := range len(tok) {
		for _, c := range alphabet + "+/=. " {
			if byte(c) == tok[i] {
				continue
			}
			forged := tok[:i] + string(c) + tok[i+1:]
			if raw, err := base64.RawURLEncoding.DecodeString(forged); err == nil && string(raw) == string(orig) {
				continue // only unused padding bits changed: see TestSignerRejectsNonCanonicalEncoding
			}
			if _, err := s.Parse(forged, tokenNow); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("character %d changed to %q accepted: %v", i, c, err)
			}
		}
	}
}

// A token has one spelling, so nothing keyed on its text (a log search, a
// cache, a future deny list) can be sidestepped with a variant.
func TestSignerRejectsNonCanonicalEncoding(t *testing.T) {
	s := NewSigner(signingKey)
	c := testClaims()
	c.KeyID = "key_1" // 23+5+10+32 = 70 bytes: the last character carries 4 unused bits
	tok := s.Issue(c)
	last := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", tok[len(tok)-1])
	variant := tok[:len(tok)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[last^1])
	if _, err := s.Parse(variant, tokenNow); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("a second spelling of a valid token was accepted")
	}
}

// The scope is signed with the rest: a payment-token cannot be edited into
// an access token without the key.
func TestSignerScope(t *testing.T) {
	s := NewSigner(signingKey)
	for _, scope := range []Scope{ScopeAPI, ScopePay} {
		c := testClaims()
		c.Scope = scope
		got, err := s.Parse(s.Issue(c), tokenNow)
		if err != nil || got.Scope != scope {
			t.Errorf("scope %d: Parse = %+v, %v", scope, got, err)
		}
	}
	pay := testClaims()
	pay.Scope = ScopePay
	tok := s.Issue(pay)
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	raw[v3+1] = byte(ScopeAPI)
	if _, err := s.Parse(base64.RawURLEncoding.EncodeToString(raw), tokenNow); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("payment-token with its scope byte changed: %v, want ErrInvalidToken", err)
	}

	// A token of the layout before scopes (version 1: no scope byte), from
	// a node not yet upgraded, reads as an access token.
	v1 := resign(t, signingKey, s.Issue(testClaims()), func(b []byte) []byte {
		return append([]byte{tokenV1, b[v3]}, b[v3+2:]...)
	})
	if got, err := s.Parse(v1, tokenNow); err != nil || !sameClaims(got, testClaims()) {
		t.Errorf("version 1 token: %+v, %v", got, err)
	}
}

func TestSignerRejects(t *testing.T) {
	s := NewSigner(signingKey)
	good := s.Issue(testClaims())
	// The longest token Issue makes: the longest master key id, API key id
	// and merchant code, 2+16+21+255+76+32 = 402 bytes = 536 characters.
	longKeys := NewRingSigner(testKeys{id: strings.Repeat("x", 16), key: signingKey})
	longest := testClaims()
	longest.KeyID = strings.Repeat("k", 255)
	longest.MerchantCode = strings.Repeat("9", 76)
	tokLongest := longKeys.Issue(longest)
	longest.MerchantCode += "99999"
	tokTooLong := longKeys.Issue(longest)
	if len(tokLongest) > maxTokenLength || len(tokTooLong) <= maxTokenLength {
		t.Fatalf("fixture lengths %d and %d, want at most and over %d", len(tokLongest), len(tokTooLong), maxTokenLength)
	}
	if _, err := longKeys.Parse(tokLongest, tokenNow); err != nil {
		t.Fatalf("%d-character token refused: %v", len(tokLongest), err)
	}

	tests := []struct {
		name  string
		token string
		now   time.Time
	}{
		{"empty", "", tokenNow},
		{"signed with another key", NewSigner([]byte("another key, another gateway!!!!")).Issue(testClaims()), tokenNow},
		{"signed with an empty key", NewSigner(nil).Issue(testClaims()), tokenNow},
		{"expired: now is ExpiresAt", good, testClaims().ExpiresAt},
		{"expired long ago", good, testClaims().ExpiresAt.Add(24 * time.Hour)},
		{"wrong version 4", resign(t, signingKey, good, func(b []byte) []byte { b[0] = 4; return b }), tokenNow},
		{"unknown scope", resign(t, signingKey, good, func(b []byte) []byte { b[v3+1] = 9; return b }), tokenNow},
		{"key scope in a token", resign(t, signingKey, good, func(b []byte) []byte { b[v3+1] = byte(ScopeKey); return b }), tokenNow},
		{"wrong version 0", resign(t, signingKey, good, func(b []byte) []byte { b[0] = 0; return b }), tokenNow},
		{"unknown mode", resign(t, signingKey, good, func(b []byte) []byte { b[v3] = 'x'; return b }), tokenNow},
		{"trailing byte in the body", resign(t, signingKey, good, func(b []byte) []byte { return append(b, 0) }), tokenNow},
		{"key id length past the end", resign(t, signingKey, good, func(b []byte) []byte { b[v3+18] = 0xff; return b }), tokenNow},
		{"master key id length past the end", resign(t, signingKey, good, func(b []byte) []byte { b[1] = 0xff; return b }), tokenNow},
		{"master key id unknown", resign(t, signingKey, good, func(b []byte) []byte { b[3] = '9'; return b }), tokenNow},
		{"body too short", resign(t, signingKey, good, func(b []byte) []byte { return b[:v3+19] }), tokenNow},
		{"truncated by one character", good[:len(good)-1], tokenNow},
		{"truncated to half", good[:len(good)/2], tokenNow},
		{"signature only", good[len(good)-43:], tokenNow},
		{"one character appended", good + "A", tokenNow},
		{"padded", good + "==", tokenNow},
		{"one character past the longest", tokLongest + "A", tokenNow},
		{"validly signed but too long", tokTooLong, tokenNow},
		{"standard base64 alphabet", strings.NewReplacer("-", "+", "_", "/").Replace(good) + "+", tokenNow},
		{"not base64", "not a token!", tokenNow},
		{"JWT-looking", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", tokenNow},
		{"whitespace around", " " + good + " ", tokenNow},
		{"bearer prefix left in", "Bearer " + good, tokenNow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := s.Parse(tt.token, tt.now); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("Parse = %+v, %v; want ErrInvalidToken", c, err)
			}
		})
	}
	if _, err := s.Parse(good, testClaims().ExpiresAt.Add(-time.Millisecond)); err != nil {
		t.Errorf("token refused a millisecond before expiry: %v", err)
	}
}

func BenchmarkSignerParse(b *testing.B) {
	s := NewSigner(signingKey)
	tok := s.Issue(testClaims())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Parse(tok, tokenNow); err != nil {
			b.Fatal(err)
		}
	}
}
