package ipn

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kadipay/kadi/internal/dbclock"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/outage"
	"github.com/kadipay/kadi/internal/secret"
)

// Config tunes delivery. Zero fields take the defaults of DefaultConfig.
type Config struct {
	Workers     int           // requests in flight on this node
	PerEndpoint int           // of those, at most this many to one merchant and mode
	Timeout     time.Duration // a 2xx must arrive within this; docs/ipn.md says 15 s
	Schedule    Schedule
	Jitter      float64 // ±fraction applied to every wait of the schedule
	// MaxRetryAfter caps how long a receiver's Retry-After can postpone.
	MaxRetryAfter time.Duration
	Poll          time.Duration // how often the queue is checked for due events
	// Lease is how long a claim keeps other nodes off an event without a
	// heartbeat. The node holding it renews it every third of it while
	// the delivery runs (or waits its turn), so it can be short: a node
	// that dies hands its events over within one lease.
	Lease time.Duration
	// Defer is how long an event waits when the gateway itself cannot send
	// it: the merchant's settings unreadable, its secret unopened.
	Defer time.Duration
	// AllowPrivate lets test-mode notifications reach loopback and private
	// addresses (--allow-private-ipn). Live mode never may.
	AllowPrivate bool
	// NAT64Prefixes are the network's own NAT64 prefixes
	// (--nat64-prefixes), through which an IPv6 address reaches an IPv4
	// one: notifications to an address in one are judged by the IPv4
	// address it carries (CheckNAT64Prefix says which prefixes can be).
	NAT64Prefixes []netip.Prefix
}

// DefaultConfig is docs/ipn.md's delivery policy. Deliveries wait on the
// network, not the CPU, so the pool is wide: a hung or slow receiver holds
// at most PerEndpoint slots until its first requests time out or answer
// late, then one while half the pool or more is taken.
// Sixteen at a time to one merchant is
// what lets a busy one hear of 1,000 payments a second within 100 ms
// (docs/performance.md); four held it to a few hundred a second.
func DefaultConfig() Config {
	return Config{
		Workers: 256, PerEndpoint: 16, Timeout: 15 * time.Second, Schedule: DefaultSchedule(), Jitter: 0.2,
		MaxRetryAfter: 24 * time.Hour, Poll: time.Second, Defer: time.Minute, Lease: 9 * time.Second,
	}
}

// Validate refuses settings that cannot work, so a typo in a flag stops the
// server at start instead of silently changing how notifications go out.
// Zero values are fine: they mean the default.
func (c Config) Validate() error {
	switch {
	case c.Workers < 0 || c.PerEndpoint < 0:
		return errors.New("IPN workers and per-merchant concurrency must be positive")
	case c.Timeout < 0 || c.MaxRetryAfter < 0 || c.Poll < 0 || c.Lease < 0 || c.Defer < 0:
		return errors.New("IPN durations must be positive")
	case c.Jitter < 0 || c.Jitter >= 1:
		return fmt.Errorf("IPN jitter %v must be a fraction from 0 up to 1", c.Jitter)
	}
	if c.Lease > 0 && c.Lease < minLease {
		return fmt.Errorf("IPN lease must be at least %s: it is renewed every third of it", minLease)
	}
	for _, d := range c.Schedule {
		if d <= 0 {
			return errors.New("IPN retry waits must be positive")
		}
	}
	return CheckNAT64Prefixes(c.NAT64Prefixes)
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Workers <= 0 {
		c.Workers = d.Workers
	}
	if c.PerEndpoint <= 0 {
		c.PerEndpoint = d.PerEndpoint
	}
	c.PerEndpoint = min(c.PerEndpoint, c.Workers)
	if c.Timeout <= 0 {
		c.Timeout = d.Timeout
	}
	if c.Schedule == nil {
		c.Schedule = d.Schedule
	}
	if c.Jitter < 0 || c.Jitter >= 1 {
		c.Jitter = d.Jitter
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = d.MaxRetryAfter
	}
	if c.Poll <= 0 {
		c.Poll = d.Poll
	}
	if c.Lease <= 0 {
		c.Lease = d.Lease
	}
	if c.Defer <= 0 {
		c.Defer = d.Defer
	}
	return c
}

// minLease keeps heartbeats (a write every third of the lease) rare.
const minLease = time.Second

