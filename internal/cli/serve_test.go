package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/server"
	"github.com/kadipay/kadi/internal/store"
)

func TestParsePrefixes(t *testing.T) {
	// Clients' addresses are compared unmapped: an IPv4-mapped prefix or
	// address is read as the IPv4 one it means, not kept to match nobody.
	got, err := parsePrefixes(" 10.0.0.0/8, 192.0.2.7 ,::1,2001:db8::1/32,::ffff:172.16.0.0/108,::ffff:192.0.2.8,")
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.0.2.8/32")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parsePrefixes = %v, %v; want %v", got, err, want)
	}
	if got, err := parsePrefixes(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v; want nobody", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "localhost", "10.0.0.0/8;1.2.3.4"} {
		if _, err := parsePrefixes(bad); err == nil {
			t.Errorf("parsePrefixes(%q) accepted", bad)
		}
	}
}

// --max-amount: one figure for every currency, and a currency's own as
// CODE=N; the figure alone keeps what it always meant.
func TestParseMaxAmount(t *testing.T) {
	for _, tc := range []struct {
		in  string
		all int64
		own map[string]int64
	}{
		{"5000000", 5_000_000, nil},
		{"UGX=40000000000", 10_000_000, map[string]int64{"UGX": 40_000_000_000}},
		{" 1000000 , ugx = 40000000000,TZS=25000000000", 1_000_000, map[string]int64{"UGX": 40_000_000_000, "TZS": 25_000_000_000}},
	} {
		p := bill.DefaultPolicy()
		if err := parseMaxAmount(tc.in, &p); err != nil || p.MaxAmount != tc.all || !maps.Equal(p.MaxAmountIn, tc.own) {
			t.Errorf("%q: %v, %d %v; want %d %v", tc.in, err, p.MaxAmount, p.MaxAmountIn, tc.all, tc.own)
		}
	}
}

// Without --public-url, a form on its own listener is shown to merchants
// at that listener's address, as the API is at its own.
func TestLocalAddrURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8081": "http://127.0.0.1:8081",
		":8081":          "http://localhost:8081",
		"0.0.0.0:8081":   "http://localhost:8081",
		"[::]:8081":      "http://localhost:8081",
		"[::1]:8081":     "http://[::1]:8081",
		"pay.local:8081": "http://pay.local:8081",
		"127.0.0.1:http": "http://127.0.0.1:80",
		"127.0.0.1:0":    "", // the system's pick: not known until bound
		"127.0.0.1:":     "",
	} {
		if got := localAddrURL(addr); got != want {
			t.Errorf("localAddrURL(%q) = %q, want %q", addr, got, want)
		}
	}
}

// A private network's prefix is as wide as one may be; a wider one holds
// the Internet's addresses.
func TestEveryAddress(t *testing.T) {
	for in, want := range map[string]bool{
		"10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7,127.0.0.1": false,
		"0.0.0.0/0":             true,
		"10.0.0.0/8,8.0.0.0/7":  true,
		"fc00::/7,fc00::/6":     true,
		"::ffff:10.0.0.0/103":   true,
		"2001:db8::/32,::1/128": false,
	} {
		ps, err := parsePrefixes(in)
		if err != nil {
			t.Fatal(err)
		}
		if _, got := everyAddress(ps); got != want {
			t.Errorf("everyAddress(%s) = %v, want %v", in, got, want)
		}
	}
}

