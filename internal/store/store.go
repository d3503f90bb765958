// Package store is the only package that speaks SQL. One implementation
// serves SQLite (the embedded default) and PostgreSQL (scale-out): the SQL is
// portable and everything dialect-specific lives in dialect.go.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
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
	// What a merchant's query reads, in one read.
	Verification(ctx context.Context, merchantCode string, mode merchant.Mode, ref string) (payment.Verification, error)
	// What the operator's CLI lists.
	MerchantsAfter(ctx context.Context, after string, limit int) ([]merchant.Merchant, error)
	// What the dashboard reads and changes beyond the services' needs.
	ActiveAPIKey(ctx context.Context, code string, mode merchant.Mode) (merchant.APIKey, error)
	SetNotificationSecret(ctx context.Context, code string, mode merchant.Mode, secret string, previousUntil time.Time) error
	EndSecretOverlap(ctx context.Context, code string, mode merchant.Mode, until, at time.Time) (ended bool, err error)
	SetPassword(ctx context.Context, code, hash string) error
	TOTP(ctx context.Context, code string) (string, time.Time, error)
	EnableTOTP(ctx context.Context, code, secret string, recoveryHashes []string, at time.Time) error
	UseRecoveryCode(ctx context.Context, code, hash string, at time.Time) (bool, error)
	UseTOTPStep(ctx context.Context, code string, step int64) (bool, error)
	BillsPage(ctx context.Context, f bill.ListFilter) ([]bill.Bill, error)
	PaymentsOfBill(ctx context.Context, billRef string) ([]payment.Payment, error)
	ShownPayments(ctx context.Context, billRefs []string) (map[string]payment.Payment, error)
	PaymentTotals(ctx context.Context, merchantCode, mode string, since time.Time) ([]payment.QuarterTotal, error)
	// What a node clears up as it goes.
	PruneAuthFailures(ctx context.Context, now time.Time, window time.Duration) (int64, error)
	Ping(ctx context.Context) error
	Close() error
}

// DB is the SQL implementation of Store.
type DB struct {
	db     *sql.DB
	d      dialect
	sealer *secret.Sealer
	// behindKey: see BehindKey.
	behindKey string
	pool      Pool
	// startWait: see WithStartWait.
	startWait time.Duration
	// log hears what a start spends long on: waiting for another node's
	// migrations, building an index online.
	log *slog.Logger
	// writes commits SQLite's writes in groups (writer.go); nil on
	// PostgreSQL and while migrating.
	writes *writer
	// stmts holds SQLite statements prepared once for the life of the
	// pool's connections, by query text: parsing SQL was a fifth of the
	// CPU of a request. pgx keeps its own per-connection statement cache;
	// there only the rebound text is kept.
	stmts  sync.Map // string → *sql.Stmt (SQLite) or string (PostgreSQL)
	nstmts atomic.Int32
	// onPrepare, when a test sets it, sees every text prepared is asked
	// for, so that a text built anew at each call shows.
	onPrepare func(q string)
	// migrating keeps migrations' statements out of the cache: a statement
	// is prepared on another connection, which cannot see tables the
	// migration's transaction has just created.
	migrating bool
	// merchants and settings keep MerchantByCode's and RecentSettings's
	// answers (merchants.go).
	merchants recent[merchant.Merchant]
	settings  recent[merchant.Settings]
	// paid keeps paid bills' verifications (settled.go).
	paid *settled
	// ipnQueued is told after a commit that made an IPN event due.
	ipnQueued atomic.Pointer[func(ipn.Endpoint)]
	// heldDataDir: see WithDataDirHeld.
	heldDataDir bool
	// known answers lookups of bills that do not exist (known.go); nil
	// but on SQLite opened by the node that holds the data directory.
	known     *knownBills
	stopKnown context.CancelFunc
	knownDone chan struct{}
}

