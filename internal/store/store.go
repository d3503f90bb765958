// Package store is the only package that speaks SQL. One implementation
// serves SQLite (the embedded default) and PostgreSQL (scale-out): the SQL is
// portable and everything dialect-specific lives in dialect.go.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/session"
)

// Store is everything the services need from storage. The behaviour suite
// in storetest runs against every implementation.
type Store interface {
	merchant.Registry
	bill.Repo
	payment.Repo
	auth.Repo
	ipn.Repo
	checkout.Repo
	session.Repo
	// What the dashboard reads and changes beyond the services' needs.
	ActiveAPIKey(ctx context.Context, code string, mode merchant.Mode) (merchant.APIKey, error)
	SetNotificationSecret(ctx context.Context, code string, mode merchant.Mode, secret string) error
	SetPassword(ctx context.Context, code, hash string) error
	TOTP(ctx context.Context, code string) (string, time.Time, error)
	EnableTOTP(ctx context.Context, code, secret string, recoveryHashes []string, at time.Time) error
	UseRecoveryCode(ctx context.Context, code, hash string, at time.Time) (bool, error)
	BillsPage(ctx context.Context, f bill.ListFilter) ([]bill.Bill, error)
	PaymentsOfBill(ctx context.Context, billRef string) ([]payment.Payment, error)
	PaymentTotals(ctx context.Context, merchantCode, mode string, since time.Time, offset time.Duration) ([]payment.DayTotal, error)
	Ping(ctx context.Context) error
	Close() error
}

//go:embed migrations/*.sql
var migrations embed.FS

// DB is the SQL implementation of Store.
type DB struct {
	db *sql.DB
	d  dialect
	// writeMu queues this process's SQLite writers; see lockWrite.
	writeMu sync.Mutex
	sealer  *secret.Sealer
}

// seal encrypts a stored secret, bound to its row and column; open undoes
// it. Without a sealer both pass values through.
func (s *DB) seal(v, code string, mode merchant.Mode, column string) (string, error) {
	if s.sealer == nil {
		return v, nil
	}
	return s.sealer.Seal(v, code+"/"+string(mode)+"/"+column)
}

func (s *DB) open(v, code string, mode merchant.Mode, column string) (string, error) {
	return s.sealer.Open(v, code+"/"+string(mode)+"/"+column)
}

// lockWrite serialises this process's writers on SQLite and returns the
// unlock. They would queue on SQLite's single write lock anyway, but its
// busy handler waits by sleeping with backoff, which under load costs tens
// of milliseconds a write; a mutex hands over at once. Other processes (the
// CLI) still meet busy_timeout. PostgreSQL locks rows, so there it is a
// no-op.
func (s *DB) lockWrite() func() {
	if s.d.name != "sqlite" {
		return func() {}
	}
	s.writeMu.Lock()
	return s.writeMu.Unlock
}

var _ Store = (*DB)(nil)

// Option adjusts Open.
type Option func(*DB)

// WithSealer seals notification secrets and IPN passwords at rest. Without
// it they are stored as given: fine for tests, never what `kadi` does.
func WithSealer(s *secret.Sealer) Option { return func(db *DB) { db.sealer = s } }

// Open connects to url ("postgres://…" or a SQLite file path, optionally
// "sqlite:" prefixed) and applies pending migrations.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	d, db, err := connect(url)
	if err != nil {
		return nil, err
	}
	s := &DB{db: db, d: d}
	for _, o := range opts {
		o(s)
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Ping checks the database answers.
func (s *DB) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close releases the connection pool.
func (s *DB) Close() error { return s.db.Close() }

func (s *DB) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	defer s.lockWrite()()
	return s.db.ExecContext(ctx, s.d.rebind(q), args...)
}

func (s *DB) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return s.db.QueryRowContext(ctx, s.d.rebind(q), args...)
}

func (s *DB) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, s.d.rebind(q), args...)
}

// tx is a transaction that rebinds like DB does.
type tx struct {
	*sql.Tx
	d dialect
}

func (t tx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.ExecContext(ctx, t.d.rebind(q), args...)
}

func (t tx) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return t.QueryRowContext(ctx, t.d.rebind(q), args...)
}

// inTx runs fn in one transaction, committing if fn returns nil.
func (s *DB) inTx(ctx context.Context, fn func(tx) error) error {
	defer s.lockWrite()()
	sqlTx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx{sqlTx, s.d}); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

func (s *DB) migrate(ctx context.Context) error {
	// Under the migration lock too: PostgreSQL's IF NOT EXISTS is no guard
	// against another node creating the table at the same moment.
	err := s.inTx(ctx, func(t tx) error {
		if err := s.d.lockMigrations(ctx, t); err != nil {
			return err
		}
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
		err = s.inTx(ctx, func(t tx) error {
			if err := s.d.lockMigrations(ctx, t); err != nil {
				return err
			}
			var n int
			if err := t.queryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			for _, stmt := range splitStatements(string(body)) {
				if _, err := t.exec(ctx, stmt); err != nil {
					return fmt.Errorf("%s: %w", version, err)
				}
			}
			_, err := t.exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, version, ms(time.Now()))
			return err
		})
		if err != nil {
			return fmt.Errorf("migrate %s: %w", version, err)
		}
	}
	return nil
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

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// collect scans every row with scan; it closes rows.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// notFound maps sql.ErrNoRows to the caller's sentinel.
func notFound(err, sentinel error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return sentinel
	}
	return err
}
