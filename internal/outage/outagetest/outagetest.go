// Package outagetest has the database drivers' errors that tests of
// outage.Is and outage.ClientGone need, without a driver: pgconn's shapes,
// read by outage through the methods it reads.
package outagetest

// SQLStateError is a PostgreSQL error carrying a SQLSTATE, as pgconn's
// PgError does (57014: a statement cancelled).
type SQLStateError string

func (e SQLStateError) Error() string    { return "ERROR: (SQLSTATE " + string(e) + ")" }
func (e SQLStateError) SQLState() string { return string(e) }

// ConnGivenUp is pgconn's error for a statement never sent because its
// context had ended: safe to retry, the context's error under it.
type ConnGivenUp struct{ Err error }

func (e ConnGivenUp) Error() string     { return "timeout: context already done: " + e.Err.Error() }
func (e ConnGivenUp) Unwrap() error     { return e.Err }
func (e ConnGivenUp) SafeToRetry() bool { return true }