// OnIPNQueued has fn called after every commit through this DB that made
// an IPN event due (a payment succeeded, an event was replayed), so that
// this node's worker claims it within milliseconds instead of at its next
// poll. Events queued by another node wait for the poll.
func (s *DB) OnIPNQueued(fn func(ipn.Endpoint)) { s.ipnQueued.Store(&fn) }

func (s *DB) notifyIPNQueued(ep ipn.Endpoint) {
	if fn := s.ipnQueued.Load(); fn != nil {
		(*fn)(ep)
	}
}

// maxStatements bounds each statement cache: texts are built from a few
// shapes, never from values, so a few hundred covers them all. Longer
// texts (bulk inserts for benchmarks) are not kept.
const maxStatements = 512

// keepPrepared says whether a statement cache already holding kept
// statements keeps q: the pool's (DB.prepared) and the writer's alike.
func keepPrepared(q string, kept int) bool { return kept < maxStatements && len(q) <= 4096 }

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

var _ Store = (*DB)(nil)

// Option adjusts Open.
type Option func(*DB)

// WithSealer seals notification secrets and IPN passwords at rest. Without
// it they are stored as given: fine for tests, never what `kadi` does.
func WithSealer(s *secret.Sealer) Option { return func(db *DB) { db.sealer = s } }

// WithLog logs what migrating spends long on (the default says nothing).
func WithLog(l *slog.Logger) Option { return func(db *DB) { db.log = l } }

// WithDataDirHeld says that the caller holds the SQLite store's data
// directory (LockDataDir), so that no other process adds bills while this
// DB is open, and lookups of bills may be answered from what it has seen
// (known.go). Ignored on PostgreSQL.
func WithDataDirHeld() Option { return func(db *DB) { db.heldDataDir = true } }

// WithPool sizes the PostgreSQL connection pool (default DefaultPool).
func WithPool(p Pool) Option { return func(db *DB) { db.pool = p } }

// damaged names a SQLite file that is not a database, or a damaged one, in
// err: its first statement failed with "begin: file is not a database
// (26)", naming neither the file nor what to do.
func damaged(d dialect, url string, err error) error {
	var coded interface{ Code() int }
	if d.name != "sqlite" || !errors.As(err, &coded) {
		return err
	}
	switch coded.Code() & 0xff {
	case 11, 26: // SQLITE_CORRUPT, SQLITE_NOTADB
		return fmt.Errorf("%s is not a readable SQLite database (damaged, or another kind of file): restore the data dir from a backup (kadi backup); %w", strings.TrimPrefix(url, "sqlite:"), err)
	}
	return err
}

