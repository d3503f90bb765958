package payment

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/dbclock"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// Repo is the storage the payment service needs. StartPayment and
// FinishPayment are each one transaction.
type Repo interface {
	// StartPayment moves the bill from open to processing and inserts p,
	// or returns ErrBillBusy when the bill is not open.
	StartPayment(ctx context.Context, p Payment) error
	// SetChallenge records that p waits for a 3-D Secure code.
	SetChallenge(ctx context.Context, p Payment) error
	// ClaimChallenge moves a waiting payment back to processing, charged
	// by node, so only one answer reaches the acquirer; ErrStale if
	// another request claimed it.
	ClaimChallenge(ctx context.Context, id, node string, at time.Time) error
	// FinishPayment stores p's outcome and moves the bill on: to paid on
	// success (inserting event in the same transaction), back to open or to
	// blocked on failure, nowhere while unknown. ErrStale if p was already
	// finished. A parked event is stored pending instead if the mode has
	// an endpoint saved by then, and event's Status says so.
	FinishPayment(ctx context.Context, p Payment, maxFailures int, event *ipn.Event) error
	PaymentByID(ctx context.Context, id string) (Payment, error)
	LatestPayment(ctx context.Context, billRef string) (Payment, error)
	SuccessfulPayment(ctx context.Context, billRef string) (Payment, error)
	// UnsettledPayments lists a page of the payments q selects, oldest
	// first.
	UnsettledPayments(ctx context.Context, q Unsettled) ([]Payment, error)
	BillByID(ctx context.Context, reference string) (bill.Bill, error)
	MerchantByCode(ctx context.Context, code string) (merchant.Merchant, error)
	// RecentSettings is a mode's settings as read within the last second.
	RecentSettings(ctx context.Context, code string, mode merchant.Mode) (merchant.Settings, error)
}

// Service runs charge attempts.
type Service struct {
	Repo      Repo
	Acquirers map[merchant.Mode]Acquirer // live absent: live charges refused
	// FingerprintKey keys the PAN fingerprint; derive it from the master key.
	FingerprintKey []byte
	Now            func() time.Time
	Location       *time.Location // for IPN dates
	Log            *slog.Logger

	MaxFailures     int           // failed attempts before a bill is blocked
	AcquirerTimeout time.Duration // after this the payment is unknown, not failed
	ChallengeTTL    time.Duration // an unanswered 3-D Secure challenge fails after this
	WaitInFlight    time.Duration // how long a concurrent submit waits for the first
	// Node names this run of this node: NodeName, a slash, then what
	// tells this run from the last. Payments record it while processing.
	Node, NodeName string
	// SoleName says whether this node is known to be the only one running
	// under NodeName (nil: it is, as one SQLite node is). Until it says so
	// the payments of NodeName's other runs wait as any node's do, rather
	// than being settled at once as a crashed run's: two running nodes of
	// one name each took the other's charges in flight for abandoned, and
	// a bill reopened while its card was being charged.
	SoleName func(context.Context) bool
	// Database, when nodes share it, is read for its clock at every
	// reconciliation pass, and payments are stamped, and taken for
	// abandoned, by its time: by each node's own, a node whose clock ran
	// 15 s ahead took another node's charge in flight for abandoned, and a
	// bill reopened while its card was being charged. nil: this node's
	// clock is the database's (one SQLite node).
	Database dbclock.Source
	skew     dbclock.Skew
	// clockLog says a failing clock reading once a minute, not at every
	// reconciliation pass (every few seconds through an outage).
	clockLog     logging.Repeated
	clockLogOnce sync.Once
	Metrics      *Metrics // nil: none
	// IPNMetrics counts the notifications stored parked (nil: none).
	IPNMetrics *ipn.Metrics
	// ReconcilePage is how many unsettled payments Reconcile reads at a
	// time; 0: 500.
	ReconcilePage int

	retries retries
}

