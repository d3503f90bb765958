package server_test

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// A node started before its PostgreSQL accepts connections (a host
// booting, a failover, everything restarted at once) waits for it, saying
// so, and starts once it does; it exited at once, back only if a
// supervisor restarted it. What a wait cannot mend fails at once.
func TestStartWaitsForTheDatabase(t *testing.T) {
	fwd, dsn := forwardedPostgres(t, "the wait is for a PostgreSQL server")
	fwd.Cut()
	start := func(ctx context.Context, dsn string, wait time.Duration) (*servertest.LogBuffer, chan error) {
		cfg := server.Defaults()
		cfg.DataDir, cfg.DatabaseURL, cfg.MasterKey, cfg.DatabaseWait = t.TempDir(), dsn, secret.RandomBytes(32), wait
		logs := &servertest.LogBuffer{}
		done := make(chan error, 1)
		go func() {
			g, err := server.New(ctx, cfg, logging.New(logs, slog.LevelDebug))
			if err == nil {
				err = g.Close()
			}
			done <- err
		}()
		return logs, done
	}

	logs, done := start(t.Context(), dsn, time.Minute)
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), `"msg":"waiting for the database"`) {
		select {
		case err := <-done:
			t.Fatalf("the start ended without waiting: %v\n%s", err, logs)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no wait said in 20 s:\n%s", logs)
		}
	}
	fwd.Mend()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("once the database accepts connections: %v\n%s", err, logs)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("not started 30 s after the database came:\n%s", logs)
	}
	if !strings.Contains(logs.String(), `"msg":"the database accepts connections"`) {
		t.Errorf("the end of the wait is not said:\n%s", logs)
	}

	// No wait asked for: the first refusal ends the start.
	fwd.Cut()
	began := time.Now()
	logs, done = start(t.Context(), dsn, 0)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "--database-wait") || time.Since(began) > 10*time.Second {
		t.Errorf("no wait: %v after %s\n%s", err, time.Since(began), logs)
	}
	fwd.Mend()

	// A database that does not exist will not come: no wait.
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/kadi_no_such_database"
	began = time.Now()
	logs, done = start(t.Context(), u.String(), time.Minute)
	if err := <-done; err == nil || !strings.Contains(err.Error(), "kadi_no_such_database") || time.Since(began) > 10*time.Second {
		t.Errorf("no such database: %v after %s\n%s", err, time.Since(began), logs)
	}
	if strings.Contains(logs.String(), "waiting for the database") {
		t.Errorf("waited for a database that does not exist:\n%s", logs)
	}

	// A shutdown asked for during the wait ends it.
	fwd.Cut()
	ctx, cancel := context.WithCancel(t.Context())
	logs, done = start(ctx, dsn, time.Minute)
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("started with no database")
		}
	case <-time.After(10 * time.Second):
		t.Errorf("a shutdown did not end the wait:\n%s", logs)
	}
}
