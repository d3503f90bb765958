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
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/kadipay/kadi/internal/config"
	"github.com/kadipay/kadi/internal/server"
	"github.com/kadipay/kadi/internal/store"
)

const usage = `kadi: a hosted card payment gateway

Usage:
  kadi serve   [--addr 127.0.0.1:8080] [--data-dir DIR] [--public-url URL] [--database-url URL] [--allow-private-ipn] [--form-addr ADDR] [--dashboard-addr ADDR] [--metrics-addr ADDR] [--trusted-proxies CIDR,…] [--log-format json|text]
  kadi demo    [--addr 127.0.0.1:8080] [--shop-addr 127.0.0.1:8081] [--data-dir DIR]
  kadi merchant create     --data-dir DIR --name NAME [--json]
  kadi merchant set-ipn    --data-dir DIR --merchant CODE --mode test|live --url URL --username U --password P [--nat64-prefixes P,…]
  kadi merchant rotate-key --data-dir DIR --merchant CODE --mode test|live [--json]
  kadi merchant rotate-secret --data-dir DIR --merchant CODE --mode test|live [--overlap 24h] [--timezone ZONE] [--json]
  kadi merchant end-secret-overlap --data-dir DIR --merchant CODE --mode test|live
  kadi merchant set-callbacks --data-dir DIR --merchant CODE --mode test|live --origins URL,…
  kadi merchant reset-access --data-dir DIR --merchant CODE [--password] [--two-step] [--json]
  kadi merchant list     --data-dir DIR [--after CODE] [--limit N] [--timezone ZONE] [--json]
  kadi merchant show     --data-dir DIR --merchant CODE [--timezone ZONE] [--json]
  kadi ipn list   --data-dir DIR --merchant CODE [--mode test|live] [--status pending|parked|delivered|failed] [--limit N] [--before ID] [--timezone ZONE] [--json]
  kadi ipn show   ID --data-dir DIR [--timezone ZONE] [--json]
  kadi ipn replay ID --data-dir DIR
  kadi secret rotate [--data-dir DIR | --database-url URL] [--key-file FILE] [--reseal=false]
  kadi secret reseal [--data-dir DIR | --database-url URL] [--key-file FILE]
  kadi backup  --data-dir DIR --out DIR2

  kadi version

Every flag has an environment twin: --data-dir is KADI_DATA_DIR, and so on.
Run "kadi COMMAND -h" for a command's flags.
`

// errUsage means the command line was wrong; the message and the
// command's usage have been printed.
var errUsage = errors.New("usage")

// Main runs the command line args and returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	// SIGHUP too: a closed terminal or a logrotate's "kill -HUP" ended
	// kadi serve at once, cutting requests and deliveries in flight. Not
	// when it was ignored at start (nohup kadi serve &): watching it would
	// take the ignore back, and the node would stop with its terminal.
	stopOn := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) {
		stopOn = append(stopOn, syscall.SIGHUP)
	}
	ctx, stop := signal.NotifyContext(context.Background(), stopOn...)
	defer stop()
	err := run(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.As(err, new(loggedError)):
		return 1
	}
	fmt.Fprintln(stderr, "kadi:", err)
	return 1
}

// loggedError is an error the command has already written to its log.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

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
			return subcommandNeeded("merchant", args[1:], stderr)
		}
		if isHelp(args[1]) {
			return groupHelp("merchant", stdout)
		}
		switch args[1] {
		case "create":
			return merchantCreate(ctx, args[2:], stdout, stderr)
		case "set-ipn":
			return merchantSetIPN(ctx, args[2:], stdout, stderr)
		case "rotate-key":
			return merchantRotateKey(ctx, args[2:], stdout, stderr)
		case "rotate-secret":
			return merchantRotateSecret(ctx, args[2:], stdout, stderr)
		case "end-secret-overlap":
			return merchantEndSecretOverlap(ctx, args[2:], stdout, stderr)
		case "set-callbacks":
			return merchantSetCallbacks(ctx, args[2:], stdout, stderr)
		case "reset-access":
			return merchantResetAccess(ctx, args[2:], stdout, stderr)
		case "list":
			return merchantList(ctx, args[2:], stdout, stderr)
		case "show":
			return merchantShow(ctx, args[2:], stdout, stderr)
		}
		return subcommandNeeded("merchant", args[1:], stderr)
	case "ipn":
		return ipnCommand(ctx, args[1:], stdout, stderr)
	case "secret":
		return secretCommand(ctx, args[1:], stdout, stderr)
	case "backup":
		return backupCommand(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		if len(args) > 1 && args[0] == "help" {
			// "kadi help serve" is "kadi serve --help": it printed the
			// top-level usage.
			return run(ctx, append(slices.Clone(args[1:]), "--help"), stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return nil
	case "version", "-version", "--version":
		if len(args) > 1 {
			if isHelp(args[1]) {
				fmt.Fprintln(stdout, "usage: kadi version\n\nPrints the build's version and the Go release it was built with.")
				return nil
			}
			fmt.Fprintf(stderr, "kadi version: unexpected arguments: %s\n\nusage: kadi version\n", strings.Join(args[1:], " "))
			return errUsage
		}
		fmt.Fprintln(stdout, version())
		return nil
	}
	fmt.Fprintf(stderr, "kadi: unknown command %q\n\n%s", args[0], usage)
	return errUsage
}

func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// subcommandNeeded says what was wrong with "kadi GROUP [ARG]" and which
// subcommands there are: the whole usage, printed bare, left a stranger
// to guess.
func subcommandNeeded(group string, args []string, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintf(stderr, "kadi %s: which one? A subcommand is needed.\n\n", group)
	} else {
		fmt.Fprintf(stderr, "kadi %s: unknown subcommand %q\n\n", group, args[0])
	}
	_ = groupHelp(group, stderr)
	return errUsage
}

