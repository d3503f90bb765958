// Package sim is the simulated acquirer that test mode charges through.
// It behaves like a real one at the interface: idempotent per payment id,
// network references, approval codes, declines and 3-D Secure challenges.
package sim

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
)

// Acquirer is the simulator. The zero value is not usable; call New.
type Acquirer struct {
	key []byte // signs challenge references so they survive a restart

	mu      sync.Mutex
	charges map[string]payment.Result // by payment id: a real acquirer remembers
}

// New returns a simulator whose challenge references are signed with key;
// give it a key derived from the server's master key and a pending
// challenge can still be answered after a restart.
func New(key []byte) *Acquirer {
	return &Acquirer{key: key, charges: map[string]payment.Result{}}
}

// Charge authorizes and captures.
func (a *Acquirer) Charge(ctx context.Context, req payment.ChargeRequest) (payment.Result, error) {
	if err := ctx.Err(); err != nil {
		return payment.Result{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if res, ok := a.charges[req.PaymentID]; ok {
		return res, nil
	}
	var res payment.Result
	b, ok := special[req.PAN.Reveal()]
	switch {
	case !ok:
		res = approve()
	case b.outcome == "declined":
		res = payment.Result{Outcome: payment.Declined, DeclineCode: b.code, Message: b.message}
	case b.outcome == "error":
		res = payment.Result{Outcome: payment.AcquirerError, DeclineCode: b.code, Message: b.message}
	default:
		res = payment.Result{Outcome: payment.ChallengeNeeded, ChallengeRef: a.challengeRef(req.PaymentID)}
	}
	a.charges[req.PaymentID] = res
	return res, nil
}

// CompleteChallenge approves when code is ChallengeCode.
func (a *Acquirer) CompleteChallenge(ctx context.Context, ref, code string) (payment.Result, error) {
	if err := ctx.Err(); err != nil {
		return payment.Result{}, err
	}
	paymentID, ok := a.openChallenge(ref)
	if !ok {
		return payment.Result{Outcome: payment.Declined, DeclineCode: "authentication_failed", Message: payment.MsgChallengeFail}, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if done, ok := a.charges[paymentID]; ok && done.Outcome != payment.ChallengeNeeded {
		return done, nil // settled: a second answer changes nothing the bank recorded
	}
	res := payment.Result{Outcome: payment.Declined, DeclineCode: "authentication_failed", Message: payment.MsgChallengeFail}
	if hmac.Equal([]byte(strings.TrimSpace(code)), []byte(ChallengeCode)) {
		res = approve()
	}
	a.charges[paymentID] = res
	return res, nil
}

// Lookup reports an earlier charge; a payment the simulator never saw (or
// forgot in a restart) was never charged.
func (a *Acquirer) Lookup(ctx context.Context, paymentID string) (payment.Result, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if res, ok := a.charges[paymentID]; ok && res.Outcome != payment.ChallengeNeeded {
		return res, nil
	}
	return payment.Result{Outcome: payment.NotFoundAtBank}, nil
}

func approve() payment.Result {
	return payment.Result{
		Outcome:      payment.Approved,
		NetworkRef:   "SIM" + secret.RandomUpperAlnum(13),
		ApprovalCode: secret.RandomDigits(6),
		Message:      payment.MsgApproved,
	}
}

func (a *Acquirer) challengeRef(paymentID string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(paymentID))
	return paymentID + "." + hex.EncodeToString(m.Sum(nil)[:12])
}

func (a *Acquirer) openChallenge(ref string) (string, bool) {
	id, _, ok := strings.Cut(ref, ".")
	return id, ok && hmac.Equal([]byte(ref), []byte(a.challengeRef(id)))
}
