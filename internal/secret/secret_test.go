package secret

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
)

func TestRandomDigits(t *testing.T) {
	for _, n := range []int{1, 2, 6, 8, 10, 13} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			first := map[byte]bool{}
			zeroLater := false
			for range 2000 {
				s := RandomDigits(n)
				if len(s) != n || strings.Trim(s, "0123456789") != "" {
					t.Fatalf("RandomDigits(%d) = %q", n, s)
				}
				if s[0] == '0' {
					t.Fatalf("RandomDigits(%d) = %q starts with 0", n, s)
				}
				first[s[0]] = true
				zeroLater = zeroLater || strings.Contains(s[1:], "0")
			}
			// 2000 draws miss one of nine leading digits with odds ~1e-101.
			if len(first) != 9 {
				t.Errorf("leading digits seen: %d of 9", len(first))
			}
			if n > 2 && !zeroLater {
				t.Error("0 never appeared after the first digit")
			}
		})
	}
}

func TestRandomUpperAlnum(t *testing.T) {
	re := regexp.MustCompile(`^[A-Z0-9]{12}$`)
	seen := map[rune]bool{}
	codes := map[string]bool{}
	for range 500 {
		s := RandomUpperAlnum(12)
		if !re.MatchString(s) {
			t.Fatalf("RandomUpperAlnum(12) = %q", s)
		}
		if codes[s] {
			t.Fatalf("RandomUpperAlnum(12) repeated %q", s)
		}
		codes[s] = true
		for _, r := range s {
			seen[r] = true
		}
	}
	if len(seen) != 36 {
		t.Errorf("%d of 36 symbols seen in 6000 draws", len(seen))
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^pay_[0-9a-f]{24}$`)
	a, b := NewID("pay"), NewID("pay")
	if !re.MatchString(a) || a == b {
		t.Errorf("NewID = %q, %q", a, b)
	}
}

// Ordered ids keep NewID's shape (the API documents it) and sort by the
// second they were made in, whatever their random part.
func TestNewOrderedID(t *testing.T) {
	re := regexp.MustCompile(`^msg_[0-9a-f]{24}$`)
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	var prev string
	seen := map[string]bool{}
	for i := range 200 {
		id := NewOrderedID("msg", t0.Add(time.Duration(i/20)*time.Second))
		if !re.MatchString(id) {
			t.Fatalf("NewOrderedID = %q", id)
		}
		if seen[id] {
			t.Fatalf("%q made twice", id)
		}
		seen[id] = true
		if i%20 == 0 && id[:12] <= prev[:min(len(prev), 12)] {
			t.Errorf("%q (second %d) does not sort after %q", id, i/20, prev)
		}
		if i%20 == 19 {
			prev = id
		}
	}
	if a, b := NewOrderedID("pay", t0), NewOrderedID("pay", t0); a[:12] != b[:12] || a == b {
		t.Errorf("two ids of one second: %q, %q", a, b)
	}
}

func TestNewAPIKey(t *testing.T) {
	for _, mode := range []string{"test", "live"} {
		key := NewAPIKey(mode)
		rest, ok := strings.CutPrefix(key, "kadi_"+mode+"_")
		if !ok {
			t.Fatalf("NewAPIKey(%q) = %q, want prefix kadi_%s_", mode, key, mode)
		}
		raw, err := base64.RawURLEncoding.DecodeString(rest)
		if err != nil {
			t.Fatalf("NewAPIKey(%q) random part %q: %v", mode, rest, err)
		}
		if len(raw) < 32 {
			t.Errorf("NewAPIKey(%q) carries %d random bits, want at least 256", mode, 8*len(raw))
		}
		if bytes.Equal(raw, make([]byte, len(raw))) {
			t.Errorf("NewAPIKey(%q) random part is all zero", mode)
		}
		if NewAPIKey(mode) == key {
			t.Errorf("NewAPIKey(%q) repeated a key", mode)
		}
		// The key travels in a Basic header and in shell commands.
		if strings.ContainsAny(key, "+/=: ") {
			t.Errorf("NewAPIKey(%q) = %q has characters unsafe in headers or shells", mode, key)
		}
	}
}

func TestHashAPIKey(t *testing.T) {
	// Stored hashes must keep matching after an upgrade: the algorithm is
	// fixed by this vector (sha256sum of the key), not by the code.
	const key = "kadi_test_example"
	const want = "c7ede18862f7917f9342c631cea1dd61867859a384af6ae7ccc18fb173bddb04"
	if got := HashAPIKey(key); got != want {
		t.Errorf("HashAPIKey(%q) = %s, want %s", key, got, want)
	}
	if HashAPIKey(key) == HashAPIKey(key+"x") || HashAPIKey(key) == HashAPIKey(strings.ToUpper(key)) {
		t.Error("different keys hash alike")
	}
}

func TestCheckPasswordStrength(t *testing.T) {
	tests := []struct {
		name     string
		password string
		want     error
	}{
		{"11 characters", "abcdefghi12", ErrWeakPassword},
		{"12 letters only", "abcdefghijkl", ErrWeakPassword},
		{"12 digits only", "123456789012", ErrWeakPassword},
		{"12 with letters and digits", "abcdefghij12", nil},
		{"one digit is enough", "abcdefghijk1", nil},
		{"one letter is enough", "a12345678901", nil},
		{"spaces and symbols count", "my pass: 42!", nil},
		{"punctuation and digits only", "12345678!@#$", ErrWeakPassword},
		{"unicode letters", "ñandúñandú12", nil},
		{"11 characters in 13 bytes", "ñandúñand12", ErrWeakPassword},
		{"non-latin script", "пароль123456", nil},
		{"empty", "", ErrWeakPassword},
		// Sign-in takes printable text only: a password it refuses would
		// lock its merchant out of the dashboard and the API.
		{"a tab", "correct horse 12\tbattery", ErrPasswordText},
		{"a line break", "correct horse 12\nbattery", ErrPasswordText},
		{"a C1 control", "correct horse 12\u0085battery", ErrPasswordText},
		{"not UTF-8", "correct horse 12\xffbattery", ErrPasswordText},
		{"200 bytes", strings.Repeat("a1", 100), nil},
		{"201 bytes", strings.Repeat("a1", 100) + "b", ErrPasswordText},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckPasswordStrength(tt.password); !errors.Is(err, tt.want) {
				t.Errorf("CheckPasswordStrength(%q) = %v, want %v", tt.password, err, tt.want)
			}
		})
	}
}

func TestNewPassword(t *testing.T) {
	a, b := NewPassword(), NewPassword()
	for _, p := range []string{a, b} {
		if err := CheckPasswordStrength(p); err != nil {
			t.Errorf("NewPassword() = %q: %v", p, err)
		}
	}
	if a == b {
		t.Error("NewPassword repeated itself")
	}
}

var phc = regexp.MustCompile(`^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=(\d+)\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$`)

func TestHashPassword(t *testing.T) {
	const password = "Zoë's pass 1234"
	h := HashPassword(password)
	m := phc.FindStringSubmatch(h)
	if m == nil {
		t.Fatalf("HashPassword = %q, not an argon2id PHC string", h)
	}
	memory, _ := strconv.Atoi(m[1])
	passes, _ := strconv.Atoi(m[2])
	threads, _ := strconv.Atoi(m[3])
	// Decisions §2: argon2id with at least 19 MiB and 2 passes.
	if memory < 19456 || passes < 2 || threads < 1 {
		t.Errorf("parameters m=%d,t=%d,p=%d, want m>=19456, t>=2, p>=1", memory, passes, threads)
	}
	salt, _ := base64.RawStdEncoding.DecodeString(m[4])
	key, _ := base64.RawStdEncoding.DecodeString(m[5])
	if len(salt) < 16 || len(key) < 32 {
		t.Errorf("salt %d bytes, key %d bytes; want at least 16 and 32", len(salt), len(key))
	}
	if strings.Contains(h, password) {
		t.Error("hash contains the password")
	}
	if HashPassword(password) == h {
		t.Error("two hashes of one password are equal: the salt is not random")
	}

	for _, tt := range []struct {
		password string
		want     bool
	}{
		{password, true},
		{password + " ", false},
		{"zoë's pass 1234", false},
		{"", false},
	} {
		ok, err := CheckPassword(h, tt.password)
		if err != nil || ok != tt.want {
			t.Errorf("CheckPassword(hash, %q) = %v, %v; want %v", tt.password, ok, err, tt.want)
		}
	}
}

// Parameters come from the stored string, so raising them later leaves
// existing hashes valid.
func TestCheckPasswordUsesStoredParameters(t *testing.T) {
	salt := []byte("0123456789abcdef")
	key := argon2.IDKey([]byte("older pass 99"), salt, 3, 8*1024, 2, 24)
	stored := fmt.Sprintf("$argon2id$v=19$m=8192,t=3,p=2$%s$%s",
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
	if ok, err := CheckPassword(stored, "older pass 99"); !ok || err != nil {
		t.Errorf("CheckPassword with stored parameters = %v, %v; want true", ok, err)
	}
	if ok, err := CheckPassword(stored, "older pass 98"); ok || err != nil {
		t.Errorf("wrong password = %v, %v; want false", ok, err)
	}
}

func TestCheckPasswordEmptyHashNeverMatches(t *testing.T) {
	// The dummy checked in place of a missing hash has a password too.
	for _, p := range []string{"", "not-a-real-password-0", "anything 123"} {
		if ok, err := CheckPassword("", p); ok || err != nil {
			t.Errorf("CheckPassword(\"\", %q) = %v, %v; want false, nil", p, ok, err)
		}
	}
}

func TestCheckPasswordMalformed(t *testing.T) {
	valid := HashPassword("valid pass 123")
	parts := strings.Split(valid, "$")
	join := func(p ...string) string { return strings.Join(p, "$") }
	tests := []struct{ name, hash string }{
		{"plain text", "valid pass 123"},
		{"bcrypt", "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy"},
		{"argon2i", join(parts[0], "argon2i", parts[2], parts[3], parts[4], parts[5])},
		{"missing key", join(parts[:5]...)},
		{"extra part", valid + "$x"},
		{"no version", join(parts[0], parts[1], "x=19", parts[3], parts[4], parts[5])},
		{"parameters not numbers", join(parts[0], parts[1], parts[2], "m=lots,t=2,p=1", parts[4], parts[5])},
		{"salt not base64", join(parts[0], parts[1], parts[2], parts[3], "!!!!", parts[5])},
		{"key not base64", join(parts[0], parts[1], parts[2], parts[3], parts[4], "####")},
		{"empty key", join(parts[0], parts[1], parts[2], parts[3], parts[4], "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, err := CheckPassword(tt.hash, "valid pass 123")
			if ok || !errors.Is(err, ErrBadHash) {
				t.Errorf("CheckPassword(%q) = %v, %v; want ErrBadHash", tt.hash, ok, err)
			}
		})
	}
}

// A damaged row must give ErrBadHash (a 500 for that merchant), not a panic.
func TestCheckPasswordOutOfRangeParameters(t *testing.T) {
	parts := strings.Split(HashPassword("valid pass 123"), "$")
	for _, params := range []string{"m=19456,t=0,p=1", "m=19456,t=2,p=0"} {
		t.Run(params, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("CheckPassword panicked: %v", r)
				}
			}()
			hash := strings.Join([]string{"", parts[1], parts[2], params, parts[4], parts[5]}, "$")
			if _, err := CheckPassword(hash, "valid pass 123"); !errors.Is(err, ErrBadHash) {
				t.Errorf("CheckPassword(%q) error = %v, want ErrBadHash", hash, err)
			}
		})
	}
}

func TestNewNotificationSecret(t *testing.T) {
	s := NewNotificationSecret()
	rest, ok := strings.CutPrefix(s, "whsec_")
	if !ok {
		t.Fatalf("NewNotificationSecret() = %q, want prefix whsec_", s)
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(raw) != 32 {
		t.Fatalf("NewNotificationSecret() = %q: %d bytes, %v; want base64 of 32 bytes", s, len(raw), err)
	}
	if NewNotificationSecret() == s {
		t.Error("NewNotificationSecret repeated itself")
	}
}

func TestDerive(t *testing.T) {
	master := []byte("master key for tests")
	// Card fingerprints and token keys are derived: the derivation must not
	// change between releases. Vector from `openssl dgst -sha256 -hmac`.
	const tokenKey = "43c264f95be17b801d0d512b210af5f2574f7ab05c7ece8aebeb81b30a03974b"
	if got := hex.EncodeToString(Derive(master, "token")); got != tokenKey {
		t.Errorf("Derive(master, token) = %s, want %s", got, tokenKey)
	}
	a, b := Derive(master, "token"), Derive(master, "card-fingerprint")
	if len(a) != 32 || len(b) != 32 {
		t.Fatalf("derived keys of %d and %d bytes, want 32", len(a), len(b))
	}
	if bytes.Equal(a, b) {
		t.Error("two purposes share a key")
	}
	if !bytes.Equal(a, Derive(master, "token")) {
		t.Error("Derive is not deterministic")
	}
	if bytes.Equal(a, Derive([]byte("another master key"), "token")) {
		t.Error("two master keys derive the same key")
	}
	if bytes.Contains(a, master) {
		t.Error("derived key contains the master key")
	}
}
