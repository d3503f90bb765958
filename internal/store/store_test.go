package store_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/store"
	"github.com/kadipay/kadi/internal/store/storetest"
)

// postgresEnv names the PostgreSQL the tests may create schemas in, e.g.
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
const postgresEnv = "KADI_TEST_DATABASE_URL"

func TestStore(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) store.Store { return openSQLite(t, filepath.Join(t.TempDir(), "kadi.db")) })
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		base := postgresURL(t)
		storetest.Run(t, func(t *testing.T) store.Store { return openStore(t, freshSchema(t, base)) })
	})
}

func openStore(t *testing.T, url string) *store.DB {
	t.Helper()
	s, err := store.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openSQLite(t *testing.T, path string) *store.DB { return openStore(t, path) }

func postgresURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv(postgresEnv)
	if u == "" {
		t.Skip(postgresEnv + " is not set: skipping the PostgreSQL run (set it to e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return u
}

// freshSchema is a PostgreSQL schema of the test's own on base.
func freshSchema(t testing.TB, base string) string { return storetest.FreshSchema(t, base) }

// migrationCount is how many migrations the store embeds.
func migrationCount(t *testing.T) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	return len(names)
}

// checkMigrated opens the store twice more (the first Open migrated it) and
// checks each migration is recorded once and the data survives.
func checkMigrated(t *testing.T, dsn string, count func() (rows, versions int)) {
	ctx := t.Context()
	first := openStore(t, dsn)
	if err := first.RecordAudit(ctx, auditEvent()); err != nil {
		t.Fatal(err)
	}
	first.Close()
	for range 2 {
		s, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatalf("Open on a migrated database: %v", err)
		}
		events, err := s.AuditEvents(ctx, "1234567890", 10)
		s.Close()
		if err != nil || len(events) != 1 {
			t.Fatalf("after reopening: %d audit events, %v; want the 1 written before", len(events), err)
		}
	}
	want := migrationCount(t)
	if rows, versions := count(); rows != want || versions != want {
		t.Fatalf("schema_migrations holds %d rows for %d versions, want %d of each", rows, versions, want)
	}
}

func auditEvent() audit.Event {
	return audit.Event{ID: "aud_reopen", At: time.Now(), MerchantCode: "1234567890", Actor: "cli", Action: audit.IPNChanged, Detail: "before reopening"}
}

// A data dir's kadi.db that is not a database (damaged, or another file
// in its place) is named, with what to do: the error said only "create
// schema_migrations: begin: file is not a database (26)".
func TestOpenNamesADamagedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kadi.db")
	if err := os.WriteFile(path, []byte(strings.Repeat("this is no database ", 400)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), path+" is not a readable SQLite database") || !strings.Contains(err.Error(), "backup") {
		t.Errorf("open of a file that is no database: %v", err)
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "kadi.db")
		checkMigrated(t, path, func() (int, int) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			return countMigrations(t, db, "schema_migrations")
		})
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		dsn := freshSchema(t, postgresURL(t))
		checkMigrated(t, dsn, func() (int, int) {
			db, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			return countMigrations(t, db, "schema_migrations")
		})
	})
}