// Worker delivers due notifications until its context ends. Several
// workers, on one node or many sharing PostgreSQL, may run at once: each
// event is claimed with a lease, so only one of them sends a given attempt.
type Worker struct {
	Queue   Queue
	Config  Config
	Log     *slog.Logger
	Metrics *Metrics         // nil: none
	Now     func() time.Time // nil: time.Now
	// Location dates the test notification as payments date theirs (the
	// operator's zone); nil: UTC.
	Location *time.Location

	cfg    Config
	node   string
	claims atomic.Uint64
	strict *http.Client // live mode, and test mode unless AllowPrivate
	loose  *http.Client // test mode with AllowPrivate

	initOnce sync.Once
	// skew: leases are timed by the database's clock, when the queue is
	// one (dbclock.Source) that nodes share. By each node's own, 7 s of
	// skew between two nodes made the one ahead take over every lease the
	// other held, and every notification was sent twice.
	skew dbclock.Skew
	// clockEvery is how often the database's clock is read again.
	clockEvery time.Duration
	mu         sync.Mutex
	inFlight   map[Endpoint]int
	// queued holds events claimed for an endpoint at its cap, started as
	// its deliveries end: one claim serves rounds of deliveries instead of
	// each. At most queueCap wait, so a queued event starts within five
	// timeouts; the heartbeat keeps its lease meanwhile. The next claim for
	// the endpoint is made while half the queue is still there to keep it
	// busy, so a busy endpoint never stands idle waiting for a claim's
	// commit.
	queued map[Endpoint][]queuedEvent
	// held is every event this worker has leased and not yet recorded or
	// given back (event id → claim owner): what the heartbeat renews.
	held     map[string]string
	stopping bool
	running  atomic.Bool
	active   int
	wake     chan struct{}
	// nudge says an event was queued on this node just now, for the
	// endpoints in nudged: claim soon rather than at the next poll.
	nudge  chan struct{}
	nudged map[Endpoint]bool
	// waitFor holds the endpoints that answered 429 or 503 with a
	// Retry-After, until when: nothing more is sent to them from this node
	// meanwhile. Honoured for the one notification only, the others queued
	// for the merchant were sent at once, each spending an attempt on the
	// same refusal.
	waitFor map[Endpoint]time.Time
	// slow holds the endpoints whose last request here got no answer
	// within the timeout, or a late one (slowAnswer): they get nothing
	// claimed ahead, and one request at a time while slots run short
	// (limit), until they answer in time again.
	// At their full share, sixteen receivers that hang took every slot of
	// a node, and each slot a timeout freed went to the same merchant's
	// next notification, so every other merchant waited for those
	// backlogs. An entry stays until then; there is one at most a
	// merchant and mode.
	slow map[Endpoint]bool
	// inTimeRun counts a slow endpoint's answers in time in a row: its share
	// comes back at inTimeToRecover.
	inTimeRun map[Endpoint]int
	wg        sync.WaitGroup
}

// nudgeGap spaces the claims nudges cause: at a thousand payments a second
// a claim takes a few events each instead of being a write per payment,
// and a notification waits at most this long for it.
const nudgeGap = 5 * time.Millisecond

// share is how many events of one endpoint a claim takes; queueCap is how
// many may wait behind its deliveries in flight.
func (c Config) share() int    { return 2 * c.PerEndpoint }
func (c Config) queueCap() int { return 4 * c.PerEndpoint }

type queuedEvent struct {
	ev    Event
	owner string
}

func (w *Worker) init() {
	w.cfg = w.Config.withDefaults()
	w.node = secret.NewID("node")
	w.strict = newHTTPClient(guard{nat64: w.cfg.NAT64Prefixes}, w.cfg.Timeout, w.cfg.PerEndpoint)
	w.loose = w.strict
	if w.cfg.AllowPrivate {
		w.loose = newHTTPClient(guard{allowPrivate: true}, w.cfg.Timeout, w.cfg.PerEndpoint)
	}
	w.inFlight = map[Endpoint]int{}
	w.queued = map[Endpoint][]queuedEvent{}
	w.held = map[string]string{}
	w.nudged = map[Endpoint]bool{}
	w.waitFor = map[Endpoint]time.Time{}
	w.slow = map[Endpoint]bool{}
	w.inTimeRun = map[Endpoint]int{}
	if w.clockEvery == 0 {
		w.clockEvery = readClockEvery
	}
	w.wake = make(chan struct{}, 1)
	w.nudge = make(chan struct{}, 1)
	if w.Now == nil {
		w.Now = time.Now
	}
	if w.Log == nil {
		w.Log = slog.New(slog.DiscardHandler)
	}
}

// leaseNow is now by the database's clock, as of its last reading.
func (w *Worker) leaseNow() time.Time { return w.Now().Add(w.skew.Get()) }

// readClockEvery is how often a worker reads the database's clock: a
// node's time sync can drift or step while it runs.
const readClockEvery = 30 * time.Second

