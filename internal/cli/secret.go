package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/kadipay/kadi/internal/keyring"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server"
	"github.com/kadipay/kadi/internal/store"
)

// secretFlags are the flags of `kadi secret rotate` and `kadi secret
// reseal`: the database, and the ring's file when it is not where `kadi
// serve` would look (server.FindKeySource).
type secretFlags struct {
	st      storeFlags
	keyFile string
}

func (f *secretFlags) register(fs *flag.FlagSet) {
	f.st.register(fs)
	fs.StringVar(&f.keyFile, "key-file", "", "the master key ring's file (default: $KADI_SECRET_KEY_FILE, else DATA_DIR/secret.key)")
}

// source says where the ring is: --key-file, else as `kadi serve` finds it.
func (f *secretFlags) source() (server.KeySource, error) {
	if f.keyFile != "" {
		return server.KeySource{File: f.keyFile}, nil
	}
	src, err := server.FindKeySource(f.st.dataDir, f.st.databaseURL)
	if err != nil {
		return src, err
	}
	if src.File != "" {
		if _, err := os.Stat(src.File); errors.Is(err, fs.ErrNotExist) {
			return src, fmt.Errorf("no master key ring at %s: pass the --data-dir kadi serve uses, or --key-file", src.File)
		}
	}
	return src, nil
}

// checkDatabase refuses a mistyped --data-dir or --database-url before the
// ring is touched: a rotation that then failed on the URL had already
// written a new ring.
func (f *secretFlags) checkDatabase() error {
	if err := server.CheckDatabaseURL(f.st.databaseURL); err != nil {
		return err
	}
	if f.st.databaseURL == "" {
		if _, err := os.Stat(server.DatabaseURL(f.st.dataDir, "")); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no Kadi database in %s: pass the --data-dir kadi serve uses (or --database-url)", f.st.dataDir)
		}
	}
	return nil
}

// parse reads args and says where the ring is, refusing a ring or a
// database that is not there before either is touched. needDatabase is
// false for a rotation that re-seals nothing: it touches the ring alone,
// as on a copy of it (docs/operations.md).
func (f *secretFlags) parse(fset *flag.FlagSet, args []string, needDatabase func() bool) (server.KeySource, error) {
	if err := parseFlags(fset, args); err != nil {
		return server.KeySource{}, err
	}
	src, err := f.source()
	if err != nil || !needDatabase() {
		return src, err
	}
	return src, f.checkDatabase()
}

func secretCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		return groupHelp("secret", stdout)
	}
	if len(args) > 0 {
		switch args[0] {
		case "rotate":
			return secretRotate(ctx, args[1:], stdout, stderr)
		case "reseal":
			return secretReseal(ctx, args[1:], stdout, stderr)
		}
	}
	return subcommandNeeded("secret", args, stderr)
}

// secretRotate makes a new master key the ring's current one, keeping the
// previous keys, then re-seals the stored secrets under it.
func secretRotate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f secretFlags
	reseal := true
	fset := newFlags("secret rotate", stderr)
	f.register(fset)
	fset.BoolVar(&reseal, "reseal", true, "re-seal the stored secrets under the new key at once (false when other nodes read their own copy of the ring: copy it to them first, then run kadi secret reseal)")
	src, err := f.parse(fset, args, func() bool { return reseal })
	if err != nil {
		return err
	}
	if src.Env != "" {
		r, err := keyring.Parse(os.Getenv(src.Env))
		if err != nil {
			return fmt.Errorf("%s: %w", src.Env, err)
		}
		used, err := f.usedKeyIDs(ctx, keyring.New(r))
		if err != nil {
			return err
		}
		next := r.Rotate(secret.RandomBytes(32), used...)
		if err := f.recordKeys(ctx, keyring.New(next)); err != nil {
			return err
		}
		fmt.Fprintf(stderr, `The master key comes from %[1]s, which this command cannot change. The new ring is below
(on stdout; it is secret). Set %[1]s to it on every node and for the CLI, restart the nodes,
then run "kadi secret reseal". Until every node has it, keep the old value everywhere.
`, src.Env)
		// Quoted: the ring's lines are joined by commas and spaces, and
		// pasted unquoted into a shell or a unit's Environment= only its
		// first word ("k1") was kept.
		fmt.Fprintf(stdout, "%s='%s'\n", src.Env, next.OneLine())
		return nil
	}
	keys, err := keyring.Load(src.File)
	if err != nil {
		return err
	}
	var db *store.DB
	if reseal || f.checkDatabase() == nil {
		// The ring must open what it is to re-seal before it is changed:
		// a wrong key file was rotated, then the re-seal failed. Without
		// re-sealing, the database is read when it is within reach, for
		// the key ids it has seen.
		if db, err = server.OpenStoreWithKeys(ctx, f.st.dataDir, f.st.databaseURL, keys, f.st.options()...); err != nil {
			if !reseal {
				return fmt.Errorf("read the key ids the database has seen, so that the new key takes none of them (nothing was changed): %w; "+
					"to rotate a copy of the ring apart from the database, give no --data-dir or --database-url (nor KADI_DATA_DIR or KADI_DATABASE_URL)", err)
			}
			return err
		}
		defer db.Close()
		if behind := db.BehindKey(); behind != "" {
			return fmt.Errorf("this ring lacks key %q, which sealed stored secrets: it missed a rotation; rotate from the current ring (nothing was changed)", behind)
		}
	}
	var used []string
	if db != nil {
		// A ring restored from a copy older than a rotation lacks the ids
		// that rotation took; the database has seen them.
		if used, err = db.SealingKeyIDs(ctx); err != nil {
			return err
		}
	}
	next := keys.Ring().Rotate(secret.RandomBytes(32), used...)
	if err := keyring.WriteFile(src.File, next); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Master key rotated in %s: the current key is now %s; the previous keys are kept, so tokens and values they made keep working.\n",
		src.File, next.Current().ID)
	if db != nil {
		// The open store seals with keys, which follow their file: read
		// back, the new key is the current one, recorded at once so that
		// no later rotation takes its id.
		if _, err := keys.Reload(); err != nil {
			return fmt.Errorf("master key ring %s was rotated but could not be read back (%w); run kadi secret reseal", src.File, err)
		}
		if id := keys.Ring().Current().ID; id != next.Current().ID {
			return fmt.Errorf("master key ring %s: read back, its current key is %s, not %s; run kadi secret reseal", src.File, id, next.Current().ID)
		}
		if err := db.RecordSealingKeys(ctx); err != nil {
			return err
		}
	}
	if !reseal {
		fmt.Fprintln(stdout, `Stored secrets not re-sealed yet: copy the ring to every node, then run "kadi secret reseal".`)
		return nil
	}
	return resealWith(ctx, db, keys, stdout)
}

