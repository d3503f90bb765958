package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
)

// BackupSQLite writes a consistent copy of the SQLite database at src to
// dst, which must not exist, while servers keep writing to src: VACUUM INTO
// reads one snapshot (WAL lets the writer go on meanwhile) and writes a
// compact database with no WAL beside it. The source is not migrated or
// otherwise written: a backup taken by a newer binary must not upgrade a
// database an older server is running on.
func BackupSQLite(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("database to back up: %w", err)
	}
	// Made here, empty and private, because SQLite would create it with
	// the process's umask; VACUUM INTO fills an empty file.
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("create the copy: %w", err)
	}
	f.Close()
	db, err := sql.Open("sqlite", "file:"+src+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return fmt.Errorf("open %s: %w", src, err)
	}
	defer db.Close()
	if err := hasKadiSchema(ctx, db); err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return syncFile(dst)
}

func hasKadiSchema(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&n)
	if err != nil {
		return fmt.Errorf("read the schema: %w", err)
	}
	if n == 0 {
		return errors.New("not a Kadi database (no schema_migrations table)")
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}

// Summary is what a check of a database copy found.
type Summary struct {
	// Integrity is SQLite's integrity_check verdict: "ok" or its findings.
	Integrity string
	// Version is the last migration applied to the copy; Latest the last
	// this binary knows. A copy behind is migrated when served.
	Version, Latest string
	Merchants       int
	Bills           int
}

// CheckSQLite opens the SQLite database at path read-only and reports
// whether it is whole and what it holds, without changing a byte of it.
func CheckSQLite(ctx context.Context, path string) (Summary, error) {
	if _, err := os.Stat(path); err != nil {
		return Summary{}, fmt.Errorf("open the copy: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=query_only(1)")
	if err != nil {
		return Summary{}, fmt.Errorf("open %s: %w", path, err)
	}
	defer db.Close()
	var s Summary
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return Summary{}, fmt.Errorf("integrity check of %s: %w", path, err)
	}
	var findings []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			rows.Close()
			return Summary{}, fmt.Errorf("integrity check of %s: %w", path, err)
		}
		findings = append(findings, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Summary{}, fmt.Errorf("integrity check of %s: %w", path, err)
	}
	s.Integrity = strings.Join(findings, "; ")
	if err := hasKadiSchema(ctx, db); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), '') FROM schema_migrations`).Scan(&s.Version); err != nil {
		return s, fmt.Errorf("read the migration version of %s: %w", path, err)
	}
	s.Latest = latestMigration()
	for _, c := range []struct {
		table string
		n     *int
	}{{"merchants", &s.Merchants}, {"bills", &s.Bills}} {
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+c.table).Scan(c.n); err != nil {
			return s, fmt.Errorf("count %s in %s: %w", c.table, path, err)
		}
	}
	return s, nil
}

// latestMigration is the version of the last migration this binary has.
func latestMigration() string {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	if len(names) == 0 {
		return ""
	}
	sort.Strings(names)
	return strings.TrimSuffix(strings.TrimPrefix(names[len(names)-1], "migrations/"), ".sql")
}
