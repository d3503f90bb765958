package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/config"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/server"
	"github.com/kadipay/kadi/internal/store"
)

// serveFlags binds `kadi serve`'s flags onto a server.Config.
func serveFlags(fs *flag.FlagSet, cfg *server.Config, st *storeFlags, logs *logFlags) {
	st.register(fs)
	fs.StringVar(&cfg.Addr, "addr", cfg.Addr, "listen address for the API, the hosted form and /healthz")
	fs.Func("public-url", "the URL merchants and customers reach this gateway at, https://host[:port] (default http://ADDR)", func(v string) error {
		u, err := parsePublicURL(v)
		cfg.PublicURL = u
		return err
	})
	fs.BoolVar(&cfg.AllowPrivateIPN, "allow-private-ipn", false, "let test-mode IPN reach loopback and private addresses (local development)")
	fs.DurationVar(&cfg.TokenTTL, "token-ttl", cfg.TokenTTL, "access token lifetime")
	fs.DurationVar(&cfg.Bills.TTL, "bill-ttl", cfg.Bills.TTL, "how long an unpaid bill stays payable when it names no order.expiry")
	fs.DurationVar(&cfg.Bills.MaxTTL, "bill-max-ttl", cfg.Bills.MaxTTL, "the latest order.expiry a bill may name, from its creation")
	fs.Func("max-amount", fmt.Sprintf("largest bill amount, in major units, for every currency, then any currency's own as CODE=N: 10000000,UGX=40000000000 (default %d)", cfg.Bills.MaxAmount), func(v string) error {
		return parseMaxAmount(v, &cfg.Bills)
	})
	fs.Func("currencies", "comma-separated ISO 4217 codes bills may use (default "+strings.Join(cfg.Bills.Currencies, ",")+")", func(v string) error {
		cfg.Bills.Currencies = strings.Split(strings.ToUpper(strings.ReplaceAll(v, " ", "")), ",")
		for _, c := range cfg.Bills.Currencies {
			if _, ok := money.LookupCurrency(c); !ok {
				return fmt.Errorf("%q is not an ISO 4217 currency code", c)
			}
		}
		return nil
	})
	fs.StringVar(&cfg.FormAddr, "form-addr", "", "serve the hosted form ({payment_form_url}) on this address only (default: beside the API)")
	fs.Func("form-public-url", "with --form-addr: the URL shoppers' browsers reach the hosted form at, shown to merchants as where their checkout posts (default: --public-url, a proxy routing /cardPay to --form-addr; without --public-url, http://FORM-ADDR)", func(v string) error {
		u, err := parsePublicURL(v)
		cfg.FormPublicURL = u
		return err
	})
	fs.StringVar(&cfg.DashboardAddr, "dashboard-addr", "", "serve the merchant dashboard (/dashboard/) on this address only (default: beside the API)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve /metrics on this address only, off the public listener (default: beside the API)")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", cfg.RequestTimeout, "how long a request may take in all, what it waits for the database included; past it the client is answered 503 with when to come back (at most 50s; the CSV export and the health probes are not bound by it)")
	fs.DurationVar(&cfg.DrainDelay, "drain-delay", cfg.DrainDelay, "on SIGTERM, answer /readyz 503 this long before closing the listeners, so a load balancer probing /readyz stops sending first (a little over its probe interval)")
	fs.DurationVar(&cfg.MetricsRefresh, "metrics-refresh", cfg.MetricsRefresh, "how often gauges read from the database (IPN queue) are refreshed; scrapes read the last values")
	fs.Func("metrics-allow", "comma-separated CIDRs or addresses that may read /metrics beside the API (default 127.0.0.0/8,::1; empty: nobody); given with --metrics-addr, the peers that listener's /metrics and profiler answer (not given, it answers anyone who reaches it)", func(v string) error {
		allow, err := parsePrefixes(v)
		if err != nil {
			return err
		}
		if p, ok := everyAddress(allow); ok {
			// /metrics tells the business's volumes; a scraper from
			// anywhere belongs on its own listener.
			return fmt.Errorf("%s lets anyone read /metrics (a prefix here is at most as wide as a private network: /8 for IPv4, /7 for IPv6): name your scrapers' addresses or subnets, or serve metrics on a private --metrics-addr", p)
		}
		cfg.MetricsAllow, cfg.GuardMetricsAddr = allow, true
		return nil
	})
	fs.Func("trusted-proxies", "comma-separated CIDRs or addresses of reverse proxies whose X-Forwarded-For or Forwarded header names the client (default none: the socket's peer is the client)", func(v string) error {
		trusted, err := parsePrefixes(v)
		if err != nil {
			return err
		}
		if p, ok := everyAddress(trusted); ok {
			// Every client could then name its own address: the
			// per-address throttles and lockouts would count nothing.
			return fmt.Errorf("%s trusts every address (a prefix here is at most as wide as a private network: /8 for IPv4, /7 for IPv6): name your proxies' own addresses or subnets", p)
		}
		cfg.TrustedProxies = trusted
		return nil
	})
	nat64Flag(fs, &cfg.IPN.NAT64Prefixes)
	fs.StringVar(&cfg.TimeZone, "timezone", cfg.TimeZone, "IANA time zone of dates in callbacks, IPN and the dashboard, and of an order.expiry without an offset")
	fs.StringVar(&cfg.DefaultRegion, "default-region", cfg.DefaultRegion, "region (ISO 3166 alpha-2) whose national form customers' mobile numbers may use, e.g. 0712345678 in KE")
	fs.IntVar(&cfg.IPN.Workers, "ipn-workers", cfg.IPN.Workers, "IPN requests in flight at once on this node")
	fs.IntVar(&cfg.IPN.PerEndpoint, "ipn-per-merchant", cfg.IPN.PerEndpoint, "of those, at most this many to one merchant and mode, so a slow receiver holds only its own")
	fs.DurationVar(&cfg.IPN.Timeout, "ipn-timeout", cfg.IPN.Timeout, "an IPN receiver must answer 2xx within this")
	fs.Var(&cfg.IPN.Schedule, "ipn-retry-schedule", "comma-separated waits before each IPN retry; the first attempt is immediate, and after the last wait the event is failed")
	fs.Float64Var(&cfg.IPN.Jitter, "ipn-jitter", cfg.IPN.Jitter, "random spread of each retry wait, as a fraction (0.2 is ±20%)")
	fs.DurationVar(&cfg.IPN.MaxRetryAfter, "ipn-max-retry-after", cfg.IPN.MaxRetryAfter, "longest wait a receiver's Retry-After can ask for")
	fs.DurationVar(&cfg.IPN.Poll, "ipn-poll", cfg.IPN.Poll, "how often the IPN queue is checked for due notifications")
	fs.DurationVar(&cfg.IPN.Lease, "ipn-lease", cfg.IPN.Lease, "how long a node's claim on a notification keeps others off it unless renewed; renewed every third of it while the delivery runs, so a dead node's notifications move on within one lease")
	fs.StringVar(&cfg.NodeName, "node-name", "", "this node's name among the nodes sharing the database, the same across its restarts, so that after a crash it settles its payments left in flight at once (default: the host name and the API's address)")
	fs.IntVar(&cfg.DBPool.MaxConns, "db-max-conns", cfg.DBPool.MaxConns, "PostgreSQL: connections this node keeps at most, all kept open while in use; the default is 4 per core, at least 8")
	fs.DurationVar(&cfg.DatabaseWait, "database-wait", cfg.DatabaseWait, "PostgreSQL: at start, wait this long for a database that does not accept connections yet (starting, failing over, all its connections taken), saying so in the log; 0 fails at once")
	fs.DurationVar(&cfg.DBPool.MaxIdleTime, "db-conn-idle-time", cfg.DBPool.MaxIdleTime, "PostgreSQL: close a connection unused this long")
	fs.DurationVar(&cfg.DBPool.MaxLifetime, "db-conn-lifetime", cfg.DBPool.MaxLifetime, "PostgreSQL: replace every connection after this long (to follow a failover or a pooler)")
	fs.StringVar(&logs.level, "log-level", "info", "debug, info, warn or error")
	// Checked as it is set, so that a bad KADI_LOG_FORMAT is named as
	// the variable, not as a flag nobody typed.
	fs.Func("log-format", "json or text (default: text when stderr is a terminal, json otherwise)", func(v string) error {
		if v != "json" && v != "text" {
			return fmt.Errorf("must be json or text, not %q", v)
		}
		logs.format = v
		return nil
	})
}

