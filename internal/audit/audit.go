// Package audit names the security-relevant events the gateway records.
package audit

import (
	"context"
	"strings"
	"time"
)

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
	IPNTested     = "ipn.test_sent"
	LockedOut     = "auth.locked_out"
	MerchantAdded = "merchant.created"
	SignedIn      = "dashboard.signed_in"
	// PasswordAccepted: a right password of a merchant whose sign-in
	// also takes a two-step code; signed_in follows the code.
	PasswordAccepted = "dashboard.password_accepted"
	SignInFailed     = "dashboard.sign_in_failed"
	SignedOut        = "dashboard.signed_out"
	SignedOutAll     = "dashboard.signed_out_everywhere"
	SecretRevealed   = "notification_secret.revealed"
	SecretRotated    = "notification_secret.rotated"
	// SecretOverlapEnded: a replaced secret stopped signing before the
	// time its rotation gave it.
	SecretOverlapEnded = "notification_secret.overlap_ended"
	PasswordChange     = "password.changed"
	TOTPEnabled        = "totp.enabled"
	AccessReset        = "merchant.access_reset"
	// CallbacksChanged: the origins hosted-form results may go back to.
	CallbacksChanged = "callbacks.configured"
)

// Details of actions on one mode's keys and settings begin with the mode
// ("live: https://shop.example/ipn as shop", "live key replaced by …").
// LiveDetail tells live ones apart: live mode's settings are shown only to
// a session that passed two-step verification (decisions.md §2).
func LiveDetail(detail string) bool { return strings.HasPrefix(detail, "live") }

type actorKey struct{}

// WithActor names who acts in ctx, for the audit lines the store writes
// alongside a change (a key rotation, an IPN change).
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorFrom is the actor WithActor named, or fallback.
func ActorFrom(ctx context.Context, fallback string) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return fallback
}
