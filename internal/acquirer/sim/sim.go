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
	key    []byte // signs challenge references so they survive a restart
	ledger Ledger
}

// Ledger is what the simulated bank remembers of each payment, by the
// gateway's payment id (its idempotency key). A real acquirer records a
// charge before it answers; so must a ledger, for the gateway to reconcile
// a crash between the acquirer's answer and its own record
// (store.SimLedger keeps it in the gateway's database, in its own table and
// transactions, as a bank's would be its own).
type Ledger interface {
	// Entry is the result recorded for paymentID, if any.
	Entry(ctx context.Context, paymentID string) (payment.Result, bool, error)
	// Record stores res for paymentID unless a result is recorded already,
	// and returns the recorded one: the first charge wins.
	Record(ctx context.Context, paymentID string, res payment.Result) (payment.Result, error)
	// Settle replaces a pending challenge (or nothing) with its answer and
	// returns the recorded result: a second answer changes nothing.
	Settle(ctx context.Context, paymentID string, res payment.Result) (payment.Result, error)
}

// New returns a simulator whose challenge references are signed with key
// (give it a key derived from the server's master key and a pending
// challenge can still be answered after a restart) and whose charges are
// kept in ledger; nil keeps them in memory, forgotten on restart.
func New(key []byte, ledger Ledger) *Acquirer {
	if ledger == nil {
		ledger = &memoryLedger{charges: map[string]payment.Result{}}
	}
	return &Acquirer{key: key, ledger: ledger}
}

// Charge authorizes and captures.
func (a *Acquirer) Charge(ctx context.Context, req payment.ChargeRequest) (payment.Result, error) {
	if err := ctx.Err(); err != nil {
		return payment.Result{}, err
	}
	// No read of the ledger first: Record keeps the first result recorded
	// for a payment and returns it, so a retried charge gets the answer
	// its first attempt got, and a first charge (all but every one) costs
	// one write instead of a read and a write.
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
	return a.ledger.Record(ctx, req.PaymentID, res)
}

// CompleteChallenge approves when code is ChallengeCode.
func (a *Acquirer) CompleteChallenge(ctx context.Context, ref, code string) (payment.Result, error) {
	if err := ctx.Err(); err != nil {
		return payment.Result{}, err
	}
	failed := payment.Result{Outcome: payment.Declined, DeclineCode: "authentication_failed", Message: payment.MsgChallengeFail}
	paymentID, ok := a.openChallenge(ref)
	if !ok {
		return failed, nil
	}
	if done, ok, err := a.ledger.Entry(ctx, paymentID); err != nil {
		return payment.Result{}, err
	} else if ok && done.Outcome != payment.ChallengeNeeded {
		return done, nil // settled: a second answer changes nothing the bank recorded
	}
	res := failed
	if hmac.Equal([]byte(strings.TrimSpace(code)), []byte(ChallengeCode)) {
		res = approve()
	}
	return a.ledger.Settle(ctx, paymentID, res)
}

// Lookup reports an earlier charge; a payment the simulator never saw, or
// whose challenge was never answered, was never charged.
func (a *Acquirer) Lookup(ctx context.Context, paymentID string) (payment.Result, error) {
	res, ok, err := a.ledger.Entry(ctx, paymentID)
	if err != nil {
		return payment.Result{}, err
	}
	if ok && res.Outcome != payment.ChallengeNeeded {
		return res, nil
	}
	return payment.Result{Outcome: payment.NotFoundAtBank}, nil
}

// memoryLedger keeps charges for the life of the process.
type memoryLedger struct {
	mu      sync.Mutex
	charges map[string]payment.Result
}

func (l *memoryLedger) Entry(_ context.Context, id string) (payment.Result, bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	res, ok := l.charges[id]
	return res, ok, nil
}

func (l *memoryLedger) Record(_ context.Context, id string, res payment.Result) (payment.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.charges[id]; ok {
		return old, nil
	}
	l.charges[id] = res
	return res, nil
}

func (l *memoryLedger) Settle(_ context.Context, id string, res payment.Result) (payment.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.charges[id]; ok && old.Outcome != payment.ChallengeNeeded {
		return old, nil
	}
	l.charges[id] = res
	return res, nil
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
