package auth

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
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
	// ReserveAuthAttempt counts an attempt against subject before its
	// password is checked. reserved is false while the subject is locked
	// (lockedUntil says until when) or while attempts already counted, failed
	// or in flight, use up the policy's allowance.
	ReserveAuthAttempt(ctx context.Context, subject string, now time.Time, p LockoutPolicy) (lockedUntil time.Time, reserved bool, err error)
	// ReleaseAuthAttempt gives back one reserved attempt that was never
	// checked.
	ReleaseAuthAttempt(ctx context.Context, subject string) error
	// RecordAuthFailure settles a reserved attempt that failed and returns
	// when subject's lockout ends (zero if not locked). newlyLocked is true
	// exactly once per lockout, for the audit log.
	RecordAuthFailure(ctx context.Context, subject string, now time.Time, p LockoutPolicy) (lockedUntil time.Time, newlyLocked bool, err error)
	// ThrottleAuthFailure counts a failure against subject and returns when
	// it may try again (zero: at once).
	ThrottleAuthFailure(ctx context.Context, subject string, now time.Time, p ThrottlePolicy) (next time.Time, err error)
	// AuthLockedUntil returns when subject's lock or throttle ends.
	AuthLockedUntil(ctx context.Context, subject string, now time.Time) (time.Time, error)
	ClearAuthFailures(ctx context.Context, subject string) error
	RecordAudit(ctx context.Context, e audit.Event) error
}

// LockoutPolicy is docs/security.md (PCI DSS 8.3.4) for a merchant's
// credential: after MaxFailures within Window it is refused for LockFor.
type LockoutPolicy struct {
	MaxFailures int
	Window      time.Duration
	LockFor     time.Duration
}

// DefaultLockout is 10 failures, 30 minutes.
var DefaultLockout = LockoutPolicy{MaxFailures: 10, Window: 30 * time.Minute, LockFor: 30 * time.Minute}

// ThrottlePolicy slows a client address down instead of locking it: many
// merchants can share one address (an office, a carrier's NAT, a proxy), and
// a lock there would shut all of them out. After Free failures within
// Window, each further failure makes the address wait BaseDelay, doubling
// up to MaxDelay.
type ThrottlePolicy struct {
	Free      int
	Window    time.Duration
	BaseDelay time.Duration
	MaxDelay  time.Duration
}

// DefaultThrottle lets 10 failures through, then waits 1 s, 2 s, 4 s … at
// most a minute between guesses: about 60 an hour from one address, while
// a merchant behind it waits a minute at worst.
var DefaultThrottle = ThrottlePolicy{Free: 10, Window: 30 * time.Minute, BaseDelay: time.Second, MaxDelay: time.Minute}

// Delay is how long an address must wait after its nth failure.
func (p ThrottlePolicy) Delay(n int) time.Duration {
	if n <= p.Free {
		return 0
	}
	d := p.BaseDelay
	for i := p.Free + 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	return min(d, p.MaxDelay)
}

var (
	// ErrInvalidClient: the API key in the Basic header is wrong.
	ErrInvalidClient = errors.New("the API key is not valid")
	// ErrInvalidGrant: the username (merchant code) or password is wrong.
	ErrInvalidGrant = errors.New("the username or password is not valid")
	// ErrKeyElsewhere: a genuine API key of another merchant than the
	// code sent. A set-up mistake (one merchant's key beside another's
	// code), not a password guess: said as such, counted against the
	// client address only, and telling the key's holder reveals nothing
	// it lacks (the answer is the same whether the code exists or not).
	ErrKeyElsewhere = fmt.Errorf("%w: this API key belongs to another merchant code than the one sent", ErrInvalidGrant)
	// ErrNoAPIKey: the request carried no API key at all, a set-up
	// mistake said as such.
	ErrNoAPIKey = fmt.Errorf("%w: no API key was sent; send it as Authorization: Basic <API key>", ErrInvalidClient)
	// ErrBusy: every password-hashing slot stayed taken for the whole
	// queue wait. The caller should come back in a second.
	ErrBusy = errors.New("the gateway is busy checking other sign-ins; try again in a moment")
)