// Open connects to url ("postgres://…" or a SQLite file path, optionally
// "sqlite:" prefixed) and applies pending migrations.
func Open(ctx context.Context, url string, opts ...Option) (*DB, error) {
	s := &DB{merchants: recent[merchant.Merchant]{maxAge: merchantMaxAge}, settings: recent[merchant.Settings]{maxAge: merchantMaxAge},
		paid: newSettled(maxSettled), pool: DefaultPool(), log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	d, db, err := connect(url, s.pool)
	if err != nil {
		return nil, err
	}
	s.db, s.d = db, d
	if err := s.awaitServer(ctx); err != nil {
		db.Close()
		return nil, err
	}
	s.migrating = true
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, damaged(d, url, err)
	}
	s.migrating = false
	if err := s.checkSealer(ctx); err != nil {
		db.Close()
		return nil, err
	}
	if d.name == "sqlite" && s.heldDataDir {
		if err := s.startKnownBills(ctx); err != nil {
			db.Close()
			return nil, err
		}
	}
	if d.name == "sqlite" {
		if s.writes, err = startWriter(ctx, s); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// BehindKey is the key that sealed a stored secret when this ring lacks
// it (PostgreSQL, a copy of the ring that missed a rotation), else "".
// Rotating from such a copy would reuse the newer key's id for another key.
func (s *DB) BehindKey() string { return s.behindKey }

// ErrDataDirServed: another process serves from the data directory
// (LockDataDir).
var ErrDataDirServed = errors.New("the data directory is being served")

// ForeignKeysError: the master key ring does not open the database's
// sealed secrets. KeyID is the key the value tried was sealed under.
type ForeignKeysError struct{ KeyID string }

func (e *ForeignKeysError) Error() string {
	return fmt.Sprintf("the master key ring does not open this database's secrets (sealed under key %q): "+
		"use the key file the gateway was set up with (KADI_SECRET_KEY_FILE, or secret.key in the data dir); nothing was changed", e.KeyID)
}

// checkSealer makes sure this ring is the database's. A ring that is not
// (another install's key file, a restore with the wrong one, a key dropped
// before its values were resealed) would start a node that reports ready
// and answers every token request with a 500, and let the CLI seal new
// merchants under a key the rest of the database does not share, which no
// node could open after. Two checks: every key the database recorded that
// this ring has the id of must be the same key (sealing_keys), and one
// sealed value must open. A ring that opens it is the database's, and its
// keys are recorded.
func (s *DB) checkSealer(ctx context.Context) error {
	if s.sealer == nil {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT key_id, key_check FROM sealing_keys ORDER BY key_id`)
	if err != nil {
		return fmt.Errorf("read the sealing keys' checks: %w", err)
	}
	recorded, err := collect(rows, func(row scanner) ([2]string, error) {
		var k [2]string
		err := row.Scan(&k[0], &k[1])
		return k, err
	})
	if err != nil {
		return fmt.Errorf("read the sealing keys' checks: %w", err)
	}
	shared := 0
	for _, k := range recorded {
		if check, ok := s.sealer.KeyCheck(k[0]); ok {
			if check != k[1] {
				return &ForeignKeysError{KeyID: k[0]}
			}
			shared++
		}
	}
	var code, mode, v string
	err = s.db.QueryRowContext(ctx, s.d.rebind(`SELECT merchant_code, mode, notification_secret FROM merchant_settings
		WHERE notification_secret <> '' ORDER BY merchant_code, mode LIMIT 1`)).Scan(&code, &mode, &v)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil // nothing proves this ring yet: it is recorded once it opens a value
	case err != nil:
		return fmt.Errorf("read a sealed secret to check the master key: %w", err)
	}
	if _, err := s.open(v, code, merchant.Mode(mode), "notification_secret"); err != nil {
		id, _ := secret.SealedKeyID(v)
		// A node of a shared database behind a rotation (its copy of the
		// ring lacks the new key, and shares an older one): it starts,
		// and the nodes' key check (node_keys) tells, and takes it out of
		// the balancer when the others are ahead, until its file catches
		// up. A database no ring was recorded for yet (upgraded from a
		// release before sealing_keys) cannot tell it from a stranger.
		if s.d.name == "postgres" && !s.sealer.HasKey(id) && (shared > 0 || len(recorded) == 0) {
			s.behindKey = id
			return nil
		}
		return &ForeignKeysError{KeyID: id}
	}
	return s.recordSealingKeys(ctx)
}

// SealingKeyIDs are the ids of every master key recorded as having sealed
// this database's secrets: a rotation takes an id none of them has.
func (s *DB) SealingKeyIDs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key_id FROM sealing_keys ORDER BY key_id`)
	if err != nil {
		return nil, fmt.Errorf("read the sealing keys: %w", err)
	}
	return collect(rows, func(row scanner) (string, error) {
		var id string
		err := row.Scan(&id)
		return id, err
	})
}

// RecordSealingKeys records the keys of the ring this store seals with,
// which has proved to be the database's: a rotation records its new key
// at once, so no later rotation can take its id.
func (s *DB) RecordSealingKeys(ctx context.Context) error { return s.recordSealingKeys(ctx) }

// recordSealingKeys records the checks of this ring's keys once it has
// proved to be the database's: a copy of it that misses a later rotation
// shares them.
func (s *DB) recordSealingKeys(ctx context.Context) error {
	for _, id := range s.sealer.KeyIDs() {
		check, ok := s.sealer.KeyCheck(id)
		if !ok {
			continue
		}
		_, err := s.db.ExecContext(ctx, s.d.rebind(`INSERT INTO sealing_keys (key_id, key_check, recorded_at) VALUES (?, ?, ?)
			ON CONFLICT (key_id) DO NOTHING`), id, check, ms(time.Now()))
		if err != nil {
			return fmt.Errorf("record the sealing keys' checks: %w", err)
		}
	}
	return nil
}

// Ping checks the database answers.
func (s *DB) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// ErrBehind: the database lacks migrations this binary has (another tool
// restored an older copy, or the migration that Open ran was rolled back).
var ErrBehind = errors.New("the database schema is behind this binary")

// Migrated checks that every migration this binary embeds is recorded as
// applied, for readiness: a node whose schema is behind must not serve. A
// schema ahead of it is a newer release's, which only adds
// (docs/operations.md, upgrades): this node keeps serving on it until its
// turn to be replaced comes. Asking for the very version had every node of
// the previous release say "not ready" as soon as the first new node
// migrated the database.
func (s *DB) Migrated(ctx context.Context) error {
	var version string
	if err := s.queryRow(ctx, `SELECT COALESCE(MAX(version), '') FROM schema_migrations`).Scan(&version); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	if latest := latestMigration(); version < latest {
		return fmt.Errorf("%w: at %q, this binary needs %q", ErrBehind, version, latest)
	}
	return nil
}

// Close lets queued writes commit, then releases the connection pool.
func (s *DB) Close() error {
	if s.known != nil {
		s.stopKnown()
		<-s.knownDone
	}
	if s.writes != nil {
		s.writes.close()
	}
	s.stmts.Range(func(_, v any) bool {
		if st, ok := v.(*sql.Stmt); ok {
			st.Close()
		}
		return true
	})
	return s.db.Close()
}

// prepared returns q ready to run: on SQLite a statement prepared once, on
// PostgreSQL the text with numbered placeholders. Past the cache's bound q
// comes back as text.
func (s *DB) prepared(ctx context.Context, q string) (stmt *sql.Stmt, text string, err error) {
	if s.onPrepare != nil {
		s.onPrepare(q)
	}
	if v, ok := s.stmts.Load(q); ok {
		if st, ok := v.(*sql.Stmt); ok {
			return st, "", nil
		}
		return nil, v.(string), nil
	}
	text = s.d.rebind(q)
	if s.migrating || !keepPrepared(q, int(s.nstmts.Load())) {
		return nil, text, nil
	}
	if s.d.name != "sqlite" {
		if _, loaded := s.stmts.LoadOrStore(q, text); !loaded {
			s.nstmts.Add(1)
		}
		return nil, text, nil
	}
	st, err := s.db.PrepareContext(ctx, text)
	if err != nil {
		return nil, "", err
	}
	if v, loaded := s.stmts.LoadOrStore(q, st); loaded {
		st.Close()
		return v.(*sql.Stmt), "", nil
	}
	s.nstmts.Add(1)
	return st, "", nil
}

// exec runs one writing statement: on SQLite through the group-commit
// writer, as a transaction of its own.
func (s *DB) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	if s.writes == nil {
		st, text, err := s.prepared(ctx, q)
		if err != nil {
			return nil, err
		}
		var res sql.Result
		if st != nil {
			res, err = st.ExecContext(ctx, args...)
		} else {
			res, err = s.db.ExecContext(ctx, text, args...)
		}
		if err != nil {
			return nil, err
		}
		return readResult(res), nil
	}
	return s.writes.exec(ctx, q, args...)
}

// rowsAffected is a write's result read as soon as it ran. database/sql
// reads a result under the lock of the connection that ran it, which by
// the time a caller reads it may be running another statement: the next
// group's on SQLite's one writer (COMMIT and fsync included), another
// request's round trip on a pooled PostgreSQL connection.
type rowsAffected struct {
	n   int64
	err error
}

func readResult(r sql.Result) rowsAffected {
	n, err := r.RowsAffected()
	return rowsAffected{n: n, err: err}
}

func (r rowsAffected) RowsAffected() (int64, error) { return r.n, r.err }

// LastInsertId is not kept: no write uses it, every table has a key of
// its own, and PostgreSQL has no such thing.
func (r rowsAffected) LastInsertId() (int64, error) {
	return 0, errors.New("store: LastInsertId is not kept")
}

// queryRow and query read outside any transaction; on SQLite, beside the
// writer (WAL).
func (s *DB) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	st, text, err := s.prepared(ctx, q)
	if st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	if err != nil {
		text = s.d.rebind(q) // the error comes back from the query itself
	}
	return s.db.QueryRowContext(ctx, text, args...)
}

