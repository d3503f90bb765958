package store_test

import (
	"database/sql"
	"strings"
	"testing"
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
		rows, err := raw.QueryContext(t.Context(), `EXPLAIN SELECT reference FROM bills WHERE order_ref = $1 AND merchant_code = $2 AND mode = 'test'`,
			refs[len(refs)/2].order, code)
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
	const constraint = "bills_merchant_code_mode_order_ref_key"
	t.Logf("before Analyze:\n%s", plan())
	if err := s.Analyze(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p := plan(); !strings.Contains(p, "Index Cond") || !strings.Contains(p, constraint) {
		t.Errorf("after Analyze the lookup does not use %s:\n%s", constraint, p)
	}
}
