//go:build unix

package store

import (
	"errors"
	"fmt"
	"os"

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
