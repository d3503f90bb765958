package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrations embed.FS

// onlineMarker, as a migration's first line, says it only builds and drops
// indexes. PostgreSQL then runs each statement CONCURRENTLY, outside a
// transaction: a plain CREATE INDEX holds every write to its table for the
// whole build, which on ipn_events during a rolling upgrade stops the
// previous release's nodes from finishing payments. SQLite, one node with
// one writer, runs it as any other.
const onlineMarker = "-- kadi:online"

// migrationLock is the PostgreSQL advisory lock that keeps two nodes
// starting at once from migrating twice. Releases before 2026-11-27 took
// 4711 and waited for it inside a transaction, holding a snapshot that an
// online build waits to see end: were it the same lock, such a node
// starting during a build would wait for the build and the build for it.
// They only find the migrations they know applied, so they need not wait
// for this release's.
const migrationLock = 4712

// lockPoll spaces the tries for the migration lock; after waitSaid of
// them, or of an index's build, a start says what it waits for.
const (
	lockPoll = 20 * time.Millisecond
	waitSaid = 5 * time.Second
)

// migrate applies the migrations this release embeds that the database
// lacks, each in a transaction of its own, an online one on PostgreSQL
// outside any.
func (s *DB) migrate(ctx context.Context) error {
	// held checks, before each migration, that the lock is still this
	// node's: a session ended under it (a timeout, a dropped connection)
	// lets it go, and another node in.
	held := func() error { return nil }
	if s.d.name == "postgres" {
		// The lock's transaction holds a connection while the
		// migrations take another: a pool of one would wait for ever.
		if s.pool.MaxConns == 1 {
			s.db.SetMaxOpenConns(2)
			defer s.pool.apply(s.db)
		}
		lock, err := s.lockMigrations(ctx)
		if err != nil {
			return err
		}
		defer lock.Rollback()
		held = func() error {
			// Simple protocol: no portal, no snapshot left behind.
			if _, err := lock.ExecContext(ctx, `SELECT 1`); err != nil {
				return fmt.Errorf("lost the migration lock (another node may be migrating): %w", err)
			}
			return nil
		}
	}
	// Under the migration lock too: PostgreSQL's IF NOT EXISTS is no guard
	// against another node creating the table at the same moment.
	err := s.inTx(ctx, func(t tx) error {
		_, err := t.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`)
		return err
	})
	if err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		version := strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
		stmts := splitStatements(string(body))
		if err := held(); err != nil {
			return fmt.Errorf("migrate %s: %w", version, err)
		}
		if s.d.name == "postgres" && strings.HasPrefix(string(body), onlineMarker+"\n") {
			err = s.migrateOnline(ctx, version, stmts)
		} else {
			// SQLite: the writer's immediate transaction holds the
			// database's write lock.
			err = s.inTx(ctx, func(t tx) error {
				if done, err := migrated(t.queryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version)); done || err != nil {
					return err
				}
				for _, stmt := range stmts {
					if _, err := t.exec(ctx, stmt); err != nil {
						return fmt.Errorf("%s: %w", version, err)
					}
				}
				_, err := t.exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, version, ms(time.Now()))
				return err
			})
		}
		if err != nil {
			return fmt.Errorf("migrate %s: %w", version, err)
		}
	}
	return nil
}

func migrated(row scanner) (bool, error) {
	var n int
	err := row.Scan(&n)
	return n > 0, err
}

// lockMigrations takes PostgreSQL's migration lock for a transaction of
// its own, which the caller leaves open until its migrations are done and
// then rolls back: a transaction's lock, unlike a
// session's, goes back with its connection through a pooler in
// transaction mode (PgBouncer's). The lock is tried, never waited for (a
// statement waiting for it holds a snapshot, which an online build waits
// to see end), by one statement of the simple protocol that fails when
// the lock is taken: a query with a result, through the extended
// protocol, leaves its portal, and the portal its snapshot, open with the
// transaction, and the build waited for the node that ran it.
func (s *DB) lockMigrations(ctx context.Context) (*sql.Tx, error) {
	began, said := time.Now(), false
	for {
		t, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("take the migration lock: %w", err)
		}
		// Held idle while indexes build for minutes: a timeout of the
		// server's, the role's or a pooler's for idle transactions would
		// end it, and the lock with it. (PgBouncer's own
		// idle_transaction_timeout is the operator's to raise.)
		_, err = t.ExecContext(ctx, `DO $$ BEGIN
			IF NOT pg_try_advisory_xact_lock(`+strconv.Itoa(migrationLock)+`) THEN
				RAISE EXCEPTION USING ERRCODE = 'lock_not_available', MESSAGE = 'another node is migrating';
			END IF;
			PERFORM set_config('idle_in_transaction_session_timeout', '0', true);
			IF current_setting('server_version_num')::int >= 170000 THEN
				PERFORM set_config('transaction_timeout', '0', true);
			END IF;
		END $$`)
		if err == nil {
			return t, nil
		}
		_ = t.Rollback()
		if pgErr := (*pgconn.PgError)(nil); !errors.As(err, &pgErr) || pgErr.Code != lockNotAvailable {
			return nil, fmt.Errorf("take the migration lock: %w", err)
		}
		if !said && time.Since(began) >= waitSaid {
			said = true
			s.log.InfoContext(ctx, "waiting for another node's migrations to end (PostgreSQL advisory lock)", "lock", migrationLock)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("take the migration lock: %w", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// lockNotAvailable is PostgreSQL's SQLSTATE for a lock not taken.
const lockNotAvailable = "55P03"

// migrateOnline runs an online migration on PostgreSQL, under the
// migration lock, on a connection of its own: each statement
// CONCURRENTLY, one at a time. Names are qualified with the schema the
// migrations build in, the search path's first: unqualified, a drop takes
// the first index of that name on the path, which may be another
// deployment's. A build cut short (the node stopped mid-way) leaves an
// invalid index behind, which would be taken for done, so it is dropped
// and built again; one that finished is kept.
func (s *DB) migrateOnline(ctx context.Context, version string, stmts []string) error {
	steps := make([]onlineStep, 0, len(stmts))
	for _, stmt := range stmts {
		st, err := parseOnline(stmt)
		if err != nil {
			return err
		}
		steps = append(steps, st)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// Closed, not returned to the pool, with the timeouts set off
		// below.
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}()
	if done, err := migrated(conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, version)); done || err != nil {
		return err
	}
	// A build waits for every older snapshot in the database: a
	// statement_timeout meant for the gateway's queries would cancel it at
	// every start, and each start would build it again. (Through a pooler
	// in transaction mode these settings may land on another server
	// connection: raise the role's there.)
	for _, q := range []string{`SET statement_timeout = 0`, `SET lock_timeout = 0`} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	var schema string
	if err := conn.QueryRowContext(ctx, `SELECT quote_ident(current_schema())`).Scan(&schema); err != nil {
		return fmt.Errorf("the schema to migrate: %w", err)
	}
	for _, st := range steps {
		var valid sql.NullBool
		err := conn.QueryRowContext(ctx, `SELECT x.indisvalid FROM pg_index x JOIN pg_class c ON c.oid = x.indexrelid
			WHERE c.relname = $1 AND c.relnamespace = to_regnamespace($2)`, strings.ToLower(st.index), schema).Scan(&valid)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("index %s: %w", st.index, err)
		}
		exists := valid.Valid
		var qs []string
		switch {
		case st.build == "" && exists:
			qs = []string{"DROP INDEX CONCURRENTLY " + schema + "." + st.index}
		case st.build != "" && exists && !valid.Bool:
			qs = []string{"DROP INDEX CONCURRENTLY " + schema + "." + st.index, st.build}
		case st.build != "" && !exists:
			qs = []string{st.build}
		}
		// A build waits for every older snapshot in the database: a start
		// that takes minutes says why, one that does not says nothing.
		began, said := time.Now(), make(chan struct{})
		slow := time.AfterFunc(waitSaid, func() {
			s.log.InfoContext(ctx, "building an index online: it waits for the database's older transactions to end", "migration", version, "index", st.index)
			close(said)
		})
		for _, q := range qs {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				if !slow.Stop() {
					<-said // said before the error is, not after
				}
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		if !slow.Stop() { // said, or saying it
			<-said
			s.log.InfoContext(ctx, "index built", "migration", version, "index", st.index, "took", time.Since(began).Round(time.Millisecond).String())
		}
	}
	_, err = conn.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, version, ms(time.Now()))
	return err
}

// onlineStep is one statement of an online migration: index is built by
// build, or dropped when build is empty.
type onlineStep struct{ index, build string }

var (
	createIndex = regexp.MustCompile(`(?is)^CREATE\s+(UNIQUE\s+)?INDEX\s+(\w+)\s+(ON\s.*)$`)
	dropIndex   = regexp.MustCompile(`(?is)^DROP\s+INDEX\s+(\w+)$`)
)

// parseOnline reads a statement of an online migration: an index built,
// which PostgreSQL then builds CONCURRENTLY, or one dropped.
func parseOnline(stmt string) (onlineStep, error) {
	if m := createIndex.FindStringSubmatch(stmt); m != nil {
		unique := ""
		if strings.TrimSpace(m[1]) != "" {
			unique = "UNIQUE "
		}
		return onlineStep{index: m[2], build: "CREATE " + unique + "INDEX CONCURRENTLY " + m[2] + " " + m[3]}, nil
	}
	if m := dropIndex.FindStringSubmatch(stmt); m != nil {
		return onlineStep{index: m[1]}, nil
	}
	return onlineStep{}, fmt.Errorf("an online migration only creates and drops indexes, not: %.60s", stmt)
}

// splitStatements cuts a migration at semicolons that end a line, dropping
// comment-only chunks. Our migrations keep semicolons out of literals.
func splitStatements(body string) []string {
	var out []string
	for _, chunk := range strings.Split(body, ";\n") {
		var lines []string
		for _, l := range strings.Split(chunk, "\n") {
			if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "--") {
				lines = append(lines, l)
			}
		}
		if stmt := strings.TrimSuffix(strings.TrimSpace(strings.Join(lines, "\n")), ";"); stmt != "" {
			out = append(out, stmt)
		}
	}
	return out
}
