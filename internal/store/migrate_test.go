package store_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/server/servertest"
	"github.com/kadipay/kadi/internal/store"
)

// migratedSchema is a fresh PostgreSQL schema the store has migrated, and
// a connection to it of the test's own.
func migratedSchema(t *testing.T) (dsn string, db *sql.DB) {
	t.Helper()
	dsn = freshSchema(t, postgresURL(t))
	return dsn, openMigrated(t, dsn)
}

// openMigrated has the store migrate dsn's schema and gives a connection
// to it of the test's own.
func openMigrated(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	openStore(t, dsn).Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// cutShort leaves migration 0011 as a node stopped during its online
// build does: its index invalid, the migration unrecorded.
func cutShort(t *testing.T, db *sql.DB) {
	t.Helper()
	for _, q := range []string{
		`UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass('ipn_events_endpoint')`,
		`DELETE FROM schema_migrations WHERE version = '0011_ipn_endpoint_index'`,
	} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if indexValid(t, db, "ipn_events_endpoint") {
		t.Fatal("the index is still valid: the test's set-up did not take")
	}
}

// undoMigration takes a migration that built index back out of a migrated
// PostgreSQL schema, as if the database were of the release before it.
func undoMigration(t *testing.T, db *sql.DB, version, index string) {
	t.Helper()
	for _, q := range []string{`DROP INDEX ` + index, `DELETE FROM schema_migrations WHERE version = '` + version + `'`} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func indexValid(t *testing.T, db *sql.DB, index string) bool {
	t.Helper()
	var valid bool
	if err := db.QueryRowContext(t.Context(), `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`, index).Scan(&valid); err != nil {
		t.Fatalf("index %s: %v", index, err)
	}
	return valid
}

// A migration that builds an index on ipn_events runs while the previous
// release's nodes write the table: its build waits for their transactions
// instead of holding their next writes (a plain CREATE INDEX queues for a
// lock that every INSERT then queues behind, for the whole build).
func TestOnlineMigrationLetsWritesThrough(t *testing.T) {
	dsn := freshSchema(t, postgresURL(t))
	// A fresh schema's migrations build online too: one that waited for
	// its own node's lock would wait for ever.
	first, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	s, err := store.Open(first, dsn)
	if err != nil {
		t.Fatalf("Open of a fresh schema: %v", err)
	}
	s.Close()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	undoMigration(t, db, "0011_ipn_endpoint_index", "ipn_events_endpoint")
	// The nodes' connections are named, so that the build looked for is
	// this test's, not another package's in a schema of its own.
	app := "kadi_online_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	nodeDSN := withParam(t, dsn, "application_name", app)
	// An operator's timeouts, meant for the gateway's queries, neither end
	// the lock's idle transaction nor cancel a build held for seconds.
	nodeDSN = withParam(t, nodeDSN, "idle_in_transaction_session_timeout", "1000")
	nodeDSN = withParam(t, nodeDSN, "statement_timeout", "2000")

	// A node of the previous release, in the middle of a payment's write.
	writing, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer writing.Rollback()
	if _, err := writing.ExecContext(t.Context(), `LOCK TABLE ipn_events IN ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// The nodes' starts give up after a while, so that a failure of this
	// test is an error, not a hang.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	logs := &servertest.LogBuffer{}
	start := func() chan error {
		done := make(chan error, 1)
		go func() {
			s, err := store.Open(ctx, nodeDSN, store.WithLog(slog.New(slog.NewTextHandler(logs, nil))))
			if err == nil {
				s.Close()
			}
			done <- err
		}()
		return done
	}
	opened := start()
	// The build has started and waits for that write.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM pg_stat_activity
			WHERE application_name = $1 AND query LIKE 'CREATE INDEX%ipn_events_endpoint%' AND wait_event_type = 'Lock'`, app).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the migration's index build never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Another node starting meanwhile waits for the migration lock, and
	// lets the build finish while it waits; so does a node of a release
	// before online builds, which waited for its lock in a transaction.
	second := start()
	old := make(chan error, 1)
	go func() {
		t, err := db.BeginTx(ctx, nil)
		if err == nil {
			_, err = t.ExecContext(ctx, `SELECT pg_advisory_xact_lock(4711)`)
			_ = t.Rollback()
		}
		old <- err
	}()
	time.Sleep(100 * time.Millisecond)
	// Another write of that node meanwhile goes through.
	next, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Rollback()
	if _, err := next.ExecContext(t.Context(), `SET LOCAL lock_timeout = '2s'`); err != nil {
		t.Fatal(err)
	}
	if _, err := next.ExecContext(t.Context(), `LOCK TABLE ipn_events IN ROW EXCLUSIVE MODE`); err != nil {
		t.Errorf("a write to ipn_events during the migration: %v", err)
	}
	next.Rollback()
	// A build held this long says so (after 5 s): a start can wait
	// minutes on it.
	const building = `msg="building an index online: it waits for the database's older transactions to end" migration=0011_ipn_endpoint_index index=ipn_events_endpoint`
	for !strings.Contains(logs.String(), building) {
		if time.Now().After(deadline) {
			t.Fatalf("a build held for seconds said nothing; the log:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	writing.Rollback()
	if err := <-opened; err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := <-second; err != nil {
		t.Fatalf("Open of the node that started during the migration: %v", err)
	}
	if err := <-old; err != nil {
		t.Fatalf("the previous release's migration lock during the migration: %v", err)
	}
	if !indexValid(t, db, "ipn_events_endpoint") {
		t.Error("the index built online is not valid")
	}
	for _, line := range []string{building, `msg="index built" migration=0011_ipn_endpoint_index index=ipn_events_endpoint`} {
		if n := strings.Count(logs.String(), line); n != 1 {
			t.Errorf("logged %q %d times, want once; the log:\n%s", line, n, logs)
		}
	}
}

// A build cut short (the node stopped mid-way) leaves an invalid index of
// the migration's name behind; the next start builds it again. One that
// finished before its node stopped, valid, is kept.
func TestOnlineMigrationRebuildsAnIndexLeftInvalid(t *testing.T) {
	dsn, db := migratedSchema(t)
	cutShort(t, db)
	s, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatalf("Open after a build cut short: %v", err)
	}
	s.Close()
	if !indexValid(t, db, "ipn_events_endpoint") {
		t.Error("the index left invalid was not built again")
	}

	built := indexOID(t, db, "ipn_events_endpoint")
	if _, err := db.ExecContext(t.Context(), `DELETE FROM schema_migrations WHERE version = '0011_ipn_endpoint_index'`); err != nil {
		t.Fatal(err)
	}
	openStore(t, dsn).Close()
	if indexOID(t, db, "ipn_events_endpoint") != built {
		t.Error("a valid index of an unrecorded migration was built again")
	}
}

func indexOID(t *testing.T, db *sql.DB, index string) (oid int64) {
	t.Helper()
	if err := db.QueryRowContext(t.Context(), `SELECT to_regclass($1)::oid`, index).Scan(&oid); err != nil {
		t.Fatalf("index %s: %v", index, err)
	}
	return oid
}

// withParam is dsn with a connection parameter set.
func withParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// A schema whose name needs quoting (upper-case letters) is found by the
// online steps: a build cut short in it is built again.
func TestOnlineMigrationInAQuotedSchema(t *testing.T) {
	base := postgresURL(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	schema := "Kadi_Quoted_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := admin.ExecContext(t.Context(), `CREATE SCHEMA "`+schema+`"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.ExecContext(context.Background(), `DROP SCHEMA "`+schema+`" CASCADE`) })
	dsn := withParam(t, base, "search_path", `"`+schema+`"`)
	db := openMigrated(t, dsn)
	cutShort(t, db)
	openStore(t, dsn).Close()
	if !indexValid(t, db, "ipn_events_endpoint") {
		t.Error("the index left invalid in a quoted schema was not built again")
	}
}

// A schema sharing the search path with another deployment's: an online
// migration drops and builds in its own, the path's first, and leaves an
// index of the same name further along the path alone.
func TestOnlineMigrationKeepsToItsSchema(t *testing.T) {
	dsn, db := migratedSchema(t)
	other := freshSchema(t, postgresURL(t))
	odb, err := sql.Open("pgx", other)
	if err != nil {
		t.Fatal(err)
	}
	defer odb.Close()
	if _, err := odb.ExecContext(t.Context(), `CREATE TABLE t (a INT); CREATE INDEX ipn_events_endpoint ON t (a)`); err != nil {
		t.Fatal(err)
	}
	undoMigration(t, db, "0011_ipn_endpoint_index", "ipn_events_endpoint")
	mine, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := url.Parse(other)
	if err != nil {
		t.Fatal(err)
	}
	path := mine.Query().Get("search_path") + "," + theirs.Query().Get("search_path")
	openStore(t, withParam(t, dsn, "search_path", path)).Close()
	var n int
	if err := odb.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'ipn_events_endpoint'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("the other schema's index of the same name: %d, %v; want it kept", n, err)
	}
	if !indexValid(t, db, "ipn_events_endpoint") {
		t.Error("the migration's own index was not built")
	}
}

// The migration lock goes with the migration, not with the store: a node
// that starts while another runs opens at once.
func TestMigrationLockEndsWithTheMigration(t *testing.T) {
	dsn := freshSchema(t, postgresURL(t))
	openStore(t, dsn) // stays open
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("Open beside a running node: %v", err)
	}
	s.Close()
}

// A node whose start is cancelled while another holds the migration lock
// gets its context's error, and said what it was waiting for once it had
// waited a while.
func TestMigrationLockWaitEndsWithItsContext(t *testing.T) {
	dsn, db := migratedSchema(t)
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `SELECT pg_advisory_lock(4712)`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Second) // the log line comes after 5 s
	defer cancel()
	var logs strings.Builder
	if _, err := store.Open(ctx, dsn, store.WithLog(slog.New(slog.NewTextHandler(&logs, nil)))); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open while another holds the migration lock: %v, want the context's deadline", err)
	}
	if want := `msg="waiting for another node's migrations to end (PostgreSQL advisory lock)" lock=4712`; strings.Count(logs.String(), want) != 1 {
		t.Errorf("the log of a start waiting for the migration lock:\n%s\nwant %q once", logs.String(), want)
	}
	if _, err := conn.ExecContext(t.Context(), `SELECT pg_advisory_unlock(4712)`); err != nil {
		t.Fatal(err)
	}
	openStore(t, dsn).Close()
}