// lookup reads one row by a key. On SQLite it runs without the request's
// cancellation: a read by key is local and takes microseconds, and a
// cancellable context costs each statement two goroutines (database/sql's
// and the driver's), half the read's time (BenchmarkBillLookup). A
// PostgreSQL read crosses the network and keeps its deadline.
func (s *DB) lookup(ctx context.Context, q string, args ...any) *sql.Row {
	if s.d.name == "sqlite" {
		ctx = context.WithoutCancel(ctx)
	}
	return s.queryRow(ctx, q, args...)
}

func (s *DB) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	st, text, err := s.prepared(ctx, q)
	if err != nil {
		return nil, err
	}
	if st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.db.QueryContext(ctx, text, args...)
}

// tx is a transaction that rebinds and prepares like DB does: a
// database/sql transaction (PostgreSQL, and SQLite while it migrates), or
// the group-commit writer's own connection inside the transaction it began
// (writer.go). In a group commit ctx replaces the caller's: a write that
// has started runs to its end.
type tx struct {
	sqlTx *sql.Tx
	w     *writer
	s     *DB
	ctx   context.Context
}

// runner is what runs statements: *sql.Tx or *sql.Conn.
type runner interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

func (t tx) context(ctx context.Context) context.Context {
	if t.ctx != nil {
		return t.ctx
	}
	return ctx
}

