// Package bill turns a merchant's create-bill request into a payable bill:
// field rules, references, expiry and idempotent creation.
package bill

import (
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
)

// State is where a bill is in its life. Only an open, unexpired bill can be
// charged; processing means one charge attempt holds it.
type State string

const (
	Open       State = "open"
	Processing State = "processing"
	Paid       State = "paid"
	Blocked    State = "blocked" // too many failed attempts
)

// Bill is an order the merchant asked us to collect.
type Bill struct {
	Reference      string // ours: 12 upper-case letters and digits
	MerchantCode   string
	Mode           merchant.Mode
	OrderReference string // the merchant's
	RequestHash    string // of the normalised request, for idempotent retries
	CustomerName   string
	BillerCode     string
	Outlet         string
	Amount         money.Amount
	Description    string
	State          State
	FailedAttempts int
	ExpiresAt      time.Time
	CreatedAt      time.Time

	// requestedExpiry is order.expiry as an instant, zero when the request
	// named none, set by Validate: sameRequest compares it.
	requestedExpiry time.Time
	// requestedExpiryText is order.expiry as written (trimmed), which the
	// stored request hash holds.
	requestedExpiryText string
}

// Expired reports whether the bill can no longer be paid at now.
func (b Bill) Expired(now time.Time) bool { return !now.Before(b.ExpiresAt) }

// ListFilter selects a merchant's bills for the dashboard, newest first.
type ListFilter struct {
	MerchantCode string
	Mode         merchant.Mode
	// State filters by state; Expired is open bills past their expiry.
	State State
	// From and To bound the creation time (zero: unbounded); To excludes.
	From, To time.Time
	// Search matches the bill reference, the order reference, or the last
	// four digits of a card tried on the bill.
	Search string
	// After pages on: only bills older than this one (keyset, no OFFSET).
	After *Cursor
	Limit int
	// Now says which open bills count as expired.
	Now time.Time
}

// Expired is a filter value and a display state, never a stored one: an
// open bill past its expiry.
const Expired State = "expired"

// Cursor is a position in a list of bills: newest first by creation time,
// then reference.
type Cursor struct {
	CreatedAt time.Time
	Reference string
}

// DisplayState is what a person should read for b at now.
func (b Bill) DisplayState(now time.Time) State {
	if b.State == Open && b.Expired(now) {
		return Expired
	}
	return b.State
}