// RequestError is a malformed token request (RFC 6749 invalid_request or
// unsupported_grant_type).
type RequestError struct{ Code, Message string }

func (e *RequestError) Error() string { return e.Message }

// LockedError is returned while a credential or client address is locked.
type LockedError struct{ RetryAfter time.Duration }

func (e *LockedError) Error() string {
	seconds := int(e.RetryAfter.Seconds() + 0.999) // as Retry-After says it
	switch minutes := (seconds + 59) / 60; {
	case seconds <= 1:
		return "too many failed attempts; try again in 1 second"
	case seconds < 60:
		return fmt.Sprintf("too many failed attempts; try again in %d seconds", seconds)
	case minutes == 1:
		return "too many failed attempts; try again in 1 minute"
	default:
		return fmt.Sprintf("too many failed attempts; try again in %d minutes", minutes)
	}
}

// Service issues and verifies tokens.
type Service struct {
	Repo        Repo
	Signer      Signer
	Revocations *Revocations
	// TTL is the lifetime of new tokens and the longest any token is
	// honoured from its issue time, whatever lifetime it was issued with.
	TTL      time.Duration
	Lockout  LockoutPolicy
	Throttle ThrottlePolicy
	// Hashes bounds the argon2id checks running at once: each takes 19 MiB,
	// so a login storm must queue, not allocate.
	Hashes *HashGate
	Now    func() time.Time
	Log    *slog.Logger
	// CheckPassword is secret.CheckPassword unless a test counts the calls.
	CheckPassword func(hash, password string) (bool, error)
}

// Grant is a token request after the HTTP layer has read it.
type Grant struct {
	APIKey   string
	Username string // the merchant code
	// UsernameField is what the request calls Username, for the message
	// when it is missing; "username" if empty.
	UsernameField string
	Password      string
	ClientIP      string
	// KeyAsPassword lets Password be the API key, as the /token form's text
	// allows.
	KeyAsPassword bool
	// Scope of the token to issue: ScopeAPI (the zero value) or ScopePay.
	Scope Scope
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
		return Issued{}, ErrNoAPIKey
	}
	if g.Username == "" || g.Password == "" {
		return Issued{}, &RequestError{Code: "invalid_request", Message: cmp.Or(g.UsernameField, "username") + " and password are required"}
	}
	// Outside text reaches the database below: refuse what no credential
	// can contain (PostgreSQL rejects invalid UTF-8 and NUL outright).
	if !plainText(g.APIKey, 256) || !plainText(g.Username, 64) || !plainText(g.Password, 256) {
		return Issued{}, &RequestError{Code: "invalid_request", Message: "credentials must be printable UTF-8 text"}
	}
	if g.Scope != ScopeAPI && g.Scope != ScopePay {
		return Issued{}, fmt.Errorf("issue: scope %q cannot be granted", g.Scope)
	}
	if err := s.checkThrottle(ctx, g.ClientIP, now); err != nil {
		return Issued{}, err
	}

	key, err := s.Repo.APIKeyByHash(ctx, secret.HashAPIKey(g.APIKey))
	if errors.Is(err, merchant.ErrNotFound) {
		// Only the client address pays for a bad key: merchant codes are
		// public (they sit in every checkout form), so counting these
		// against the named merchant would let anyone lock it out.
		return Issued{}, s.throttle(ctx, now, ErrInvalidClient, g.ClientIP)
	} else if err != nil {
		return Issued{}, fmt.Errorf("look up API key: %w", err)
	}
	if g.Username != key.MerchantCode {
		return Issued{}, s.throttle(ctx, now, ErrKeyElsewhere, g.ClientIP)
	}
	// The key is genuine: failures from here on are its merchant's too.
	err = s.guarded(ctx, now, tokenLock(key.MerchantCode), g.ClientIP, key.MerchantCode, func() (bool, error) {
		return s.checkGrant(ctx, g, key)
	})
	if err != nil {
		return Issued{}, err
	}
	settings, err := s.Repo.Settings(ctx, key.MerchantCode, key.Mode)
	if err != nil {
		return Issued{}, fmt.Errorf("load settings: %w", err)
	}
	c := Claims{MerchantCode: key.MerchantCode, Mode: key.Mode, KeyID: key.ID, Scope: g.Scope, IssuedAt: now, ExpiresAt: now.Add(s.TTL)}
	return Issued{Token: s.Signer.Issue(c), Claims: c, NotificationSecret: settings.NotificationSecret}, nil
}

