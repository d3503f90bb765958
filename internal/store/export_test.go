package store

import (
	"context"
	"database/sql"
	"fmt"
)

// InTx runs fn in a transaction as the store's own writes do.
func (s *DB) InTx(ctx context.Context, fn func() error) error {
	return s.inTx(ctx, func(tx) error { return fn() })
}

// ExecRaw lets the behaviour suite step around the store's own guards to
// test the database's (storetest.RawExecer).
func (s *DB) ExecRaw(ctx context.Context, query string, args ...any) error {
	_, err := s.exec(ctx, query, args...)
	return err
}

// PragmaOnConns reads a SQLite pragma on n pool connections held at once, so
// a setting applied to only the first connection cannot pass for all.
func PragmaOnConns(ctx context.Context, s *DB, pragma string, n int) ([]string, error) {
	conns := make([]*sql.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var values []string
	for range n {
		c, err := s.db.Conn(ctx)
		if err != nil {
			return nil, err
		}
		conns = append(conns, c)
		var v string
		if err := c.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&v); err != nil {
			return nil, fmt.Errorf("PRAGMA %s: %w", pragma, err)
		}
		values = append(values, v)
	}
	return values, nil
}

// PoolStats are the connection pool's counters.
func PoolStats(s *DB) sql.DBStats { return s.db.Stats() }

// OnPrepare has fn see every statement text s is asked to run; set it
// before s serves anything.
func OnPrepare(s *DB, fn func(q string)) { s.onPrepare = fn }

// BillsListed reports whether s answers lookups of no bill from the bills
// it listed (known.go).
func BillsListed(s *DB) bool { return s.known != nil && s.known.ready.Load() }

// Statements is how many statement texts s keeps prepared.
func Statements(s *DB) int32 { return s.nstmts.Load() }

// VerificationQuery is Verification's statement, for its plan to be read.
var VerificationQuery = verificationQuery

// LatestAttemptsQuery and PaymentsByIDQuery are ShownPayments's
// statements, and PaymentColumns the payments' columns in the order it
// reads them, for their plans to be read.
var LatestAttemptsQuery, PaymentsByIDQuery, PaymentColumns = latestAttemptsQuery, paymentsByIDQuery, paymentColumns

// BackendPID is the PostgreSQL backend serving one of s's connections.
func BackendPID(ctx context.Context, s *DB) (pid int, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
	return pid, err
}

// Setting reads one server setting on one of s's pooled connections.
func Setting(ctx context.Context, s *DB, name string) (string, error) {
	var v string
	err := s.db.QueryRowContext(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}

// KeepPaidVerifications gives s a cache of n paid bills' verifications.
func KeepPaidVerifications(s *DB, n int) { s.paid = newSettled(n) }

// MaxPaidVerifications is how many the cache of a store keeps.
const MaxPaidVerifications = maxSettled