// now is Now by the database's clock, as of the last reading: Now plus
// how far the database's clock is from this machine's.
func (s *Service) now() time.Time { return s.Now().Add(s.skew.Get()) }

// readClock measures how far the database's clock is from this machine's
// (not from Now, which a test may hold still), within a few seconds.
func (s *Service) readClock(ctx context.Context) {
	if s.Database == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s.clockLogOnce.Do(func() { s.clockLog.Log = s.Log })
	switch _, _, _, err := s.skew.Measure(ctx, s.Database, time.Now); {
	case err != nil && ctx.Err() == nil:
		s.clockLog.Fail(ctx, "read the database's clock; payments keep the last reading", "err", err)
	case err == nil:
		s.clockLog.OK(ctx, "read the database's clock")
	}
}

// CanCharge says whether mode has a card connector: without one (live, by
// default) its charges are refused with ErrLiveDisabled.
func (s *Service) CanCharge(mode merchant.Mode) bool { return s.Acquirers[mode] != nil }

// minListTimeout is the least time one page of Reconcile's listing gets.
const minListTimeout = time.Second

// Unsettled selects the payments Reconcile looks at: charges (processing
// or unknown) of Modes untouched since Before, charges of Modes left
// processing by an earlier run of this node (Node is NodePrefix and other
// than Self; none when NodePrefix is empty), and challenges of any mode
// untouched since ChallengesBefore. A challenge younger than that waits
// for its shopper, not for reconciliation: listed, the challenges of a
// busy hour filled the page and the charges behind them waited. Listed
// by UpdatedAt then ID, Limit at a time, after AfterUpdated and AfterID
// (the last of the previous page; zero: from the first).
type Unsettled struct {
	Before, ChallengesBefore time.Time
	Modes                    []merchant.Mode
	NodePrefix, Self         string
	AfterUpdated             time.Time
	AfterID                  string
	Limit                    int
}

// NodeID is the Node of a run of the node called name.
func NodeID(name, run string) string { return name + "/" + run }

// Attempt is what the customer submitted for one charge.
type Attempt struct {
	PAN          card.PAN
	Expiry       card.Expiry
	CVV          string
	Holder       string
	CallbackURL  string
	MobileNumber string
	EmailAddress string
}

// Messages shown to customers and sent to merchants.
const (
	MsgApproved       = "Payment approved"
	MsgExpired        = "The bill has expired and can no longer be paid"
	MsgBlocked        = "Too many failed payment attempts: this bill is blocked"
	MsgInFlight       = "A payment for this bill is still being processed"
	MsgUnknown        = "The card network did not answer in time; the payment is being confirmed and will not be charged twice"
	MsgNotReached     = "The payment did not reach the card network; nothing was charged"
	MsgChallengeFail  = "3-D Secure authentication failed"
	MsgChallengeStale = "3-D Secure authentication was not completed in time"
)

