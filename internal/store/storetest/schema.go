package storetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"net/url"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the schema's own handling
)

// FreshSchema creates an empty PostgreSQL schema on the server base names,
// dropped when tb ends, and returns base with search_path pointing into
// it: every test gets a database of its own.
func FreshSchema(tb testing.TB, base string) string {
	tb.Helper()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatal(err)
	}
	name := "kadi_test_" + strings.ToLower(rand.Text())
	if _, err := admin.ExecContext(context.Background(), `CREATE SCHEMA `+name); err != nil {
		admin.Close()
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.ExecContext(context.Background(), `DROP SCHEMA `+name+` CASCADE`); err != nil {
			tb.Errorf("drop schema %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", name) // pgx passes unknown parameters on as runtime settings
	u.RawQuery = q.Encode()
	return u.String()
}
