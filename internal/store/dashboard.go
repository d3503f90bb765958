package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/payment"
)

// BillsPage lists bills as f asks, newest first, paged by keyset on
// (created_at, reference): the hundred-thousandth page costs what the
// first does.
func (s *DB) BillsPage(ctx context.Context, f bill.ListFilter) ([]bill.Bill, error) {
	q := `SELECT ` + billColumns + ` FROM bills WHERE merchant_code = ? AND mode = ?`
	args := []any{f.MerchantCode, string(f.Mode)}
	if v := strings.TrimSpace(f.Search); v != "" {
		// Three indexed look-ups, then the bills by primary key. An OR of
		// the three in one WHERE reads every bill of the merchant, and so
		// does an index on merchant_code: "|| ''" keeps the planner off it.
		refs, err := s.searchBills(ctx, f, v)
		if err != nil || len(refs) == 0 {
			return nil, err
		}
		q = `SELECT ` + billColumns + ` FROM bills WHERE reference IN (?` + strings.Repeat(`, ?`, len(refs)-1) + `)
			AND merchant_code || '' = ? AND mode || '' = ?`
		args = args[:0]
		for _, r := range refs {
			args = append(args, r)
		}
		args = append(args, f.MerchantCode, string(f.Mode))
	}
	switch f.State {
	case "":
	case bill.Expired:
		q += ` AND state = ? AND expires_at <= ?`
		args = append(args, string(bill.Open), ms(f.Now))
	case bill.Open:
		q += ` AND state = ? AND expires_at > ?`
		args = append(args, string(bill.Open), ms(f.Now))
	default:
		q += ` AND state = ?`
		args = append(args, string(f.State))
	}
	if !f.From.IsZero() {
		q += ` AND created_at >= ?`
		args = append(args, ms(f.From))
	}
	if !f.To.IsZero() {
		q += ` AND created_at < ?`
		args = append(args, ms(f.To))
	}
	if f.After != nil {
		// A row-value comparison: both SQLite and PostgreSQL walk the
		// (merchant_code, mode, created_at, reference) index from there.
		q += ` AND (created_at, reference) < (?, ?)`
		args = append(args, ms(f.After.CreatedAt), f.After.Reference)
	}
	if f.Search != "" {
		// Ordered in Go: an ORDER BY would tempt the planner to walk the
		// merchant's whole list in order instead of fetching the few hits.
		// Not kept prepared: its text has one placeholder a hit, and each
		// count would take a place in the bounded statement cache.
		rows, err := s.db.QueryContext(ctx, s.d.rebind(q), args...)
		if err != nil {
			return nil, err
		}
		bills, err := collect(rows, scanBill)
		slices.SortFunc(bills, func(a, b bill.Bill) int {
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(b.Reference, a.Reference)
		})
		return bills[:min(len(bills), max(f.Limit, 1))], err
	}
	q += ` ORDER BY created_at DESC, reference DESC LIMIT ?`
	args = append(args, max(f.Limit, 1))
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanBill)
}

// maxSearchHits bounds how many bills one search may name (a last four
// digits shared by many cards): the list shows the newest of them.
const maxSearchHits = 1000

// searchBills finds the references of bills whose reference or order
// reference is v, or on which a card ending in v was tried.
func (s *DB) searchBills(ctx context.Context, f bill.ListFilter, v string) ([]string, error) {
	var refs []string
	add := func(q string, args ...any) error {
		rows, err := s.query(ctx, q, args...)
		if err != nil {
			return err
		}
		found, err := collect(rows, func(r scanner) (string, error) {
			var ref string
			return ref, r.Scan(&ref)
		})
		refs = append(refs, found...)
		return err
	}
	mode := string(f.Mode)
	if err := add(`SELECT reference FROM bills WHERE reference = ? AND merchant_code = ? AND mode = ?`, strings.ToUpper(v), f.MerchantCode, mode); err != nil {
		return nil, err
	}
	if err := add(`SELECT reference FROM bills WHERE merchant_code = ? AND mode = ? AND order_ref = ?`, f.MerchantCode, mode, v); err != nil {
		return nil, err
	}
	if len(v) == 4 {
		if err := add(`SELECT DISTINCT bill_ref FROM payments WHERE merchant_code = ? AND mode = ? AND card_last4 = ? LIMIT ?`,
			f.MerchantCode, mode, v, maxSearchHits); err != nil {
			return nil, err
		}
	}
	return refs[:min(len(refs), maxSearchHits)], nil
}