// Pay charges b once. Whatever the browser does (double submits, back
// button, replays) a bill gets at most one successful charge: a paid bill
// answers with its successful payment, and a submit that races an attempt
// in flight waits for that attempt's result and returns it.
//
// The returned payment carries the outcome; an error means the gateway
// itself failed.
func (s *Service) Pay(ctx context.Context, b bill.Bill, m merchant.Merchant, a Attempt) (Payment, error) {
	acq := s.Acquirers[b.Mode]
	if acq == nil {
		return Payment{}, ErrLiveDisabled
	}
	now := s.now()
	switch {
	case b.State == bill.Paid:
		return s.Repo.SuccessfulPayment(ctx, b.Reference)
	case b.State == bill.Processing:
		return s.AwaitSettled(ctx, b.Reference)
	case b.State == bill.Blocked:
		return refused(b, MsgBlocked), nil
	case b.Expired(s.Now()): // expiry is stamped, and shown, by this node's clock
		return refused(b, MsgExpired), nil
	}

	p := Payment{
		ID:            secret.NewOrderedID("pay", now),
		BillReference: b.Reference,
		MerchantCode:  b.MerchantCode,
		Mode:          b.Mode,
		Status:        Processing,
		Amount:        b.Amount,
		Card: CardSummary{
			Brand: a.PAN.Brand(), First6: a.PAN.First6(), Last4: a.PAN.Last4(),
			ExpMonth: a.Expiry.Month, ExpYear: a.Expiry.Year, Holder: a.Holder,
			Fingerprint: card.Fingerprint(s.FingerprintKey, a.PAN),
		},
		CallbackURL:  a.CallbackURL,
		MobileNumber: a.MobileNumber,
		EmailAddress: a.EmailAddress,
		CreatedAt:    now,
		UpdatedAt:    now,
		Node:         s.Node,
	}
	stamped := time.Now()
	if err := s.Repo.StartPayment(ctx, p); errors.Is(err, ErrBillBusy) {
		return s.AwaitSettled(ctx, b.Reference)
	} else if err != nil {
		return Payment{}, fmt.Errorf("start payment: %w", err)
	}

	res, err := s.ask(ctx, p.Mode, "charge", stamped, func(actx context.Context) (Result, error) {
		return acq.Charge(actx, ChargeRequest{PaymentID: p.ID, Amount: b.Amount, PAN: a.PAN, Expiry: a.Expiry, CVV: a.CVV, Holder: a.Holder})
	})
	if err != nil {
		s.Log.WarnContext(ctx, "acquirer did not answer; payment left unknown", "payment", p.ID, "err", err)
		res = Result{Outcome: "", Message: MsgUnknown}
	}
	return s.settle(ctx, p, b, m, res)
}

// ask makes one call to the acquirer for a payment stamped processing at
// stamped, ending AcquirerTimeout after the stamp, not after the write of
// the stamp returned: Reconcile takes a processing payment as abandoned
// once its stamp is older than AcquirerTimeout and a margin, and a store
// slow to answer had left the charge running past that, where the
// reconciler could hear "not found" from the bank, reopen the bill and
// let the shopper pay again while the first charge went through. With no
// time left the call is not made, and the payment is unknown: the
// reconciler asks the bank.
func (s *Service) ask(ctx context.Context, mode merchant.Mode, op string, stamped time.Time, call func(context.Context) (Result, error)) (Result, error) {
	actx, cancel := context.WithDeadline(context.WithoutCancel(ctx), stamped.Add(s.AcquirerTimeout))
	defer cancel()
	if err := actx.Err(); err != nil {
		return Result{}, fmt.Errorf("no time left for the acquirer after recording the payment: %w", err)
	}
	start := time.Now()
	res, err := call(actx)
	s.Metrics.answered(mode, op, res, err, time.Since(start))
	return res, err
}

// CompleteChallenge finishes a 3-D Secure challenge for payment id.
func (s *Service) CompleteChallenge(ctx context.Context, id, code string) (Payment, error) {
	p, err := s.Repo.PaymentByID(ctx, id)
	if err != nil {
		return Payment{}, err
	}
	switch p.Status {
	case Processing:
		return s.awaitPayment(ctx, p.ID) // another answer is with the acquirer
	case Challenge:
	default:
		return p, nil // a replayed challenge answer gets the first result
	}
	b, m, err := s.billAndMerchant(ctx, p)
	if err != nil {
		return Payment{}, err
	}
	if s.now().Sub(p.UpdatedAt) > s.ChallengeTTL {
		failed, err := s.failChallenge(ctx, p, b, m, "authentication_timeout", MsgChallengeStale)
		if errors.Is(err, ErrStale) {
			return s.awaitPayment(ctx, p.ID) // an answer claimed it first
		}
		return failed, err
	}
	if b.Expired(s.now()) {
		// The bill's expiry is the shop's deadline: a challenge begun
		// before it is not a way to pay after it.
		failed, err := s.failChallenge(ctx, p, b, m, "bill_expired", MsgExpired)
		if errors.Is(err, ErrStale) {
			return s.awaitPayment(ctx, p.ID)
		}
		return failed, err
	}
	acq := s.Acquirers[p.Mode]
	if acq == nil {
		return Payment{}, ErrLiveDisabled
	}
	stamped := time.Now()
	if err := s.Repo.ClaimChallenge(ctx, p.ID, s.Node, s.now()); errors.Is(err, ErrStale) {
		return s.awaitPayment(ctx, p.ID) // a concurrent answer is with the acquirer
	} else if err != nil {
		return Payment{}, fmt.Errorf("claim challenge: %w", err)
	}
	res, err := s.ask(ctx, p.Mode, "challenge", stamped, func(actx context.Context) (Result, error) {
		return acq.CompleteChallenge(actx, p.ChallengeRef, code)
	})
	if err != nil {
		res = Result{Message: MsgUnknown}
	}
	return s.settle(ctx, p, b, m, res)
}

