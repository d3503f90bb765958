// Command kadi-load drives a running Kadi on this machine through the
// merchant flow and prints throughput relative to two baselines measured in
// the same run (a minimal net/http handler it starts itself, and the
// gateway's /healthz), latency percentiles and the server's CPU time per
// request.
//
//	kadi merchant create --data-dir D --name Load --json > merchant.json
//	kadi serve --data-dir D &
//	kadi-load --url http://127.0.0.1:8080 --credentials merchant.json
//
// Checkouts pay with the simulated acquirer's first approving test card
// unless --card names another.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/config"
	"github.com/kadipay/kadi/internal/load"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server"
	"github.com/kadipay/kadi/internal/store"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == load.MinimalFlag {
		// The second baseline, started by a run as a process of its own.
		if err := load.ServeMinimal(); err != nil {
			fmt.Fprintln(os.Stderr, "kadi-load:", err)
			os.Exit(1)
		}
		return
	}
	var o load.Options
	var creds, dataDir, databaseURL, urls, metrics, pids string
	var seed int
	var only, cpuProfile string
	fs := flag.NewFlagSet("kadi-load", flag.ExitOnError)
	fs.StringVar(&urls, "url", "http://127.0.0.1:8080", "the gateway (loopback only); several nodes sharing a database: comma-separated, each request to the next")
	fs.StringVar(&metrics, "metrics", "", "where each node serves /metrics, comma-separated like --url (default: each --url's /metrics; a gateway serving with --metrics-addr ADDR has them at http://ADDR/metrics)")
	fs.StringVar(&creds, "credentials", "", "a file holding `kadi merchant create --json` output (required)")
	fs.StringVar(&o.Card, "card", sim.TestCards[0].Number, "an approving test card number (the default is the simulated acquirer's first)")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "concurrent clients")
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "time per scenario, in 5 slices that alternate with as many of its baseline's")
	fs.IntVar(&o.MaxRequests, "max-requests", 20000, "requests per scenario at most")
	fs.StringVar(&o.IPNListen, "ipn-listen", "", "also run the IPN scenarios, receiving on this address (point the merchant's test IPN URL at http://ADDR/ipn; serve with --allow-private-ipn)")
	fs.IntVar(&o.IPNRate, "ipn-rate", 1000, "payments a second in the IPN latency scenario")
	fs.IntVar(&seed, "seed-bills", 0, "instead of a run, add this many bills for the merchant straight into the store (--data-dir or --database-url), in batches")
	fs.StringVar(&dataDir, "data-dir", "", "with --seed-bills: the gateway's data directory (SQLite)")
	fs.StringVar(&databaseURL, "database-url", "", "with --seed-bills: the gateway's PostgreSQL")
	fs.StringVar(&only, "only", "", "run only the scenarios whose name matches this regular expression (IPN names the IPN scenarios); the baselines always run")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write kadi-load's own CPU profile to this file (its clients' cost is the other half of each ratio on one machine)")
	fs.StringVar(&pids, "pid", "", "the gateway's process ids, comma-separated, for its CPU time (default: the processes listening on the --url ports)")
	if err := config.Parse(fs, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kadi-load:", err)
		os.Exit(2)
	}
	o.BaseURLs = strings.Split(urls, ",")
	if metrics != "" {
		o.MetricsURLs = strings.Split(metrics, ",")
	}
	if pids != "" {
		for _, p := range strings.Split(pids, ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(p))
			if err != nil || pid <= 0 {
				fmt.Fprintf(os.Stderr, "kadi-load: --pid: %q is not a process id\n", p)
				os.Exit(2)
			}
			o.ServerPIDs = append(o.ServerPIDs, pid)
		}
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			fmt.Fprintln(os.Stderr, "kadi-load: --only:", err)
			os.Exit(2)
		}
		o.Only = re
	}
	if creds == "" || (o.Card == "" && seed == 0) {
		fmt.Fprintln(os.Stderr, "kadi-load: --credentials FILE and an approving --card NUMBER are required")
		os.Exit(2)
	}
	raw, err := os.ReadFile(creds)
	if err != nil {
		// A file given but not there said "--credentials FILE … required".
		fmt.Fprintln(os.Stderr, "kadi-load: --credentials:", err)
		os.Exit(2)
	}
	if err := json.Unmarshal(raw, &o.Credentials); err != nil {
		fmt.Fprintln(os.Stderr, "kadi-load: credentials:", err)
		os.Exit(2)
	}
	if seed > 0 {
		if err := seedBills(seed, dataDir, databaseURL, o.Credentials); err != nil {
			fmt.Fprintln(os.Stderr, "kadi-load:", err)
			os.Exit(1)
		}
		return
	}
	o.Warn = func(msg string) { fmt.Fprintln(os.Stderr, "kadi-load:", msg) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	stopProfile, err := startProfile(cpuProfile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kadi-load: --cpuprofile:", err)
		os.Exit(2)
	}
	rs, err := load.Run(ctx, o)
	if perr := stopProfile(); perr != nil {
		fmt.Fprintln(os.Stderr, "kadi-load: --cpuprofile:", perr)
	}
	load.Report(os.Stdout, rs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kadi-load:", err)
		os.Exit(1)
	}
	if n := load.Failed(rs); n > 0 {
		fmt.Fprintf(os.Stderr, "kadi-load: %d requests failed (above, each scenario's first): the figures are not of record\n", n)
		os.Exit(1)
	}
}

// startProfile starts writing kadi-load's own CPU profile to path (none
// when path is empty); the returned function ends it.
func startProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// seedBills fills the store for a run against a full store.
func seedBills(n int, dataDir, databaseURL string, c merchant.Credentials) error {
	if (dataDir == "") == (databaseURL == "") {
		return errors.New("--seed-bills needs --data-dir or --database-url (one of them)")
	}
	if dataDir != "" {
		if _, err := os.Stat(server.DatabaseURL(dataDir, "")); err != nil {
			return fmt.Errorf("no Kadi database in %s: %w", dataDir, err)
		}
		// A node serving the data dir answers "no such bill" for bills it
		// never saw added: seed before it starts.
		release, err := store.LockDataDir(dataDir)
		if err != nil {
			return fmt.Errorf("seed bills: %w", err)
		}
		defer release()
	}
	ctx := context.Background()
	st, err := store.Open(ctx, server.DatabaseURL(dataDir, databaseURL))
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	err = load.Seed(ctx, st, c, n, func(done int) {
		if done%1_000_000 == 0 || done == n {
			fmt.Printf("%d bills in %s\n", done, time.Since(start).Round(time.Second))
		}
	})
	if err != nil {
		return err
	}
	return st.Analyze(ctx)
}
