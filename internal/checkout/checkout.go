// Package checkout is the server-side state of one shopper's visit to the
// hosted pages. The merchant's form carries a bearer token into the
// shopper's browser; Kadi's own pages never write it back. After the first
// POST /cardPay a checkout session, known to the browser only by an opaque
// random id, carries what the next pages need: which bill, which mode, the
// merchant's form fields and the 3-D Secure challenge waiting, if any.
package checkout

import (
	"context"
	"errors"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// TTL is how long a session lives from its start: long enough to type a
// card and answer a 3-D Secure challenge, short enough that a page left
// open on a shared computer stops working.
const TTL = 30 * time.Minute

// ErrNotFound covers missing and expired sessions alike.
var ErrNotFound = errors.New("no such checkout session, or it has expired")

// Session is one shopper's checkout. Only IDHash is stored; the id itself
// lives in the shopper's page.
type Session struct {
	IDHash        string
	MerchantCode  string
	Mode          merchant.Mode
	BillReference string
	// Fields are the merchant's form fields other than the token and the
	// card: what the hosted form needs to finish the payment.
	Fields map[string]string
	// PaymentID is the payment waiting for this session's 3-D Secure code.
	PaymentID string
	// EntryPage marks a session of Kadi's own card-entry page, where the
	// shopper may try another card after a decline. A session made only to
	// carry a merchant-posted form's 3-D Secure challenge is not one: that
	// form keeps the spec's one-shot behaviour.
	EntryPage bool
	// Notice is what the card page shows again after a refused attempt.
	Notice    Notice
	CreatedAt time.Time
	ExpiresAt time.Time
}

// Notice is what Kadi's card page shows again after a refused attempt:
// why, and what the shopper typed that may be shown again. Never the card
// number or the security code.
type Notice struct {
	// Errors maps a card field to its message id (internal/i18n).
	Errors map[string]string `json:"errors,omitempty"`
	// Declined is the message id of the attempt the card issuer refused,
	// and DeclineCode the acquirer's code for why.
	Declined    string `json:"declined,omitempty"`
	DeclineCode string `json:"declineCode,omitempty"`
	FirstName   string `json:"firstName,omitempty"`
	LastName    string `json:"lastName,omitempty"`
	Expiry      string `json:"expiry,omitempty"` // as typed: MM / YY
}

// New starts a session and returns its id: 256 random bits, which go to
// the browser and nowhere else.
func New(merchantCode string, mode merchant.Mode, billRef string, fields map[string]string, now time.Time) (string, Session) {
	id := secret.NewToken()
	return id, Session{
		IDHash: Hash(id), MerchantCode: merchantCode, Mode: mode, BillReference: billRef,
		Fields: fields, CreatedAt: now, ExpiresAt: now.Add(TTL),
	}
}

// Hash is how a session id is stored and looked up: a copy of the
// database does not hand out live sessions.
func Hash(id string) string {
	return secret.HashToken(id)
}

// ValidID reports whether id has the shape New gives, so nothing else
// reaches the database.
func ValidID(id string) bool {
	if len(id) != 43 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Repo is the storage sessions need.
type Repo interface {
	CreateCheckout(ctx context.Context, s Session) error
	// CheckoutByHash finds a session not yet expired at now.
	CheckoutByHash(ctx context.Context, idHash string, now time.Time) (Session, error)
	BindCheckoutPayment(ctx context.Context, idHash, paymentID string) error
	// SetCheckoutNotice replaces what the session's card page shows again.
	SetCheckoutNotice(ctx context.Context, idHash string, n Notice) error
	// EndCheckout expires the session at now: its pages stop working.
	EndCheckout(ctx context.Context, idHash string, now time.Time) error
	DeleteExpiredCheckouts(ctx context.Context, now time.Time) (int64, error)
}
