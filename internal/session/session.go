// Package session is a merchant's signed-in visit to the dashboard. Sessions
// live in the database, so any node serves any session; the browser holds
// only a random id, and only the id's hash is stored.
package session

import (
	"context"
	"errors"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// Lifetimes: a session ends after IdleTimeout without a request, and after
// MaxAge whatever happens (docs/security.md).
const (
	IdleTimeout = 15 * time.Minute
	MaxAge      = 12 * time.Hour
)

// ErrNotFound covers unknown, ended and expired sessions alike.
var ErrNotFound = errors.New("no such session, or it has ended")

// ErrPasswordChanged: the password a sign-in checked was changed before
// its session was stored. Another node may verify against a merchant it
// read up to a second earlier; the change signs every session out, and a
// session stored after it with the old password would have lived on.
var ErrPasswordChanged = errors.New("the password was changed during the sign-in")

// Session is one signed-in browser.
type Session struct {
	IDHash       string
	MerchantCode string
	// Mode is the world the dashboard shows: test or live.
	Mode merchant.Mode
	// CSRF is the token every form of this session carries.
	CSRF string
	// SecondFactor is when the merchant's TOTP code was checked in this
	// session (zero: not yet); live mode needs it.
	SecondFactor time.Time
	CreatedAt    time.Time
	LastSeenAt   time.Time
}

// New starts a session for merchantCode and returns its id, 256 random bits
// that go to the browser's cookie and nowhere else.
func New(merchantCode string, now time.Time) (string, Session) {
	id := secret.NewToken()
	return id, Session{
		IDHash: Hash(id), MerchantCode: merchantCode, Mode: merchant.Test,
		CSRF:      secret.NewToken(),
		CreatedAt: now, LastSeenAt: now,
	}
}

// Hash is how an id is stored and looked up.
func Hash(id string) string {
	return secret.HashToken(id)
}

// Alive reports whether s may still be used at now.
func (s Session) Alive(now time.Time) bool {
	return now.Sub(s.LastSeenAt) < IdleTimeout && now.Sub(s.CreatedAt) < MaxAge
}

// Repo is the storage sessions need.
type Repo interface {
	// CreateSession stores s if the merchant's password hash is still
	// checked, the one the sign-in verified, and says ErrPasswordChanged
	// otherwise.
	CreateSession(ctx context.Context, s Session, checked string) error
	// SessionByHash finds a session that is alive at now.
	SessionByHash(ctx context.Context, idHash string, now time.Time) (Session, error)
	// TouchSession records activity (and the mode and second factor, which
	// a request may change).
	TouchSession(ctx context.Context, s Session) error
	// SeenSession records activity alone: a request that changes nothing
	// must not write back the mode or second factor it read, or a page
	// loading in one tab undoes a mode switch made in another meanwhile.
	SeenSession(ctx context.Context, idHash string, at time.Time) error
	DeleteSession(ctx context.Context, idHash string) error
	// DeleteSessions ends every session of a merchant but keep ("" for
	// none): sign out everywhere, and a password change.
	DeleteSessions(ctx context.Context, merchantCode, keep string) error
}
