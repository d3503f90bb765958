package merchant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/secret"
)

// Credentials are the secrets handed to a new merchant. They are shown once:
// only hashes of the password and API keys are stored.
type Credentials struct {
	MerchantCode      string         `json:"merchantCode"`
	Username          string         `json:"username"`
	Password          string         `json:"password"`
	BillerCode        string         `json:"billerCode"`
	OutletCode        string         `json:"outletCode"`
	ServiceID         string         `json:"serviceId"`
	SystemCode        string         `json:"systemCode"`
	SettlementAccount string         `json:"settlementAccount"`
	Test              ModeCredential `json:"test"`
	Live              ModeCredential `json:"live"`
}

// ModeCredential is one mode's API key and notification secret.
type ModeCredential struct {
	APIKey             string `json:"apiKey"`
	NotificationSecret string `json:"notificationSecret"`
}

// Registry is the storage onboarding needs.
type Registry interface {
	CreateMerchant(ctx context.Context, m Merchant, settings []Settings, keys []APIKey) error
	MerchantByCode(ctx context.Context, code string) (Merchant, error)
	RotateAPIKey(ctx context.Context, key APIKey) error
	// SetIPN saves a mode's IPN target, re-enables it, and says how many
	// parked notifications it sent (ipn.ParkedResendWindow).
	SetIPN(ctx context.Context, code string, mode Mode, cfg IPNConfig) (resent int, err error)
}

// ErrBadName is returned for a merchant name that is empty or over-long,
// or holds a control character or a card number: the name is shown on
// every hosted page, the dashboard and the CLI's listings, and kept at
// rest, where no card number may be.
var ErrBadName = errors.New("merchant name must be 1 to 100 characters of text, without control characters or a card number")

// Onboard creates a merchant with fresh codes and credentials.
func Onboard(ctx context.Context, reg Registry, name string, now time.Time) (Credentials, error) {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 100 || !utf8.ValidString(name) || strings.IndexFunc(name, unicode.IsControl) >= 0 || card.HoldsPAN(name) {
		return Credentials{}, ErrBadName
	}
	code := secret.RandomDigits(10)
	password := secret.NewPassword()
	m := Merchant{
		Code:              code,
		Name:              name,
		PasswordHash:      secret.HashPassword(password),
		BillerCode:        secret.RandomDigits(6),
		Outlets:           []string{secret.RandomDigits(8)},
		ServiceID:         secret.RandomDigits(6),
		SystemCode:        secret.RandomDigits(7),
		SettlementAccount: secret.RandomDigits(13),
		CreatedAt:         now,
	}
	creds := Credentials{
		MerchantCode: code, Username: code, Password: password,
		BillerCode: m.BillerCode, OutletCode: m.Outlets[0],
		ServiceID: m.ServiceID, SystemCode: m.SystemCode, SettlementAccount: m.SettlementAccount,
	}
	var settings []Settings
	var keys []APIKey
	for _, mode := range Modes {
		key := secret.NewAPIKey(string(mode))
		mc := ModeCredential{APIKey: key, NotificationSecret: secret.NewNotificationSecret()}
		settings = append(settings, Settings{MerchantCode: code, Mode: mode, NotificationSecret: mc.NotificationSecret})
		keys = append(keys, APIKey{ID: secret.NewID("key"), MerchantCode: code, Mode: mode, Hash: secret.HashAPIKey(key), Prefix: KeyPrefix(key), CreatedAt: now})
		if mode == Test {
			creds.Test = mc
		} else {
			creds.Live = mc
		}
	}
	if err := reg.CreateMerchant(ctx, m, settings, keys); err != nil {
		return Credentials{}, fmt.Errorf("create merchant: %w", err)
	}
	return creds, nil
}

// RotateKey replaces the merchant's API key for mode. The old key, and every
// token issued with it, stop working.
func RotateKey(ctx context.Context, reg Registry, code string, mode Mode, now time.Time) (string, error) {
	if _, err := reg.MerchantByCode(ctx, code); err != nil {
		return "", err
	}
	key := secret.NewAPIKey(string(mode))
	err := reg.RotateAPIKey(ctx, APIKey{ID: secret.NewID("key"), MerchantCode: code, Mode: mode, Hash: secret.HashAPIKey(key), Prefix: KeyPrefix(key), CreatedAt: now})
	if err != nil {
		return "", fmt.Errorf("rotate key: %w", err)
	}
	return key, nil
}
