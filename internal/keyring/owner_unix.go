//go:build unix

package keyring

import (
	"fmt"
	"os"
	"syscall"
)

// keepOwner gives f the owner of the file at path, when there is one: a
// rotation run as root on a ring the service user owns left a ring that
// user could not read, with the database already re-sealed under it.
func keepOwner(f *os.File, path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return nil // a new ring: its owner is whoever makes it
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok || (int(st.Uid) == os.Getuid() && int(st.Gid) == os.Getgid()) {
		return nil
	}
	if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("%s belongs to user %d, group %d, and the new ring could not be given to them (%v): run this as that user, e.g. sudo -u kadi", path, st.Uid, st.Gid, err)
	}
	return nil
}