func countMigrations(t *testing.T, db *sql.DB, table string) (rows, versions int) {
	t.Helper()
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*), COUNT(DISTINCT version) FROM `+table).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	return rows, versions
}

// Nodes of a PostgreSQL deployment start together; each migrates on Open.
func TestConcurrentOpenPostgres(t *testing.T) {
	dsn := freshSchema(t, postgresURL(t))
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			s, err := store.Open(t.Context(), dsn)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d of %d at once: %v", i+1, n, err)
		}
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if rows, versions := countMigrations(t, db, "schema_migrations"); rows != migrationCount(t) || versions != rows {
		t.Fatalf("schema_migrations holds %d rows for %d versions after concurrent opens", rows, versions)
	}
}

func TestSQLitePragmas(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "kadi.db")
	s := openSQLite(t, path)

	// WAL is recorded in the file itself, so any connection sees it.
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var mode string
	if err := other.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Errorf("journal_mode seen by another connection = %q, want wal", mode)
	}

	// The rest are per connection: every connection of the pool needs them.
	tests := []struct {
		pragma string
		ok     func(v string) bool
		want   string
	}{
		{"journal_mode", func(v string) bool { return v == "wal" }, "wal"},
		{"synchronous", func(v string) bool { return v == "2" }, "2 (FULL)"},
		{"busy_timeout", func(v string) bool { n, err := strconv.Atoi(v); return err == nil && n > 0 }, "> 0"},
		{"foreign_keys", func(v string) bool { return v == "1" }, "1"},
	}
	for _, tt := range tests {
		values, err := store.PragmaOnConns(ctx, s, tt.pragma, 4)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range values {
			if !tt.ok(v) {
				t.Errorf("connection %d: PRAGMA %s = %s, want %s", i, tt.pragma, v, tt.want)
			}
		}
	}

	// And foreign keys are enforced, not merely switched on.
	err = s.ExecRaw(ctx, `INSERT INTO outlets (code, merchant_code) VALUES (?, ?)`, "00000001", "no such merchant")
	if err == nil {
		t.Error("an outlet of a merchant that does not exist was stored")
	}
}

// TestPostgresPoolKeepsItsConnections: under concurrent queries the pool
// opens at most MaxConns connections and keeps them (issue 12: with
// database/sql's default of 2 idle connections, most queries under load
// opened a new PostgreSQL backend).
func TestPostgresPoolKeepsItsConnections(t *testing.T) {
	dsn := freshSchema(t, postgresURL(t))
	const maxConns = 6
	s, err := store.Open(t.Context(), dsn, store.WithPool(store.Pool{MaxConns: maxConns, MaxIdleTime: time.Minute, MaxLifetime: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := store.PoolStats(s)
	var wg sync.WaitGroup
	for range 3 * maxConns {
		wg.Go(func() {
			for range 40 {
				if _, err := s.BillByID(t.Context(), "NOSUCHBILL01"); err == nil {
					t.Error("found a bill in an empty store")
				}
			}
		})
	}
	wg.Wait()
	after := store.PoolStats(s)
	if after.MaxOpenConnections != maxConns {
		t.Errorf("MaxOpenConnections %d, want %d", after.MaxOpenConnections, maxConns)
	}
	if closed := after.MaxIdleClosed - before.MaxIdleClosed; closed != 0 {
		t.Errorf("%d connections closed for want of idle room under load: the pool churns", closed)
	}
	if after.OpenConnections > maxConns {
		t.Errorf("%d connections open, bound %d", after.OpenConnections, maxConns)
	}
	if after.WaitCount == before.WaitCount {
		t.Log("no query waited for a connection: the load did not reach the bound")
	}
}

// A transaction whose request ended (the client went away) before its
// commit fails as that, not as "already committed or rolled back": the
// gateway logged those as failures of its own.
func TestCommitAfterTheClientLeft(t *testing.T) {
	db, err := store.Open(t.Context(), freshSchema(t, postgresURL(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 5 {
		ctx, cancel := context.WithCancel(t.Context())
		err := db.InTx(ctx, func() error {
			cancel()
			time.Sleep(20 * time.Millisecond) // database/sql rolls back on its own meanwhile
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("commit after the context ended: %v, want context.Canceled", err)
		}
	}
}

// On PostgreSQL other nodes add bills, so a node never answers "no such
// bill" from what it has seen, even told it holds a data dir.
func TestKnownBillsNeverOnPostgreSQL(t *testing.T) {
	s, err := store.Open(t.Context(), freshSchema(t, postgresURL(t)), store.WithDataDirHeld())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	var reads int
	store.OnPrepare(s, func(string) { reads++ })
	if _, err := s.Verification(t.Context(), "1234567890", merchant.Test, "NOSUCHBILL"); !errors.Is(err, bill.ErrNotFound) {
		t.Fatalf("%v, want bill.ErrNotFound", err)
	}
	if store.BillsListed(s) || reads == 0 {
		t.Errorf("listed %t, %d reads: a PostgreSQL node answered a lookup of no bill without a read", store.BillsListed(s), reads)
	}
}
