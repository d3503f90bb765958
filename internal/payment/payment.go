// Package payment charges a bill: the attempt state machine, exactly one
// successful charge per bill, and the Acquirer interface that moves money.
package payment

import (
	"context"
	"errors"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
)

// Status of one charge attempt.
//
//	processing ──▶ succeeded | failed | unknown | challenge
//	challenge  ──▶ succeeded | failed
//	unknown    ──▶ succeeded | failed   (only by asking the acquirer)
type Status string

const (
	Processing Status = "processing"
	Challenge  Status = "challenge" // waiting for the customer's 3-D Secure code
	Succeeded  Status = "succeeded"
	Failed     Status = "failed"
	Unknown    Status = "unknown" // the acquirer did not answer: maybe charged
)

// Pending reports an attempt whose outcome is not known yet: with the
// acquirer, or left unknown until the reconciler asks it. A shopper is
// told it is being confirmed, never that it failed: it may yet be
// charged.
func (s Status) Pending() bool { return s == Processing || s == Unknown }

// Verification is what a merchant's query of a bill is answered from: the
// bill, and the payment that decides the answer, which is the bill's
// successful one or else its latest attempt.
type Verification struct {
	BillReference  string
	OrderReference string
	// Amount is the bill's; its currency is a nothing-paid answer's.
	Amount    money.Amount
	CreatedAt time.Time
	// State and ExpiresAt are the bill's: an unpaid bill that is blocked
	// or past its expiry will never be paid, and the verification says so.
	State     bill.State
	ExpiresAt time.Time
	// Payment holds what a query shows of it: ID, Status, NetworkRef,
	// Amount, UpdatedAt and Message. Its ID is empty when the bill was
	// never attempted.
	Payment Payment
}

// Payment is one attempt to charge a bill. It never holds the PAN or CVV:
// only what docs/hosted-form.md allows.
type Payment struct {
	ID            string
	BillReference string
	MerchantCode  string
	Mode          merchant.Mode
	Status        Status
	Amount        money.Amount
	Card          CardSummary
	NetworkRef    string // the card network's reference: the callback's transactionRef
	ApprovalCode  string
	DeclineCode   string
	Message       string // for the customer and the merchant
	ChallengeRef  string // the acquirer's handle on a pending 3-D Secure challenge
	CallbackURL   string
	MobileNumber  string
	EmailAddress  string
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Node is the process that charges it while it is processing
	// (Service.Node): after a crash, the node's next run reconciles its
	// predecessor's payments at once instead of waiting for a cutoff.
	Node string
}

// CardSummary is the part of a card we may keep.
type CardSummary struct {
	Brand       card.Brand
	First6      string
	Last4       string
	ExpMonth    int
	ExpYear     int
	Holder      string
	Fingerprint string
}

// Acquirer authorizes and captures card payments. Implementations must be
// idempotent on ChargeRequest.PaymentID: asking twice never charges twice.
type Acquirer interface {
	Charge(ctx context.Context, req ChargeRequest) (Result, error)
	// CompleteChallenge finishes a 3-D Secure challenge with the code the
	// customer typed.
	CompleteChallenge(ctx context.Context, challengeRef, code string) (Result, error)
	// Lookup asks what became of an earlier charge, to resolve an unknown
	// payment without charging again.
	Lookup(ctx context.Context, paymentID string) (Result, error)
}

// ChargeRequest carries the clear card data to the acquirer; it lives only
// in memory for the duration of one request.
type ChargeRequest struct {
	PaymentID string
	Amount    money.Amount
	PAN       card.PAN
	Expiry    card.Expiry
	CVV       string
	Holder    string
}

// Outcome of an acquirer call.
type Outcome string

const (
	Approved        Outcome = "approved"
	Declined        Outcome = "declined"
	ChallengeNeeded Outcome = "challenge"
	AcquirerError   Outcome = "error"     // nothing charged; the customer may retry
	NotFoundAtBank  Outcome = "not_found" // Lookup: the acquirer never saw it, so nothing was charged
)

// DeclineExpiredCard is the decline code of a card past its expiry, from
// whichever acquirer answered: the card will not pay however often it is
// tried, which the card page tells the shopper.
const DeclineExpiredCard = "expired_card"

// Result is the acquirer's answer.
type Result struct {
	Outcome      Outcome
	NetworkRef   string
	ApprovalCode string
	DeclineCode  string
	Message      string
	ChallengeRef string
}

var (
	// ErrBillBusy is returned by Repo.StartPayment when the bill is not open.
	ErrBillBusy = errors.New("bill is not open for payment")
	// ErrStale is returned by Repo.FinishPayment when another request
	// already finished the attempt.
	ErrStale = errors.New("payment already finished")
	// ErrNotFound: no such payment.
	ErrNotFound = errors.New("payment not found")
	// ErrLiveDisabled: live mode has no acquirer connector configured.
	ErrLiveDisabled = errors.New("live card processing is not configured on this gateway")
	// ErrUnrecorded: the charge's outcome (an answer, or none in time)
	// could not be stored (the database went away). The payment stays
	// processing until reconciliation asks the acquirer again, so the
	// shopper must be told it is being confirmed, never that nothing was
	// charged. Its text does not say the network answered: an SRE read
	// it beside "acquirer did not answer" for the same payment.
	ErrUnrecorded = errors.New("the charge's outcome is not recorded yet; reconciliation will ask the acquirer")
)

// QuarterTotal is the finished payments of one currency and outcome in
// one quarter of an hour, for the dashboard's charts. Every zone's offset
// from UTC is a whole number of quarters, so they add up into the days of
// any zone, on either side of a change to or from summer time.
type QuarterTotal struct {
	Start    time.Time
	Currency string
	Status   Status
	Count    int64
	SumMinor int64
}
