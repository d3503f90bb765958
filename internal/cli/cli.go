// Package cli is the kadi command: serve, merchant administration and the
// demo. Each subcommand parses its flags (with KADI_* twins), then calls
// into the service packages.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

const usage = `kadi: a hosted card payment gateway

Usage:
  kadi serve   [--addr 127.0.0.1:8080] [--data-dir DIR] [--public-url URL] [--database-url URL] [--allow-private-ipn] [--form-addr ADDR] [--metrics-addr ADDR]
  kadi demo    [--addr 127.0.0.1:8080] [--shop-addr 127.0.0.1:8081] [--data-dir DIR]
  kadi merchant create     --data-dir DIR --name NAME [--json]
  kadi merchant set-ipn    --data-dir DIR --merchant CODE --mode test|live --url URL --username U --password P
  kadi merchant rotate-key --data-dir DIR --merchant CODE --mode test|live [--json]
  kadi ipn list   --data-dir DIR --merchant CODE [--mode test|live] [--status pending|delivered|failed] [--json]
  kadi ipn show   ID --data-dir DIR [--json]
  kadi ipn replay ID --data-dir DIR

Every flag has an environment twin: --data-dir is KADI_DATA_DIR, and so on.
Run "kadi COMMAND -h" for a command's flags.
`

// errUsage means the command line was wrong; the message has been printed.
var errUsage = errors.New("usage")

// Main runs the command line args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	}
	fmt.Fprintln(stderr, "kadi:", err)
	return 1
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "demo":
		return runDemo(ctx, args[1:], stdout, stderr)
	case "merchant":
		if len(args) < 2 {
			fmt.Fprint(stderr, usage)
			return errUsage
		}
		switch args[1] {
		case "create":
			return merchantCreate(ctx, args[2:], stdout, stderr)
		case "set-ipn":
			return merchantSetIPN(ctx, args[2:], stdout, stderr)
		case "rotate-key":
			return merchantRotateKey(ctx, args[2:], stdout, stderr)
		}
	case "ipn":
		return ipnCommand(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "kadi: unknown command %q\n\n%s", strings.Join(args, " "), usage)
	return errUsage
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kadi "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// storeFlags are the flags every command that opens the database shares.
type storeFlags struct{ dataDir, databaseURL string }

func (s *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.dataDir, "data-dir", "kadi-data", "directory of the embedded SQLite database and the secret key")
	fs.StringVar(&s.databaseURL, "database-url", "", "postgres://… to use PostgreSQL instead of SQLite")
}