func TestLogFormat(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	r, pipe, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer pipe.Close()
	for _, tc := range []struct {
		name, asked string
		w           io.Writer
		want        string
	}{
		{"json asked at a terminal", "json", devNull, "json"},
		{"text asked into a file", "text", file, "text"},
		{"default into a file", "", file, "json"},
		{"default into a pipe", "", pipe, "json"},
		{"default into a buffer", "", &bytes.Buffer{}, "json"},
		// /dev/null is a character device, as a terminal is.
		{"default to a character device", "", devNull, "text"},
	} {
		got, err := logFormat(tc.asked, tc.w)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	for _, bad := range []string{"JSON", "xml", "logfmt", " text"} {
		_, err := newLogger(&bytes.Buffer{}, logFlags{level: "info", format: bad})
		if err == nil || !strings.Contains(err.Error(), "--log-format must be json or text") {
			t.Errorf("--log-format %q: %v", bad, err)
		}
	}
	// What each format writes, card numbers redacted in both.
	for _, tc := range []struct {
		format string
		isJSON bool
	}{{"json", true}, {"text", false}} {
		var buf bytes.Buffer
		log, err := newLogger(&buf, logFlags{level: "info", format: tc.format})
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello", "card", "4242424242424242")
		out := buf.String()
		if got := json.Valid(buf.Bytes()); got != tc.isJSON {
			t.Errorf("--log-format %s wrote %q", tc.format, out)
		}
		if !tc.isJSON && !strings.HasPrefix(out, "time=") {
			t.Errorf("--log-format text wrote %q", out)
		}
		if strings.Contains(out, "4242424242424242") {
			t.Errorf("--log-format %s: card number in clear: %s", tc.format, out)
		}
	}
}

func TestCollectorSettings(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		gcPercent   int
		memoryLimit int64
	}{
		{"neither set", nil, defaultGCPercent, defaultMemoryLimit},
		{"GOGC set", map[string]string{"GOGC": "100"}, 0, defaultMemoryLimit},
		{"GOGC off", map[string]string{"GOGC": "off"}, 0, defaultMemoryLimit},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "1GiB"}, defaultGCPercent, 0},
		{"both set", map[string]string{"GOGC": "50", "GOMEMLIMIT": "1GiB"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gc, limit := collectorSettings(func(k string) string { return tt.env[k] })
			if gc != tt.gcPercent || limit != tt.memoryLimit {
				t.Errorf("collectorSettings = %d, %d; want %d, %d", gc, limit, tt.gcPercent, tt.memoryLimit)
			}
		})
	}
}

// A database URL is printed at start and by merchant create: no password
// in it, wherever pgx takes one.
func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"postgres://kadi:s3cret@db:5432/kadi?sslmode=disable", "postgres://kadi:REDACTED@db:5432/kadi?sslmode=disable"},
		{"postgres://db:5432/kadi?sslmode=disable&user=kadi&password=TopSecret123", "postgres://db:5432/kadi?password=REDACTED&sslmode=disable&user=kadi"},
		{"postgresql://db/kadi?sslpassword=k3y", "postgresql://db/kadi?sslpassword=REDACTED"},
		{"postgres://kadi@db/kadi", "postgres://kadi@db/kadi"},
		{"host=db user=kadi password=TopSecret123 dbname=kadi", "host=db user=kadi password=REDACTED dbname=kadi"},
		{"host=db password = 'top secret\\' 123' dbname=kadi", "host=db password=REDACTED dbname=kadi"},
		{"postgres://kadi:pa%zz@db/kadi", "postgres://…@db/kadi"},
		{"sqlite:kadi-data/kadi.db", "sqlite:kadi-data/kadi.db"},
	} {
		if got := redactURL(tt.in); got != tt.want {
			t.Errorf("redactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if strings.Contains(redactURL(tt.in), "ecret") || strings.Contains(redactURL(tt.in), "k3y") {
			t.Errorf("redactURL(%q) shows a password", tt.in)
		}
	}
}

// A gateway on every interface is named localhost in its links, not
// http://[::]:PORT, which no browser opens.
func TestLocalURL(t *testing.T) {
	for _, tt := range []struct {
		addr       string
		prefix     string
		everywhere bool
	}{
		{"127.0.0.1:0", "http://127.0.0.1:", false},
		{"0.0.0.0:0", "http://localhost:", true},
		{":0", "http://localhost:", true},
	} {
		ln, err := net.Listen("tcp", tt.addr)
		if err != nil {
			t.Fatal(err)
		}
		u, everywhere := localURL(ln)
		ln.Close()
		if !strings.HasPrefix(u, tt.prefix) || everywhere != tt.everywhere || strings.HasSuffix(u, ":") {
			t.Errorf("localURL(%s) = %q, %v; want %s… and %v", tt.addr, u, everywhere, tt.prefix, tt.everywhere)
		}
	}
}