// AbandonChallenge fails a payment still waiting for its 3-D Secure code,
// as when the shopper cancels on the challenge page: nothing was charged,
// and the bill reopens (or blocks) as after any failed attempt. A payment
// no longer waiting is returned as it is: an answer got there first.
func (s *Service) AbandonChallenge(ctx context.Context, id, msg string) (Payment, error) {
	p, err := s.Repo.PaymentByID(ctx, id)
	if err != nil {
		return Payment{}, err
	}
	switch p.Status {
	case Processing:
		return s.awaitPayment(ctx, p.ID)
	case Challenge:
	default:
		return p, nil
	}
	b, m, err := s.billAndMerchant(ctx, p)
	if err != nil {
		return Payment{}, err
	}
	failed, err := s.failChallenge(ctx, p, b, m, "authentication_cancelled", msg)
	if errors.Is(err, ErrStale) {
		return s.awaitPayment(ctx, p.ID)
	}
	return failed, err
}

// failChallenge fails payment p, waiting for its 3-D Secure code, after
// claiming it as an answer does: ErrStale when an answer (or another
// failure) claimed it first. An answer that is claimed is with the
// acquirer, and failing the payment under it would reopen a bill that
// answer may charge: the bill could then be charged twice.
func (s *Service) failChallenge(ctx context.Context, p Payment, b bill.Bill, m merchant.Merchant, declineCode, msg string) (Payment, error) {
	if err := s.Repo.ClaimChallenge(ctx, p.ID, s.Node, s.now()); err != nil {
		if errors.Is(err, ErrStale) {
			return Payment{}, err
		}
		return Payment{}, fmt.Errorf("claim challenge: %w", err)
	}
	return s.settle(ctx, p, b, m, Result{Outcome: Declined, DeclineCode: declineCode, Message: msg})
}

// Reconcile settles payments a crash or a silent acquirer left behind:
// unknown or processing ones by asking the acquirer (never by charging
// again), abandoned challenges by failing them so the bill reopens. A
// payment another node may still be charging is left until olderThan has
// passed (longer than AcquirerTimeout, so that node has given up on the
// acquirer); one left processing by an earlier run of this node is
// reconciled at once: that run is over, as this one runs in its place.
func (s *Service) Reconcile(ctx context.Context, olderThan time.Duration) error {
	s.readClock(ctx)
	q := Unsettled{Self: s.Node}
	if s.NodeName != "" && (s.SoleName == nil || s.SoleName(ctx)) {
		q.NodePrefix = s.NodeName + "/"
	}
	now := s.now()
	q.Before, q.ChallengesBefore = now.Add(-olderThan), now.Add(-s.ChallengeTTL)
	// Charges of a mode without a connector here are not listed: skipped,
	// they stayed at the head of every page.
	for mode := range s.Acquirers {
		if s.CanCharge(mode) {
			q.Modes = append(q.Modes, mode)
		}
	}
	q.Limit = cmp.Or(s.ReconcilePage, 500)
	s.retries.prune(now)
	// Page after page to the end: the payments it passes over (a lookup
	// that failed, one it cannot settle) no longer keep the ones behind
	// them from being reached. One that cannot be settled is said and
	// passed over: the pass returned at the first.
	var errs []error
	for {
		// Bounded: a query left hanging on a connection a failover cut
		// stopped every pass after it. The acquirer's time, but never
		// under a second: a short acquirer timeout (100 ms in tests) cut
		// a listing that a loaded machine took longer over.
		lctx, cancel := context.WithTimeout(ctx, max(s.AcquirerTimeout, minListTimeout))
		page, err := s.Repo.UnsettledPayments(lctx, q)
		cancel()
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("list unsettled payments: %w", err))...)
		}
		for _, p := range page {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := s.reconcile(ctx, p); err != nil {
				errs = append(errs, fmt.Errorf("payment %s: %w", p.ID, err))
			}
		}
		if len(page) < q.Limit {
			return errors.Join(errs...)
		}
		q.AfterUpdated, q.AfterID = page[len(page)-1].UpdatedAt, page[len(page)-1].ID
	}
}

