package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/dbclock"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
)

var (
	_ ipn.Repo       = (*DB)(nil)
	_ dbclock.Source = (*DB)(nil)
)

const ipnEventColumns = `id, merchant_code, mode, payment_id, payload, status, attempts, next_attempt_at, created_at,
	delivered_at, replays, last_error, lease_owner, lease_until`

// ClaimIPN leases due events, at most c.PerEndpoint of each endpoint and
// c.Limit in all, oldest first, and only those that are still pending, due
// and unleased when the UPDATE reaches them, so two claimers never both
// win an event. The poll's claim takes every endpoint's share however long
// another endpoint's backlog in front of it; a quick claim reads only a
// window of the oldest due events (the pending index alone), where picking
// in Go rather than with a window function over 4,096 rows was many times
// cheaper on SQLite (BenchmarkClaimIPN).
func (s *DB) ClaimIPN(ctx context.Context, c ipn.Claim) ([]ipn.Event, error) {
	if c.Limit <= 0 {
		return nil, nil
	}
	perEndpoint := c.PerEndpoint
	if perEndpoint <= 0 {
		perEndpoint = c.Limit
	}
	now, leaseNow := ms(c.Now), ms(c.Now)
	if !c.LeaseNow.IsZero() {
		leaseNow = ms(c.LeaseNow)
	}
	skip := make([]string, 0, len(c.Skip))
	for _, ep := range c.Skip {
		skip = append(skip, endpointKey(ep.MerchantCode, ep.Mode))
	}
	one := make(map[string]bool, len(c.One))
	for _, ep := range c.One {
		one[endpointKey(ep.MerchantCode, ep.Mode)] = true
	}
	skipList, err := json.Marshal(skip)
	if err != nil {
		return nil, err
	}
	claims := s.d.claimStatements()
	scan, scanArgs := claims.poll, []any{now, leaseNow, perEndpoint, string(skipList), c.Limit}
	if c.Quick {
		// The window is how far past the claim's own size a quick claim
		// looks for other endpoints' events behind one endpoint's run;
		// every row of it costs about 1.5 µs on SQLite.
		window := min(max(2*c.Limit, 64), 1024)
		scan, scanArgs = claims.quick, []any{now, window, leaseNow, string(skipList), window}
	}
	var out []ipn.Event
	err = s.inTx(ctx, func(t tx) error {
		rows, err := t.query(ctx, scan, scanArgs...)
		if err != nil {
			return err
		}
		picked, err := pickDue(rows, perEndpoint, one, c.Limit, c.Quick)
		if err != nil || len(picked) == 0 {
			return err
		}
		ids, err := json.Marshal(picked)
		if err != nil {
			return err
		}
		args := []any{c.Owner, ms(c.LeaseUntil), string(ids), now, leaseNow}
		if s.d.name == "postgres" { // its take locks the rows before it updates them
			args = []any{string(ids), now, leaseNow, c.Owner, ms(c.LeaseUntil)}
		}
		rows, err = t.query(ctx, claims.take, args...)
		if err != nil {
			return err
		}
		out, err = collect(rows, scanIPNEvent)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("claim IPN events: %w", err)
	}
	// RETURNING promises no order; deliver oldest first.
	sortEvents(out)
	return out, nil
}

// claimSQL is ClaimIPN's statements in one dialect: the poll's scan, the
// quick claim's scan, and the update that takes what a scan picked. They
// are built once: the statement cache is keyed by text, and a claim runs
// after every commit that made a notification due.
type claimSQL struct{ poll, quick, take string }

var sqliteClaims, postgresClaims = newClaimSQL(dialect{name: "sqlite"}), newClaimSQL(dialect{name: "postgres", numbered: true})

func (d dialect) claimStatements() *claimSQL {
	if d.name == "postgres" {
		return &postgresClaims
	}
	return &sqliteClaims
}

func newClaimSQL(d dialect) claimSQL {
	// An endpoint disabled by a 410 is not left out here: its events are
	// claimed once and parked (RecordIPN), which takes them out of every
	// later scan.
	notSkipped := `NOT IN (` + d.jsonTexts() + `)`
	modes := make([]string, len(merchant.Modes))
	for i, m := range merchant.Modes {
		modes[i] = "('" + string(m) + "')"
	}
	// The poll walks the merchants with pending events (one index seek
	// each, in the endpoint index) and takes the oldest due, unleased
	// events of each of their endpoints: a merchant waits behind nobody's
	// backlog, even one whose receiver fails at once and so never fills
	// its share of requests in flight (it waited 21.9 s behind 60,000 when
	// the poll read the oldest events of all). PostgreSQL joins each
	// endpoint's events laterally; SQLite, which has no LATERAL, finds
	// them by id through a correlated list (a seq scan on PostgreSQL).
	endpoints := `WITH RECURSIVE m(code) AS (
			SELECT MIN(merchant_code) FROM ipn_events WHERE status = 'pending'
			UNION ALL
			SELECT (SELECT MIN(merchant_code) FROM ipn_events WHERE status = 'pending' AND merchant_code > m.code)
			FROM m WHERE m.code IS NOT NULL
		), md(mode) AS (VALUES ` + strings.Join(modes, ", ") + `)`
	share := `FROM ipn_events
			WHERE status = 'pending' AND merchant_code = m.code AND mode = md.mode AND next_attempt_at <= ? AND lease_until < ?
			ORDER BY next_attempt_at, id LIMIT ?`
	// When the claim cannot take every endpoint's share, it takes each
	// endpoint's oldest first, then each one's second, and so on (turn):
	// by age alone, an old backlog would fill a small claim by itself.
	turns := `SELECT id, merchant_code, mode FROM (
			SELECT e.id, e.merchant_code, e.mode, e.next_attempt_at,
				ROW_NUMBER() OVER (PARTITION BY e.merchant_code, e.mode ORDER BY e.next_attempt_at, e.id) AS turn `
	poll := endpoints + turns + `
			FROM m, md, ipn_events e
			WHERE m.code IS NOT NULL AND e.id IN (SELECT id ` + share + `)
				AND (m.code || '/' || md.mode) ` + notSkipped + `) t
		ORDER BY turn, next_attempt_at, id LIMIT ?`
	if d.name == "postgres" {
		poll = endpoints + turns + `
			FROM m CROSS JOIN md CROSS JOIN LATERAL (SELECT id, merchant_code, mode, next_attempt_at ` + share + `) e
			WHERE m.code IS NOT NULL AND (m.code || '/' || md.mode) ` + notSkipped + `) t
		ORDER BY turn, next_attempt_at, id LIMIT ?`
	}
	c := claimSQL{
		poll: poll,
		// A quick claim looks at the window's worth of the oldest due
		// events and no further: behind a hung endpoint's backlog of
		// thousands each would otherwise read the whole backlog to find
		// nothing. (Its sort is of the window only.)
		quick: `SELECT e.id, e.merchant_code, e.mode FROM (
				SELECT id, merchant_code, mode, next_attempt_at, lease_until FROM ipn_events
				WHERE status = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?) e
			WHERE e.lease_until < ? AND (e.merchant_code || '/' || e.mode) ` + notSkipped + `
			ORDER BY e.next_attempt_at, e.id LIMIT ?`,
		// One writer at a time, and the claim's transaction is it: the
		// re-check only guards against an event that changed since this
		// node's last look in another way.
		take: `UPDATE ipn_events SET lease_owner = ?, lease_until = ?
			WHERE id IN (` + d.jsonTexts() + `) AND status = 'pending' AND next_attempt_at <= ? AND lease_until < ?
			RETURNING ` + ipnEventColumns,
	}
	if d.name == "postgres" {
		// Nodes claim side by side. Each locks only the rows it takes,
		// in id order, skipping rows another claim holds: no claim ever
		// waits for another, so two nodes cannot deadlock (they did,
		// 40P01, when the UPDATE locked its rows in whatever order it met
		// them). A row taken meanwhile fails the re-check after its lock
		// and is left.
		c.take = `WITH locked AS (SELECT e.id FROM ipn_events e WHERE e.id IN (` + d.jsonTexts() + `)
				AND e.status = 'pending' AND e.next_attempt_at <= ? AND e.lease_until < ?
				ORDER BY e.id FOR UPDATE SKIP LOCKED)
			UPDATE ipn_events SET lease_owner = ?, lease_until = ? WHERE id IN (SELECT id FROM locked)
			RETURNING ` + ipnEventColumns
	}
	return c
}

// pickDue takes, from due events oldest first, at most perEndpoint of each
// endpoint (one of those in one) and limit in all, and stops reading once
// it has them. A quick claim also stops at a run of perEndpoint events it
// could not take: what follows is most likely more of the same endpoints'
// backlog.
func pickDue(rows *sql.Rows, perEndpoint int, one map[string]bool, limit int, quick bool) ([]string, error) {
	defer rows.Close()
	var picked []string
	taken := map[string]int{}
	passed := 0 // events in a row that were not taken
	for len(picked) < limit && rows.Next() {
		var id, code, mode string
		if err := rows.Scan(&id, &code, &mode); err != nil {
			return nil, err
		}
		ep := endpointKey(code, merchant.Mode(mode))
		most := perEndpoint
		if one[ep] {
			most = 1
		}
		if taken[ep] < most {
			taken[ep]++
			picked = append(picked, id)
			passed = 0
		} else if passed++; quick && passed >= perEndpoint {
			break
		}
	}
	return picked, rows.Err()
}

func endpointKey(code string, mode merchant.Mode) string { return code + "/" + string(mode) }

func sortEvents(evs []ipn.Event) {
	slices.SortStableFunc(evs, func(a, b ipn.Event) int { return a.NextAttemptAt.Compare(b.NextAttemptAt) })
}

// DatabaseNow reads PostgreSQL's clock, which the nodes sharing it time
// their IPN leases by. SQLite's is this machine's: shared is false.
func (s *DB) DatabaseNow(ctx context.Context) (time.Time, bool, error) {
	if s.d.name != "postgres" {
		return time.Now(), false, nil
	}
	var us int64
	if err := s.queryRow(ctx, `SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS BIGINT)`).Scan(&us); err != nil {
		return time.Time{}, true, fmt.Errorf("read the database's clock: %w", err)
	}
	return time.UnixMicro(us), true, nil
}

// ReleaseIPN clears owner's lease on ids, making them claimable again.
func (s *DB) ReleaseIPN(ctx context.Context, owner string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	anys := make([]any, len(ids))
	for i, id := range ids {
		anys[i] = id
	}
	list, args := idList(anys)
	_, err := s.exec(ctx, `UPDATE ipn_events SET lease_owner = '', lease_until = 0
		WHERE lease_owner = ? AND id IN (`+list+`)`, append([]any{owner}, args...)...)
	return err
}

// RenewIPN extends the leases in held (event id → owner) that their
// owners still hold, one statement per owner.
func (s *DB) RenewIPN(ctx context.Context, held map[string]string, until time.Time) (int, error) {
	byOwner := map[string][]any{}
	for id, owner := range held {
		byOwner[owner] = append(byOwner[owner], id)
	}
	renewed := 0
	err := s.inTx(ctx, func(t tx) error {
		renewed = 0
		for owner, ids := range byOwner {
			for len(ids) > 0 {
				chunk := ids[:min(len(ids), 500)]
				ids = ids[len(chunk):]
				list, args := idList(chunk)
				res, err := t.exec(ctx, `UPDATE ipn_events SET lease_until = ?
					WHERE lease_owner = ? AND id IN (`+list+`)`, append([]any{ms(until), owner}, args...)...)
				if err != nil {
					return err
				}
				n, _ := res.RowsAffected()
				renewed += int(n)
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("renew IPN leases: %w", err)
	}
	return renewed, nil
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// idList is the placeholders and arguments of an IN list of ids, its
// length rounded up to a power of two with "" (no row's id): a text for
// each count of ids took one of the statement cache's places, and a node
// renewing its leases every few seconds, a different count each time,
// filled the cache within hours.
func idList(ids []any) (string, []any) {
	n := 1
	for n < len(ids) {
		n *= 2
	}
	args := make([]any, n)
	for i := range args {
		args[i] = ""
		if i < len(ids) {
			args[i] = ids[i]
		}
	}
	return placeholders(n), args
}

// RecordIPN stores an attempt's outcome, its log row and, for a 410, the
// disabling of the endpoint, all in one transaction and only while r.Owner
// still holds the lease.
func (s *DB) RecordIPN(ctx context.Context, r ipn.Result) error {
	if r.DisableURL != "" {
		// Which endpoint is the event's; a 410 is rare enough to forget
		// them all. Before, so that no delivery reads the endpoint enabled
		// from memory between the commit and the forget after it.
		s.settings.forgetAll()
		defer s.settings.forgetAll()
	}
	unparked := false
	err := s.inTx(ctx, func(t tx) error {
		unparked = false
		if r.Status == ipn.Parked {
			still, err := s.stillSaved(ctx, t, r.EventID, r.Saw)
			if err != nil {
				return err
			}
			if !still {
				r.Status, unparked = ipn.Pending, true
			}
		}
		set := `status = ?, attempts = attempts + ?, last_error = ?, lease_owner = '', lease_until = 0`
		counted := 0
		if r.Attempt != nil {
			counted = 1
		}
		args := []any{string(r.Status), counted, r.LastError}
		switch r.Status {
		case ipn.Pending, ipn.Parked:
			set += `, next_attempt_at = ?`
			args = append(args, ms(r.NextAttemptAt))
		case ipn.Delivered:
			set += `, delivered_at = ?`
			args = append(args, ms(r.At))
		}
		args = append(args, r.EventID, r.Owner)
		res, err := t.exec(ctx, `UPDATE ipn_events SET `+set+` WHERE id = ? AND lease_owner = ?`, args...)
		if err != nil {
			return fmt.Errorf("update IPN event: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ipn.ErrLeaseLost
		}
		if a := r.Attempt; a != nil {
			// Numbered in the same statement: one round trip less for
			// every delivery.
			_, err := t.exec(ctx, `INSERT INTO ipn_attempts (event_id, seq, attempted_at, url, status_code, latency_us, error, response)
				SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ?, ?, ? FROM ipn_attempts WHERE event_id = ?`,
				r.EventID, ms(a.At), a.URL, a.StatusCode, a.Latency.Microseconds(), a.Error, a.Response, r.EventID)
			if err != nil {
				return fmt.Errorf("insert IPN attempt: %w", err)
			}
		}
		if r.DisableURL != "" && r.Attempt != nil {
			_, err := t.exec(ctx, `UPDATE merchant_settings SET ipn_disabled_at = ?
				WHERE merchant_code = (SELECT merchant_code FROM ipn_events WHERE id = ?)
				AND mode = (SELECT mode FROM ipn_events WHERE id = ?)
				AND ipn_url = ? AND ipn_disabled_at = 0`,
				ms(r.Attempt.At), r.EventID, r.EventID, r.DisableURL)
			if err != nil {
				return fmt.Errorf("disable IPN endpoint: %w", err)
			}
		}
		return nil
	})
	if err == nil && unparked {
		// The worker parked on settings this DB kept in memory while
		// another process or node saved new ones: left, every claim of
		// the event would park it again until they aged out.
		s.settings.forgetAll()
		return ipn.ErrConfigChanged
	}
	return err
}

// stillSaved says whether saw is still the saved IPN configuration of the
// event's endpoint (savedIPN).
func (s *DB) stillSaved(ctx context.Context, t tx, eventID string, saw merchant.IPNConfig) (bool, error) {
	cfg, found, err := s.savedIPN(ctx, t, `merchant_code = (SELECT merchant_code FROM ipn_events WHERE id = ?)
		AND mode = (SELECT mode FROM ipn_events WHERE id = ?)`, eventID, eventID)
	if err != nil {
		return false, err
	}
	return found && cfg.URL == saw.URL && ms(cfg.DisabledAt) == ms(saw.DisabledAt), nil
}

// savedIPN reads the saved IPN configuration of the endpoint where selects,
// inside t, for a park: a worker's (stillSaved) or a payment's
// (FinishPayment). On PostgreSQL it holds a share lock on that row until
// t ends, so SetIPN, which sends the parked events, runs either before (and
// the park sees its change) or after (and its update sees the event
// parked); a share lock, not an update, so that parks for one merchant do
// not queue behind each other. SQLite's one writer orders them already.
// found is false when the endpoint has no settings row.
func (s *DB) savedIPN(ctx context.Context, t tx, where string, args ...any) (cfg merchant.IPNConfig, found bool, err error) {
	q := `SELECT ipn_url, ipn_disabled_at FROM merchant_settings WHERE ` + where
	if s.d.name == "postgres" {
		q += ` FOR SHARE`
	}
	var disabled int64
	err = t.queryRow(ctx, q, args...).Scan(&cfg.URL, &disabled)
	if errors.Is(err, sql.ErrNoRows) {
		return merchant.IPNConfig{}, false, nil
	}
	if err != nil {
		return merchant.IPNConfig{}, false, fmt.Errorf("read the IPN configuration: %w", err)
	}
	cfg.DisabledAt = fromMS(disabled)
	return cfg, true, nil
}

// IPNStats counts pending and failed events.
func (s *DB) IPNStats(ctx context.Context) (ipn.Stats, error) {
	var st ipn.Stats
	var oldest int64
	// The literals let both databases count from the partial indexes.
	err := s.queryRow(ctx, `SELECT COUNT(*), COALESCE(MIN(created_at), 0) FROM ipn_events WHERE status = 'pending'`).
		Scan(&st.Pending, &oldest)
	if err != nil {
		return st, fmt.Errorf("count pending IPN events: %w", err)
	}
	st.OldestPending = fromMS(oldest)
	if err := s.queryRow(ctx, `SELECT COUNT(*) FROM ipn_events WHERE status = 'failed'`).Scan(&st.Failed); err != nil {
		return st, fmt.Errorf("count failed IPN events: %w", err)
	}
	return st, nil
}

// IPNEvents lists a merchant's events, newest first.
func (s *DB) IPNEvents(ctx context.Context, f ipn.Filter) ([]ipn.Event, error) {
	q := `SELECT ` + ipnEventColumns + ` FROM ipn_events WHERE merchant_code = ?`
	args := []any{f.MerchantCode}
	if f.Mode != "" {
		q += ` AND mode = ?`
		args = append(args, string(f.Mode))
	}
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, string(f.Status))
	}
	if f.PaymentID != "" {
		q += ` AND payment_id = ?`
		args = append(args, f.PaymentID)
	}
	if f.Before != "" {
		// Keyset paging in the listing's own order; an id that is not
		// there (or another merchant's) names the end of the list.
		q += ` AND (created_at, id) < (SELECT created_at, id FROM ipn_events WHERE id = ? AND merchant_code = ?)`
		args = append(args, f.Before, f.MerchantCode)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.query(ctx, q+` ORDER BY created_at DESC, id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanIPNEvent)
}

// IPNEvent loads one event.
func (s *DB) IPNEvent(ctx context.Context, id string) (ipn.Event, error) {
	return scanIPNEvent(s.lookup(ctx, `SELECT `+ipnEventColumns+` FROM ipn_events WHERE id = ?`, id))
}

// IPNAttempts lists an event's attempts, oldest first.
func (s *DB) IPNAttempts(ctx context.Context, id string) ([]ipn.Attempt, error) {
	rows, err := s.query(ctx, `SELECT event_id, seq, attempted_at, url, status_code, latency_us, error, response
		FROM ipn_attempts WHERE event_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []ipn.Attempt
	for rows.Next() {
		var a ipn.Attempt
		var at, latency int64
		if err := rows.Scan(&a.EventID, &a.Seq, &at, &a.URL, &a.StatusCode, &latency, &a.Error, &a.Response); err != nil {
			return nil, err
		}
		a.At, a.Latency = fromMS(at), time.Duration(latency)*time.Microsecond
		out = append(out, a)
	}
	return out, rows.Err()
}

// ReplayIPN starts a new round of deliveries for an event: pending, due at
// now, attempts counted from zero, same id. A lease in flight is left alone:
// the attempt it covers still records its outcome.
func (s *DB) ReplayIPN(ctx context.Context, id string, now time.Time, actor string) (ipn.Event, error) {
	var ev ipn.Event
	err := s.inTx(ctx, func(t tx) error {
		// The lease goes too: an attempt in flight when the replay comes
		// would otherwise write its outcome over the new round (failed
		// for good after a last attempt, or delivered) and the replay
		// would never be sent. That attempt finds its lease lost.
		res, err := t.exec(ctx, `UPDATE ipn_events SET status = ?, attempts = 0, replays = replays + 1, next_attempt_at = ?,
			delivered_at = 0, last_error = '', lease_owner = '', lease_until = 0 WHERE id = ?`, string(ipn.Pending), ms(now), id)
		if err != nil {
			return fmt.Errorf("replay IPN event: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return ipn.ErrNotFound
		}
		if ev, err = scanIPNEvent(t.queryRow(ctx, `SELECT `+ipnEventColumns+` FROM ipn_events WHERE id = ?`, id)); err != nil {
			return err
		}
		return insertAudit(ctx, t, audit.Event{At: now, MerchantCode: ev.MerchantCode, Actor: actor, Action: audit.IPNReplayed,
			Detail: fmt.Sprintf("%s event %s (payment %s), replay %d", ev.Mode, ev.ID, ev.PaymentID, ev.Replays)})
	})
	if err == nil {
		s.notifyIPNQueued(ipn.Endpoint{MerchantCode: ev.MerchantCode, Mode: ev.Mode})
	}
	return ev, err
}

func scanIPNEvent(row scanner) (ipn.Event, error) {
	var ev ipn.Event
	var mode, status, payload string
	var next, created, delivered, leaseUntil int64
	err := row.Scan(&ev.ID, &ev.MerchantCode, &mode, &ev.PaymentID, &payload, &status, &ev.Attempts, &next, &created,
		&delivered, &ev.Replays, &ev.LastError, &ev.LeaseOwner, &leaseUntil)
	if errors.Is(err, sql.ErrNoRows) {
		return ipn.Event{}, ipn.ErrNotFound
	}
	if err != nil {
		return ipn.Event{}, err
	}
	ev.Mode, ev.Status, ev.Payload = merchant.Mode(mode), ipn.Status(status), []byte(payload)
	ev.NextAttemptAt, ev.CreatedAt, ev.DeliveredAt, ev.LeaseUntil = fromMS(next), fromMS(created), fromMS(delivered), fromMS(leaseUntil)
	return ev, nil
}
