package auth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// Repo is the storage auth needs.
type Repo interface {
	APIKeyByHash(ctx context.Context, hash string) (merchant.APIKey, error) // active keys only
	MerchantByCode(ctx context.Context, code string) (merchant.Merchant, error)
	Settings(ctx context.Context, code string, mode merchant.Mode) (merchant.Settings, error)
	RevokedKeys(ctx context.Context, since time.Time) ([]string, error)
	// RecordAuthFailure counts a failure for subject and returns when its
	// lockout ends (zero if not locked). newlyLocked is true exactly once
	// per lockout, for the audit log.
	RecordAuthFailure(ctx context.Context, subject string, now time.Time, p LockoutPolicy) (lockedUntil time.Time, newlyLocked bool, err error)
	AuthLockedUntil(ctx context.Context, subject string, now time.Time) (time.Time, error)
	ClearAuthFailures(ctx context.Context, subject string) error
	RecordAudit(ctx context.Context, e audit.Event) error
}

// LockoutPolicy is decisions §2 (PCI DSS 8.3.4): after MaxFailures within
// Window the credential is refused for LockFor.
type LockoutPolicy struct {
	MaxFailures int
	Window      time.Duration
	LockFor     time.Duration
}

// DefaultLockout is 10 failures, 30 minutes.
var DefaultLockout = LockoutPolicy{MaxFailures: 10, Window: 30 * time.Minute, LockFor: 30 * time.Minute}

var (
	// ErrInvalidClient: the API key in the Basic header is wrong.
	ErrInvalidClient = errors.New("the API key is not valid")
	// ErrInvalidGrant: the username (merchant code) or password is wrong.
	ErrInvalidGrant = errors.New("the username or password is not valid")
)

// RequestError is a malformed token request (RFC 6749 invalid_request or
// unsupported_grant_type).
type RequestError struct{ Code, Message string }

func (e *RequestError) Error() string { return e.Message }

// LockedError is returned while a credential or client address is locked.
type LockedError struct{ RetryAfter time.Duration }

func (e *LockedError) Error() string {
	return fmt.Sprintf("too many failed attempts; try again in %d minutes", int(e.RetryAfter.Minutes()+0.999))
}

// Service issues and verifies tokens.
type Service struct {
	Repo        Repo
	Signer      Signer
	Revocations *Revocations
	TTL         time.Duration
	Lockout     LockoutPolicy
	Now         func() time.Time
	Log         *slog.Logger
}

// Grant is a token request after the HTTP layer has read it.
type Grant struct {
	APIKey   string
	Username string // the merchant code
	Password string
	ClientIP string
	// KeyAsPassword lets Password be the API key, as the /token form's text
	// allows.
	KeyAsPassword bool
}

// Issued is a new token with what the responses need.
type Issued struct {
	Token              string
	Claims             Claims
	NotificationSecret string
}

