package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
	"time"
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

// migrationLock is the advisory lock that keeps two PostgreSQL nodes
// starting at once from migrating twice.
const migrationLock = 4711

// lockPoll spaces the tries for the migration lock.
const lockPoll = 20 * time.Millisecond

// migrate applies the migrations this release embeds that the database
// lacks, each in a transaction of its own, an online one on PostgreSQL
// outside any.
func (s *DB) migrate(ctx context.Context) (err error) {
	run := s.inTx // SQLite: the writer's immediate transaction holds the database's write lock
	var conn *sql.Conn
	if s.d.name == "postgres" {
		if conn, err = s.lockMigrations(ctx); err != nil {
			return err
		}
		defer func() {
			// Closed, not returned to the pool: the lock goes with it,
			// whatever happened.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			_ = conn.Close()
		}()
		run = func(ctx context.Context, fn func(tx) error) error {
			sqlTx, err := conn.BeginTx(ctx, nil)
			if err != nil {
				return fmt.Errorf("begin: %w", err)
			}
			if err := fn(tx{Tx: sqlTx, s: s}); err != nil {
				_ = sqlTx.Rollback()
				return err
			}
			return sqlTx.Commit()
		}
	}
	err = run(ctx, func(t tx) error {
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
		if conn != nil && strings.HasPrefix(string(body), onlineMarker+"\n") {
			err = migrateOnline(ctx, conn, version, stmts)
		} else {
			err = run(ctx, func(t tx) error {
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

// lockMigrations takes PostgreSQL's migration lock for the session of a
// connection of its own, which the caller closes to let it go. The lock is
// tried, never waited for, and outside any transaction: a node waiting
// for it inside one holds a snapshot, which the CREATE INDEX CONCURRENTLY
// of the node holding the lock waits to see end, so each would wait for
// the other.
func (s *DB) lockMigrations(ctx context.Context) (*sql.Conn, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	for {
		var got bool
		if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, migrationLock).Scan(&got); err != nil {
			conn.Close()
			return nil, fmt.Errorf("take the migration lock: %w", err)
		}
		if got {
			return conn, nil
		}
		select {
		case <-ctx.Done():
			conn.Close()
			return nil, fmt.Errorf("take the migration lock: %w", ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}

// migrateOnline runs an online migration on PostgreSQL, on conn, which
// holds the migration lock: its statements CONCURRENTLY, one at a time.
func migrateOnline(ctx context.Context, conn *sql.Conn, version string, stmts []string) error {
	var online []string
	for _, stmt := range stmts {
		qs, err := concurrently(stmt)
		if err != nil {
			return err
		}
		online = append(online, qs...)
	}
	if done, err := migrated(conn.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, version)); done || err != nil {
		return err
	}
	for _, q := range online {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	_, err := conn.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`, version, ms(time.Now()))
	return err
}

var (
	createIndex = regexp.MustCompile(`(?is)^CREATE\s+(UNIQUE\s+)?INDEX\s+(\w+)\s+(ON\s.*)$`)
	dropIndex   = regexp.MustCompile(`(?is)^DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?(\w+)$`)
)

// concurrently is what PostgreSQL runs for stmt of an online migration. A
// build first drops an index of its name: one cut short (a node stopped
// mid-build) is left behind invalid, and would be taken for done.
func concurrently(stmt string) ([]string, error) {
	if m := createIndex.FindStringSubmatch(stmt); m != nil {
		unique, name, rest := strings.ToUpper(strings.TrimSpace(m[1])), m[2], m[3]
		if unique != "" {
			unique += " "
		}
		return []string{
			"DROP INDEX CONCURRENTLY IF EXISTS " + name,
			"CREATE " + unique + "INDEX CONCURRENTLY " + name + " " + rest,
		}, nil
	}
	if m := dropIndex.FindStringSubmatch(stmt); m != nil {
		return []string{"DROP INDEX CONCURRENTLY IF EXISTS " + m[1]}, nil
	}
	return nil, fmt.Errorf("an online migration only creates and drops indexes, not: %.60s", stmt)
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
