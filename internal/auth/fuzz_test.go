package auth_test

import (
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/merchant"
)

// FuzzSignerParse: a bearer token is outside input. Parsing never panics,
// and nothing but the exact issued token is accepted.
func FuzzSignerParse(f *testing.F) {
	s := auth.NewSigner([]byte("fuzz-key-0123456789abcdef0123456"))
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	issued := s.Issue(auth.Claims{MerchantCode: "1234567890", Mode: merchant.Test, KeyID: "key_abc",
		IssuedAt: now, ExpiresAt: now.Add(time.Hour)})
	f.Add(issued)
	f.Add(issued[:len(issued)-1])
	f.Add("")
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := s.Parse(token, now)
		if err == nil && token != issued {
			t.Fatalf("forged token accepted: %q → %+v", token, c)
		}
	})
}