// guarded runs check, a password check, counted against subject: the
// attempt is reserved before the check, so parallel guesses cannot all be
// checked before any of them is counted; a failure is settled (and may lock
// the subject), a success clears the count, and a check that could not run
// gives its place back.
func (s *Service) guarded(ctx context.Context, now time.Time, subject, clientIP, merchantCode string, check func() (bool, error)) error {
	until, reserved, err := s.Repo.ReserveAuthAttempt(ctx, subject, now, s.Lockout)
	if err != nil {
		return fmt.Errorf("reserve auth attempt: %w", err)
	}
	if !reserved {
		if !until.After(now) {
			// No lock: the allowance is held by attempts still being
			// checked, which may all be right (a merchant's workers asking
			// for tokens at once). Come back in a moment, like a full hash
			// gate; not "locked for 30 minutes".
			return ErrBusy
		}
		return &LockedError{RetryAfter: until.Sub(now)}
	}
	ok, err := check()
	if err != nil {
		if cerr := s.Repo.ReleaseAuthAttempt(context.WithoutCancel(ctx), subject); cerr != nil {
			s.Log.WarnContext(ctx, "return unused auth attempt", "err", cerr)
		}
		return err
	}
	if !ok {
		return s.fail(ctx, now, clientIP, merchantCode, subject)
	}
	if err := s.Repo.ClearAuthFailures(ctx, subject); err != nil {
		return fmt.Errorf("clear failures: %w", err)
	}
	return nil
}

// The dashboard's locks of a merchant: its sign-in, the password
// re-entered in a session, and the second factor's codes.
func signInLock(code string) string { return "dashboard:" + code }

// unknownCode is how a username no merchant has is counted: itself when it
// has a merchant code's shape (ten digits, never a card number), else as
// one of all the others.
func unknownCode(username string) string {
	if len(username) == 10 && strings.Trim(username, "0123456789") == "" {
		return username
	}
	return "not-a-merchant-code"
}
func reauthLock(code string) string       { return "reauth:" + code }
func secondFactorLock(code string) string { return "totp:" + code }

func tokenLock(code string) string { return "merchant:" + code }

// AccessLocks are the subjects of a merchant's locks, the dashboard's and
// its API tokens', for an operator's reset to lift (kadi merchant
// reset-access): a merchant whose systems kept the old password after a
// reset locked its tokens, and no command lifted that for 30 minutes.
func AccessLocks(code string) []string {
	return []string{signInLock(code), reauthLock(code), secondFactorLock(code), tokenLock(code)}
}

// SignIn checks a dashboard sign-in: username (the merchant code) and
// password. Failures lock the merchant's dashboard sign-in after the
// lockout's count, but not its API tokens: merchant codes are public (every
// checkout form carries one), so a stranger must not be able to stop a
// merchant's payments by failing its sign-in. Unknown merchants cost the
// same argon2id time and get the same answer as wrong passwords.
func (s *Service) SignIn(ctx context.Context, username, password, clientIP string) (merchant.Merchant, error) {
	now := s.Now()
	if username == "" || password == "" || !plainText(username, 64) || !plainText(password, 256) {
		return merchant.Merchant{}, ErrInvalidGrant
	}
	if err := s.checkThrottle(ctx, clientIP, now); err != nil {
		return merchant.Merchant{}, err
	}
	m, err := s.Repo.MerchantByCode(ctx, username)
	known := err == nil
	if err != nil && !errors.Is(err, merchant.ErrNotFound) {
		return merchant.Merchant{}, fmt.Errorf("load merchant: %w", err)
	}
	// An unknown code is counted and locked as a known one is: a lock that
	// only real merchants' codes could reach would tell which exist. What
	// is not a merchant code's shape may be anything a stranger typed, a
	// card number included, which auth_failures would keep for an hour: it
	// is counted in one bucket, which no merchant can be in.
	lock := signInLock(unknownCode(username))
	if known {
		lock = signInLock(m.Code)
	}
	err = s.guarded(ctx, now, lock, clientIP, m.Code, func() (bool, error) {
		ok, err := s.hashCheck(ctx, m.PasswordHash, password)
		return ok && known, err
	})
	return m, err // the merchant, when known, even on a failure: its audit log records it
}