// zeroMeansDefault are the flags whose zero value the gateway reads as
// "the default": given as 0 on the command line, it is a mistake to say,
// not a default to take silently.
var zeroMeansDefault = []string{"ipn-workers", "ipn-per-merchant", "ipn-timeout", "ipn-poll", "ipn-lease", "ipn-max-retry-after", "db-max-conns", "request-timeout"}

// zeroGiven refuses one of zeroMeansDefault set to zero.
func zeroGiven(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		if v := f.Value.String(); err == nil && slices.Contains(zeroMeansDefault, f.Name) && (v == "0" || v == "0s") {
			def := f.DefValue
			if def == "0" {
				def = "chosen by the machine"
			}
			err = fmt.Errorf("--%s (%s) 0: give more than zero, or leave it out for the default (%s)", f.Name, config.EnvName(f.Name), def)
		}
	})
	return err
}

// logFlags are how a long-running command logs.
type logFlags struct{ level, format string }

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	cfg := server.Defaults()
	var st storeFlags
	var logs logFlags
	fs := newFlags("serve", stderr)
	serveFlags(fs, &cfg, &st, &logs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg.DataDir, cfg.DatabaseURL = st.dataDir, st.databaseURL
	if err := zeroGiven(fs); err != nil {
		return usageErr(fs, err)
	}
	if err := cfg.Check(); err != nil {
		return usageErr(fs, err)
	}
	if err := checkMaxAmounts(cfg.Bills); err != nil {
		return usageErr(fs, err)
	}
	// Empty, as KADI_ADDR= or KADI_DATA_DIR= leave them: an empty address
	// listened on every interface, an empty data dir failed with
	// "mkdir : no such file or directory".
	switch {
	case strings.TrimSpace(cfg.Addr) == "":
		return usageErr(fs, errors.New("--addr (KADI_ADDR) is empty: give host:port, e.g. 127.0.0.1:8080"))
	case cfg.DatabaseURL == "" && strings.TrimSpace(cfg.DataDir) == "":
		return usageErr(fs, errors.New("--data-dir (KADI_DATA_DIR) is empty: give the data directory, or --database-url"))
	case cfg.FormPublicURL != "" && cfg.FormAddr == "":
		return usageErr(fs, errors.New("--form-public-url is for a hosted form on an address of its own (--form-addr); beside the API it is at --public-url"))
	case strings.Contains(cfg.NodeName, "/"):
		// A node's runs are named NAME/RUN: a node "web" would take the
		// payments in flight of a node "web/2" for its own earlier run's,
		// and settle them while that node was still charging them.
		return usageErr(fs, fmt.Errorf("--node-name %q holds a \"/\": name the node without one, e.g. web-2", cfg.NodeName))
	}
	for _, a := range []struct{ flag, addr string }{{"--addr", cfg.Addr}, {"--form-addr", cfg.FormAddr}, {"--dashboard-addr", cfg.DashboardAddr}, {"--metrics-addr", cfg.MetricsAddr}} {
		if err := checkListenAddr(a.flag, a.addr); err != nil {
			return usageErr(fs, err)
		}
	}
	log, err := newLogger(stderr, logs)
	if err != nil {
		return usageErr(fs, err)
	}
	if format, _ := logFormat(logs.format, stderr); format == "json" {
		// The line saying why the node stopped is one more record for
		// the log processor: written as plain text, a JSON pipeline
		// dropped or mangled the one line that mattered.
		defer func() {
			if err != nil {
				log.Error("kadi serve stopped", "error", err.Error())
				err = loggedError{err}
			}
		}()
	}
	tuneCollector(log)
	dataDirGiven := false
	fs.Visit(func(f *flag.Flag) { dataDirGiven = dataDirGiven || f.Name == "data-dir" })
	if cfg.DatabaseURL != "" && dataDirGiven {
		// Nothing reads it then (the key ring comes from KADI_SECRET_KEY
		// or KADI_SECRET_KEY_FILE): said, in case the operator thinks it
		// holds the node's state.
		log.Warn("--data-dir is not used with --database-url: the database holds the state, and the key ring comes from KADI_SECRET_KEY_FILE or KADI_SECRET_KEY", "data_dir", cfg.DataDir)
	}
	release, held, err := lockDataDir(cfg, log)
	if err != nil {
		return err
	}
	cfg.DataDirHeld = held
	defer release()
	ln, err := listen(cfg.Addr, "kadi serve", "--addr")
	if err != nil {
		return err
	}
	if cfg.PublicURL == "" && cfg.FormAddr != "" && cfg.FormPublicURL == "" {
		// Local use, as the API's own URL below: the form's listener is
		// bound later, so its address is read from the flag.
		if cfg.FormPublicURL = localAddrURL(cfg.FormAddr); cfg.FormPublicURL == "" {
			return usageErr(fs, fmt.Errorf("--form-addr %s leaves the port to the system, and the dashboard could not tell merchants where the form is: give a port, or --form-public-url", cfg.FormAddr))
		}
	}
	if cfg.PublicURL == "" {
		var everywhere bool
		cfg.PublicURL, everywhere = localURL(ln)
		if everywhere {
			log.Warn("listening on every interface without --public-url: pages and links name " + cfg.PublicURL + "; pass --public-url with the address merchants and shoppers reach")
		}
	}
	// Said once every listener is bound: said before, it was logged even
	// when a --metrics-addr or --form-addr bind then failed.
	cfg.Ready = func(line string) {
		log.Info("kadi serving", "addr", ln.Addr().String(), "public_url", cfg.PublicURL, "database", redactURL(server.DatabaseURL(cfg.DataDir, cfg.DatabaseURL)),
			"trusted_proxies", prefixList(cfg.TrustedProxies), "nat64_prefixes", prefixList(cfg.IPN.NAT64Prefixes))
		fmt.Fprintln(stdout, line)
	}
	// Waiting for the database and migrating can take a while: probes
	// and clients meanwhile hear "starting", not silence.
	stopStarting := server.AnswerWhileStarting(ln)
	g, err := server.New(ctx, cfg, log)
	stopStarting()
	if err != nil {
		ln.Close()
		return err
	}
	defer g.Close()
	return g.Serve(ctx, ln)
}

