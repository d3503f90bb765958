package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestMayComeUp(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nothing listening", fmt.Errorf("failed to connect: %w", refused), true},
		{"host not resolved yet", &net.DNSError{Err: "no such host", Name: "db", IsNotFound: true}, true},
		{"starting up", &pgconn.PgError{Code: "57P03", Message: "the database system is starting up"}, true},
		{"every connection taken", &pgconn.PgError{Code: "53300"}, true},
		{"shutting down", &pgconn.PgError{Code: "57P01"}, true},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true},
		{"wrong password", &pgconn.PgError{Code: "28P01"}, false},
		{"no such role", &pgconn.PgError{Code: "28000"}, false},
		{"no such database", fmt.Errorf("connect: %w", &pgconn.PgError{Code: "3D000"}), false},
		{"a parameter refused", &pgconn.PgError{Code: "22023"}, false},
		{"shutdown asked for", context.Canceled, false},
		// PgBouncer says 08P01 while its server boots or fills up.
		{"a pooler's server not up yet", &pgconn.PgError{Code: "08P01", Message: "pgbouncer cannot connect to server"}, true},
		{"certificate of another host", fmt.Errorf("tls: %w", x509.HostnameError{Host: "db"}), false},
		{"certificate of an unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"unknown", errors.New("something else"), true},
	} {
		if got := mayComeUp(c.err); got != c.want {
			t.Errorf("%s: mayComeUp = %v, want %v", c.name, got, c.want)
		}
	}
}