// retryWait is how long a payment of age that could not be settled waits
// before the acquirer is asked again: half its age, from 30 s to 10 min.
func retryWait(age time.Duration) time.Duration {
	return min(max(age/2, 30*time.Second), 10*time.Minute)
}

// retries holds when Reconcile may next ask the acquirer about a payment
// whose lookup failed. It is this node's memory: a node that starts asks
// at once, and each node keeps its own.
type retries struct {
	mu    sync.Mutex
	until map[string]time.Time
}

func (r *retries) due(id string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !now.Before(r.until[id])
}

func (r *retries) postpone(id string, until time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.until == nil {
		r.until = map[string]time.Time{}
	}
	r.until[id] = until
}

// prune forgets the waits that are over, settled payments' among them.
func (r *retries) prune(now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, until := range r.until {
		if !now.Before(until) {
			delete(r.until, id)
		}
	}
}

// reconcile settles one payment Reconcile listed.
func (s *Service) reconcile(ctx context.Context, p Payment) error {
	if p.Status == Challenge { // unanswered for ChallengeTTL: no acquirer is asked
		b, m, err := s.billAndMerchant(ctx, p)
		if err != nil {
			return err
		}
		if _, err := s.failChallenge(ctx, p, b, m, "authentication_timeout", MsgChallengeStale); errors.Is(err, ErrStale) {
			return nil // answered since the list was read: that answer settles it
		} else if err != nil {
			return err
		}
		s.Log.InfoContext(ctx, "reconciled payment", "payment", p.ID, "outcome", "challenge expired")
		return nil
	}
	acq := s.Acquirers[p.Mode]
	if acq == nil {
		return nil // listed only for modes with a connector; a test's Repo may list more
	}
	// A payment that could not be settled is asked about again after a
	// wait that grows with its age, not at every pass (nor its bill read):
	// during an acquirer's outage each lookup costs up to AcquirerTimeout,
	// and a pass spent on them kept the payments behind (other modes',
	// expired challenges) waiting.
	now := s.now()
	if !s.retries.due(p.ID, now) {
		return nil
	}
	postpone := func() time.Time {
		until := now.Add(retryWait(now.Sub(p.UpdatedAt)))
		s.retries.postpone(p.ID, until)
		return until
	}
	res, err := s.lookup(ctx, acq, p)
	if err != nil {
		s.Log.WarnContext(ctx, "acquirer lookup failed; payment stays unknown", "payment", p.ID, "err", err, "next_lookup", postpone())
		return nil
	}
	if res.Outcome == NotFoundAtBank {
		res = Result{Outcome: AcquirerError, Message: MsgNotReached}
	}
	b, m, err := s.billAndMerchant(ctx, p)
	if err == nil {
		_, err = s.settle(ctx, p, b, m, res)
	}
	if err != nil {
		return fmt.Errorf("settle as the acquirer answered (%s), asked again after %s: %w", res.Outcome, postpone().Format(time.RFC3339), err)
	}
	s.Log.InfoContext(ctx, "reconciled payment", "payment", p.ID, "outcome", res.Outcome)
	return nil
}

