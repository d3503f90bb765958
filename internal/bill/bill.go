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
}

// Expired reports whether the bill can no longer be paid at now.
func (b Bill) Expired(now time.Time) bool { return !now.Before(b.ExpiresAt) }
