package cli

import (
	"bytes"
	"context"
	"database/sql"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/server/servertest"
	"github.com/kadipay/kadi/internal/store/storetest"
)

// A command that waits for another node's migrations says so on stderr,
// as a serving node logs it: a CLI that sat silent looked hung.
func TestCommandSaysItWaitsForMigrations(t *testing.T) {
	base := os.Getenv("KADI_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("KADI_TEST_DATABASE_URL is not set: skipping the PostgreSQL run")
	}
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	t.Setenv("KADI_SECRET_KEY", strings.Repeat("ab", 32))
	dsn := storetest.FreshSchema(t, base)
	list := []string{"merchant", "list", "--database-url", dsn}
	var stdout, stderr bytes.Buffer
	if code := Main(list, &stdout, &stderr); code != 0 {
		t.Fatalf("kadi merchant list on a fresh schema: exit %d\n%s", code, stderr.String())
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `SELECT pg_advisory_lock(4712)`); err != nil { // another node migrating
		t.Fatal(err)
	}
	out := &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- Main(list, &bytes.Buffer{}, out) }()
	const said = `msg="waiting for another node's migrations to end (PostgreSQL advisory lock)"`
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(out.String(), said); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the command waiting for the migration lock said nothing; stderr:\n%s", out.String())
		}
	}
	if _, err := conn.ExecContext(t.Context(), `SELECT pg_advisory_unlock(4712)`); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("kadi merchant list once the lock was free: exit %d\n%s", code, out.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("kadi merchant list did not go on once the lock was free")
	}
}

// A node started before its PostgreSQL answers on its port while it
// waits: alive, not ready, then ready once the database comes.
func TestServeAnswersWhileWaitingForTheDatabase(t *testing.T) {
	base := os.Getenv("KADI_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("KADI_TEST_DATABASE_URL is not set: skipping the PostgreSQL run")
	}
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	t.Setenv("KADI_SECRET_KEY", strings.Repeat("ab", 32))
	u, err := url.Parse(storetest.FreshSchema(t, base))
	if err != nil {
		t.Fatal(err)
	}
	fwd := servertest.Forward(t, u.Host)
	u.Host = fwd.Addr()
	fwd.Cut()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var addr string
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	// A free port, let go for serve to take: another process may take it
	// first, and then another port is tried.
	for attempt := 0; ; attempt++ {
		free, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = free.Addr().String()
		free.Close()
		go func() {
			done <- run(ctx, []string{"serve", "--addr", addr, "--database-url", u.String(), "--database-wait", "1m", "--log-format", "json"}, &stdout, &stderr)
		}()
		select {
		case err := <-done:
			if attempt < 3 && err != nil && strings.Contains(err.Error()+stderr.String(), "in use") {
				continue
			}
			t.Fatalf("serve ended before the database came: %v\n%s", err, stderr.String())
		case <-time.After(500 * time.Millisecond):
		}
		break
	}
	client := &http.Client{Timeout: 3 * time.Second}
	status := func(path string) int {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	until := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 20 s\n%s", what, stderr.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	until("waiting said", func() bool { return strings.Contains(stderr.String(), "waiting for the database") })
	if live, ready := status("/livez"), status("/readyz"); live != http.StatusOK || ready != http.StatusServiceUnavailable {
		t.Errorf("while waiting for the database: /livez %d, /readyz %d; want 200 and 503", live, ready)
	}
	fwd.Mend()
	until("ready once the database answers", func() bool { return status("/readyz") == http.StatusOK })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop")
	}
}