// lookup asks the acquirer what became of p, within AcquirerTimeout: a
// call left hanging held up every payment Reconcile had still to settle.
func (s *Service) lookup(ctx context.Context, acq Acquirer, p Payment) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, s.AcquirerTimeout)
	defer cancel()
	start := time.Now()
	res, err := acq.Lookup(ctx, p.ID)
	s.Metrics.answered(p.Mode, "lookup", res, err, time.Since(start))
	return res, err
}

func (s *Service) billAndMerchant(ctx context.Context, p Payment) (bill.Bill, merchant.Merchant, error) {
	b, err := s.Repo.BillByID(ctx, p.BillReference)
	if err != nil {
		return bill.Bill{}, merchant.Merchant{}, fmt.Errorf("load bill of payment %s: %w", p.ID, err)
	}
	m, err := s.Repo.MerchantByCode(ctx, p.MerchantCode)
	if err != nil {
		return bill.Bill{}, merchant.Merchant{}, fmt.Errorf("load merchant of payment %s: %w", p.ID, err)
	}
	return b, m, nil
}

// settle records the acquirer's answer durably before anyone is told.
func (s *Service) settle(ctx context.Context, p Payment, b bill.Bill, m merchant.Merchant, res Result) (Payment, error) {
	// The charge happened: record it even if the browser left; but not
	// for ever: a write left hanging on a connection a failover cut held
	// the shopper's page (and a reconciliation pass) until the socket
	// died. An outcome not recorded is ErrUnrecorded, and the reconciler
	// asks the acquirer again.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.AcquirerTimeout)
	defer cancel()
	p.UpdatedAt = s.now()
	p.NetworkRef, p.ApprovalCode, p.DeclineCode, p.Message = res.NetworkRef, res.ApprovalCode, res.DeclineCode, res.Message
	var event *ipn.Event
	switch res.Outcome {
	case Approved:
		p.Status = Succeeded
		if p.Message == "" {
			p.Message = MsgApproved
		}
		ev, err := s.notification(ctx, p, b, m)
		if err != nil {
			return Payment{}, err
		}
		event = &ev
	case ChallengeNeeded:
		p.Status = Challenge
		p.ChallengeRef = res.ChallengeRef
		if err := s.Repo.SetChallenge(ctx, p); err != nil {
			return Payment{}, fmt.Errorf("record challenge of payment %s: %w: %w", p.ID, ErrUnrecorded, err)
		}
		s.Metrics.recorded(p)
		return p, nil
	case Declined, AcquirerError:
		p.Status = Failed
	default:
		p.Status = Unknown
		p.Message = MsgUnknown
	}
	err := s.Repo.FinishPayment(ctx, p, s.MaxFailures, event)
	if errors.Is(err, ErrStale) {
		return s.Repo.PaymentByID(ctx, p.ID)
	}
	if err != nil {
		return Payment{}, fmt.Errorf("finish payment %s: %w: %w", p.ID, ErrUnrecorded, err)
	}
	s.Metrics.recorded(p)
	if event != nil && event.Status == ipn.Parked {
		s.IPNMetrics.Parked()
	}
	return p, nil
}

// AwaitSettled waits for the attempt in flight on billRef and returns its
// result: a double submit sees the first submit's outcome, and a cancel
// during a charge the charge's. After WaitInFlight it returns a payment
// still Processing.
func (s *Service) AwaitSettled(ctx context.Context, billRef string) (Payment, error) {
	return s.await(ctx, billRef, func() (Payment, error) { return s.Repo.LatestPayment(ctx, billRef) })
}

