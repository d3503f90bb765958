package e2e

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// docs/operations.md, Backup and restore: kadi backup copies the data dir
// of a running, busy gateway; a gateway started on the copy serves every
// bill acknowledged before the backup began, to the same merchant
// credentials, and the copy is as private as the original.
func TestBackupWhileServing(t *testing.T) {
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Backed Up Shop") })
	shop := newShopper(t, g, m)
	ctx := context.Background()

	// Bills are created for the whole backup; each acknowledged one is
	// recorded, in order.
	load := startBillLoad(t, shop, "BK", "7.00", 2*time.Millisecond)
	for deadline := time.Now().Add(30 * time.Second); ; {
		n := len(load.Acked())
		if n >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d bills in 30 s before the backup", n)
		}
		time.Sleep(10 * time.Millisecond)
	}

	old := syscall.Umask(0o022) // the copy must be private whatever the umask
	defer syscall.Umask(old)
	before := load.Acked()
	out := filepath.Join(t.TempDir(), "backup")
	stdout, stderr, err := runKadi(t, "backup", "--data-dir", g.DataDir, "--out", out)
	during := len(load.Acked()) - len(before)
	if err != nil {
		t.Fatalf("kadi backup: %v\nstdout: %s\nstderr: %s", err, stdout, stderr)
	}
	if err := load.Stop(); err != nil {
		t.Fatalf("bills while backing up: %v", err)
	}
	if during == 0 {
		t.Errorf("no bill was created while kadi backup ran: the test proves nothing about a busy gateway")
	}
	t.Logf("%d bills before the backup, %d during it; kadi backup said:\n%s%s", len(before), during, stdout, stderr)

	// What it says: checked, with the counts, and the key's warning.
	bills := regexp.MustCompile(`integrity ok; .*merchants 1, bills (\d+)`).FindSubmatch(stdout)
	if bills == nil {
		t.Fatalf("kadi backup's report lacks the check: %s", stdout)
	}
	if n, _ := strconv.Atoi(string(bills[1])); n < len(before) {
		t.Errorf("the copy holds %d bills, fewer than the %d acknowledged before", n, len(before))
	}
	if !strings.Contains(string(stderr), "secret.key is the master key") {
		t.Errorf("no warning that the key copy is secret: %s", stderr)
	}

	// Private files, in a private directory.
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("--out directory: %v, %v; want 0700", fi.Mode(), err)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		if fi, err := e.Info(); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v; want 0600", e.Name(), fi.Mode(), err)
		}
	}
	if strings.Join(names, " ") != "kadi.db secret.key" {
		t.Errorf("the copy holds %v, want kadi.db and secret.key", names)
	}

	// A gateway on the copy serves every bill acknowledged before the
	// backup began, to the same credentials.
	restored := &gateway{t: t, DataDir: out, logDir: t.TempDir()}
	restored.Addr = "127.0.0.1:" + freePort(t)
	restored.BaseURL = "http://" + restored.Addr
	t.Cleanup(func() {
		if restored.running() {
			restored.signal(syscall.SIGKILL)
			<-restored.exited
		}
		if t.Failed() {
			t.Logf("restored server log (last lines):\n%s", tail(restored.Logs(), 40))
		}
	})
	restored.Start()
	c := restored.Client(t, m)
	for _, ref := range before {
		v, err := c.Verify(ctx, ref)
		if err != nil {
			t.Fatalf("bill %s, acknowledged before the backup, on the restored gateway: %v", ref, err)
		}
		if v.OrderRef != ref || v.Paid {
			t.Fatalf("bill %s on the restored gateway: %+v", ref, v)
		}
	}
	restored.Stop()
}

// kadi backup refuses what it cannot do well, saying where to look, and
// never writes over an earlier backup.
func TestBackupRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	createMerchant(t, dir, "Refusing Shop")
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "kadi.db"), []byte("an earlier backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"PostgreSQL", []string{"--data-dir", dir, "--database-url", "postgres://kadi@db.example/kadi", "--out", filepath.Join(t.TempDir(), "b")}, nil,
			[]string{"pg_dump", "Backup and restore", "docs/operations.md"}},
		{"PostgreSQL from the environment", []string{"--data-dir", dir, "--out", filepath.Join(t.TempDir(), "b")}, []string{"KADI_DATABASE_URL=postgres://kadi@db.example/kadi"},
			[]string{"pg_dump", "docs/operations.md"}},
		{"non-empty --out", []string{"--data-dir", dir, "--out", full}, nil, []string{"not empty"}},
		{"no database", []string{"--data-dir", filepath.Join(t.TempDir(), "typo"), "--out", filepath.Join(t.TempDir(), "b")}, nil, []string{"no Kadi database"}},
		{"no --out", []string{"--data-dir", dir}, nil, []string{"--out is required", "usage: kadi backup"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range tc.env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			_, stderr, err := runKadi(t, append([]string{"backup"}, tc.args...)...)
			if err == nil {
				t.Fatalf("kadi backup %v succeeded", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(stderr), w) {
					t.Errorf("stderr lacks %q: %s", w, stderr)
				}
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(full, "kadi.db")); string(b) != "an earlier backup" {
		t.Error("an earlier backup was overwritten")
	}
}