// readClock measures how far the database's clock is from this node's,
// when the queue is shared between nodes, and warns once the two are more
// than a second apart: leases follow the database's clock, but retries
// and the times shown to merchants are this node's.
func (w *Worker) readClock(ctx context.Context) {
	c, ok := w.Queue.(dbclock.Source)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	skew, old, shared, err := w.skew.Measure(ctx, c, w.Now)
	if err != nil || !shared {
		if err != nil && ctx.Err() == nil {
			w.Log.Warn("read the database's clock", "err", err)
		}
		return
	}
	if skew.Abs() > time.Second && (skew-old).Abs() > time.Second/2 {
		w.Log.Warn("this node's clock is off the database's: IPN leases follow the database's clock; fix the node's time sync (NTP)",
			"database_ahead_by", skew.Round(time.Millisecond).String())
	}
}

// Run claims and delivers events until ctx ends, then waits for the
// deliveries in flight (each bounded by the timeout) to finish and be
// recorded, so a shutdown does not count as a failed attempt.
func (w *Worker) Run(ctx context.Context) {
	w.initOnce.Do(w.init)
	w.running.Store(true)
	defer w.running.Store(false)
	defer w.releaseQueued()
	// The heartbeat outlives the deliveries the shutdown waits for.
	defer w.heartbeat()()
	defer w.wg.Wait()
	defer func() {
		w.mu.Lock()
		w.stopping = true
		w.mu.Unlock()
	}()
	w.readClock(ctx)
	clockTick := time.NewTicker(w.clockEvery)
	defer clockTick.Stop()
	tick := time.NewTicker(w.cfg.Poll)
	defer tick.Stop()
	batch := 1 // slots that must be free before claiming
	quick := false
	claim := true
	var nudged time.Time
	claims := &logging.Repeated{Log: w.Log}
	for {
		if claim {
			full, err := w.claimOnce(ctx, batch, quick)
			switch {
			case err != nil && ctx.Err() == nil:
				claims.Fail(ctx, "claim IPN events", "err", err)
			case err == nil:
				claims.OK(ctx, "claim IPN events")
			}
			if full && err == nil {
				continue // more may be due right now
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			// A delivery ended. Claiming a slot at a time would cost a
			// database write per event; wait for half the pool unless
			// the poll comes first, which claims whatever is free (so
			// endpoints that hang cannot starve the others).
			batch, quick, claim = max(w.cfg.Workers/2, 1), true, true
		case <-tick.C:
			batch, quick, claim = 1, false, true
		case <-clockTick.C:
			w.readClock(ctx)
			claim = false
		case <-w.nudge:
			if wait := nudgeGap - time.Since(nudged); wait > 0 {
				t := time.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return
				case <-t.C:
				}
			}
			nudged = time.Now()
			batch, quick, claim = 1, true, w.nudgeWanted()
		}
	}
}

// Nudge tells the worker an event for ep was queued just now, so that it
// claims within milliseconds instead of at its next poll. It never blocks:
// nudges that come while one is pending are one.
func (w *Worker) Nudge(ep Endpoint) {
	w.initOnce.Do(w.init)
	w.mu.Lock()
	w.nudged[ep] = true
	w.mu.Unlock()
	select {
	case w.nudge <- struct{}{}:
	default:
	}
}

// nudgeWanted reports whether a claim could start any of the nudged
// endpoints' events sooner. A saturated one takes its next events as its
// queue drains: claiming for it would only read its backlog again, which
// behind an endpoint that hangs is thousands of rows read in the writer
// for nothing at every payment.
func (w *Worker) nudgeWanted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	want := false
	for ep := range w.nudged {
		want = want || !w.saturated(ep)
	}
	clear(w.nudged)
	return want
}

// saturated: ep is at its cap here and its queue has no room for another
// share (it is more than half full, or ep is slow and queues nothing).
// The caller holds w.mu.
func (w *Worker) saturated(ep Endpoint) bool {
	return w.inFlight[ep] >= w.limit(ep) && (w.slow[ep] || w.cfg.queueCap()-len(w.queued[ep]) < w.cfg.share())
}

// limit is how many requests may be in flight to ep from here: one while
// it is slow and half the node's slots or more are taken. Slots are cut
// for fairness, which only matters when they run short: cut always, a
// merchant whose receiver answers every notification in 6 s got one
// every 6 s from an idle node, and its backlog grew without end. The
// caller holds w.mu.
func (w *Worker) limit(ep Endpoint) int {
	if w.slow[ep] && 2*w.active >= w.cfg.Workers {
		return 1
	}
	return w.cfg.PerEndpoint
}

// Running reports whether Run is delivering: a node whose notifications
// would wait is not ready.
func (w *Worker) Running() bool { return w.running.Load() }