// localURL is a listener's http URL as this machine reaches it, and
// whether it listens on every interface (0.0.0.0, ::), which no browser
// can be sent to: that one is named localhost.
func localURL(ln net.Listener) (string, bool) {
	a, ok := ln.Addr().(*net.TCPAddr)
	return localAddrURL(ln.Addr().String()), ok && a.IP.IsUnspecified()
}

// checkMaxAmounts refuses a currency's own maximum for a currency bills
// may not use: a mistyped code, or one --currencies left out.
func checkMaxAmounts(p bill.Policy) error {
	for code := range p.MaxAmountIn {
		if !slices.Contains(p.Currencies, code) {
			return fmt.Errorf("--max-amount gives %s a maximum, and --currencies (%s) does not take it", code, strings.Join(p.Currencies, ","))
		}
	}
	return nil
}

// parseMaxAmount reads --max-amount: one figure for every currency, and
// any currency's own as CODE=N, in major units.
func parseMaxAmount(v string, p *bill.Policy) error {
	p.MaxAmountIn = nil
	all := false
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		code, figure, own := strings.Cut(f, "=")
		if !own {
			code, figure = "", f
		}
		code = strings.ToUpper(strings.TrimSpace(code))
		n, err := strconv.ParseInt(strings.TrimSpace(figure), 10, 64)
		switch {
		case err != nil:
			return fmt.Errorf("%q is not a whole number of major units: give e.g. 10000000 or UGX=40000000000", f)
		case n < 1:
			return fmt.Errorf("%s would refuse every bill: give the largest amount in major units, e.g. 1000000", f)
		case !own && all:
			return errors.New("give one figure for every currency, and CODE=N for a currency of its own")
		case !own:
			p.MaxAmount, all = n, true
			continue
		}
		if _, ok := money.LookupCurrency(code); !ok {
			return fmt.Errorf("%q is not an ISO 4217 currency code", code)
		}
		if _, dup := p.MaxAmountIn[code]; dup {
			return fmt.Errorf("%s is given twice", code)
		}
		if p.MaxAmountIn == nil {
			p.MaxAmountIn = map[string]int64{}
		}
		p.MaxAmountIn[code] = n
	}
	return nil
}

