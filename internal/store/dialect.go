package store

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite" // registers "sqlite"
)

// dialect holds every difference between SQLite and PostgreSQL.
type dialect struct {
	name     string
	numbered bool // PostgreSQL wants $1, $2… where we write ?
}

func connect(url string, pool Pool) (dialect, *sql.DB, error) {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		// synchronous_commit defaults to on; ask for it anyway, so a server
		// configured otherwise cannot lose an acknowledged payment.
		// A server that does not answer (a host down, packets dropped)
		// must give a request its 503 within seconds, not after the
		// operating system's TCP timeout of minutes.
		// application_name tells an operator's pg_stat_activity which
		// backends are the gateway's.
		for _, kv := range [][2]string{{"synchronous_commit", "on"}, {"connect_timeout", "5"}, {"application_name", "kadi"}} {
			if param, value := kv[0], kv[1]; !strings.Contains(url, param+"=") {
				sep := "?"
				if strings.Contains(url, "?") {
					sep = "&"
				}
				url += sep + param + "=" + value
			}
		}
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			return dialect{}, nil, fmt.Errorf("open postgres: %w", err)
		}
		// A request given up (the client hung up, a deadline passed) stops
		// its statement by asking the server to cancel it, and the
		// connection stays: pgx's default closes it, and every abandoned
		// request then cost a new backend and its prepared statements.
		// Should the server not answer within cancelWait, the connection
		// is closed after all.
		cfg.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
			return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: cancelWait}
		}
		db := stdlib.OpenDB(*cfg)
		pool.apply(db)
		return dialect{name: "postgres", numbered: true}, db, nil
	}
	path := strings.TrimPrefix(url, "sqlite:")
	if err := privateFiles(path); err != nil {
		return dialect{}, nil, err
	}
	// WAL lets readers run beside the writer; synchronous=FULL makes a
	// commit durable before the browser sees its result; immediate
	// transactions take the write lock up front, so two writers queue on
	// busy_timeout instead of failing with SQLITE_BUSY on upgrade.
	// secure_delete(FAST) overwrites what a write deletes in the pages it
	// writes anyway: a swept checkout's shopper fields (names, address,
	// e-mail) stayed readable in the file's freed cells.
	dsn := "file:" + path + "?_txlock=immediate" +
		"&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)" +
		"&_pragma=foreign_keys(ON)&_pragma=journal_size_limit(67108864)&_pragma=secure_delete(FAST)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return dialect{}, nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	// Keep every connection open: a new SQLite connection parses the
	// whole schema and prepares its statements again, which with
	// database/sql's default of 2 idle connections was a fifth of the CPU
	// under load. Ten: the group-commit writer and the checkpointer each
	// hold one for good, and readers share eight.
	db.SetMaxOpenConns(10)
	db.SetMaxIdleConns(10)
	return dialect{name: "sqlite"}, db, nil
}

// cancelWait is how long a cancelled statement's connection waits for
// PostgreSQL to confirm the cancel before it is closed instead.
const cancelWait = time.Second

// Pool sizes the PostgreSQL connection pool of one node (SQLite keeps its
// own: one writer and a few readers in the process).
type Pool struct {
	// MaxConns bounds the node's connections. Every one is kept open
	// while it is used at least once per MaxIdleTime: database/sql's
	// default of 2 idle connections made most queries under load open a
	// new PostgreSQL backend (issue 12: 130 backends in 8 s on one node).
	MaxConns int
	// MaxIdleTime closes a connection unused that long, so a quiet node
	// gives its backends back.
	MaxIdleTime time.Duration
	// MaxLifetime recycles every connection after that long, so a node
	// follows a failover or a pooler's rebalancing without a restart.
	MaxLifetime time.Duration
}

// DefaultPool is sized for the machine: four connections per core (at
// least 8), so each core has queries waiting on the network while others
// run. docs/operations.md says how to size it against PostgreSQL's
// max_connections across nodes.
func DefaultPool() Pool {
	return Pool{MaxConns: max(8, 4*runtime.GOMAXPROCS(0)), MaxIdleTime: 5 * time.Minute, MaxLifetime: 30 * time.Minute}
}

func (p Pool) apply(db *sql.DB) {
	if p.MaxConns <= 0 {
		p = DefaultPool()
	}
	db.SetMaxOpenConns(p.MaxConns)
	db.SetMaxIdleConns(p.MaxConns)
	db.SetConnMaxIdleTime(p.MaxIdleTime)
	db.SetConnMaxLifetime(p.MaxLifetime)
}

// privateFiles makes the database file, and the WAL and shared-memory
// files beside it, readable by their owner only, whatever the umask: they
// hold password hashes, holders' names, card digits, phones and e-mails.
// SQLite gives -wal and -shm the mode of the database file, so creating
// that one 0600 before SQLite opens it is what keeps the others private;
// the chmods tighten files an earlier version (or another umask) left open.
func privateFiles(path string) error {
	// SQLite puts -wal and -shm beside the file a link leads to.
	dir := filepath.Dir(path)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		dir = filepath.Dir(real)
	}
	if err := writableDir(dir); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open database file: %w", err)
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}

// rebind makes q the text the dialect runs. PostgreSQL wants $1, $2…
// where we write ?. SQLite's planner reads the value bound to a bare
// "LIMIT ?", and a statement whose plan read a bound value is prepared
// again whenever a value is bound, which is every run: an IPN claim spent
// longer being re-prepared than running. "LIMIT (? + 0)" limits the same
// and keeps the statement prepared.
func (d dialect) rebind(q string) string {
	if !d.numbered {
		return strings.ReplaceAll(q, "LIMIT ?", "LIMIT (? + 0)")
	}
	if !strings.Contains(q, "?") {
		return q
	}
	var sb strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			sb.WriteByte('$')
			sb.WriteString(strconv.Itoa(n))
			continue
		}
		sb.WriteByte(q[i])
	}
	return sb.String()
}

// jsonTexts is a subquery of the strings in a JSON array bound to its one
// placeholder: a list of any length in one statement text, prepared once.
func (d dialect) jsonTexts() string {
	if d.name == "postgres" {
		return `SELECT jsonb_array_elements_text(CAST(? AS jsonb))`
	}
	return `SELECT value FROM json_each(?)`
}