// claimOnce fills free slots with due events, if at least batch are free.
// It reports whether the claim came back full, meaning more events may be
// waiting.
func (w *Worker) claimOnce(ctx context.Context, batch int, quick bool) (bool, error) {
	w.mu.Lock()
	free := w.cfg.Workers - w.active
	// Endpoints at their cap take events into their queue when it has
	// room for a whole share; the others wait for it to drain.
	room := 0
	var skip []Endpoint
	for ep, n := range w.inFlight {
		if n < w.limit(ep) {
			continue
		}
		if w.saturated(ep) {
			skip = append(skip, ep)
		} else {
			room += w.cfg.queueCap() - len(w.queued[ep])
		}
	}
	for ep := range w.waitFor {
		if w.waiting(ep) {
			skip = append(skip, ep)
		}
	}
	one := make([]Endpoint, 0, len(w.slow))
	for ep := range w.slow {
		one = append(one, ep)
	}
	w.mu.Unlock()
	if free < batch && room == 0 {
		return false, nil
	}
	now, leaseNow := w.Now(), w.leaseNow()
	owner := fmt.Sprintf("%s#%d", w.node, w.claims.Add(1))
	limit := free + room
	cctx, cancel := w.dbContext(ctx)
	events, err := w.Queue.ClaimIPN(cctx, Claim{Owner: owner, Now: now, LeaseNow: leaseNow, LeaseUntil: leaseNow.Add(w.cfg.Lease),
		Limit: limit, PerEndpoint: w.cfg.share(), Skip: skip, One: one, Quick: quick})
	cancel()
	if err != nil {
		return false, err
	}
	var release []string
	started := 0
	for _, ev := range events {
		ep := Endpoint{ev.MerchantCode, ev.Mode}
		w.mu.Lock()
		// An endpoint that asked to wait since the claim began gets its
		// events back, as one over its cap does.
		wait := w.waiting(ep)
		ok := !wait && w.inFlight[ep] < w.limit(ep) && w.active < w.cfg.Workers
		queue := !ok && !wait && !w.slow[ep] && w.inFlight[ep] > 0 && len(w.queued[ep]) < w.cfg.queueCap()
		if ok {
			w.inFlight[ep]++
			w.active++
		} else if queue {
			w.queued[ep] = append(w.queued[ep], queuedEvent{ev, owner})
		}
		if ok || queue {
			w.held[ev.ID] = owner
		}
		w.mu.Unlock()
		if queue {
			continue
		}
		if !ok {
			// Over this endpoint's cap and its queue's: give it back at
			// once so that another node, or a later poll, can take it.
			release = append(release, ev.ID)
			continue
		}
		started++
		w.wg.Add(1)
		go w.deliver(context.WithoutCancel(ctx), ev, owner)
	}
	if len(release) > 0 {
		rctx, cancel := w.writeContext(context.WithoutCancel(ctx))
		defer cancel()
		if err := w.Queue.ReleaseIPN(rctx, owner, release); err != nil {
			w.Log.Warn("release IPN events", "err", err)
		}
	}
	return len(events) == limit && started > 0, nil
}

// done ends a delivery to ep: its slot goes to the endpoint's next queued
// event, or back to the pool. The caller still counts in w.wg, so adding
// the next delivery to it is safe.
func (w *Worker) done(ep Endpoint) {
	w.mu.Lock()
	if w.waiting(ep) {
		// Asked to wait: what was claimed ahead for it goes back. (A slow
		// endpoint has nothing queued: answered gave it back.)
		defer w.giveBack(w.unqueue(ep))
	}
	if q := w.queued[ep]; len(q) > 0 && !w.stopping {
		next := q[0]
		if w.queued[ep] = q[1:]; len(w.queued[ep]) == 0 {
			delete(w.queued, ep)
		}
		refill := len(q)-1 == w.cfg.queueCap()-w.cfg.share()
		w.mu.Unlock()
		w.wg.Add(1)
		go w.deliver(context.Background(), next.ev, next.owner)
		if refill {
			w.signal()
		}
		return
	}
	w.active--
	if w.inFlight[ep]--; w.inFlight[ep] <= 0 {
		delete(w.inFlight, ep)
	}
	w.mu.Unlock()
	w.signal()
}

// waiting reports whether ep asked for a pause that is not over, and
// forgets one that is. The caller holds w.mu.
func (w *Worker) waiting(ep Endpoint) bool {
	until, ok := w.waitFor[ep]
	if ok && !w.Now().Before(until) {
		delete(w.waitFor, ep)
		return false
	}
	return ok
}

