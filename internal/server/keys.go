package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kadipay/kadi/internal/keyring"
	"github.com/kadipay/kadi/internal/secret"
)

// KeySource says where the master key ring of a data dir and database URL
// is, as `kadi serve` looks for it: File is the ring's file, or Env the
// name of the environment variable holding it (which no command can
// rewrite). With neither the data dir's secret.key is made on first start.
type KeySource struct {
	File string
	Env  string
}

// FindKeySource applies the order of docs/operations.md: KADI_SECRET_KEY,
// KADI_SECRET_KEY_FILE, then, for the embedded single-node default only,
// DATA_DIR/secret.key.
func FindKeySource(dataDir, url string) (KeySource, error) {
	if os.Getenv("KADI_SECRET_KEY") != "" && os.Getenv("KADI_SECRET_KEY_FILE") != "" {
		// The variable won, silently: the file's rotations never reached
		// this node, whose ring fell behind the others'.
		return KeySource{}, errors.New("KADI_SECRET_KEY and KADI_SECRET_KEY_FILE are both set: give one (the file is followed as it changes, without a restart; the variable is read at start)")
	}
	if os.Getenv("KADI_SECRET_KEY") != "" {
		return KeySource{Env: "KADI_SECRET_KEY"}, nil
	}
	if path := os.Getenv("KADI_SECRET_KEY_FILE"); path != "" {
		return KeySource{File: path}, nil
	}
	if url != "" {
		return KeySource{}, errors.New("with a shared database every node needs the same key: set KADI_SECRET_KEY or KADI_SECRET_KEY_FILE (64 hex characters, or a key ring)")
	}
	return KeySource{File: filepath.Join(dataDir, "secret.key")}, nil
}

// keyRing finds the ring every other secret is derived from: the config,
// KADI_SECRET_KEY (hex or a ring), KADI_SECRET_KEY_FILE, or, for the
// embedded single-node default only, a file made in the data dir on first
// start. A ring read from a file follows the file (Keyring.Watch).
func keyRing(cfg Config) (*keyring.Keyring, error) {
	if len(cfg.MasterKey) > 0 {
		return keyring.New(keyring.Ring{Keys: []keyring.Key{{ID: secret.LegacyKeyID, Secret: cfg.MasterKey}}}), nil
	}
	src, err := FindKeySource(cfg.DataDir, cfg.DatabaseURL)
	if err != nil {
		return nil, err
	}
	if src.Env != "" {
		r, err := keyring.Parse(os.Getenv(src.Env))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src.Env, err)
		}
		return keyring.New(r), nil
	}
	if os.Getenv("KADI_SECRET_KEY_FILE") != "" {
		return keyring.Load(src.File)
	}
	return dataDirKeyRing(cfg.DataDir, src.File)
}

// dataDirKeyRing reads the data dir's key file, making it (a ring of one
// new key) when there is none and no database yet. A database without a
// key beside it has its key elsewhere (KADI_SECRET_KEY_FILE, as the docs
// advise for production, and sudo drops the environment): a new key there
// sealed the next secret under it, that merchant's tokens failed with a
// 500, and backups copied the stray key as the master key.
func dataDirKeyRing(dataDir, path string) (*keyring.Keyring, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrPermission) {
		// Read as "no key": a read-only command run as another user
		// said it failed to write a new master key.
		return nil, fmt.Errorf("cannot read %s (permission denied): run as the user kadi serve runs as (sudo -u kadi …)", dataDir)
	} else if err == nil {
		if err := os.Chmod(path, 0o600); err != nil {
			return nil, fmt.Errorf("make %s private: %w", path, err)
		}
		return keyring.Load(path)
	}
	if _, err := os.Stat(DatabaseURL(dataDir, "")); err == nil {
		return nil, fmt.Errorf("%s holds a Kadi database but no secret.key: its master key is elsewhere; "+
			"set KADI_SECRET_KEY_FILE (or KADI_SECRET_KEY) as kadi serve has it (with sudo: sudo -u kadi env KADI_SECRET_KEY_FILE=… kadi …)", dataDir)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	ring := keyring.Ring{Keys: []keyring.Key{{ID: secret.LegacyKeyID, Secret: secret.RandomBytes(32)}}}
	// Written whole beside it, then linked into place: a link never
	// replaces a file, so of two processes starting at once one makes the
	// key and the other reads that key, never a half-written file.
	tmp := filepath.Join(dataDir, ".secret.key.new."+secret.RandomUpperAlnum(8))
	defer os.Remove(tmp)
	if err := keyring.WriteFile(tmp, ring); err != nil {
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return keyring.Load(path)
}
