//go:build !unix

package store

// writableDir: elsewhere SQLite's own error is what there is to say.
func writableDir(string) error { return nil }

// LockDataDir: elsewhere a second node on the data dir is not refused
// (docs/operations.md says so).
func LockDataDir(string) (release func(), err error) { return func() {}, nil }

// DataDirLocks: LockDataDir holds nothing here.
const DataDirLocks = false