// PaymentsOfBill lists every attempt on a bill, oldest first.
func (s *DB) PaymentsOfBill(ctx context.Context, billRef string) ([]payment.Payment, error) {
	rows, err := s.query(ctx, `SELECT `+paymentColumns+` FROM payments WHERE bill_ref = ? ORDER BY created_at, id`, billRef)
	if err != nil {
		return nil, err
	}
	return collect(rows, scanPayment)
}

// refsPerQuery is how many bill references one ShownPayments statement
// takes: a fixed number keeps one statement text (the statement cache is
// keyed by text and bounded), whatever a page holds.
const refsPerQuery = 50

// latestAttemptsQuery names the latest attempt on each of refsPerQuery
// bills (NULL for a bill never tried): one index look-up a reference
// (payments_bill), on both stores; a VALUES column is column1 on both.
// paymentsByIDQuery then reads those attempts by primary key. Every
// attempt of fifty bills by an IN list on bill_ref, and the attempts
// joined to the first statement as a subquery, were both planned as a scan
// of the whole payments table on a PostgreSQL database not yet analyzed
// (20 ms a page on 100,000 payments, 0.3 ms after ANALYZE).
var (
	latestAttemptsQuery = `SELECT (SELECT p.id FROM payments p WHERE p.bill_ref = v.column1 ORDER BY p.created_at DESC, p.id DESC LIMIT 1)
	FROM (VALUES (?)` + strings.Repeat(`, (?)`, refsPerQuery-1) + `) AS v`
	paymentsByIDQuery = `SELECT ` + paymentColumns + ` FROM payments WHERE id IN (?` + strings.Repeat(`, ?`, refsPerQuery-1) + `)`
)

// ShownPayments gives, for each of billRefs that was tried, its latest
// attempt: on a paid bill, its payment (no attempt starts on a paid bill,
// nor beside one in progress).
func (s *DB) ShownPayments(ctx context.Context, billRefs []string) (map[string]payment.Payment, error) {
	shown := make(map[string]payment.Payment, len(billRefs))
	args := make([]any, refsPerQuery)
	// pad fills args with values, then with "", which no bill or payment
	// has: every statement has refsPerQuery parameters.
	pad := func(values []string) {
		for i := range args {
			args[i] = ""
			if i < len(values) {
				args[i] = values[i]
			}
		}
	}
	for chunk := range slices.Chunk(billRefs, refsPerQuery) {
		pad(chunk)
		rows, err := s.query(ctx, latestAttemptsQuery, args...)
		if err != nil {
			return nil, err
		}
		ids, err := collect(rows, func(r scanner) (string, error) {
			var id sql.NullString
			err := r.Scan(&id)
			return id.String, err
		})
		if err != nil {
			return nil, err
		}
		pad(ids)
		if rows, err = s.query(ctx, paymentsByIDQuery, args...); err != nil {
			return nil, err
		}
		attempts, err := collect(rows, scanPayment)
		if err != nil {
			return nil, err
		}
		for _, p := range attempts {
			shown[p.BillReference] = p
		}
	}
	return shown, nil
}

// PaymentTotals sums a merchant's finished payments since since, by
// quarter of an hour, currency and outcome: the caller adds the quarters
// up into its own zone's days (a day of a zone with summer time is not
// one fixed offset from UTC). Plain integer arithmetic keeps it portable
// and one index range scan.
func (s *DB) PaymentTotals(ctx context.Context, merchantCode, mode string, since time.Time) ([]payment.QuarterTotal, error) {
	rows, err := s.query(ctx, `SELECT updated_at / 900000 AS quarter, currency, status, COUNT(*), SUM(amount_minor)
		FROM payments WHERE merchant_code = ? AND mode = ? AND updated_at >= ? AND status IN (?, ?)
		GROUP BY quarter, currency, status ORDER BY quarter`,
		merchantCode, mode, ms(since), string(payment.Succeeded), string(payment.Failed))
	if err != nil {
		return nil, err
	}
	return collect(rows, func(r scanner) (payment.QuarterTotal, error) {
		var t payment.QuarterTotal
		var quarter int64
		var status string
		err := r.Scan(&quarter, &t.Currency, &status, &t.Count, &t.SumMinor)
		t.Start, t.Status = time.UnixMilli(quarter*900_000), payment.Status(status)
		return t, err
	})
}

