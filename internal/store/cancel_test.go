package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/store"
)

// A statement whose request is given up (the client hung up, a deadline
// passed) is cancelled on the PostgreSQL server, and the node keeps its
// connection: closing it instead made every abandoned request cost a new
// backend (99 of them in one kadi-load run whose slices end by
// abandoning what is in flight).
func TestCancelledStatementKeepsItsConnection(t *testing.T) {
	s, err := store.Open(t.Context(), freshSchema(t, postgresURL(t)), store.WithPool(store.Pool{MaxConns: 1, MaxIdleTime: time.Minute, MaxLifetime: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	backend := func() (pid int) {
		t.Helper()
		pid, err := store.BackendPID(t.Context(), s)
		if err != nil {
			t.Fatal(err)
		}
		return pid
	}
	before := backend()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.ExecRaw(ctx, `SELECT pg_sleep(5)`); err == nil {
		t.Fatal("a statement outlived its context")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("the cancelled statement took %s to give up", took)
	}
	if after := backend(); after != before {
		t.Errorf("the cancelled statement cost the connection: backend %d, then %d", before, after)
	}
}
