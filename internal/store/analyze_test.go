package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/store"
)

// A new PostgreSQL database's planner has no statistics, and for a lookup
// by order reference it ties the order-reference constraint with the
// dashboard's state list, then takes the list and filters every bill of
// the merchant. Analyze, which kadi-load runs after seeding, gives it the
// statistics that autovacuum would give a minute later.
func TestAnalyzeGivesTheOrderReferenceLookupItsIndex(t *testing.T) {
	dsn := freshSchema(t, postgresURL(t))
	s := openStore(t, dsn)
	code, refs, _ := seedBills(t, s, 20_000)
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	plan := func() string {
		t.Helper()
		return explain(t, raw, `EXPLAIN SELECT reference FROM bills WHERE order_ref = $1 AND merchant_code = $2 AND mode = 'test'`,
			refs[len(refs)/2].order, code)
	}
	const constraint = "bills_merchant_code_mode_order_ref_key"
	t.Logf("before Analyze:\n%s", plan())
	if err := s.Analyze(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p := plan(); !strings.Contains(p, "Index Cond") || !strings.Contains(p, constraint) {
		t.Errorf("after Analyze the lookup does not use %s:\n%s", constraint, p)
	}
}

// Store.Verification reads a bill's successful payment through
// payments_one_success, never by reading the payments table whole: not in
// the generic plan that a prepared statement gets after five runs (pgx
// prepares every statement), and not on a database never analyzed, where
// a first form of the statement (the success or else the latest attempt,
// in one join) got a hash join over a sequential scan of payments.
func TestVerificationPlanReadsOnePayment(t *testing.T) {
	dsn := freshSchema(t, postgresURL(t))
	s := openStore(t, dsn)
	code, refs, _ := seedBills(t, s, 20_000)
	for range 300 {
		if _, err := queueIPNEvent(t.Context(), s, code, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn, err := raw.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	for i, byOrderReference := range []bool{false, true} {
		q := store.VerificationQuery(byOrderReference)
		for n := 1; strings.Contains(q, "?"); n++ {
			q = strings.Replace(q, "?", fmt.Sprintf("$%d", n), 1)
		}
		name := fmt.Sprintf("verification%d", i)
		if _, err := conn.ExecContext(t.Context(), `PREPARE `+name+` AS `+q); err != nil {
			t.Fatal(err)
		}
		// EXPLAIN takes no parameters; a reference and a merchant code are
		// letters and digits.
		p := explain(t, conn, fmt.Sprintf(`EXPLAIN EXECUTE %s('%s', '%s', 'test')`, name, refs[0].ref, code))
		if strings.Contains(p, "Seq Scan on payments") || !strings.Contains(p, "payments_one_success") {
			t.Errorf("by order reference %v: the generic plan does not read the one success by its index:\n%s", byOrderReference, p)
		}
	}
}

// explain runs an EXPLAIN statement and returns its plan's lines.
func explain(t *testing.T, db interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}, query string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	// PostgreSQL's plan is one column; SQLite's query plan is four, the
	// line last.
	cells := make([]any, len(cols))
	for i := range cells {
		cells[i] = new(any)
	}
	var lines []string
	for rows.Next() {
		if err := rows.Scan(cells...); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprint(*cells[len(cells)-1].(*any)))
	}
	return strings.Join(lines, "\n")
}

// Unanalyzed names the tables PostgreSQL will not analyze by itself, and
// why: one whose own autovacuum_enabled is off, and all of them when
// autovacuum is off for the server (as on the machine these tests were
// written on).
func TestUnanalyzed(t *testing.T) {
	dsn := freshSchema(t, postgresURL(t))
	s := openStore(t, dsn)
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var autovacuum, trackCounts string
	if err := raw.QueryRow(`SELECT current_setting('autovacuum'), current_setting('track_counts')`).Scan(&autovacuum, &trackCounts); err != nil {
		t.Fatal(err)
	}
	var server []string // what each table says with its own setting left on
	switch {
	case autovacuum == "off":
		server = []string{"bills: autovacuum is off on the server", "ipn_events: autovacuum is off on the server", "payments: autovacuum is off on the server"}
	case trackCounts == "off":
		server = []string{"bills: track_counts is off on the server", "ipn_events: track_counts is off on the server", "payments: track_counts is off on the server"}
	}
	check := func(when string, want []string) {
		t.Helper()
		got, err := s.Unanalyzed(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s (autovacuum %s, track_counts %s): Unanalyzed = %q, want %q", when, autovacuum, trackCounts, got, want)
		}
	}
	check("new database", server)
	if _, err := raw.Exec(`ALTER TABLE bills SET (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	want := append([]string{"bills: autovacuum_enabled is off for the table"}, server[min(1, len(server)):]...)
	check("bills' autovacuum off", want)
}

func TestUnanalyzedSQLite(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "kadi.db"))
	if got, err := s.Unanalyzed(t.Context()); err != nil || got != nil {
		t.Errorf("SQLite: Unanalyzed = %v, %v; want none", got, err)
	}
}

// The payments lists read each listed bill's latest attempt by its index,
// on a PostgreSQL database never analyzed as on SQLite: a first form of
// the statement (every attempt of fifty bills, by an IN list) was planned
// there as a sequential scan of all payments, 20 ms a page on 100,000,
// and so was a second (the latest attempts as a subquery of one statement).
func TestShownPaymentsPlanReadsByIndex(t *testing.T) {
	for _, tc := range []struct {
		name, dsn string
		explain   string // how the store's statement is explained
		bad       string // what the plan must not hold
		byID      string // the primary key's index
	}{
		{"SQLite", "sqlite", "EXPLAIN QUERY PLAN ", "SCAN p", "sqlite_autoindex_payments_1"},
		{"PostgreSQL", "postgres", "EXPLAIN ", "Seq Scan on payments", "payments_pkey"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dsn, driver string
			if tc.dsn == "sqlite" {
				dsn, driver = filepath.Join(t.TempDir(), "kadi.db"), "sqlite"
			} else {
				dsn, driver = freshSchema(t, postgresURL(t)), "pgx"
			}
			s := openStore(t, dsn)
			code, _, _ := seedBills(t, s, 20_000)
			raw, err := sql.Open(driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			// An attempt on every bill, so that reading them all costs.
			if _, err := raw.ExecContext(t.Context(), `INSERT INTO payments (`+store.PaymentColumns+`)
				SELECT 'pay_' || reference, reference, merchant_code, mode, 'failed', amount_minor, currency, 'VISA', '424242', '4242',
					12, 2030, '', 'f', '', '', '', '', '', '', '', '', created_at, created_at, ''
				FROM bills WHERE merchant_code = '`+code+`' AND reference NOT IN (SELECT bill_ref FROM payments)`); err != nil {
				t.Fatal(err)
			}
			for _, st := range []struct{ q, index string }{
				{store.LatestAttemptsQuery, "payments_bill"},
				{store.PaymentsByIDQuery, tc.byID},
			} {
				// EXPLAIN takes no parameters: references and ids are
				// letters, digits and _.
				q := strings.ReplaceAll(st.q, "?", "'ABCDEFGH2345'")
				if p := explain(t, raw, tc.explain+q); strings.Contains(p, tc.bad) || !strings.Contains(p, st.index) {
					t.Errorf("not read by %s:\n%s\n%s", st.index, q, p)
				}
			}
		})
	}
}

// The gateway's PostgreSQL sessions name themselves (an SRE counting a
// node's backends in pg_stat_activity had to match client ports to
// processes), keep synchronous_commit on, and a URL's own settings win.
func TestPostgresSessionSettings(t *testing.T) {
	base := freshSchema(t, postgresURL(t))
	for _, tc := range []struct{ url, name string }{
		{base, "kadi"},
		{base + "&application_name=kadi-node-7", "kadi-node-7"},
	} {
		s := openStore(t, tc.url)
		for setting, want := range map[string]string{"application_name": tc.name, "synchronous_commit": "on"} {
			if got, err := store.Setting(t.Context(), s, setting); err != nil || got != want {
				t.Errorf("%s with %s: %q, %v; want %q", setting, tc.url, got, err, want)
			}
		}
	}
}
