// Package audit names the security-relevant events the gateway records.
package audit

import "time"

// Event is one line of the audit log.
type Event struct {
	ID           string
	At           time.Time
	MerchantCode string // empty when no merchant is known
	Actor        string // "cli", "api", or a client address
	Action       string
	Detail       string
}

// Actions.
const (
	KeyRotated    = "api_key.rotated"
	IPNChanged    = "ipn.configured"
	IPNReplayed   = "ipn.replayed"
	LockedOut     = "auth.locked_out"
	MerchantAdded = "merchant.created"
)
