// Package merchant holds what the gateway knows about a merchant: codes,
// credentials per mode and IPN settings, and the onboarding that makes them.
package merchant

import (
	"errors"
	"fmt"
	"time"
)

// Mode separates test money from live money: a token carries its mode and
// data created in one mode is invisible in the other.
type Mode string

const (
	Test Mode = "test"
	Live Mode = "live"
)

// Modes lists every mode, in display order.
var Modes = []Mode{Test, Live}

// ErrBadMode is returned for a mode other than test or live.
var ErrBadMode = errors.New("mode must be test or live")

// ParseMode reads "test" or "live".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Test, Live:
		return Mode(s), nil
	}
	return "", fmt.Errorf("%q: %w", s, ErrBadMode)
}

// Merchant is an onboarded partner. Its username is its merchant code.
type Merchant struct {
	Code              string
	Name              string
	PasswordHash      string
	BillerCode        string
	Outlets           []string
	ServiceID         string // paybill number
	SystemCode        string // till number
	SettlementAccount string
	CreatedAt         time.Time
}

// HasOutlet reports whether code is one of the merchant's outlets.
func (m Merchant) HasOutlet(code string) bool {
	for _, o := range m.Outlets {
		if o == code {
			return true
		}
	}
	return false
}

// Settings are a merchant's per-mode secrets and IPN target.
type Settings struct {
	MerchantCode       string
	Mode               Mode
	NotificationSecret string
	// PreviousSecret is the notification secret a rotation replaced: it
	// signs beside NotificationSecret until PreviousUntil, so that a
	// receiver has that long to take the new one.
	PreviousSecret string
	PreviousUntil  time.Time
	IPN            IPNConfig
	// CallbackOrigins are the origins ("https://shop.example") a hosted
	// form's result may go back to; none: any the form names.
	CallbackOrigins []string
}

// SigningSecrets are the secrets that sign a notification sent at now:
// the current one first, then the one a rotation replaced while its
// overlap lasts.
func (s Settings) SigningSecrets(now time.Time) []string {
	if s.PreviousSecret != "" && now.Before(s.PreviousUntil) {
		return []string{s.NotificationSecret, s.PreviousSecret}
	}
	return []string{s.NotificationSecret}
}

// IPNConfig is where and how IPN messages are delivered for one mode.
type IPNConfig struct {
	URL      string
	Username string
	Password string
	// DisabledAt is set when the receiver answered 410 Gone; saving the
	// configuration again clears it.
	DisabledAt time.Time
}

// APIKey is a stored key: only its hash is ever kept.
type APIKey struct {
	ID           string
	MerchantCode string
	Mode         Mode
	Hash         string
	// Prefix is the key's first characters, which the dashboard shows so a
	// merchant can tell keys apart; the rest exists only as the hash.
	Prefix    string
	CreatedAt time.Time
	RevokedAt time.Time
}

// KeyPrefix is how much of an API key is kept in clear: "kadi_test_" and
// four characters of its random part.
func KeyPrefix(key string) string {
	if len(key) > 14 {
		return key[:14]
	}
	return ""
}

// ErrNotFound is returned by lookups that find no merchant, key or settings.
var ErrNotFound = errors.New("merchant not found")

// ErrTwoStepOn refuses to turn two-step verification on over a factor
// already on: only an operator's reset (kadi merchant reset-access)
// takes one away.
var ErrTwoStepOn = errors.New("two-step verification is already on")