// "kadi merchant -h" and its siblings print their group's usage and exit
// 0, as the top-level usage says ("Run kadi COMMAND -h").
func TestGroupHelp(t *testing.T) {
	for _, group := range []string{"merchant", "ipn", "secret"} {
		for _, h := range []string{"-h", "--help", "help"} {
			var stdout, stderr bytes.Buffer
			code := Main([]string{group, h}, &stdout, &stderr)
			if code != 0 || !strings.Contains(stdout.String(), "kadi "+group+" ") || stderr.Len() != 0 {
				t.Errorf("kadi %s %s: exit %d\n%s%s", group, h, code, stdout.String(), stderr.String())
			}
		}
		// Without a subcommand, or with a wrong one, it says what was
		// wrong and lists the group's subcommands (it printed the whole
		// usage, bare).
		for args, want := range map[string]string{"": "which one? A subcommand is needed", "frob": `unknown subcommand "frob"`} {
			var stdout, stderr bytes.Buffer
			argv := []string{group}
			if args != "" {
				argv = append(argv, args)
			}
			code := Main(argv, &stdout, &stderr)
			if code != 2 || !strings.Contains(stderr.String(), "kadi "+group+": "+want) || strings.Contains(stderr.String(), "kadi serve") {
				t.Errorf("kadi %s %s: exit %d\n%s", group, args, code, stderr.String())
			}
		}
	}
}

// serveWithMetricsAddrTaken runs kadi serve with a --metrics-addr another
// process holds, logging in format.
func serveWithMetricsAddrTaken(t *testing.T, format string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var out, errs bytes.Buffer
	code = Main([]string{"serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0", "--metrics-addr", taken.Addr().String(), "--log-format", format}, &out, &errs)
	return code, out.String(), errs.String()
}

// "kadi serving" is logged once every listener is bound: it was logged
// before a --metrics-addr bind that then failed.
func TestServingIsSaidOnlyWhenServing(t *testing.T) {
	code, stdout, stderr := serveWithMetricsAddrTaken(t, "text")
	if code == 0 || !strings.Contains(stderr, "metrics listen") || !strings.Contains(stderr, "pass --metrics-addr with a free address") || strings.Contains(stderr, "kadi serving") || strings.Contains(stdout, "ready") {
		t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// Under --log-format json the line saying why serve stopped is a JSON
// record like every other: it was plain text, which a log pipeline
// reading JSON dropped or mangled.
func TestServeFailureIsAJSONRecord(t *testing.T) {
	code, _, stderr := serveWithMetricsAddrTaken(t, "json")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var last map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		last = nil
		if err := json.Unmarshal([]byte(line), &last); err != nil {
			t.Errorf("not a JSON record: %q", line)
		}
	}
	if last["level"] != "ERROR" || last["msg"] != "kadi serve stopped" || !strings.Contains(fmt.Sprint(last["error"]), "pass --metrics-addr with a free address") {
		t.Errorf("the last record does not say why serve stopped: %v\n%s", last, stderr)
	}
}

// A bad KADI_LOG_FORMAT is named as the variable: it was reported as a
// --log-format nobody had typed.
func TestLogFormatFromTheEnvironmentIsNamed(t *testing.T) {
	t.Setenv("KADI_LOG_FORMAT", "xml")
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0"}, &stdout, &stderr); code != 2 ||
		!strings.Contains(stderr.String(), `KADI_LOG_FORMAT="xml": must be json or text, not "xml"`) {
		t.Errorf("exit %d\n%s", code, stderr.String())
	}
}

// An empty KADI_ADDR listened on every interface, an empty KADI_DATA_DIR
// failed with "mkdir : no such file or directory": both are refused,
// saying which. (An empty variable stays a value: KADI_METRICS_ALLOW=
// means nobody.)
func TestEmptyAddressOrDataDirIsRefused(t *testing.T) {
	for env, want := range map[string]string{"KADI_ADDR": "--addr (KADI_ADDR) is empty", "KADI_DATA_DIR": "--data-dir (KADI_DATA_DIR) is empty"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, "")
			args := []string{"serve"}
			if env == "KADI_ADDR" {
				args = append(args, "--data-dir", t.TempDir())
			} else {
				args = append(args, "--addr", "127.0.0.1:0")
			}
			var stdout, stderr bytes.Buffer
			if code := Main(args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), want) {
				t.Errorf("exit %d\n%s", code, stderr.String())
			}
		})
	}
}

func TestParsePublicURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"https://pay.example", "https://pay.example"},
		{"https://pay.example/", "https://pay.example"},
		{"Https://Pay.Example:8443", "https://pay.example:8443"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://[::1]:8080/", "http://[::1]:8080"},
		{"pay.example.com", "!"},
		{"ftp://pay.example", "!"},
		{"https://", "!"},
		{"https://user@pay.example", "!"},
		{"https://pay.example/pay", "!"},
		{"https://pay.example/?x=1", "!"},
		{"https://pay.example/#top", "!"},
	} {
		got, err := parsePublicURL(tt.in)
		if tt.want == "!" {
			if err == nil {
				t.Errorf("parsePublicURL(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parsePublicURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// Settings that would refuse every bill, trust every client's word for
// its address or show /metrics to everyone are refused at start, saying
// which.
func TestServeRefusesSettingsThatBreakEverything(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-amount", "0"}, "-max-amount: 0 would refuse every bill"},
		{[]string{"--max-amount", "100,UGX=0"}, "-max-amount: UGX=0 would refuse every bill"},
		{[]string{"--max-amount", "100,XYZ=5"}, `"XYZ" is not an ISO 4217 currency code`},
		{[]string{"--max-amount", "100,200"}, "give one figure for every currency"},
		{[]string{"--max-amount", "UGX=5,ugx=6"}, "UGX is given twice"},
		{[]string{"--max-amount", "1e6"}, `"1e6" is not a whole number of major units`},
		{[]string{"--max-amount", "100,JPY=5"}, "--max-amount gives JPY a maximum, and --currencies (KES,USD,EUR,GBP,UGX,TZS,RWF) does not take it"},
		{[]string{"--currencies", "KES,XYZ"}, `"XYZ" is not an ISO 4217 currency code`},
		{[]string{"--trusted-proxies", "10.0.0.1,0.0.0.0/0"}, "0.0.0.0/0 trusts every address"},
		{[]string{"--trusted-proxies", "::/0"}, "::/0 trusts every address"},
		{[]string{"--metrics-allow", "127.0.0.1,0.0.0.0/0"}, "-metrics-allow: 0.0.0.0/0 lets anyone read /metrics"},
		{[]string{"--metrics-allow", "::/0"}, "-metrics-allow: ::/0 lets anyone read /metrics"},
		// Every address in two halves, or written as IPv4-mapped.
		{[]string{"--metrics-allow", "0.0.0.0/1,128.0.0.0/1"}, "-metrics-allow: 0.0.0.0/1 lets anyone read /metrics"},
		{[]string{"--metrics-allow", "::ffff:0.0.0.0/96"}, "-metrics-allow: 0.0.0.0/0 lets anyone read /metrics"},
		{[]string{"--trusted-proxies", "10.0.0.0/8,4000::/2"}, "4000::/2 trusts every address"},
		{[]string{"--public-url", "pay.example.com"}, "must start with https://"},
		{[]string{"--node-name", "web/2"}, `--node-name "web/2" holds a "/"`},
		{[]string{"--nat64-prefixes", "64:ff9b:1:2::/80"}, "its length must be one of RFC 6052's"},
		{[]string{"--nat64-prefixes", "192.0.2.0/24"}, "192.0.2.0/24 is not an IPv6 prefix"},
		{[]string{"--nat64-prefixes", "fd00:64::1:0/96"}, "has bits set past its length (fd00:64::/96?)"},
		{[]string{"--nat64-prefixes", "fd00:64::/32,fd00:64:808:808::/96"}, "overlap"},
		// Settings the gateway would refuse later, with no usage: said as
		// usage mistakes, before anything opens.
		{[]string{"--timezone", "Mars/Olympus"}, `--timezone "Mars/Olympus"`},
		{[]string{"--token-ttl", "48h"}, "a token's lifetime must be between 1s and 24h"},
		{[]string{"--default-region", "ZZ"}, `default region "ZZ"`},
		{[]string{"--ipn-jitter", "5"}, "IPN jitter 5 must be a fraction"},
		{[]string{"--bill-ttl", "0"}, "bill"},
		{[]string{"--drain-delay", "-1s"}, "--drain-delay -1s cannot be negative"},
		{[]string{"--request-timeout", "70s"}, "--request-timeout 1m10s: give between 1s and 50s"},
		{[]string{"--database-wait", "-5s"}, "--database-wait -5s cannot be negative"},
		{[]string{"--database-url", "/etc/passwd"}, "--database-url must be a postgres:// or postgresql:// URL"},
		{[]string{"--request-timeout", "500ms"}, "--request-timeout 500ms: give between 1s and 50s"},
		{[]string{"--request-timeout", "0"}, "--request-timeout (KADI_REQUEST_TIMEOUT) 0: give more than zero"},
		{[]string{"--log-level", "verbose"}, `--log-level "verbose": give debug, info, warn or error`},
		{[]string{"--addr", "nonsense"}, `--addr "nonsense" is not host:port`},
		{[]string{"--form-public-url", "https://checkout.example"}, "--form-public-url is for a hosted form on an address of its own (--form-addr)"},
		{[]string{"--form-addr", "127.0.0.1:0", "--form-public-url", "checkout.example"}, "must start with https://"},
		{[]string{"--addr", "127.0.0.1:99999"}, `--addr "127.0.0.1:99999" is not host:port`},
		{[]string{"--form-addr", "127.0.0.1:0"}, "--form-addr 127.0.0.1:0 leaves the port to the system"},
		{[]string{"--form-addr", "8081"}, `--form-addr "8081" is not host:port`},
		{[]string{"--dashboard-addr", "[::1:8082"}, `--dashboard-addr "[::1:8082" is not host:port`},
		// Zero would silently mean the default.
		{[]string{"--ipn-workers", "0"}, "--ipn-workers (KADI_IPN_WORKERS) 0: give more than zero, or leave it out for the default (256)"},
		{[]string{"--ipn-timeout", "0s"}, "--ipn-timeout (KADI_IPN_TIMEOUT) 0: give more than zero"},
		{[]string{"--db-max-conns", "0"}, "--db-max-conns (KADI_DB_MAX_CONNS) 0: give more than zero"},
	} {
		var stdout, stderr bytes.Buffer
		args := append([]string{"serve", "--data-dir", t.TempDir(), "--addr", "127.0.0.1:0"}, tt.args...)
		// Cancelled: a setting let through stops at once, not serving
		// until the test times out.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := run(ctx, args, &stdout, &stderr); !errors.Is(err, errUsage) || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("kadi serve %v: %v, want a usage error\n%s", tt.args, err, stderr.String())
		}
	}
}

// merchant create into a directory with no database says it made a new
// install (a mistyped --data-dir hands out credentials no gateway knows);
// into an existing one it does not.
func TestMerchantCreateSaysWhenItMadeANewDataDir(t *testing.T) {
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	dir := filepath.Join(t.TempDir(), "data")
	for i, want := range []bool{true, false} {
		var stdout, stderr bytes.Buffer
		if code := Main([]string{"merchant", "create", "--data-dir", dir, "--name", "Shop"}, &stdout, &stderr); code != 0 {
			t.Fatalf("create %d: exit %d %s", i, code, stderr.String())
		}
		if got := strings.Contains(stdout.String(), "This made a NEW data dir, "+dir); got != want {
			t.Errorf("create %d: says it made a new data dir: %v, want %v\n%s", i, got, want, stdout.String())
		}
	}
}

// --data-dir beside --database-url is said to be unused: an operator may
// think it holds the node's state.
func TestDataDirBesideDatabaseURLIsSaidUnused(t *testing.T) {
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	t.Setenv("KADI_DATA_DIR", "")
	os.Unsetenv("KADI_DATA_DIR") // restored by t.Setenv's cleanup
	var stdout, stderr bytes.Buffer
	Main([]string{"serve", "--addr", "127.0.0.1:0", "--database-url", "postgres://127.0.0.1:1/none?connect_timeout=1", "--database-wait", "0", "--data-dir", t.TempDir(), "--log-format", "text"}, &stdout, &stderr)
	if !strings.Contains(stderr.String(), "--data-dir is not used with --database-url") {
		t.Errorf("no warning:\n%s", stderr.String())
	}
	stderr.Reset()
	Main([]string{"serve", "--addr", "127.0.0.1:0", "--database-url", "postgres://127.0.0.1:1/none?connect_timeout=1", "--database-wait", "0", "--log-format", "text"}, &stdout, &stderr)
	if strings.Contains(stderr.String(), "--data-dir is not used") {
		t.Errorf("a warning without --data-dir:\n%s", stderr.String())
	}
}

func TestPrefixListIsAJSONArray(t *testing.T) {
	for _, tt := range []struct {
		ps   []netip.Prefix
		want string
	}{
		{nil, `[]`},
		{[]netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("64:ff9b::/96")}, `["10.0.0.0/8","64:ff9b::/96"]`},
	} {
		var buf bytes.Buffer
		slog.New(slog.NewJSONHandler(&buf, nil)).Info("kadi serving", "trusted_proxies", prefixList(tt.ps))
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if got := string(rec["trusted_proxies"]); got != tt.want {
			t.Errorf("%v logged as %s, want %s", tt.ps, got, tt.want)
		}
	}
}

// A data dir whose lock cannot be taken (a file system without flock, or
// here serve.lock made a directory) is warned of and served, as before the
// lock existed, but not as held, so that its store reads every lookup of a
// bill (another node may be adding bills); one served by another node is
// refused.
func TestLockDataDirWarnsWhenNoLockCanBeTaken(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "serve.lock"), 0o700); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	cfg := server.Defaults()
	cfg.DataDir = dir
	release, held, err := lockDataDir(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || held || !strings.Contains(logs.String(), "cannot lock the data directory") {
		t.Fatalf("an unlockable data dir: held %v, %v\n%s", held, err, logs.String())
	}
	release()

	served := t.TempDir()
	cfg.DataDir = served
	first, held, err := lockDataDir(cfg, slog.New(slog.DiscardHandler))
	if err != nil || !held {
		t.Fatalf("a free data dir: held %v, %v", held, err)
	}
	defer first()
	if _, _, err := lockDataDir(cfg, slog.New(slog.DiscardHandler)); !errors.Is(err, store.ErrDataDirServed) {
		t.Errorf("a data dir already served: %v, want ErrDataDirServed", err)
	}
}