// Reauthenticate is a re-authentication inside a signed-in session (before
// regenerating a key or revealing a secret): counted like a sign-in.
func (s *Service) Reauthenticate(ctx context.Context, m merchant.Merchant, password, clientIP string) error {
	if password == "" || !plainText(password, 256) {
		return ErrInvalidGrant
	}
	// Counted apart from sign-ins: the merchant code is public, and a
	// stranger's failed sign-ins must not keep a signed-in merchant from
	// rotating a leaked key. Only a session reaches this.
	return s.guarded(ctx, s.Now(), reauthLock(m.Code), clientIP, m.Code, func() (bool, error) {
		return s.hashCheck(ctx, m.PasswordHash, password)
	})
}

// SecondFactor checks a signed-in dashboard session's second step (a TOTP
// or recovery code) with check, counted under a lock of its own: three
// codes of a million are good at any moment, so uncounted guesses from a
// session (which the password alone opens) find one in minutes. Failures
// also throttle the client address, as a wrong password does.
func (s *Service) SecondFactor(ctx context.Context, merchantCode, clientIP string, check func() (bool, error)) error {
	return s.guarded(ctx, s.Now(), secondFactorLock(merchantCode), clientIP, merchantCode, check)
}

// checkGrant checks g's password for key's merchant, within the hash gate.
// An unknown username costs the same argon2id time as a wrong password.
func (s *Service) checkGrant(ctx context.Context, g Grant, key merchant.APIKey) (bool, error) {
	var hash string
	if g.Username == key.MerchantCode {
		m, err := s.Repo.MerchantByCode(ctx, key.MerchantCode)
		if err != nil {
			return false, fmt.Errorf("load merchant: %w", err)
		}
		hash = m.PasswordHash
	}
	if g.KeyAsPassword && hash != "" && subtle.ConstantTimeCompare([]byte(g.Password), []byte(g.APIKey)) == 1 {
		return true, nil
	}
	return s.hashCheck(ctx, hash, g.Password)
}

