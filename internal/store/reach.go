package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// WithStartWait has Open wait up to d for a PostgreSQL server that does
// not accept connections yet, asking again with a growing pause, instead
// of failing at once: nodes started with their database (a host booting,
// a failover under way, everything restarted at once) exited, and came
// back only if a supervisor restarted them. A server that answers with a
// refusal a wait cannot mend (a wrong password, no such database) fails at
// once. SQLite is a file of this process's and is never waited for.
func WithStartWait(d time.Duration) Option { return func(db *DB) { db.startWait = d } }

// awaitServer returns once the database accepts a connection, or with
// why not once the start wait is over.
func (s *DB) awaitServer(ctx context.Context) error {
	if s.d.name != "postgres" {
		return nil
	}
	start := time.Now()
	pause := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.db.PingContext(ctx) // connect_timeout bounds each attempt
		if err == nil {
			if attempt > 1 {
				s.log.Info("the database accepts connections", "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nil
		}
		left := s.startWait - time.Since(start)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("reach the database: %w", ctx.Err())
		case !mayComeUp(err):
			return fmt.Errorf("reach the database: %w", err)
		case left <= 0 && s.startWait > 0:
			return fmt.Errorf("the database did not accept connections within %s (--database-wait): %w", s.startWait, err)
		case left <= 0:
			return fmt.Errorf("reach the database (give --database-wait to wait for it at start): %w", err)
		}
		s.log.Warn("waiting for the database", "attempt", attempt, "error", err.Error(),
			"gives_up_in", left.Round(time.Second).String())
		select {
		case <-ctx.Done():
			return fmt.Errorf("reach the database: %w", ctx.Err())
		case <-time.After(min(pause, left)):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// mayComeUp says whether a failed connection may succeed later: nothing
// listening yet, a server starting, recovering or shutting down, all its
// connections taken, a host not yet resolvable or reachable. An answer the
// server gave otherwise (authentication, a database that does not exist,
// a parameter it refuses) is the operator's to fix.
func mayComeUp(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "57P01", "57P02", "57P03", "53300", "53000":
			return true
		}
		return strings.HasPrefix(pg.Code, "08")
	}
	// A certificate refused is the operator's to fix, however long one
	// waits (sslmode=verify-full against the wrong name or authority).
	var unknownAuthority x509.UnknownAuthorityError
	var wrongHost x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verification *tls.CertificateVerificationError
	if errors.As(err, &unknownAuthority) || errors.As(err, &wrongHost) || errors.As(err, &invalid) || errors.As(err, &verification) {
		return false
	}
	return !errors.Is(err, context.Canceled)
}