// Issue checks g and returns a token. Unknown merchants and wrong passwords
// cost the same argon2id time and give the same answer.
func (s *Service) Issue(ctx context.Context, g Grant) (Issued, error) {
	now := s.Now()
	if g.APIKey == "" {
		return Issued{}, ErrInvalidClient
	}
	if g.Username == "" || g.Password == "" {
		return Issued{}, &RequestError{Code: "invalid_request", Message: "username and password are required"}
	}
	// Outside text reaches the database below: refuse what no credential
	// can contain (PostgreSQL rejects invalid UTF-8 and NUL outright).
	if !plainText(g.APIKey, 256) || !plainText(g.Username, 64) || !plainText(g.Password, 256) {
		return Issued{}, &RequestError{Code: "invalid_request", Message: "credentials must be printable UTF-8 text"}
	}
	if err := s.checkLock(ctx, "ip:"+g.ClientIP, now); err != nil {
		return Issued{}, err
	}

	key, err := s.Repo.APIKeyByHash(ctx, secret.HashAPIKey(g.APIKey))
	if errors.Is(err, merchant.ErrNotFound) {
		// Only the client address pays for a bad key: merchant codes are
		// public (they sit in every checkout form), so counting these
		// against the named merchant would let anyone lock it out.
		return Issued{}, s.fail(ctx, now, ErrInvalidClient, g.ClientIP, "")
	} else if err != nil {
		return Issued{}, fmt.Errorf("look up API key: %w", err)
	}
	// The key is genuine: failures from here on are its merchant's.
	if err := s.checkLock(ctx, "merchant:"+key.MerchantCode, now); err != nil {
		return Issued{}, err
	}
	var hash string
	if g.Username == key.MerchantCode {
		m, err := s.Repo.MerchantByCode(ctx, key.MerchantCode)
		if err != nil {
			return Issued{}, fmt.Errorf("load merchant: %w", err)
		}
		hash = m.PasswordHash
	}
	ok := g.KeyAsPassword && hash != "" && subtle.ConstantTimeCompare([]byte(g.Password), []byte(g.APIKey)) == 1
	if !ok {
		if ok, err = secret.CheckPassword(hash, g.Password); err != nil {
			return Issued{}, fmt.Errorf("check password: %w", err)
		}
	}
	if !ok {
		return Issued{}, s.fail(ctx, now, ErrInvalidGrant, g.ClientIP, key.MerchantCode)
	}
	if err := s.Repo.ClearAuthFailures(ctx, "merchant:"+key.MerchantCode); err != nil {
		return Issued{}, fmt.Errorf("clear failures: %w", err)
	}
	settings, err := s.Repo.Settings(ctx, key.MerchantCode, key.Mode)
	if err != nil {
		return Issued{}, fmt.Errorf("load settings: %w", err)
	}
	c := Claims{MerchantCode: key.MerchantCode, Mode: key.Mode, KeyID: key.ID, IssuedAt: now, ExpiresAt: now.Add(s.TTL)}
	return Issued{Token: s.Signer.Issue(c), Claims: c, NotificationSecret: settings.NotificationSecret}, nil
}

func (s *Service) checkLock(ctx context.Context, subject string, now time.Time) error {
	until, err := s.Repo.AuthLockedUntil(ctx, subject, now)
	if err != nil {
		return fmt.Errorf("check lockout: %w", err)
	}
	if until.After(now) {
		return &LockedError{RetryAfter: until.Sub(now)}
	}
	return nil
}

// fail counts a failure against the client address and, when the API key
// was genuine, against its merchant; a subject that this failure locks is
// audit-logged once.
func (s *Service) fail(ctx context.Context, now time.Time, cause error, clientIP, merchantCode string) error {
	subjects := []string{"ip:" + clientIP}
	if merchantCode != "" {
		subjects = append(subjects, "merchant:"+merchantCode)
	}
	for _, sub := range subjects {
		until, newly, err := s.Repo.RecordAuthFailure(ctx, sub, now, s.Lockout)
		if err != nil {
			return fmt.Errorf("record auth failure: %w", err)
		}
		if newly {
			s.Log.WarnContext(ctx, "credential locked out", "subject", sub, "until", until)
			err := s.Repo.RecordAudit(ctx, audit.Event{ID: secret.NewID("aud"), At: now, MerchantCode: merchantCode, Actor: "ip:" + clientIP, Action: audit.LockedOut,
				Detail: fmt.Sprintf("%s locked until %s after %d failures", sub, until.UTC().Format(time.RFC3339), s.Lockout.MaxFailures)})
			if err != nil {
				return fmt.Errorf("audit lockout: %w", err)
			}
		}
	}
	return cause
}

// plainText reports whether v is valid UTF-8 of at most max bytes with no
// control characters.
func plainText(v string, max int) bool {
	return len(v) <= max && utf8.ValidString(v) && strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0
}

// Verify checks a bearer token: signature, expiry and revocation, all in
// memory. No database access, no password hash.
func (s *Service) Verify(token string) (Claims, error) {
	c, err := s.Signer.Parse(token, s.Now())
	if err != nil {
		return Claims{}, err
	}
	if s.Revocations.Revoked(c.KeyID) {
		return Claims{}, ErrInvalidToken
	}
	return c, nil
}
