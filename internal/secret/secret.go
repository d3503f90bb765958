// Package secret makes and checks the gateway's credentials: random codes,
// API keys (stored only as a hash), notification secrets and argon2id password
// hashes. Nothing here touches storage.
package secret

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters: docs/security.md asks for at least 19 MiB and 2 passes
// (OWASP's minimum); we take exactly that so a login costs ~30 ms on CI.
const (
	argonMemoryKiB = 19 * 1024
	argonPasses    = 2
	argonThreads   = 1
	argonKeyLen    = 32
	argonSaltLen   = 16
)

// MinPasswordLength is the shortest password docs/security.md accepts, and
// MaxPasswordBytes the longest: sign-in and the token endpoint take up to
// 256 bytes of printable text, so a password set within these can always
// be typed back.
const (
	MinPasswordLength = 12
	MaxPasswordBytes  = 200
)

var (
	ErrWeakPassword = errors.New("password must be at least 12 characters with letters and digits")
	ErrPasswordText = errors.New("password must be printable text of at most 200 bytes, without tabs, line breaks or other control characters")
	ErrBadHash      = errors.New("stored password hash is malformed")
)

// RandomBytes returns n bytes from the operating system's CSPRNG.
func RandomBytes(n int) []byte {
	b := make([]byte, n)
	// crypto/rand.Read never returns an error since Go 1.24; it crashes the
	// program instead, which is the right answer when there is no entropy.
	_, _ = rand.Read(b)
	return b
}

const upperAlnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// RandomString returns n characters drawn uniformly from alphabet.
func RandomString(n int, alphabet string) string {
	var sb strings.Builder
	sb.Grow(n)
	limit := 256 - 256%len(alphabet) // reject to avoid modulo bias
	for sb.Len() < n {
		for _, b := range RandomBytes(n) {
			if int(b) < limit && sb.Len() < n {
				sb.WriteByte(alphabet[int(b)%len(alphabet)])
			}
		}
	}
	return sb.String()
}

// RandomDigits returns n decimal digits, the first never zero so that codes
// survive being read as numbers by spreadsheets and PHP.
func RandomDigits(n int) string {
	s := RandomString(n, "0123456789")
	if s[0] == '0' {
		s = RandomString(1, "123456789") + s[1:]
	}
	return s
}

// Unambiguous is A–Z and 2–9 without I, O, 1 and 0, which people misread
// when they copy a code from a receipt or say it on the phone.
const Unambiguous = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// RandomUpperAlnum returns n characters of A–Z and 0–9.
func RandomUpperAlnum(n int) string { return RandomString(n, upperAlnum) }

// NewToken returns 256 random bits as URL-safe text (43 characters): an
// id that goes to a browser and that nobody can guess.
func NewToken() string { return base64.RawURLEncoding.EncodeToString(RandomBytes(32)) }

// HashToken is how a token is stored and looked up: a copy of the database
// hands out no live token.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// NewID returns a prefixed random identifier, e.g. "pay_3f9c…".
func NewID(prefix string) string {
	return prefix + "_" + hex.EncodeToString(RandomBytes(12))
}

// NewOrderedID is NewID for rows written at a high rate (payments, IPN
// events): the same shape, but its first four bytes are the time in
// seconds, so the ids of one second sort together and a database inserts
// them at the end of its index instead of on a random page each, which
// was a page written per row per index at every commit. The other eight
// bytes are random: 64 bits that nobody guesses, though these ids carry
// no authority anyway.
func NewOrderedID(prefix string, now time.Time) string {
	b := RandomBytes(12)
	binary.BigEndian.PutUint32(b, uint32(now.Unix()))
	return prefix + "_" + hex.EncodeToString(b)
}

// NewAPIKey returns a fresh 256-bit API key. The prefix tells a human which
// mode a leaked key belongs to; it carries no authority.
func NewAPIKey(mode string) string {
	return "kadi_" + mode + "_" + base64.RawURLEncoding.EncodeToString(RandomBytes(32))
}

// HashAPIKey is what we store for a key. A key has 256 bits of entropy, so a
// plain SHA-256 is as strong as a slow hash and keeps the lookup indexable.
func HashAPIKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// NewNotificationSecret returns a Standard Webhooks secret: "whsec_" and
// base64 of 32 random bytes.
func NewNotificationSecret() string {
	return "whsec_" + base64.StdEncoding.EncodeToString(RandomBytes(32))
}

// NewPassword returns a random password that passes CheckPasswordStrength.
func NewPassword() string {
	for {
		p := RandomString(20, "abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789")
		if CheckPasswordStrength(p) == nil {
			return p
		}
	}
}

// CheckPasswordStrength applies docs/security.md: 12+ characters, letters
// and digits, printable text (ErrPasswordText otherwise) of at most
// MaxPasswordBytes.
func CheckPasswordStrength(p string) error {
	if len(p) > MaxPasswordBytes || !utf8.ValidString(p) || strings.ContainsFunc(p, unicode.IsControl) {
		return ErrPasswordText
	}
	var letter, digit bool
	for _, r := range p {
		letter = letter || unicode.IsLetter(r)
		digit = digit || unicode.IsDigit(r)
	}
	if len([]rune(p)) < MinPasswordLength || !letter || !digit {
		return ErrWeakPassword
	}
	return nil
}

// HashPassword returns an encoded argon2id hash in the PHC string format.
func HashPassword(password string) string {
	salt := RandomBytes(argonSaltLen)
	key := argon2.IDKey([]byte(password), salt, argonPasses, argonMemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemoryKiB, argonPasses, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// dummyHash is checked against when there is no real hash, so that a request
// for an unknown merchant costs the same time as one for a known merchant.
var dummyHash = HashPassword("not-a-real-password-0")

// CheckPassword reports whether password matches encoded, in constant time.
// An empty encoded hash is checked against a dummy and never matches.
func CheckPassword(encoded, password string) (bool, error) {
	real := encoded != ""
	if !real {
		encoded = dummyHash
	}
	var version, memory, passes int
	var threads uint8
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, ErrBadHash
	}
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil {
		return false, ErrBadHash
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &passes, &threads); err != nil {
		return false, ErrBadHash
	}
	// A stored hash is trusted input, but a corrupted one must not crash
	// the process (argon2 panics on zero passes) or allocate without bound.
	if version != argon2.Version || passes < 1 || passes > 16 || threads < 1 || memory < 8*1024 || memory > 1<<20 {
		return false, ErrBadHash
	}
	salt, err1 := base64.RawStdEncoding.DecodeString(parts[4])
	want, err2 := base64.RawStdEncoding.DecodeString(parts[5])
	if err1 != nil || err2 != nil || len(want) == 0 {
		return false, ErrBadHash
	}
	got := argon2.IDKey([]byte(password), salt, uint32(passes), uint32(memory), threads, uint32(len(want)))
	return real && subtle.ConstantTimeCompare(got, want) == 1, nil
}

// Derive returns a purpose-specific key from the server's master key, so one
// leaked derived key (say, the card fingerprint key) reveals no other.
func Derive(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("kadi/" + purpose))
	return m.Sum(nil)
}