// awaitPayment waits for payment id to leave processing.
func (s *Service) awaitPayment(ctx context.Context, id string) (Payment, error) {
	p, err := s.Repo.PaymentByID(ctx, id)
	if err != nil {
		return Payment{}, err
	}
	return s.await(ctx, p.BillReference, func() (Payment, error) { return s.Repo.PaymentByID(ctx, id) })
}

func (s *Service) await(ctx context.Context, billRef string, load func() (Payment, error)) (Payment, error) {
	deadline := time.Now().Add(s.WaitInFlight)
	inFlight := Payment{BillReference: billRef, Status: Processing, Message: MsgInFlight}
	for {
		p, err := load()
		if err != nil && !errors.Is(err, ErrNotFound) {
			if ctx.Err() != nil {
				// The request's time ran out (or its client left) during
				// the read: the attempt is as much in flight as below.
				return inFlight, nil
			}
			return Payment{}, err
		}
		if err == nil && p.Status != Processing {
			if p.Status != Succeeded {
				if won, err := s.Repo.SuccessfulPayment(ctx, billRef); err == nil {
					return won, nil
				}
			}
			return p, nil
		}
		if time.Now().After(deadline) {
			return inFlight, nil
		}
		select {
		case <-ctx.Done():
			// The request's time is up before WaitInFlight: the attempt
			// is as much in flight as after it, not an outage.
			return inFlight, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func refused(b bill.Bill, msg string) Payment {
	return Payment{BillReference: b.Reference, MerchantCode: b.MerchantCode, Mode: b.Mode, Status: Failed, Amount: b.Amount, Message: msg}
}

// notification is p's IPN event. For a merchant with no endpoint for the
// mode (by its settings as read within the last second) it is parked: the
// store checks that against the saved settings as it inserts the event,
// and queues it instead should an endpoint have been saved meanwhile.
func (s *Service) notification(ctx context.Context, p Payment, b bill.Bill, m merchant.Merchant) (ipn.Event, error) {
	amount := json.Number(p.Amount.String())
	payload := ipn.Payload{
		CallbackType: "IPN",
		Customer:     ipn.PayloadCustomer{Name: b.CustomerName, MobileNumber: p.MobileNumber},
		Transaction: ipn.PayloadTransaction{
			Date:           ipn.JavaTimestamp(p.UpdatedAt.In(s.Location)),
			Reference:      p.NetworkRef,
			PaymentMode:    "CARD",
			Amount:         amount,
			BillNumber:     b.Reference,
			OrderAmount:    json.Number(b.Amount.String()),
			ServiceCharge:  "0",
			ServedBy:       b.Outlet,
			AdditionalInfo: b.OrderReference,
			Status:         "SUCCESS",
			Remarks:        p.Message,
		},
		Bank: ipn.PayloadBank{Reference: p.ID, TransactionType: "C", Account: m.SettlementAccount},
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return ipn.Event{}, fmt.Errorf("encode IPN payload: %w", err)
	}
	// Due now by the earlier of this node's clock and the database's: the
	// IPN workers tell what is due by their own nodes' clocks. By the
	// database's alone, a node behind it held its notifications back by
	// the difference; by this node's alone, a node 90 s ahead that died
	// left its notifications 90 s in the future for the others.
	due := s.Now()
	if db := s.now(); db.Before(due) {
		due = db
	}
	ev := ipn.Event{
		ID: secret.NewOrderedID("msg", p.UpdatedAt), MerchantCode: p.MerchantCode, Mode: p.Mode, PaymentID: p.ID,
		Payload: body, Status: ipn.Pending, NextAttemptAt: due, CreatedAt: p.UpdatedAt,
	}
	// Unread settings leave it pending: the worker reads them again.
	if st, err := s.Repo.RecentSettings(ctx, p.MerchantCode, p.Mode); err == nil {
		if why, ok := ipn.NoEndpoint(st.IPN, p.Mode); ok {
			ev.Status, ev.LastError = ipn.Parked, ipn.ParkedNote(why)
		}
	}
	return ev, nil
}
