package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/outage"
	"github.com/kadipay/kadi/internal/outage/outagetest"
)

// Each failure carries the headers its status asks for, and only those:
// when to come back from a 429 or a 503 (longer for a database outage,
// which a restart or a failover ends), the scheme a 401 needs.
func TestFailureHeaders(t *testing.T) {
	down := fmt.Errorf("read bill: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")})
	for _, tc := range []struct {
		name                  string
		err                   error
		retryAfter, challenge string
	}{
		{"no such bill", fmt.Errorf("query: %w", bill.ErrNotFound), "", ""},
		{"database down", down, strconv.Itoa(int(outage.RetryAfter.Seconds())), ""},
		// The client's own network failed it: a 400, not an outage to
		// come back after.
		{"body cut off by the client's network", fmt.Errorf("%w: %w", errUnreadable, &net.OpError{Op: "read", Net: "tcp", Err: errors.New("i/o timeout")}), "", ""},
		{"busy", auth.ErrBusy, "1", ""},
		{"locked out", &auth.LockedError{RetryAfter: 90*time.Second + time.Millisecond}, "91", ""},
		{"expired token", auth.ErrTokenExpired, "", `Bearer realm="kadi", error="invalid_token"`},
		{"payment-token", errPayOnlyToken, "", `Bearer realm="kadi", error="insufficient_scope"`},
		{"bad API key", auth.ErrInvalidClient, "", `Basic realm="kadi"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, code, _, _ := classify(context.Background(), tc.err)
			rec := httptest.NewRecorder()
			authHeaders(rec, tc.err, code)
			if got := rec.Header().Get("Retry-After"); got != tc.retryAfter {
				t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
		})
	}
}

// A request whose client left is 499 on its access line, whatever the
// store said of the work it stopped: PostgreSQL's cancelled statement was
// a 500 logged at ERROR, and a connection given up a 503, both counted by
// the 5xx alerts operators are told to set.
func TestClientGoneIs499TimeRunOutIs503(t *testing.T) {
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	late, cancelLate := context.WithDeadline(live, time.Now().Add(-time.Second))
	defer cancelLate()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want int
	}{
		{"statement cancelled for the client", gone, fmt.Errorf("store bill: insert bill: %w", outagetest.SQLStateError("57014")), 499},
		{"connection given up for the client", gone, fmt.Errorf("query: %w", outagetest.ConnGivenUp{Err: context.Canceled}), 499},
		{"the same, the client still there", live, fmt.Errorf("query: %w", outagetest.ConnGivenUp{Err: context.Canceled}), 503},
		{"the client left, the bill refused", gone, fmt.Errorf("query: %w", bill.ErrNotFound), 404},
		// A database host that hangs fails nothing by itself: the
		// request's time running out is the outage, and its client
		// waits for the 503.
		{"the request's time ran out", late, errors.New("store bill: interrupted"), 503},
	} {
		if status, _, _, _ := classify(tc.ctx, tc.err); status != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, status, tc.want)
		}
	}
}
