package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/store"
)

// A backup taken while the database is being written is whole, private
// whatever the umask, holds what was committed before it began, and opens
// as a store serving the same merchants. (Not parallel: the umask is the
// process's.)
func TestBackupWhileWriting(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	src := filepath.Join(dir, "kadi.db")
	s := openSQLite(t, src)
	ctx := t.Context()
	var codes []string
	for i := range 3 {
		c, err := merchant.Onboard(ctx, s, fmt.Sprintf("Shop %d", i), time.Now())
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, c.MerchantCode)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := s.RecordAudit(context.Background(), audit.Event{At: time.Now(), MerchantCode: codes[0], Actor: "test", Action: "test", Detail: fmt.Sprint(w, i)})
				if err != nil {
					t.Errorf("write during the backup: %v", err)
					return
				}
				writes.Add(1)
			}
		})
	}
	for writes.Load() < 20 {
		time.Sleep(time.Millisecond)
	}
	dst := filepath.Join(dir, "copy.db")
	err := store.BackupSQLite(ctx, src, dst)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("BackupSQLite: %v", err)
	}
	if fi, err := os.Stat(dst); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("copy: %v, %v; want mode 0600", fi.Mode(), err)
	}
	sum, err := store.CheckSQLite(ctx, dst)
	if err != nil {
		t.Fatalf("CheckSQLite: %v", err)
	}
	if sum.Integrity != "ok" || sum.Merchants != 3 || sum.Bills != 0 || sum.Version == "" || sum.Version != sum.Latest {
		t.Errorf("summary %+v; want integrity ok, 3 merchants, 0 bills, the latest migration", sum)
	}
	// Checking changes nothing: no WAL or journal appears beside the copy.
	for _, side := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(dst + side); err == nil {
			t.Errorf("%s appeared beside the checked copy", side)
		}
	}
	copied := openSQLite(t, dst)
	for _, code := range codes {
		if _, err := copied.MerchantByCode(ctx, code); err != nil {
			t.Errorf("merchant %s in the copy: %v", code, err)
		}
	}
}

func TestBackupRefuses(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	src := filepath.Join(dir, "kadi.db")
	openSQLite(t, src)
	notKadi := filepath.Join(dir, "other.db")
	if err := os.WriteFile(notKadi, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	taken := filepath.Join(dir, "taken.db")
	if err := os.WriteFile(taken, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, src, dst string }{
		{"no source", filepath.Join(dir, "missing.db"), filepath.Join(dir, "a.db")},
		{"source not a Kadi database", notKadi, filepath.Join(dir, "b.db")},
		{"copy already there", src, taken},
	} {
		if err := store.BackupSQLite(ctx, tc.src, tc.dst); err == nil {
			t.Errorf("%s: BackupSQLite succeeded", tc.name)
		}
	}
	if b, _ := os.ReadFile(taken); string(b) != "x" {
		t.Errorf("an existing file was overwritten (%d bytes now)", len(b))
	}

	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte("SQLite format 3\x00 but not really, a torn copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{garbage, notKadi, filepath.Join(dir, "missing.db")} {
		if sum, err := store.CheckSQLite(ctx, path); err == nil && sum.Integrity == "ok" {
			t.Errorf("CheckSQLite(%s) passed: %+v", filepath.Base(path), sum)
		}
	}
}