// localAddrURL is addr's http:// URL for a browser on this host (every
// interface, which no browser can be sent to, is localhost), or "" when
// its port is the system's to pick (0 or none).
func localAddrURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	n, err := net.LookupPort("tcp", port) // a service name, https, is its number
	if err != nil || n == 0 {
		return ""
	}
	port = strconv.Itoa(n)
	if ip, err := netip.ParseAddr(host); host == "" || err == nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// parsePublicURL reads --public-url: an absolute http or https URL of a
// host, with no path (the pages' links are absolute from /), query or
// fragment; scheme and host in lower case and no trailing slash, so that
// links read "https://pay.example/dashboard/" and an https URL however it
// is written makes the dashboard's cookies Secure.
func parsePublicURL(v string) (string, error) {
	if strings.TrimSpace(v) == "" {
		return "", nil // http://ADDR, as without the flag
	}
	u, err := url.Parse(strings.TrimSpace(v))
	if err != nil {
		return "", fmt.Errorf("%q is not a URL: %w", v, err)
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", fmt.Errorf("%q must start with https:// (or http:// for local use)", v)
	case u.Host == "" || u.User != nil:
		return "", fmt.Errorf("%q must name a host, and no user", v)
	case strings.TrimSuffix(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", fmt.Errorf("%q must be the gateway's root: no path, query or fragment (its pages link from /)", v)
	}
	return scheme + "://" + strings.ToLower(u.Host), nil
}

// parsePrefixes reads "10.0.0.0/8, 192.0.2.7, ::1": a bare address is a
// prefix of one.
func parsePrefixes(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, unmapped(p).Masked())
		} else if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, unmapped(netip.PrefixFrom(a, a.BitLen())))
		} else {
			return nil, fmt.Errorf("%q is neither a CIDR prefix nor an IP address", f)
		}
	}
	return out, nil
}