// unqueue takes ep's queued events off the queue and out of the
// heartbeat's care, for giveBack. The caller holds w.mu.
func (w *Worker) unqueue(ep Endpoint) []queuedEvent {
	back := w.queued[ep]
	delete(w.queued, ep)
	for _, qe := range back {
		w.release(qe.ev.ID, qe.owner)
	}
	return back
}

// answer is how a receiver answered a request, for its share of the
// node's slots.
type answer int

const (
	inTime   answer = iota // any HTTP status within slowAnswer
	late                   // an HTTP status, after slowAnswer
	noAnswer               // none within the timeout
)

// answerIn says how an HTTP answer that took took counts.
func (c Config) answerIn(took time.Duration) answer {
	if took > c.slowAnswer() {
		return late
	}
	return inTime
}

// slowAnswer is how long an answer may take and the receiver keep its
// full share: a third of the timeout (5 s by default). Sixteen receivers
// that each answered in 14 s held every slot of a node as surely as
// sixteen that hung, and only a timeout made one slow.
func (c Config) slowAnswer() time.Duration { return c.Timeout / 3 }

// inTimeToRecover is how many answers in time in a row give a slow
// endpoint its share back. One was enough before: a receiver that hung on
// every other request (one of two instances dead) got sixteen slots back
// at each answer, eight of which then hung for the whole timeout. Sent one
// at a time, four answers take a healthy receiver milliseconds.
const inTimeToRecover = 4

// answered notes how ep answered a request (any HTTP status counts as an
// answer: a receiver that refuses at once holds no slot). One that
// answered late or not at all becomes slow, and what was claimed ahead
// for it goes back; one that then answers in time inTimeToRecover times
// in a row gets its full share back.
func (w *Worker) answered(ep Endpoint, how answer, took time.Duration) {
	w.mu.Lock()
	was := w.slow[ep]
	var back []queuedEvent
	switch {
	case how != inTime:
		w.slow[ep] = true
		delete(w.inTimeRun, ep)
		back = w.unqueue(ep)
	case was:
		if w.inTimeRun[ep]++; w.inTimeRun[ep] >= inTimeToRecover {
			delete(w.slow, ep)
			delete(w.inTimeRun, ep)
		}
	}
	recovered := was && !w.slow[ep]
	w.mu.Unlock()
	w.giveBack(back)
	switch {
	case !was && how == noAnswer:
		w.Log.Warn("IPN receiver not answering: nothing claimed ahead for it on this node, and one request at a time while half the node's slots are taken, until it answers in time",
			"merchant", ep.MerchantCode, "mode", ep.Mode, "timeout", w.cfg.Timeout.String())
	case !was && how == late:
		w.Log.Warn("IPN receiver slow to answer: nothing claimed ahead for it on this node, and one request at a time while half the node's slots are taken, until it answers in time",
			"merchant", ep.MerchantCode, "mode", ep.Mode, "took", took.Round(time.Millisecond).String(), "in_time", w.cfg.slowAnswer().String())
	case recovered:
		w.Log.Info("IPN receiver answering in time again", "merchant", ep.MerchantCode, "mode", ep.Mode)
	}
}

// giveBack releases queued events claimed but not started.
func (w *Worker) giveBack(qs []queuedEvent) {
	byOwner := map[string][]string{}
	for _, qe := range qs {
		byOwner[qe.owner] = append(byOwner[qe.owner], qe.ev.ID)
	}
	for owner, ids := range byOwner {
		ctx, cancel := w.writeContext(context.Background())
		if err := w.Queue.ReleaseIPN(ctx, owner, ids); err != nil {
			w.Log.Warn("release IPN events", "err", err)
		}
		cancel()
	}
}

func (w *Worker) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// release stops renewing event id's lease for the claim owner made, and
// only that claim's: a replay drops the lease, and this worker may have
// claimed the event again since. Forgetting the newer claim stopped its
// renewal, its lease ran out mid-request, and the event was sent again and
// again, never recorded. w.mu must be held.
func (w *Worker) release(id, owner string) {
	if w.held[id] == owner {
		delete(w.held, id)
	}
}

// releaseQueued gives back, when the worker stops, the events it claimed
// but never started, so that another node takes them at once instead of
// after their lease.
func (w *Worker) releaseQueued() {
	w.mu.Lock()
	var back []queuedEvent
	for ep, q := range w.queued {
		for _, qe := range q {
			w.release(qe.ev.ID, qe.owner)
		}
		back = append(back, q...)
		delete(w.queued, ep)
	}
	w.mu.Unlock()
	w.giveBack(back)
}

