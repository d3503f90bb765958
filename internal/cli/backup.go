package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kadipay/kadi/internal/server"
	"github.com/kadipay/kadi/internal/store"
)

// backupCommand copies a data dir while kadi serve keeps running on it:
// the database as one consistent snapshot, and the master key when it lives
// there, then checks the copy before it says done.
func backupCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	flags := newFlags("backup", stderr)
	var st storeFlags
	st.register(flags)
	var out string
	flags.StringVar(&out, "out", "", "directory to write the copy into: new, or empty (created 0700)")
	if err := parseFlags(flags, args); err != nil {
		return err
	}
	if st.databaseURL != "" {
		return errors.New("kadi backup copies the embedded SQLite database; a PostgreSQL database is backed up with PostgreSQL's tools " +
			"(pg_dump, or pg_basebackup with WAL archiving for point-in-time recovery): see \"Backup and restore\" in docs/operations.md")
	}
	if out == "" {
		return usageErr(flags, errors.New("--out is required: the directory to write the copy into"))
	}
	src := server.DatabaseURL(st.dataDir, "")
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no Kadi database in %s: pass the --data-dir kadi serve uses", st.dataDir)
	}
	if err := emptyDir(out); err != nil {
		return err
	}
	var written []string
	ok := false
	defer func() {
		// A failed backup leaves nothing that could pass for one.
		if !ok {
			for _, p := range written {
				os.Remove(p)
			}
		}
	}()

	dst := filepath.Join(out, "kadi.db")
	written = append(written, dst)
	if err := store.BackupSQLite(ctx, src, dst); err != nil {
		return fmt.Errorf("back up %s: %w", st.dataDir, err)
	}
	keyNote, keyCopied, err := copyKey(st.dataDir, out)
	if keyCopied != "" {
		written = append(written, keyCopied)
	}
	if err != nil {
		return err
	}
	sum, err := store.CheckSQLite(ctx, dst)
	if err != nil {
		return fmt.Errorf("check the copy: %w", err)
	}
	if sum.Integrity != "ok" {
		return fmt.Errorf("the copy failed SQLite's integrity check (%s); the data dir may be damaged: run kadi backup again, and if it fails again keep your last good backup", sum.Integrity)
	}
	if err := syncDir(out); err != nil {
		return err
	}
	ok = true

	size := ""
	if fi, err := os.Stat(dst); err == nil {
		size = fmt.Sprintf("%.1f MiB; ", float64(fi.Size())/(1<<20))
	}
	fmt.Fprintf(stdout, "Backed up %s to %s, checked:\n", st.dataDir, out)
	fmt.Fprintf(stdout, "  kadi.db     %sintegrity ok; %s; merchants %d, bills %d\n", size, schemaNote(sum), sum.Merchants, sum.Bills)
	fmt.Fprintf(stdout, "  %s\n", keyNote)
	// Never over the old data dir's files: its kadi.db-wal and -shm, left
	// by a crash, would be replayed onto the copy and corrupt it.
	fmt.Fprintln(stdout, "To restore: stop kadi serve, move the data dir aside, put these files in a new, empty data dir (0700, owned by the user kadi runs as), start kadi serve on it; never copy them over the old dir's files (docs/operations.md, \"Backup and restore\").")
	if keyCopied != "" {
		fmt.Fprintf(stderr, "kadi backup: warning: %s is the master key, in clear. With it, whoever holds the copy can sign access tokens and read the stored notification secrets. Store it apart from the database copy, encrypted.\n", keyCopied)
	}
	return nil
}

func schemaNote(s store.Summary) string {
	switch {
	case s.Version == s.Latest:
		return "schema " + s.Version
	case s.Version < s.Latest:
		return "schema " + s.Version + " (this kadi migrates it to " + s.Latest + " when it serves it)"
	}
	return "schema " + s.Version + " (newer than this kadi's " + s.Latest + ": restore it with the version that made it)"
}

// emptyDir makes dir, or accepts it if it exists empty: a backup never
// mixes with or overwrites another.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create --out %s: %w", dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("--out %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("--out %s is not empty: give a new or empty directory, so that no earlier backup is overwritten or mixed with this one", dir)
	}
	return nil
}

// copyKey copies the master key when kadi serve reads it from the data dir
// (no KADI_SECRET_KEY or KADI_SECRET_KEY_FILE): without it the copy's
// sealed secrets cannot be opened. It returns a line for the report and the
// path it wrote, if any.
func copyKey(dataDir, out string) (note, written string, err error) {
	for _, env := range []string{"KADI_SECRET_KEY", "KADI_SECRET_KEY_FILE"} {
		if os.Getenv(env) != "" {
			return "master key  not in the data dir (" + env + " sets it), so not copied: the copy is useless without it; keep it safe apart", "", nil
		}
	}
	key, err := os.ReadFile(filepath.Join(dataDir, "secret.key"))
	if errors.Is(err, fs.ErrNotExist) {
		return "master key  none in the data dir, and neither KADI_SECRET_KEY nor KADI_SECRET_KEY_FILE is set: find the key kadi serve runs with, or the copy's secrets cannot be opened", "", nil
	} else if err != nil {
		return "", "", fmt.Errorf("read the master key: %w", err)
	}
	dst := filepath.Join(out, "secret.key")
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("copy the master key: %w", err)
	}
	_, err = f.Write(key)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", dst, fmt.Errorf("copy the master key: %w", err)
	}
	return "secret.key  the master key (mode 0600): secret, see the warning", dst, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