// nat64Flag binds --nat64-prefixes onto ps: kadi serve's, which its
// deliveries follow, and set-ipn's, whose check of a URL should agree.
func nat64Flag(fs *flag.FlagSet, ps *[]netip.Prefix) {
	fs.Func("nat64-prefixes", "comma-separated NAT64 prefixes of this network beside the well-known 64:ff9b::/96 (RFC 6052 lengths, /32 to /96): an IPN receiver's address in one is judged by the IPv4 address it carries, so that none reaches a private IPv4 host through the translator", func(v string) error {
		// Not parsePrefixes: it masks, and a prefix mistyped with bits
		// past its length is better refused than read as another.
		var parsed []netip.Prefix
		for _, f := range strings.Split(v, ",") {
			if f = strings.TrimSpace(f); f == "" {
				continue
			}
			p, err := netip.ParsePrefix(f)
			if err != nil {
				return fmt.Errorf("%q is not a CIDR prefix", f)
			}
			parsed = append(parsed, p)
		}
		if err := ipn.CheckNAT64Prefixes(parsed); err != nil {
			return err
		}
		*ps = parsed
		return nil
	})
}

// checkListenAddr refuses a listening address that cannot be one, as a
// usage mistake said before anything opens (it was a failed start, exit
// 1, once the data dir was locked and the store open). Empty is "not
// given"; a port may be a service name, which only listening can judge.
func checkListenAddr(name, addr string) error {
	if addr == "" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if n, perr := strconv.Atoi(port); perr == nil && (n < 0 || n > 65535) {
			err = errors.New("no such port")
		}
	}
	if err != nil {
		return fmt.Errorf("%s %q is not host:port (e.g. 127.0.0.1:8080, :8080, [::1]:8080)", name, addr)
	}
	return nil
}

