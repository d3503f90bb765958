// Command kadi-load drives a running Kadi on this machine through the
// merchant flow and prints throughput relative to a same-run baseline.
//
//	kadi merchant create --data-dir D --name Load --json > merchant.json
//	kadi serve --data-dir D &
//	kadi-load --url http://127.0.0.1:8080 --credentials merchant.json --card NUMBER
//
// NUMBER is an approving test card from the README.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/kadipay/kadi/internal/config"
	"github.com/kadipay/kadi/internal/load"
)

func main() {
	var o load.Options
	var creds string
	fs := flag.NewFlagSet("kadi-load", flag.ExitOnError)
	fs.StringVar(&o.BaseURL, "url", "http://127.0.0.1:8080", "the gateway (loopback only)")
	fs.StringVar(&creds, "credentials", "", "a file holding `kadi merchant create --json` output (required)")
	fs.StringVar(&o.Card, "card", "", "an approving test card number (required)")
	fs.IntVar(&o.Concurrency, "concurrency", 8, "concurrent clients")
	fs.DurationVar(&o.Duration, "duration", 5*time.Second, "time per scenario")
	fs.IntVar(&o.MaxRequests, "max-requests", 20000, "requests per scenario at most")
	if err := config.Parse(fs, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kadi-load:", err)
		os.Exit(2)
	}
	raw, err := os.ReadFile(creds)
	if err != nil || o.Card == "" {
		fmt.Fprintln(os.Stderr, "kadi-load: --credentials FILE and --card NUMBER are required")
		os.Exit(2)
	}
	if err := json.Unmarshal(raw, &o.Credentials); err != nil {
		fmt.Fprintln(os.Stderr, "kadi-load: credentials:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rs, err := load.Run(ctx, o)
	load.Report(os.Stdout, rs)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kadi-load:", err)
		os.Exit(1)
	}
}
