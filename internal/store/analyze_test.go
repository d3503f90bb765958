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
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
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