// statement returns q ready to run in t, as DB.prepared does, and what
// runs it as text when it is not kept prepared. The writer prepares on
// its own connection: preparing through the pool made every write wait
// for a reader's connection the first time its text was seen.
func (t tx) statement(ctx context.Context, q string) (*sql.Stmt, runner, string, error) {
	if t.w != nil {
		st, text, err := t.w.prepared(ctx, q)
		return st, t.w.conn, text, err
	}
	st, text, err := t.s.prepared(ctx, q)
	if st != nil {
		st = t.sqlTx.StmtContext(ctx, st)
	}
	return st, t.sqlTx, text, err
}

func (t tx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	ctx = t.context(ctx)
	st, r, text, err := t.statement(ctx, q)
	if err != nil {
		return nil, err
	}
	if st != nil {
		return st.ExecContext(ctx, args...)
	}
	return r.ExecContext(ctx, text, args...)
}

func (t tx) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	ctx = t.context(ctx)
	st, r, text, err := t.statement(ctx, q)
	if st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	if err != nil {
		text = t.s.d.rebind(q) // the error comes back from the query itself
	}
	return r.QueryRowContext(ctx, text, args...)
}

func (t tx) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	ctx = t.context(ctx)
	st, r, text, err := t.statement(ctx, q)
	if err != nil {
		return nil, err
	}
	if st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.QueryContext(ctx, text, args...)
}

// inTx runs fn in one transaction, committing if fn returns nil: on SQLite
// in the writer's next group commit.
func (s *DB) inTx(ctx context.Context, fn func(tx) error) error {
	if s.writes != nil {
		return s.writes.do(ctx, fn)
	}
	sqlTx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx{sqlTx: sqlTx, s: s}); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		if ctx.Err() != nil {
			// The client went away and database/sql rolled back: Commit
			// says only "already committed or rolled back", and the
			// request was logged as a failure of the gateway.
			return fmt.Errorf("commit: %w: %w", err, ctx.Err())
		}
		return fmt.Errorf("commit: %w", err)
	}
	return nil
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
