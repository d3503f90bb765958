package keyring

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile replaces the ring in path at once for every reader: the new
// text goes to a private temporary file beside it, which is synced and
// renamed over path, so a node reloading mid-rotation reads the old ring
// or the new one, never half of one.
func WriteFile(path string, r Ring) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write master key ring: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	// CreateTemp makes it 0600; say so, whatever it does in another version.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write master key ring: %w", err)
	}
	if err := keepOwner(f, path); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString(r.Text()); err != nil {
		f.Close()
		return fmt.Errorf("write master key ring: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write master key ring: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write master key ring: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replace master key ring: %w", err)
	}
	// The rename is durable only once the directory is.
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