// groupHelp prints the usage lines of a command group ("kadi merchant -h").
func groupHelp(group string, stdout io.Writer) error {
	fmt.Fprintln(stdout, "Usage:")
	for _, l := range strings.Split(usage, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "kadi "+group+" ") {
			fmt.Fprintln(stdout, l)
		}
	}
	fmt.Fprintf(stdout, "\nRun \"kadi %s SUBCOMMAND -h\" for a subcommand's flags.\n", group)
	return nil
}

func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kadi "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s\n\nflags (each also read from its KADI_* environment twin):\n", usageLine(fs.Name()))
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags reads args into fs (see config.Parse). Every mistake is
// printed once, with the command's usage line, and comes back as errUsage;
// -h lists every flag and comes back as flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	return quietParse(fs, func() error { return config.Parse(fs, args) })
}

// quietParse runs parse with the flag package's own printing off, then
// says what it returned: on a bad value or an unknown flag the flag
// package printed the one line that mattered above every flag of the
// command, which buried it.
func quietParse(fs *flag.FlagSet, parse func() error) error {
	out := fs.Output()
	fs.SetOutput(io.Discard)
	err := parse()
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		fs.Usage()
		return err
	}
	return usageErr(fs, err)
}

// usageErr prints what is wrong with a command line and how the command
// is used, and returns errUsage (exit status 2).
func usageErr(fs *flag.FlagSet, err error) error {
	fmt.Fprintf(fs.Output(), "%s: %v\nusage: %s\nRun \"%s -h\" for every flag.\n", fs.Name(), err, usageLine(fs.Name()), fs.Name())
	return errUsage
}

// usageLine is the line of the usage text that shows command.
func usageLine(command string) string {
	for _, l := range strings.Split(usage, "\n") {
		l = strings.TrimSpace(l)
		if rest, ok := strings.CutPrefix(l, command); ok && (rest == "" || rest[0] == ' ') {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return command + " [flags]"
}

// storeFlags are the flags every command that opens the database shares.
// stderr hears what opening spends long on (another node's migrations, an
// index built online), as a serving node's log does.
type storeFlags struct {
	dataDir, databaseURL string
	stderr               io.Writer
}

// open opens the store the flags name. Only the commands that set a
// gateway up (serve, demo, merchant create) may create a data dir: for any
// other, a mistyped --data-dir must fail, not leave an empty database
// behind and report that it holds nothing.
func (s *storeFlags) open(ctx context.Context, create bool) (*store.DB, error) {
	if !create && s.databaseURL == "" {
		if _, err := os.Stat(server.DatabaseURL(s.dataDir, "")); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no Kadi database in %s: pass the --data-dir kadi serve uses (or --database-url)", s.dataDir)
		}
	}
	return server.OpenStore(ctx, s.dataDir, s.databaseURL, s.options()...)
}

// options are what every command opens the store with.
func (s *storeFlags) options() []store.Option {
	if s.stderr == nil {
		return nil
	}
	return []store.Option{store.WithLog(slog.New(slog.NewTextHandler(s.stderr, nil)))}
}

func (s *storeFlags) register(fs *flag.FlagSet) {
	s.stderr = fs.Output()
	fs.StringVar(&s.dataDir, "data-dir", "kadi-data", "directory of the embedded SQLite database and the secret key")
	fs.StringVar(&s.databaseURL, "database-url", "", "postgres://… to use PostgreSQL instead of SQLite")
}

// version says which build this is: the module version and the VCS
// revision the go command stamped into the binary, when it did.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "kadi (no build information)"
	}
	v, rev, dirty := info.Main.Version, "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if v == "" {
		v = "(devel)"
	}
	out := "kadi " + v
	if len(rev) > 12 {
		rev = rev[:12]
	}
	// A pseudo-version already names the revision.
	if rev != "" && !strings.Contains(v, rev) {
		if dirty {
			rev += "+dirty"
		}
		out += " revision " + rev
	}
	return out + " " + info.GoVersion
}
