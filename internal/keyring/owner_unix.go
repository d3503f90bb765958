//go:build unix

package keyring

import (
	"fmt"
	"os"
	"syscall"
)

// keepOwner gives f the owner, group and group-read bit of the file at
// path, when there is one: a rotation run as root on a ring the service
// user owns (or reads through its group, 0640) left a ring that user
// could not read, with the database already re-sealed under it. Other
// users never get a bit.
func keepOwner(f *os.File, path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return nil // a new ring: its owner is whoever makes it
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if mode := info.Mode().Perm() & 0o640; mode != 0o600 {
		if err := f.Chmod(mode | 0o600); err != nil {
			return fmt.Errorf("write master key ring: %w", err)
		}
	}
	if int(st.Uid) == os.Getuid() && int(st.Gid) == os.Getgid() {
		return nil
	}
	if int(st.Uid) != os.Getuid() {
		if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil {
			return fmt.Errorf("%s belongs to user %d, and the new ring could not be given to it (%v): run this as that user, e.g. sudo -u kadi", path, st.Uid, err)
		}
		return nil
	}
	// The owner already: only the group may differ, and a group this
	// user is not in cannot be given; the owner reads the ring anyway.
	_ = f.Chown(-1, int(st.Gid))
	return nil
}