// deliver makes one attempt and records its outcome. The slot is given
// back as soon as the request is over, before the outcome is written: the
// endpoint's limit is on requests in flight, and the event stays leased to
// this worker until the write lands, so nobody takes it meanwhile; waiting
// for the write would make every slot pay a commit per notification.
func (w *Worker) deliver(ctx context.Context, ev Event, owner string) {
	defer w.wg.Done()
	var once sync.Once
	free := func() { once.Do(func() { w.done(Endpoint{ev.MerchantCode, ev.Mode}) }) }
	defer free()
	res := w.attempt(ctx, ev)
	free()
	res.EventID, res.Owner = ev.ID, owner
	// Counted when made, before the outcome is written: whoever sees the
	// written outcome sees it counted too. A park is counted once it is
	// stored: a configuration saved meanwhile makes the event due instead.
	if res.Status != Parked {
		w.Metrics.observe(res)
	}
	rctx, cancel := w.writeContext(ctx)
	err := w.Queue.RecordIPN(rctx, res)
	cancel()
	w.mu.Lock()
	w.release(ev.ID, owner)
	w.mu.Unlock()
	if res.Status == Parked && err == nil {
		w.Metrics.observe(res)
	}
	switch {
	case errors.Is(err, ErrConfigChanged):
		w.Log.Info("IPN configuration changed while parking; the event is due again", "event", ev.ID)
	case errors.Is(err, ErrLeaseLost):
		w.Log.Warn("IPN lease lost before recording; another worker owns the event now", "event", ev.ID)
	case err != nil && outage.Is(err):
		// A connection the database dropped is no fault of the gateway's:
		// the lease will expire and the event be sent again.
		w.Log.Warn("record IPN attempt: database out of reach; the notification is sent again once its lease runs out", "event", ev.ID, "err", err)
	case err != nil:
		// The lease will expire and the event be retried: at least once.
		w.Log.Error("record IPN attempt", "event", ev.ID, "err", err)
	}
	if res.Attempt != nil {
		// recorded false: the receiver's answer is not kept, and the
		// event is sent again (a "delivered" there is not the event's).
		w.Log.Info("IPN attempt", "event", ev.ID, "merchant", ev.MerchantCode, "mode", ev.Mode, "status", res.Status,
			"http_status", res.Attempt.StatusCode, "latency_ms", res.Attempt.Latency.Milliseconds(), "err", res.Attempt.Error, "recorded", err == nil)
	}
}

// dbContext bounds one read of the queue (a claim, settings) or a renewal
// by a third of a lease, as the heartbeat's are: a call left hanging on a
// connection a database failover had cut stopped every claim of the node,
// which stayed "ready", for as long as the socket took to die. A timed-out
// claim only waits for the next.
func (w *Worker) dbContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, w.cfg.Lease/3)
}

// writeContext bounds a write of an outcome or a release by two leases:
// the heartbeat renews the event's lease meanwhile, and an outcome not
// written is a notification sent again; but a write hanging for ever kept
// that lease renewed for ever.
func (w *Worker) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 2*w.cfg.Lease)
}

