//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// writableDir checks that this process may create and remove files in
// dir. SQLite creates kadi.db-wal and kadi.db-shm beside the database and
// removes them on close: in a directory the service's user cannot write
// (created by root, say), a start failed a step later with "unable to open
// database file (14)", naming neither the directory nor why. access(2)
// asks without leaving a file behind, and refuses even root an immutable
// directory or a read-only mount. Other trouble (no such directory) is for
// opening the file to report.
func writableDir(dir string) error {
	err := unix.Access(dir, unix.W_OK|unix.X_OK)
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EROFS) {
		return fmt.Errorf("the data directory %s is not writable by this user (uid %d), and SQLite creates its -wal and -shm files there: %w", dir, os.Geteuid(), err)
	}
	return nil
}

// DataDirLocks: LockDataDir holds dir here (where it returns no error).
const DataDirLocks = true

// LockDataDir holds dir for one serving node until release is called: the
// embedded store serves one node, and a second kadi serve (or kadi demo) on
// the same data dir ran beside the first, each with its own notification
// worker and reconciler. It is taken before the store is opened, so that the
// second changes nothing. The lock is flock(2)'s on dir/serve.lock, which
// the kernel lifts when the process ends however it ends; the file names
// the pid that holds it, for the refusal to say. A file system that takes
// no such lock (some NFS or FUSE mounts) gives another error, which the
// caller may warn of and start anyway. The CLI's other commands do not take
// it: they may run while the node serves, and none of them adds bills
// (knownBills counts on that). kadi-load's seeding, which does, takes it.
func LockDataDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	path := filepath.Join(dir, "serve.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the data directory: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			by := ""
			if pid := strings.TrimSpace(string(holder)); pid != "" {
				by = " (pid " + pid + ")"
			}
			return nil, fmt.Errorf("%w: another kadi serve%s is serving from the data directory %s: the embedded SQLite store serves one node; stop it first, or run several nodes on PostgreSQL (--database-url)", ErrDataDirServed, by, dir)
		}
		return nil, fmt.Errorf("lock the data directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