// unmapped reads an IPv4-mapped IPv6 prefix (::ffff:10.0.0.0/104) as the
// IPv4 one it means: clients' addresses are compared unmapped, so written
// as mapped it would match nobody.
func unmapped(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// everyAddress returns the prefix of ps wider than any private network
// (10.0.0.0/8, fc00::/7), if one is: such a prefix holds the Internet's
// addresses, and 0.0.0.0/1,128.0.0.0/1 is every address as surely as
// 0.0.0.0/0.
func everyAddress(ps []netip.Prefix) (netip.Prefix, bool) {
	for _, p := range ps {
		if p.Addr().Is4() && p.Bits() < 8 || p.Addr().Is6() && p.Bits() < 7 {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// The Go runtime's collector settings when the environment sets none.
// Each password check allocates 19 MiB that is garbage a moment later;
// without a limit the collector lets a login storm's garbage pile up
// before it runs, and near the limit it collects sooner, which keeps a
// node's footprint predictable (docs/security.md). Under the limit the
// collector runs when the heap has grown to five times what it kept, not
// twice (GOGC=100): a request leaves little behind (about 4 MB live under
// load), so at 100 the collector ran some thirty times a second to hold
// the heap under 8 MB of a 150 MB budget, for 5-9 % of the gateway's CPU
// (docs/performance.md).
const (
	defaultMemoryLimit = 96 << 20
	defaultGCPercent   = 400
)

// collectorSettings is what tuneCollector sets: zero leaves a setting to
// the environment variable that names it.
func collectorSettings(getenv func(string) string) (gcPercent int, memoryLimit int64) {
	if getenv("GOGC") == "" {
		gcPercent = defaultGCPercent
	}
	if getenv("GOMEMLIMIT") == "" {
		memoryLimit = defaultMemoryLimit
	}
	return gcPercent, memoryLimit
}

func tuneCollector(log *slog.Logger) {
	gcPercent, memoryLimit := collectorSettings(os.Getenv)
	if memoryLimit != 0 {
		debug.SetMemoryLimit(memoryLimit)
	}
	if gcPercent != 0 {
		debug.SetGCPercent(gcPercent)
	}
	log.Debug("garbage collector", "gc_percent", gcPercent, "memory_limit", memoryLimit)
}

func newLogger(w io.Writer, f logFlags) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(f.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: give debug, info, warn or error", f.level)
	}
	format, err := logFormat(f.format, w)
	if err != nil {
		return nil, err
	}
	if format == "text" {
		return logging.NewText(w, l), nil
	}
	return logging.New(w, l), nil
}

// logFormat is the format asked for, or by default the one that suits
// where the log goes.
func logFormat(asked string, w io.Writer) (string, error) {
	switch asked {
	case "json", "text":
		return asked, nil
	case "":
		if isTerminal(w) {
			return "text", nil
		}
		return "json", nil
	}
	return "", fmt.Errorf("--log-format must be json or text, not %q", asked)
}

// isTerminal reports whether w is a character device: someone reading at a
// terminal, rather than a file, a pipe or journald's socket, which get JSON
// for their log processors. (/dev/null is one too; nobody reads it.)
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// redactURL hides the passwords in a database URL before it is printed or
// logged: pgx takes one in the URL's user info, in its query
// (password=, sslpassword=) and in a keyword/value string.
func redactURL(dsn string) string {
	const hidden = "REDACTED"
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" && u.Host != "" {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), hidden)
		}
		q := u.Query()
		for _, k := range []string{"password", "sslpassword"} {
			if q.Has(k) {
				q.Set(k, hidden)
				u.RawQuery = q.Encode()
			}
		}
		return u.String()
	}
	if at := strings.LastIndex(dsn, "@"); at > 0 {
		if scheme := strings.Index(dsn, "://"); scheme > 0 && scheme < at {
			return dsn[:scheme+3] + "…" + dsn[at:] // a URL that does not parse
		}
	}
	return dsnPassword.ReplaceAllString(dsn, "${1}="+hidden)
}

// dsnPassword is a password in a keyword/value connection string, quoted
// or not.
var dsnPassword = regexp.MustCompile(`(?i)\b((?:ssl)?password)\s*=\s*(?:'(?:[^'\\]|\\.)*'|\S+)`)

// prefixList is ps as the start line logs them: a list, in JSON an array
// (never null), where log pipelines can search each prefix. They were one
// string, "[10.0.0.0/8 192.168.0.0/16]".
func prefixList(ps []netip.Prefix) []string {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// lockDataDir holds an embedded store's data dir for this node before
// anything opens it (store.LockDataDir), and does nothing on PostgreSQL;
// held says whether it does. A file system that takes no lock is warned
// of, not refused: such a node started before the lock existed.
func lockDataDir(cfg server.Config, log *slog.Logger) (release func(), held bool, err error) {
	if cfg.DatabaseURL != "" {
		return func() {}, false, nil
	}
	release, err = store.LockDataDir(cfg.DataDir)
	switch {
	case errors.Is(err, store.ErrDataDirServed):
		return nil, false, err
	case err != nil:
		log.Warn("cannot lock the data directory, so a second node on it would not be refused: run one kadi serve on it", "data_dir", cfg.DataDir, "err", err)
		return func() {}, false, nil
	}
	return release, store.DataDirLocks, nil
}
