package ipn

import (
	"context"
	"errors"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
)

var (
	// ErrNotFound is returned for an event id that does not exist.
	ErrNotFound = errors.New("IPN event not found")
	// ErrLeaseLost means the worker's claim on an event expired and was
	// taken over (or the event was replayed) before its result was stored:
	// the other claimer's result stands.
	ErrLeaseLost = errors.New("IPN event lease lost")
	// ErrConfigChanged answers a Parked result whose Saw is no longer the
	// endpoint's saved configuration: the event was stored pending and
	// due at its NextAttemptAt instead.
	ErrConfigChanged = errors.New("IPN configuration changed since it was read: the event is due again, not parked")
)

// Endpoint is one receiver: a merchant's IPN target for one mode.
type Endpoint struct {
	MerchantCode string
	Mode         merchant.Mode
}

// Claim asks for due events.
type Claim struct {
	// Owner names this claim; the lease is only honoured for it. Every
	// claim uses a fresh owner so that a stale worker, even on this node,
	// cannot store a result over a newer claim.
	Owner string
	// Now is when due events are due by; LeaseNow, when set, is now by
	// the database's clock, which leases are compared with (zero: Now).
	// LeaseUntil is by that clock too.
	Now        time.Time
	LeaseNow   time.Time
	LeaseUntil time.Time
	Limit      int // events in all
	// PerEndpoint caps the events of one endpoint in this claim, so a
	// merchant with a large backlog cannot take every slot.
	PerEndpoint int
	// Skip lists endpoints already at their concurrency cap here: their
	// events stay unclaimed for other nodes and later polls.
	Skip []Endpoint
	// One lists endpoints of which the claim takes one event at most:
	// receivers slow to answer, for which nothing is claimed ahead. At
	// PerEndpoint, each of their requests claimed a share, started one
	// and gave the rest back: a write of each, for nothing.
	One []Endpoint
	// Quick claims (a delivery ended, an event was queued) look only at
	// the oldest due events, a few times Limit of them, and stop at a run
	// of events they cannot take. The poll's claims are not quick: they
	// take every endpoint's oldest due events, up to PerEndpoint each, so
	// an endpoint whose events wait behind another's long backlog is
	// reached within a poll, whether that backlog's receiver hangs or
	// fails at once.
	Quick bool
}

// Result is the outcome of handling one claimed event, stored in one
// transaction together with its attempt.
type Result struct {
	EventID string
	Owner   string // must still hold the lease, else ErrLeaseLost
	// Attempt is the request made; nil when none was (no URL configured),
	// which leaves the attempt count as it was.
	Attempt *Attempt
	Status  Status
	// NextAttemptAt is when a Pending event is due. A Parked result sets
	// it too: the event is due then instead if Saw is no longer the
	// endpoint's saved configuration.
	NextAttemptAt time.Time
	// Saw is the IPN configuration that a Parked result found unusable.
	// The event is parked only while it is still the one saved, so a
	// configuration saved meanwhile (which sends the parked events) cannot
	// miss one being parked as it commits.
	Saw       merchant.IPNConfig
	At        time.Time // delivered at, when Status is Delivered
	LastError string
	// DisableURL, when set, disables the endpoint (the receiver answered
	// 410 Gone), but only if it is still configured with this URL: a
	// configuration saved meanwhile is not disabled by an old answer.
	DisableURL string
}

// Filter selects events for listing.
type Filter struct {
	MerchantCode string
	Mode         merchant.Mode // empty: both
	Status       Status        // empty: all
	PaymentID    string        // empty: all
	// Before, an event id, pages on: only events listed after it (older,
	// or as old with a smaller id). Empty: from the newest.
	Before string
	Limit  int
}

// Stats describe the queue for monitoring.
type Stats struct {
	Pending       int
	Failed        int
	OldestPending time.Time // created time of the oldest pending event; zero if none
}

// Queue is the storage the worker needs.
type Queue interface {
	// ClaimIPN leases due pending events. A lease is
	// taken only if the event is still due and unleased when the update
	// runs, so two claimers never both win one event.
	ClaimIPN(ctx context.Context, c Claim) ([]Event, error)
	// ReleaseIPN gives back events this owner claimed but will not send.
	ReleaseIPN(ctx context.Context, owner string, ids []string) error
	// RenewIPN extends to until the leases still held by their owners
	// (held maps event id to owner) and says how many it extended: the
	// heartbeat that keeps a delivery's lease short.
	RenewIPN(ctx context.Context, held map[string]string, until time.Time) (int, error)
	// RecordIPN stores r and clears the lease, if r.Owner still holds it.
	RecordIPN(ctx context.Context, r Result) error
	// RecentSettings is read at send time, so a changed IPN configuration
	// applies to events already queued: at once when saved through the
	// same store, within a second when saved by another node.
	RecentSettings(ctx context.Context, code string, mode merchant.Mode) (merchant.Settings, error)
	IPNStats(ctx context.Context) (Stats, error)
}

// Repo is all the IPN storage: the worker's queue plus the delivery log
// that operators read and replay from.
type Repo interface {
	Queue
	IPNEvents(ctx context.Context, f Filter) ([]Event, error)
	IPNEvent(ctx context.Context, id string) (Event, error)
	IPNAttempts(ctx context.Context, id string) ([]Attempt, error)
	// ReplayIPN makes an event of any status pending again, due now,
	// as a new round of the same event (same webhook-id), and writes the
	// audit log entry in the same transaction.
	ReplayIPN(ctx context.Context, id string, now time.Time, actor string) (Event, error)
}
