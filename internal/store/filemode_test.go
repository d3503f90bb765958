package store_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/store"
)

// The database, its WAL and its shared-memory file hold password hashes,
// holders' names, card digits, phones and e-mails: they are 0600 whatever
// the umask, in a data dir that already exists with looser permissions,
// and files an earlier version left 0644 are tightened on open. (Not
// parallel: the umask is the process's.)
func TestDatabaseFilesArePrivate(t *testing.T) {
	for _, tt := range []struct {
		name     string
		umask    int
		existing os.FileMode // 0: no database file yet
	}{
		{"new database, umask 022", 0o022, 0},
		{"new database, umask 000", 0o000, 0},
		{"database left 0644 by an older version", 0o022, 0o644},
		{"database left 0666", 0o000, 0o666},
	} {
		t.Run(tt.name, func(t *testing.T) {
			old := syscall.Umask(tt.umask)
			defer syscall.Umask(old)
			dir := filepath.Join(t.TempDir(), "data")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "kadi.db")
			if tt.existing != 0 {
				for _, p := range []string{path, path + "-wal", path + "-shm"} {
					if err := os.WriteFile(p, nil, tt.existing); err != nil {
						t.Fatal(err)
					}
					if err := os.Chmod(p, tt.existing); err != nil {
						t.Fatal(err)
					}
				}
			}
			s := openSQLite(t, path)
			// A write, so the WAL and shared-memory files exist.
			if err := s.RecordAudit(t.Context(), audit.Event{At: time.Now(), MerchantCode: "1234567890", Actor: "test", Action: "test", Detail: "x"}); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, e := range entries {
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				seen[e.Name()] = true
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s is %04o, want 0600", e.Name(), fi.Mode().Perm())
				}
			}
			for _, name := range []string{"kadi.db", "kadi.db-wal", "kadi.db-shm"} {
				if !seen[name] {
					t.Errorf("no %s to check (have %v)", name, seen)
				}
			}
		})
	}
}

// A data directory this user cannot write to is named as such at open,
// before SQLite fails to create its -wal file with "unable to open
// database file", and the check leaves nothing behind.
func TestUnwritableDataDirIsNamed(t *testing.T) {
	// kadi.db in data/ is a link to real/kadi.db: SQLite writes beside the
	// real file, so real/ is the directory that must be writable.
	data, real := t.TempDir(), t.TempDir()
	path := filepath.Join(data, "kadi.db")
	if err := os.Symlink(filepath.Join(real, "kadi.db"), path); err != nil {
		t.Fatal(err)
	}
	s := openSQLite(t, path) // a database made while both were writable
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	readOnly(t, data)
	s, err := store.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("Open with only the link's directory read-only: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	readOnly(t, real)
	_, err = store.Open(t.Context(), path)
	if err == nil || !strings.Contains(err.Error(), "the data directory "+real+" is not writable by this user") {
		t.Fatalf("Open with the database's directory read-only: %v", err)
	}
	for _, dir := range []string{data, real} {
		if left, _ := filepath.Glob(filepath.Join(dir, ".*")); len(left) > 0 {
			t.Errorf("the check left %v behind", left)
		}
	}
}

// readOnly makes dir unwritable for this process until the test ends. As
// root, permissions do not stop a write: the directory is made immutable
// instead (chattr), or the test is skipped.
func readOnly(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
			t.Skipf("root, and chattr +i refused (%v: %s): nothing here stops root writing", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("chattr", "-i", dir).Run() })
		return
	}
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(dir, 0o700) })
}

// What the sweeper deletes (a checkout's shopper fields: names, address,
// e-mail) is overwritten in the database file, not left in its freed
// cells for anyone who reads the file (secure_delete=FAST).
func TestDeletedCheckoutsLeaveNoTrace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kadi.db")
	db := ipnOpen(t, path)
	code := ipnMerchant(t, db, "http://127.0.0.1:9/ipn")
	ev := ipnEvent(t, db, code, time.Now())
	p, err := db.PaymentByID(t.Context(), ev.PaymentID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, addr := range []string{"1 Gone Street ZZFORGOTTENZZ", "2 Kept Street"} {
		expires := now.Add(-time.Minute) // the first is over
		if i == 1 {
			expires = now.Add(time.Hour)
		}
		if err := db.CreateCheckout(t.Context(), checkout.Session{IDHash: fmt.Sprintf("hash%d", i), MerchantCode: code, Mode: merchant.Test,
			BillReference: p.BillReference, Fields: map[string]string{"address": addr}, CreatedAt: now, ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := db.DeleteExpiredCheckouts(t.Context(), now); err != nil || n != 1 {
		t.Fatalf("DeleteExpiredCheckouts: %d, %v", n, err)
	}
	if err := db.Close(); err != nil { // the last connection's close checkpoints the WAL into the file
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("2 Kept Street")) {
		t.Fatal("the kept session is not in the file: the test reads the wrong file")
	}
	if bytes.Contains(raw, []byte("ZZFORGOTTENZZ")) {
		t.Error("a deleted checkout's address is still in the database file")
	}
}