// heartbeat renews the leases this worker holds every third of a lease,
// until the function it returns is called. A renewal that fails is
// retried on the next beat; a lease that runs out meanwhile may be taken
// over, and the receiver then hears the event twice under one webhook-id,
// which docs/ipn.md allows.
func (w *Worker) heartbeat() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(w.cfg.Lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			w.mu.Lock()
			held := maps.Clone(w.held)
			w.mu.Unlock()
			if len(held) == 0 {
				continue
			}
			ctx, cancel := w.dbContext(context.Background())
			_, err := w.Queue.RenewIPN(ctx, held, w.leaseNow().Add(w.cfg.Lease))
			cancel()
			if err != nil {
				w.Log.Warn("renew IPN leases", "events", len(held), "err", err)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// attempt reads the merchant's settings (a change made on another node is
// seen within a second) and sends ev.
func (w *Worker) attempt(ctx context.Context, ev Event) Result {
	now := w.Now()
	sctx, cancel := w.dbContext(ctx)
	st, err := w.Queue.RecentSettings(sctx, ev.MerchantCode, ev.Mode)
	cancel()
	if err != nil {
		return w.postpone(now, fmt.Sprintf("cannot read the merchant's IPN settings: %v", err))
	}
	if why, ok := NoEndpoint(st.IPN, ev.Mode); ok {
		return park(now, st.IPN, why)
	}
	if err := CheckURL(st.IPN.URL, ev.Mode); err != nil {
		return park(now, st.IPN, fmt.Sprintf("configured IPN URL not usable: %v", err))
	}
	keys, err := signingKeys(st.SigningSecrets(now))
	if err != nil {
		return w.postpone(now, "cannot sign: "+err.Error())
	}

	a := &Attempt{EventID: ev.ID, At: now, URL: st.IPN.URL}
	resp, err := w.send(ctx, ev, st.IPN, keys, a)
	switch {
	case err == nil:
		w.answered(Endpoint{ev.MerchantCode, ev.Mode}, w.cfg.answerIn(a.Latency), a.Latency)
	case errors.Is(err, errNoAnswer):
		w.answered(Endpoint{ev.MerchantCode, ev.Mode}, noAnswer, a.Latency)
	}
	res := Result{Attempt: a}
	n := ev.Attempts + 1 // this attempt's number in the round
	switch {
	case err != nil:
		a.Error = err.Error()
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		res.Status, res.At = Delivered, w.Now()
		return res
	case resp.StatusCode == http.StatusGone:
		a.Error = "410 Gone: endpoint disabled until the IPN configuration is saved again"
		res.Status, res.NextAttemptAt, res.LastError, res.DisableURL = Pending, w.Now(), a.Error, st.IPN.URL
		return res
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		a.Error = fmt.Sprintf("HTTP %d: redirects are not followed; configure the final URL", resp.StatusCode)
	default:
		a.Error = "HTTP " + strconv.Itoa(resp.StatusCode)
	}
	res.LastError = a.Error
	retryAfter := ""
	if resp != nil {
		retryAfter = resp.Header.Get("Retry-After")
	}
	if after, err := parseRetryAfter(retryAfter, w.Now()); err == nil && after > 0 &&
		(a.StatusCode == http.StatusTooManyRequests || a.StatusCode == http.StatusServiceUnavailable) {
		w.mu.Lock()
		w.waitFor[Endpoint{ev.MerchantCode, ev.Mode}] = w.Now().Add(min(after, w.cfg.MaxRetryAfter))
		w.mu.Unlock()
	}
	next, more := w.cfg.retryAt(n, a.StatusCode, retryAfter, w.Now())
	if !more {
		res.Status = Failed
		res.LastError = fmt.Sprintf("gave up after %d attempts: %s", n, a.Error)
		return res
	}
	res.Status, res.NextAttemptAt = Pending, next
	return res
}

// Test sends a signed sample notification to the merchant's configured
// URL for mode, through the same client and address guard as real
// deliveries, and returns what happened. Nothing is queued or retried.
func (w *Worker) Test(ctx context.Context, merchantCode string, mode merchant.Mode) (Attempt, error) {
	w.initOnce.Do(w.init)
	st, err := w.Queue.RecentSettings(ctx, merchantCode, mode)
	if err != nil {
		return Attempt{}, fmt.Errorf("read IPN settings: %w", err)
	}
	if st.IPN.URL == "" {
		return Attempt{}, errors.New("no IPN URL is saved for this mode yet")
	}
	if err := CheckURL(st.IPN.URL, mode); err != nil {
		return Attempt{}, err
	}
	now := w.Now()
	keys, err := signingKeys(st.SigningSecrets(now))
	if err != nil {
		return Attempt{}, err
	}
	body, err := json.Marshal(Payload{
		CallbackType: "IPN",
		Customer:     PayloadCustomer{Name: "Test Customer", MobileNumber: "+254 712345678"},
		Transaction: PayloadTransaction{Date: JavaTimestamp(now.In(cmp.Or(w.Location, time.UTC))), Reference: "TEST", PaymentMode: "CARD", Amount: "1.00",
			// Neither can name a real bill or order: bill references are 12
			// letters and digits, order references letters and digits only
			// ("test" was a valid one, which a receiver could credit).
			BillNumber: "TESTNOTIFICATION", OrderAmount: "1.00", ServiceCharge: "0", AdditionalInfo: "TEST-NOTIFICATION",
			Status: "SUCCESS", Remarks: "Test notification sent from the Kadi dashboard: no payment happened"},
		Bank: PayloadBank{Reference: "test", TransactionType: "C"},
	})
	if err != nil {
		return Attempt{}, err
	}
	ev := Event{ID: secret.NewID("msg"), MerchantCode: merchantCode, Mode: mode, Payload: body}
	a := Attempt{EventID: ev.ID, At: now, URL: st.IPN.URL}
	if _, err := w.send(ctx, ev, st.IPN, keys, &a); err != nil {
		a.Error = err.Error()
	}
	return a, nil
}

// retryAt is when to try again after the n-th attempt of a round failed,
// with statusCode (0: no answer) and the answer's Retry-After header; false
// when the schedule is used up. A 429 or 503 that asks for a longer wait
// than the schedule gets it, up to MaxRetryAfter.
func (c Config) retryAt(n, statusCode int, retryAfter string, now time.Time) (time.Time, bool) {
	wait, more := c.Schedule.retryWait(n, c.Jitter)
	if !more {
		return time.Time{}, false
	}
	if statusCode == http.StatusTooManyRequests || statusCode == http.StatusServiceUnavailable {
		if after, err := parseRetryAfter(retryAfter, now); err == nil {
			wait = max(wait, min(after, c.MaxRetryAfter))
		}
	}
	return now.Add(wait), true
}

func (w *Worker) postpone(now time.Time, why string) Result {
	return Result{Status: Pending, NextAttemptAt: now.Add(w.cfg.Defer), LastError: why}
}

// park sets aside an event whose merchant has no usable endpoint: it waits
// for the merchant, not for the gateway, so it is neither polled nor
// counted as late. Saving the IPN configuration sends it.
func park(now time.Time, saw merchant.IPNConfig, why string) Result {
	return Result{Status: Parked, NextAttemptAt: now, Saw: saw, LastError: ParkedNote(why)}
}

// NoEndpoint says why cfg, a mode's saved IPN configuration, gives a
// notification nowhere to go, if it does: no URL, or the endpoint disabled
// after a 410. A notification queued for it is stored parked at once
// (payment.Service), rather than claimed and parked by a worker: two
// writes a payment for every merchant that has not set an IPN URL.
func NoEndpoint(cfg merchant.IPNConfig, mode merchant.Mode) (why string, ok bool) {
	switch {
	case cfg.URL == "":
		return fmt.Sprintf("no IPN URL configured for %s mode", mode), true
	case !cfg.DisabledAt.IsZero():
		return "IPN endpoint disabled after 410 Gone", true
	}
	return "", false
}

// ParkedNote is a parked event's LastError: why it waits, and what sends it.
func ParkedNote(why string) string {
	return fmt.Sprintf("%s; sent when an IPN configuration is saved within %d days of the payment, or by replay", why, parkedDays)
}

// signingKeys decodes the secrets that sign a notification now.
func signingKeys(secrets []string) ([][]byte, error) {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		k, err := SigningKey(s)
		if err != nil {
			return nil, err
		}
		keys[i] = k
	}
	return keys, nil
}

// send posts the payload, signed with each of keys, and fills a's outcome
// fields. The response body is read (its excerpt kept) and closed before
// returning.
func (w *Worker) send(ctx context.Context, ev Event, cfg merchant.IPNConfig, keys [][]byte, a *Attempt) (*http.Response, error) {
	// The latency is measured from when the timeout starts to the end of
	// the answer read: a receiver cut off at the timeout shows at least
	// the timeout, and one that sends its headers at once and its body
	// slowly shows the time it held the slot (timed to the headers, it
	// counted as answering in time).
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.URL, bytes.NewReader(ev.Payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Kadi-IPN/1")
	if cfg.Username != "" || cfg.Password != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cfg.Username+":"+cfg.Password)))
	}
	ts := w.Now()
	req.Header.Set(HeaderID, ev.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	// Standard Webhooks: signatures separated by spaces, any of which a
	// receiver may check (two while a rotated secret still signs).
	sigs := make([]string, len(keys))
	for i, k := range keys {
		sigs[i] = Sign(k, ev.ID, ts, ev.Payload)
	}
	req.Header.Set(HeaderSignature, strings.Join(sigs, " "))

	resp, err := w.clientFor(ev.Mode).Do(req)
	a.Latency = time.Since(start)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, fmt.Errorf("%w within %s", errNoAnswer, w.cfg.Timeout)
		}
		return nil, cleanError(err)
	}
	defer resp.Body.Close()
	a.StatusCode = resp.StatusCode
	excerpt, _ := io.ReadAll(io.LimitReader(resp.Body, MaxResponseExcerpt))
	a.Response = sanitize(excerpt)
	// Drain a little more so the connection can be reused; a receiver
	// that streams more than that loses its connection, not our time.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	a.Latency = time.Since(start)
	return resp, nil
}

// errNoAnswer is a request the receiver did not answer within the timeout.
var errNoAnswer = errors.New("no answer")

// cleanError drops the "Post \"url\": " wrapping: the URL is recorded
// beside the error.
func cleanError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// sanitize makes a receiver's bytes storable as text in any database
// (PostgreSQL refuses invalid UTF-8 and NUL).
func sanitize(b []byte) string {
	return strings.ReplaceAll(strings.ToValidUTF8(string(b), "\uFFFD"), "\x00", "")
}

// clientFor picks the HTTP client for a mode: live always gets the strict
// one, whose dialer refuses private addresses whatever the operator allowed.
func (w *Worker) clientFor(mode merchant.Mode) *http.Client {
	if mode == merchant.Test {
		return w.loose
	}
	return w.strict
}