// hashCheck runs one argon2id check within the hash gate; an empty hash
// costs the same time and never matches.
func (s *Service) hashCheck(ctx context.Context, hash, password string) (bool, error) {
	release, err := s.Hashes.acquire(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	check := s.CheckPassword
	if check == nil {
		check = secret.CheckPassword
	}
	ok, err := check(hash, password)
	if err != nil {
		return false, fmt.Errorf("check password: %w", err)
	}
	return ok, nil
}

// AuthenticateKey checks an API key presented directly (HTTP Basic), for
// the endpoints that show or act on other customers' data: a key never
// reaches a shopper's browser, unlike a bearer token. A rotated key fails at
// once on every node: only active keys are found.
func (s *Service) AuthenticateKey(ctx context.Context, apiKey, clientIP string) (Claims, error) {
	now := s.Now()
	if apiKey == "" || !plainText(apiKey, 256) {
		return Claims{}, ErrInvalidClient
	}
	if err := s.checkThrottle(ctx, clientIP, now); err != nil {
		return Claims{}, err
	}
	key, err := s.Repo.APIKeyByHash(ctx, secret.HashAPIKey(apiKey))
	if errors.Is(err, merchant.ErrNotFound) {
		return Claims{}, s.throttle(ctx, now, ErrInvalidClient, clientIP)
	} else if err != nil {
		return Claims{}, fmt.Errorf("look up API key: %w", err)
	}
	return Claims{MerchantCode: key.MerchantCode, Mode: key.Mode, KeyID: key.ID, Scope: ScopeKey, IssuedAt: now}, nil
}

// checkThrottle refuses an address that must still wait after its last
// failure.
func (s *Service) checkThrottle(ctx context.Context, clientIP string, now time.Time) error {
	until, err := s.Repo.AuthLockedUntil(ctx, throttleSubject(clientIP), now)
	if err != nil {
		return fmt.Errorf("check throttle: %w", err)
	}
	if until.After(now) {
		return &LockedError{RetryAfter: until.Sub(now)}
	}
	return nil
}

// throttle counts a failure against the client address and returns cause.
func (s *Service) throttle(ctx context.Context, now time.Time, cause error, clientIP string) error {
	next, err := s.Repo.ThrottleAuthFailure(ctx, throttleSubject(clientIP), now, s.Throttle)
	if err != nil {
		return fmt.Errorf("record auth failure: %w", err)
	}
	if !next.IsZero() {
		s.Log.InfoContext(ctx, "client address throttled", "address", clientIP, "until", next)
	}
	return cause
}

// throttleSubject is what a client address's failures are counted
// under: an IPv4 address alone, an IPv6 address by its /64, the least a
// network hands one subscriber, who could otherwise draw a fresh address
// for every guess.
func throttleSubject(clientIP string) string {
	a, err := netip.ParseAddr(clientIP)
	if err != nil || !a.Unmap().Is6() {
		return "ip:" + clientIP
	}
	p, _ := a.WithZone("").Prefix(64)
	return "ip:" + p.String()
}

// fail settles a wrong password: the address is throttled, and the
// merchant's credential is locked when its failures reach the maximum; a
// new lockout is audit-logged once.
func (s *Service) fail(ctx context.Context, now time.Time, clientIP, merchantCode, sub string) error {
	if err := s.throttle(ctx, now, nil, clientIP); err != nil {
		return err
	}
	until, newly, err := s.Repo.RecordAuthFailure(ctx, sub, now, s.Lockout)
	if err != nil {
		return fmt.Errorf("record auth failure: %w", err)
	}
	if newly {
		s.Log.WarnContext(ctx, "credential locked out", "subject", sub, "until", until)
	}
	if newly && merchantCode != "" { // no merchant, no audit log: an unknown code's sign-in
		err := s.Repo.RecordAudit(ctx, audit.Event{ID: secret.NewID("aud"), At: now, MerchantCode: merchantCode, Actor: "ip:" + clientIP, Action: audit.LockedOut,
			Detail: fmt.Sprintf("%s locked until %s after %d failures", sub, until.UTC().Format(time.RFC3339), s.Lockout.MaxFailures)})
		if err != nil {
			return fmt.Errorf("audit lockout: %w", err)
		}
	}
	return ErrInvalidGrant
}

// plainText reports whether v is valid UTF-8 of at most max bytes with no
// control characters.
func plainText(v string, max int) bool {
	return len(v) <= max && utf8.ValidString(v) && strings.IndexFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) < 0
}

// Verify checks a bearer token: signature, expiry and revocation, all in
// memory. No database access, no password hash. A token is honoured for at
// most the current TTL from its issue time, whatever lifetime it was issued
// with, so shortening --token-ttl shortens every token already out.
func (s *Service) Verify(token string) (Claims, error) {
	now := s.Now()
	c, err := s.Signer.Parse(token, now)
	if err != nil {
		return Claims{}, err
	}
	if !now.Before(c.IssuedAt.Add(s.TTL)) {
		return Claims{}, ErrTokenExpired
	}
	if s.Revocations.Revoked(c.KeyID) {
		return Claims{}, ErrTokenRevoked
	}
	if !s.Revocations.Known() {
		return Claims{}, ErrRevocationsUnknown
	}
	return c, nil
}
