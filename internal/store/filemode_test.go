package store_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/audit"
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