// --metrics-allow, given as a flag or from the environment, also guards
// the --metrics-addr listener's /metrics and profiler: it was silently
// ignored there. Not given, that listener answers anyone, as before.
func TestMetricsAllowGuardsTheMetricsListener(t *testing.T) {
	for _, tt := range []struct {
		name  string
		args  []string
		env   string
		guard bool
	}{
		{"flag", []string{"--metrics-addr", "0.0.0.0:9090", "--metrics-allow", "10.1.0.0/16"}, "", true},
		{"environment", []string{"--metrics-addr", "0.0.0.0:9090"}, "10.1.0.0/16", true},
		{"not given", []string{"--metrics-addr", "0.0.0.0:9090"}, "", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("KADI_METRICS_ALLOW", tt.env)
			}
			cfg := server.Defaults()
			var st storeFlags
			var logs logFlags
			fs := newFlags("serve", io.Discard)
			serveFlags(fs, &cfg, &st, &logs)
			if err := parseFlags(fs, tt.args); err != nil {
				t.Fatal(err)
			}
			want := netip.MustParsePrefix("127.0.0.0/8")
			if tt.guard {
				want = netip.MustParsePrefix("10.1.0.0/16")
			}
			if cfg.GuardMetricsAddr != tt.guard || len(cfg.MetricsAllow) == 0 || cfg.MetricsAllow[0] != want {
				t.Errorf("GuardMetricsAddr %t, MetricsAllow %v; want %t, %v first", cfg.GuardMetricsAddr, cfg.MetricsAllow, tt.guard, want)
			}
		})
	}
}
