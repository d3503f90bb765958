package server_test

import (
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/server/servertest"
	"github.com/kadipay/kadi/internal/store"
	"github.com/kadipay/kadi/internal/store/storetest"
)

// A gateway on a PostgreSQL that will not analyze its tables says so when
// it starts, naming the tables and why; one on SQLite, which plans without
// statistics, says nothing of it.
func TestStartWarnsOfTablesNeverAnalyzed(t *testing.T) {
	const warning = "PostgreSQL will not analyze these tables by itself"
	if g := servertest.Start(t, servertest.Options{}); strings.Contains(g.Logs.String(), warning) {
		t.Errorf("an SQLite gateway warned of statistics:\n%s", g.Logs.String())
	}
	base := os.Getenv("KADI_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("KADI_TEST_DATABASE_URL is not set: the warning is a PostgreSQL one")
	}
	dsn := storetest.FreshSchema(t, base)
	st, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`ALTER TABLE bills SET (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	g := servertest.Start(t, servertest.Options{DatabaseURL: dsn})
	logs := g.Logs.String()
	if !strings.Contains(logs, warning) || !strings.Contains(logs, "bills: autovacuum_enabled is off for the table") {
		t.Errorf("want a warning naming bills, its autovacuum off:\n%s", logs)
	}
}
