package outage_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/kadipay/kadi/internal/outage"
	"github.com/kadipay/kadi/internal/outage/outagetest"
)

// The errors are the drivers' own, produced for real: what a driver
// returns is what the gateway meets in an outage.
func TestIsTellsAnOutageFromARefusal(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		err  func(t *testing.T) error
		want bool
	}{
		{"PostgreSQL not listening", func(t *testing.T) error {
			db := openDB(t, "pgx", "postgres://postgres@127.0.0.1:1/kadi?sslmode=disable&connect_timeout=2")
			return fmt.Errorf("create bill: %w", db.PingContext(ctx))
		}, true},
		{"PostgreSQL ends the connection (57P01)", pgTerminated, true},
		// A new connection refused: the database dropped or taking no
		// connections, the role gone. Nothing the request did.
		{"PostgreSQL has no such database (3D000)", func(t *testing.T) error {
			return pgConnect(t, func(u *url.URL) { u.Path = "/kadi_no_such_database" })
		}, true},
		{"PostgreSQL has no such role (28000)", func(t *testing.T) error {
			return pgConnect(t, func(u *url.URL) { u.User = url.User("kadi_no_such_role") })
		}, true},
		{"PostgreSQL's database takes no connections (55000)", func(t *testing.T) error {
			db := pgOrSkip(t)
			name := fmt.Sprintf("kadi_outage_%d", time.Now().UnixNano())
			for _, q := range []string{`CREATE DATABASE ` + name, `ALTER DATABASE ` + name + ` ALLOW_CONNECTIONS false`} {
				if _, err := db.ExecContext(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() { db.ExecContext(context.Background(), `DROP DATABASE `+name) })
			return pgConnect(t, func(u *url.URL) { u.Path = "/" + name })
		}, true},
		{"PostgreSQL refuses the statement (22012)", func(t *testing.T) error {
			db := pgOrSkip(t)
			_, err := db.ExecContext(ctx, `SELECT 1/0`)
			return err
		}, false},
		{"SQLite read-only file", func(t *testing.T) error {
			path := sqliteFile(t)
			db := openDB(t, "sqlite", "file:"+path+"?mode=ro")
			_, err := db.ExecContext(ctx, `INSERT INTO t VALUES (2)`)
			return err
		}, true},
		{"SQLite locked beyond the busy timeout", func(t *testing.T) error {
			path := sqliteFile(t)
			holder := openDB(t, "sqlite", path)
			conn, err := holder.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
				t.Fatal(err)
			}
			defer conn.ExecContext(ctx, `ROLLBACK`)
			other := openDB(t, "sqlite", path+"?_pragma=busy_timeout(0)")
			_, err = other.ExecContext(ctx, `INSERT INTO t VALUES (2)`)
			return err
		}, true},
		{"SQLite constraint", func(t *testing.T) error {
			db := openDB(t, "sqlite", sqliteFile(t))
			_, err := db.ExecContext(ctx, `INSERT INTO t VALUES (1)`)
			return err
		}, false},
		{"SQLite syntax", func(t *testing.T) error {
			db := openDB(t, "sqlite", sqliteFile(t))
			_, err := db.ExecContext(ctx, `INSERT INTO`)
			return err
		}, false},
		{"no row", func(t *testing.T) error { return fmt.Errorf("bill: %w", sql.ErrNoRows) }, false},
		{"a closed pool", func(t *testing.T) error {
			db := openDB(t, "sqlite", sqliteFile(t))
			db.Close()
			return db.PingContext(ctx)
		}, false},
		{"the request's own cancellation", func(t *testing.T) error { return context.Canceled }, false},
		{"nil", func(t *testing.T) error { return nil }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.err(t)
			if (err == nil) != (c.name == "nil") {
				t.Fatalf("the case did not produce the error it is about: %v", err)
			}
			if got := outage.Is(err); got != c.want {
				t.Errorf("Is(%v) = %v, want %v", err, got, c.want)
			}
		})
	}
}

