// Package outage tells an outage of the gateway's database from a fault in
// the gateway: a request that failed because PostgreSQL is restarting or
// unreachable, or because SQLite's disk is full or unreadable, is answered
// 503 with a time to come back, not 500 as a bug, and is not logged as one.
//
// It reads the errors the drivers return through the methods they expose
// (pgx's SQLState and SafeToRetry, modernc's Code), so that the packages
// deciding an answer's status need not import a database driver.
package outage

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// RetryAfter is what a 503 for an outage asks clients to wait: a restart
// or a failover takes seconds, and the nodes reconnect on the next request.
const RetryAfter = 3 * time.Second

// ErrTimedOut marks a request whose time ran out waiting (within).
var ErrTimedOut = errors.New("the database did not answer in time")

// Kind is what an error that ended a request says of its cause.
type Kind int

const (
	// Fault is neither below: a refusal of the request's own, or a bug.
	Fault Kind = iota
	// ClientLeft is a client that closed its connection: nobody reads the
	// answer (nginx's 499), and nothing failed that anyone must look into.
	ClientLeft
	// Unavailable is the database out of reach, or not answering within the
	// request's time: a 503 and a time to come back.
	Unavailable
)

// Of tells what err, which ended a request whose context is ctx, says of
// its cause, and gives err back as the answer is to be decided and logged
// from (marked ErrTimedOut when the request's time ran out: within). A
// client gone is told before an outage: the connection given up for it
// reads as one. The API, the hosted form and the dashboard decide their
// answers from it.
func Of(ctx context.Context, err error) (Kind, error) {
	err = within(ctx, err)
	switch {
	case ClientGone(ctx, err):
		return ClientLeft, err
	case Is(err):
		return Unavailable, err
	}
	return Fault, err
}

// within returns err as an outage when ctx, a request's, ran out of time
// while err was made: a database host that hangs, neither answering nor
// resetting its connections, fails nothing by itself, and the request's
// deadline is what ends the wait. The deciding of a status reads it so.
func within(ctx context.Context, err error) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !Is(err) {
		return fmt.Errorf("%w: %w", ErrTimedOut, err)
	}
	return err
}

// Is reports whether err means the database could not be reached or could
// not take the write right now, as opposed to refusing the request.
func Is(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, ErrTimedOut) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var state interface{ SQLState() string }
	if errors.As(err, &state) && unavailableState(state.SQLState()) {
		return true
	}
	// pgconn marks the errors of a connection that failed before the
	// statement reached the server (closed, or never opened).
	var retry interface{ SafeToRetry() bool }
	if errors.As(err, &retry) && retry.SafeToRetry() {
		return true
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) && unavailableSQLite(coded.Code()) {
		return true
	}
	return false
}

// unavailableState is PostgreSQL's SQLSTATEs for a server that is going
// away, not accepting connections, out of resources or read-only (a
// standby after a failover), or that refuses a new connection (the role or
// its password refused, the database dropped or closed to connections:
// /healthz said the database was down while those requests were 500s):
// none of them says the request was wrong.
func unavailableState(code string) bool {
	switch {
	case strings.HasPrefix(code, "08"), // connection exception
		strings.HasPrefix(code, "53"),                     // insufficient resources: disk full, too many connections
		strings.HasPrefix(code, "58"),                     // system error: I/O
		strings.HasPrefix(code, "28"),                     // invalid authorization: role or password refused
		code == "57P01", code == "57P02", code == "57P03", // shutdown, crash, cannot connect now
		code == "3D000", // no such database
		code == "55000", // a database not accepting connections
		code == "25006": // read-only transaction
		return true
	}
	return false
}

// unavailableSQLite is SQLite's primary result codes for a database file
// that is locked beyond the busy timeout, unwritable, unreadable or full.
func unavailableSQLite(code int) bool {
	switch code & 0xff {
	case 5, 6, 7, 8, 10, 13, 14: // BUSY, LOCKED, NOMEM, READONLY, IOERR, FULL, CANTOPEN
		return true
	}
	return false
}

// ClientGone reports whether err is only the end of a request whose
// client disconnected (ctx, the request's, was cancelled): nothing failed
// that anyone must look into. Besides context.Canceled itself, PostgreSQL's
// answer to the cancel pgx sends for it (SQLSTATE 57014, "canceling
// statement due to user request") says so: it was logged as a 500 at
// ERROR, and fed the 5xx alerts. A request whose own time ran out is not
// gone: pgx cancels its statement the same way, but its client waits for
// the 503 a hanging database owes it (and the alerts).
func ClientGone(ctx context.Context, err error) bool {
	if err == nil || !errors.Is(ctx.Err(), context.Canceled) {
		return false
	}
	var state interface{ SQLState() string }
	return errors.Is(err, context.Canceled) || errors.As(err, &state) && state.SQLState() == "57014"
}