// Analyze gives PostgreSQL's planner the statistics of what InsertBills
// put in, as autovacuum would within its next minute. Until then a new
// database's planner cannot tell the order-reference constraint from the
// dashboard's lists (their estimates tie) and may filter every bill of the
// merchant for a lookup by order reference (docs/performance.md).
// SQLite plans without statistics, and this leaves it so.
func (s *DB) Analyze(ctx context.Context) error {
	if s.d.name != "postgres" {
		return nil
	}
	if _, err := s.db.ExecContext(ctx, `ANALYZE`); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}

// Unanalyzed lists the tables whose statistics PostgreSQL will not keep up
// to date by itself, each with why: autovacuum, which also analyzes, is off
// for the table or for the whole server (autovacuum, or track_counts that
// it needs). Without statistics the planner cannot tell the
// order-reference constraint from the dashboard's lists (see Analyze) and
// a lookup by order reference reads every bill of the merchant, so the
// gateway says so when it starts. SQLite plans without statistics: none.
// The table's setting is read with PostgreSQL's own boolean parser, which
// validated it when it was set (off, false, 0, no, …); the CASE keeps the
// cast away from the table's other options.
func (s *DB) Unanalyzed(ctx context.Context) ([]string, error) {
	if s.d.name != "postgres" {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT relname || ': ' || why FROM (SELECT c.relname, CASE
			WHEN EXISTS (SELECT 1 FROM unnest(c.reloptions) o WHERE CASE WHEN split_part(o, '=', 1) = 'autovacuum_enabled'
				THEN NOT split_part(o, '=', 2)::boolean ELSE false END)
				THEN 'autovacuum_enabled is off for the table'
			WHEN current_setting('autovacuum') = 'off' THEN 'autovacuum is off on the server'
			WHEN current_setting('track_counts') = 'off' THEN 'track_counts is off on the server'
			END AS why
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.relname IN ('bills', 'payments', 'ipn_events')) t
		WHERE why IS NOT NULL ORDER BY relname`)
	if err != nil {
		return nil, fmt.Errorf("read autovacuum settings: %w", err)
	}
	return collect(rows, func(r scanner) (string, error) {
		var table string
		return table, r.Scan(&table)
	})
}

// InsertBills stores many bills in one transaction, a few hundred rows a
// statement: for filling a store to measure it (benchmarks, kadi-load), not
// for the API, which creates bills one by one under its rules.
func (s *DB) InsertBills(ctx context.Context, bills []bill.Bill) error {
	const perStatement = 500
	for _, b := range bills {
		s.known.add(b)
	}
	return s.inTx(ctx, func(t tx) error {
		for start := 0; start < len(bills); start += perStatement {
			chunk := bills[start:min(start+perStatement, len(bills))]
			var sb strings.Builder
			sb.WriteString(`INSERT INTO bills (` + billColumns + `, updated_at) VALUES `)
			args := make([]any, 0, len(chunk)*16)
			for i, b := range chunk {
				if i > 0 {
					sb.WriteString(", ")
				}
				sb.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
				args = append(args, b.Reference, b.MerchantCode, string(b.Mode), b.OrderReference, b.RequestHash, b.CustomerName, b.BillerCode, b.Outlet,
					b.Amount.Minor, b.Amount.Currency.Code, b.Description, string(b.State), b.FailedAttempts, ms(b.ExpiresAt), ms(b.CreatedAt), ms(b.CreatedAt))
			}
			if _, err := t.exec(ctx, sb.String(), args...); err != nil {
				return fmt.Errorf("insert bills: %w", err)
			}
		}
		return nil
	})
}
