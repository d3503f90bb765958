package cli

import (
	"bytes"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

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