func TestClientGone(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	late, cancelLate := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer cancelLate()
	lateAndGone, cancelBoth := context.WithDeadline(gone, time.Now().Add(-time.Second))
	defer cancelBoth()
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"the client left and the query stopped", gone, fmt.Errorf("query: %w", context.Canceled), true},
		{"the client left but the failure is another", gone, errors.New("disk I/O error"), false},
		{"a cancellation of the gateway's own", live, context.Canceled, false},
		// PostgreSQL's answers when pgx gives a statement up for the client.
		{"the statement cancelled for the client", gone, fmt.Errorf("insert bill: %w", outagetest.SQLStateError("57014")), true},
		{"the connection given up for the client", gone, fmt.Errorf("lookup: %w", outagetest.ConnGivenUp{Err: context.Canceled}), true},
		{"a statement timeout of the server's", live, outagetest.SQLStateError("57014"), false},
		// The request's own time ran out (--request-timeout): pgx cancels
		// the statement as for a client gone, but the client is waiting
		// for a 503, and a hanging database must reach the 5xx alerts.
		{"the statement cancelled for the request's time", late, fmt.Errorf("insert bill: %w", outagetest.SQLStateError("57014")), false},
		{"the request's time ran out", late, fmt.Errorf("query: %w", context.DeadlineExceeded), false},
		{"the client left, then the time ran out", lateAndGone, fmt.Errorf("query: %w", context.Canceled), true},
		{"the client left during a unique violation", gone, outagetest.SQLStateError("23505"), false},
	} {
		if got := outage.ClientGone(c.ctx, c.err); got != c.want {
			t.Errorf("%s: ClientGone = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestOfTellsTheClientGoneBeforeAnOutage(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	late, cancelLate := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer cancelLate()
	for _, c := range []struct {
		name     string
		ctx      context.Context
		err      error
		want     outage.Kind
		timedOut bool
	}{
		{"no error", live, nil, outage.Fault, false},
		{"a refusal", live, errors.New("no such bill"), outage.Fault, false},
		{"the database out of reach", live, fmt.Errorf("lookup: %w", outagetest.SQLStateError("57P01")), outage.Unavailable, false},
		// The connection pgx gives up for a client gone is an outage's
		// error too: the client's leaving is what it says.
		{"the connection given up for the client", gone, fmt.Errorf("lookup: %w", outagetest.ConnGivenUp{Err: context.Canceled}), outage.ClientLeft, false},
		{"the request's time ran out", late, errors.New("sql: statement interrupted"), outage.Unavailable, true},
		{"a refusal after the client left", gone, outagetest.SQLStateError("23505"), outage.Fault, false},
	} {
		kind, err := outage.Of(c.ctx, c.err)
		if kind != c.want || errors.Is(err, outage.ErrTimedOut) != c.timedOut || !errors.Is(err, c.err) {
			t.Errorf("%s: Of = %v, %v; want kind %v, timed out %v, wrapping %v", c.name, kind, err, c.want, c.timedOut, c.err)
		}
	}
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sqliteFile is a database holding table t with the row 1.
func sqliteFile(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "x.db")
	db := openDB(t, "sqlite", path)
	if _, err := db.Exec(`CREATE TABLE t (id INTEGER PRIMARY KEY); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	return path
}

func pgOrSkip(t *testing.T) *sql.DB {
	url := os.Getenv("KADI_TEST_DATABASE_URL")
	if url == "" {
		t.Skip("KADI_TEST_DATABASE_URL not set")
	}
	return openDB(t, "pgx", url)
}

// pgConnect is the error of a first statement on the test database's
// server with its URL changed by edit.
func pgConnect(t *testing.T, edit func(*url.URL)) error {
	pgOrSkip(t)
	u, err := url.Parse(os.Getenv("KADI_TEST_DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	edit(u)
	_, err = openDB(t, "pgx", u.String()).ExecContext(context.Background(), `SELECT 1`)
	return err
}

// pgTerminated is the error of a connection PostgreSQL ended, as a
// restart or a failover ends every connection.
func pgTerminated(t *testing.T) error {
	ctx := context.Background()
	db := pgOrSkip(t)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var pid int
	if err := conn.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	_, err = conn.ExecContext(ctx, `SELECT 1`)
	return err
}