// usedKeyIDs are the key ids the database has recorded, when it is within
// reach of these flags (none when it is not: a ring rotated apart from the
// database, as on a copy of it), after checking that keys has every key
// that sealed a stored secret, as a rotation of the key file does.
func (f *secretFlags) usedKeyIDs(ctx context.Context, keys *keyring.Keyring) ([]string, error) {
	if f.checkDatabase() != nil {
		return nil, nil
	}
	db, err := server.OpenStoreWithKeys(ctx, f.st.dataDir, f.st.databaseURL, keys, f.st.options()...)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if behind := db.BehindKey(); behind != "" {
		return nil, fmt.Errorf("this ring lacks key %q, which sealed stored secrets: it missed a rotation; rotate from the current ring (nothing was changed)", behind)
	}
	return db.SealingKeyIDs(ctx)
}

// recordKeys records a rotated ring's keys in the database within reach
// of these flags at once, as a rotation of the key file does: a ring in
// the environment was rotated without, so a second rotation (or one of a
// copy of the ring) took the same id for another key, which the key check
// then took for the database's and sealed secrets no node could open.
func (f *secretFlags) recordKeys(ctx context.Context, keys *keyring.Keyring) error {
	if f.checkDatabase() != nil {
		return nil
	}
	db, err := server.OpenStoreWithKeys(ctx, f.st.dataDir, f.st.databaseURL, keys, f.st.options()...)
	if err != nil {
		return fmt.Errorf("record the new key in the database (nothing was changed; run the rotation again): %w", err)
	}
	defer db.Close()
	return db.RecordSealingKeys(ctx)
}

// secretReseal re-seals the stored secrets under the ring's current key.
func secretReseal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f secretFlags
	fset := newFlags("secret reseal", stderr)
	f.register(fset)
	src, err := f.parse(fset, args, func() bool { return true })
	if err != nil {
		return err
	}
	var keys *keyring.Keyring
	if src.Env != "" {
		r, err := keyring.Parse(os.Getenv(src.Env))
		if err != nil {
			return fmt.Errorf("%s: %w", src.Env, err)
		}
		keys = keyring.New(r)
	} else if keys, err = keyring.Load(src.File); err != nil {
		return err
	}
	db, err := server.OpenStoreWithKeys(ctx, f.st.dataDir, f.st.databaseURL, keys, f.st.options()...)
	if err != nil {
		return err
	}
	defer db.Close()
	return resealWith(ctx, db, keys, stdout)
}

// resealWith re-seals db's stored secrets under the current key of keys,
// which db seals with.
func resealWith(ctx context.Context, db *store.DB, keys *keyring.Keyring, stdout io.Writer) error {
	stats, err := db.Reseal(ctx)
	if err != nil {
		return fmt.Errorf("re-seal stored secrets (nothing was changed): %w", err)
	}
	fmt.Fprintf(stdout, "Stored secrets re-sealed under key %s: %d re-sealed, %d already under it.\n", keys.Ring().Current().ID, stats.Resealed, stats.Current)
	if stats.Changed > 0 {
		fmt.Fprintf(stdout, "%d changed by a node meanwhile; run \"kadi secret reseal\" again before retiring a key.\n", stats.Changed)
	}
	return nil
}
