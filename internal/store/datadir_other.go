//go:build !unix

package store

// writableDir: elsewhere SQLite's own error is what there is to say.
func writableDir(string) error { return nil }
