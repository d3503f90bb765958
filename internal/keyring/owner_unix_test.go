//go:build unix

package keyring

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A rotation run as root on a ring the service user owns keeps that user
// the owner: the ring was left root's, the running server could not read
// it, and a restart failed.
func TestWriteFileKeepsTheOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root can give a file to another user")
	}
	const nobody = 65534
	dir := t.TempDir()
	path := filepath.Join(dir, "ring")
	ring := Ring{Keys: []Key{{ID: "k0", Secret: []byte(strings.Repeat("k", 32))}}}
	if err := WriteFile(path, ring); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	// Read by the service through its group, as root:kadi 0640 is.
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, ring.Rotate([]byte(strings.Repeat("n", 32)))); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st := info.Sys().(*syscall.Stat_t); st.Uid != nobody || st.Gid != nobody || info.Mode().Perm() != 0o640 {
		t.Errorf("rotated ring: owner %d:%d, mode %v; want %d:%d, 0640", st.Uid, st.Gid, info.Mode().Perm(), nobody, nobody)
	}
}
