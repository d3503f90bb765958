// Package server assembles the gateway from its parts and serves it: the
// API, the hosted pages, the health check and the metrics on one listener,
// with the background work (revocation refresh, payment reconciliation,
// IPN delivery).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	_ "time/tzdata" // the operator's zone must resolve on minimal hosts too

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/api"
	"github.com/kadipay/kadi/internal/apidocs"
	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/clientaddr"
	"github.com/kadipay/kadi/internal/dashboard"
	"github.com/kadipay/kadi/internal/form"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/keyring"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/metrics"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/phone"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/store"
)

// DefaultRequestTimeout is a request's time, under the servers' 60 s
// write timeout with the acquirer's 30 s beside it.
const DefaultRequestTimeout = 20 * time.Second

// MaxRequestTimeout leaves a request's answer time under the servers' 60 s
// write timeout, past which its client would get a closed connection
// instead of the 503 saying when to come back.
const MaxRequestTimeout = 50 * time.Second

// Config is everything `kadi serve` can be told.
type Config struct {
	Addr        string
	DataDir     string
	DatabaseURL string     // empty: SQLite in DataDir
	DBPool      store.Pool // PostgreSQL's connection pool
	// DatabaseWait is how long a start waits for a PostgreSQL server that
	// does not accept connections yet (store.WithStartWait); 0 fails at
	// once.
	DatabaseWait time.Duration
	// DataDirHeld: the caller holds DataDir (store.LockDataDir), so this
	// node is the only one adding bills to its SQLite store
	// (store.WithDataDirHeld).
	DataDirHeld bool
	// RequestTimeout bounds a request's handling, what it waits for the
	// database included (0: DefaultRequestTimeout); a charge and its
	// record keep their own time (payment.Service).
	RequestTimeout time.Duration
	// NodeName names this node among those sharing the database, the
	// same across its restarts (default: the host and the API's address).
	NodeName        string
	PublicURL       string
	AllowPrivateIPN bool
	TokenTTL        time.Duration
	Bills           bill.Policy
	TimeZone        string
	MasterKey       []byte // empty: from KADI_SECRET_KEY(_FILE), else DataDir/secret.key
	// LiveAcquirer is the connector for live mode; nil refuses live charges.
	LiveAcquirer payment.Acquirer
	// RevocationPoll is how often each node reloads revoked keys.
	RevocationPoll time.Duration
	// FormAddr, when set, serves the hosted form (/cardPay and its pages)
	// on its own listener instead of beside the API.
	FormAddr string
	// FormPublicURL is where shoppers' browsers reach a form served on
	// FormAddr (empty: PublicURL, a proxy routing /cardPay there by path).
	// Merchants are shown it as the address their form posts to.
	FormPublicURL string
	// DashboardAddr, when set, serves the merchant dashboard (/dashboard/)
	// on its own listener instead of beside the API.
	DashboardAddr string
	// MetricsAddr, when set, serves /metrics on its own listener (keep it
	// private) instead of beside the public API.
	MetricsAddr string
	// MetricsAllow are the peers /metrics answers beside the API; anyone
	// else gets the 404 of an unknown path. Business volume is nobody
	// else's business.
	MetricsAllow []netip.Prefix
	// GuardMetricsAddr: MetricsAllow also names the peers MetricsAddr's
	// /metrics and profiler answer. Off, that listener answers whoever
	// reaches it. Its /livez and /readyz answer anyone either way: a
	// kubelet probes them from the node's address.
	GuardMetricsAddr bool
	// TrustedProxies are the reverse proxies whose X-Forwarded-For or
	// Forwarded header names the client (for throttle, lockout, audit and
	// logs); from anyone else the socket's peer is the client. None by
	// default: a header anyone can send must not pick the address counted.
	TrustedProxies []netip.Prefix
	// MetricsRefresh is how often gauges read from the database are
	// brought up to date; scrapes read the last values.
	MetricsRefresh time.Duration
	// DrainDelay is how long a shutdown answers /readyz 503 before it
	// closes the listeners, so that a load balancer probing /readyz stops
	// sending first.
	DrainDelay time.Duration
	// IPN tunes notification delivery; its AllowPrivate is taken from
	// AllowPrivateIPN.
	IPN ipn.Config
	// DefaultRegion reads customers' mobile numbers in national form.
	DefaultRegion string
	// Now is the clock (nil: time.Now); tests move it.
	Now func() time.Time
	// Ready, when set, hears one plain line once every listener is up:
	// what each address serves and where the data lives.
	Ready func(line string)
}

// Defaults returns the configuration docs/operations.md describes.
func Defaults() Config {
	return Config{
		Addr: "127.0.0.1:8080", DataDir: "kadi-data", TokenTTL: time.Hour, Bills: bill.DefaultPolicy(),
		TimeZone: "Africa/Nairobi", DefaultRegion: "KE", RevocationPoll: time.Second, IPN: ipn.DefaultConfig(),
		MetricsAllow:   []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		MetricsRefresh: 10 * time.Second, DBPool: store.DefaultPool(), DatabaseWait: time.Minute,
		RequestTimeout: DefaultRequestTimeout,
	}
}

// DatabaseURL says which database a data dir and URL select.
func DatabaseURL(dataDir, url string) string {
	if url != "" {
		return url
	}
	return filepath.Join(dataDir, "kadi.db")
}

// CheckDatabaseURL refuses a --database-url that is not a PostgreSQL URL.
// The store reads anything else as a SQLite file's path: a keyword/value
// string ("host=… password=… dbname=…") became a local file named after it,
// password and all, a database of each node's own.
func CheckDatabaseURL(url string) error {
	if url == "" || strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		return nil
	}
	return errors.New("--database-url must be a postgres:// or postgresql:// URL (lower case; keyword/value strings such as \"host=… dbname=…\" are not read): for the embedded SQLite, leave it out and use --data-dir")
}

// OpenStore opens (creating if need be) the configured database, with
// secrets sealed under the master key found as `kadi serve` finds it: the
// CLI and the server must agree on it.
func OpenStore(ctx context.Context, dataDir, url string, opts ...store.Option) (*store.DB, error) {
	keys, err := keyRing(Config{DataDir: dataDir, DatabaseURL: url})
	if err != nil {
		return nil, err
	}
	return OpenStoreWithKeys(ctx, dataDir, url, keys, opts...)
}

// OpenStoreWithKeys opens the database with secrets sealed under keys.
func OpenStoreWithKeys(ctx context.Context, dataDir, url string, keys *keyring.Keyring, opts ...store.Option) (*store.DB, error) {
	return openStore(ctx, dataDir, url, keys, store.DefaultPool(), opts...)
}

func openStore(ctx context.Context, dataDir, url string, keys *keyring.Keyring, pool store.Pool, opts ...store.Option) (*store.DB, error) {
	if err := CheckDatabaseURL(url); err != nil {
		return nil, err
	}
	if url == "" {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
	}
	sealer, err := secret.NewRingSealer(keys.Purpose("sealed-secrets"))
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, DatabaseURL(dataDir, url), append([]store.Option{store.WithSealer(sealer), store.WithPool(pool)}, opts...)...)
}

// MetricsListener is what --metrics-addr serves: /metrics and Go's
// profiler (/debug/pprof/), so anyone who runs a node can profile it live.
// The profiler is never on a public listener: it shows the process's
// memory and stacks. Its command line is left out: a --database-url holds
// the database's password, and whoever may scrape metrics need not read it.
func (g *Gateway) MetricsListener() http.Handler {
	mux := http.NewServeMux()
	guard := func(h http.HandlerFunc) http.Handler { return h }
	if g.cfg.GuardMetricsAddr {
		addrs := clientaddr.NewResolver(g.cfg.TrustedProxies)
		guard = func(h http.HandlerFunc) http.Handler {
			return onlyFrom(g.cfg.MetricsAllow, addrs, h, http.HandlerFunc(http.NotFound))
		}
	}
	mux.Handle("GET /metrics", guard(g.metricsHandler.ServeHTTP))
	mux.Handle("GET /readyz", g.ready)
	mux.HandleFunc("GET /livez", live)
	mux.Handle("GET /debug/pprof/", guard(pprof.Index))
	mux.Handle("GET /debug/pprof/profile", guard(pprof.Profile))
	mux.Handle("GET /debug/pprof/symbol", guard(pprof.Symbol))
	mux.Handle("GET /debug/pprof/trace", guard(pprof.Trace))
	// A scrape configured with a base URL ending in a slash asks for
	// //metrics: answered as /metrics, as the API's paths are, not a 307
	// that a scraper reports as a failed target.
	return withCleanPath(mux)
}

// Gateway is a running configuration: its store, services and handler.
type Gateway struct {
	Store    *store.DB
	Auth     *auth.Service
	Bills    *bill.Service
	Payments *payment.Service
	IPN      *ipn.Worker
	Metrics  *metrics.Registry
	Handler  http.Handler
	// FormHandler serves the hosted form: the same as Handler unless
	// Config.FormAddr gives the form a listener of its own.
	FormHandler http.Handler
	// DashboardHandler serves the dashboard: the same as Handler unless
	// Config.DashboardAddr gives it a listener of its own.
	DashboardHandler http.Handler

	metricsHandler http.Handler
	ready          *readiness
	draining       atomic.Bool // a shutdown began: /readyz answers 503
	ipnMetrics     *ipn.Metrics
	keys           *keyring.Keyring
	// peerKeys is the last check of this node's ring against the keys
	// the other nodes sign with (watchNodeKeys); nil: it holds them all.
	peerKeys        atomic.Pointer[keyring.LackingError]
	peerKeysMissing prometheus.Gauge
	// soleName: this node's last publishes found no other run's mark on
	// its name's row (watchNodeKeys); nameShared counts it for /metrics.
	soleName   atomic.Bool
	nameShared prometheus.Gauge
	cfg        Config
	log        *slog.Logger
}

// Check refuses settings that cannot work, before anything is opened:
// kadi serve says so as a usage mistake.
func (cfg Config) Check() error {
	_, err := cfg.checked()
	return err
}

// checked is Check, returning the operator's time zone it read.
func (cfg Config) checked() (*time.Location, error) {
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("--timezone %q: %w", cfg.TimeZone, err)
	}
	if cfg.TokenTTL < time.Second || cfg.TokenTTL > auth.MaxTokenTTL {
		return nil, fmt.Errorf("--token-ttl %s: a token's lifetime must be between 1s and %s", cfg.TokenTTL, auth.MaxTokenTTL)
	}
	if err := cfg.IPN.Validate(); err != nil {
		return nil, err
	}
	if cfg.MetricsRefresh <= 0 {
		return nil, errors.New("the metrics refresh interval must be positive")
	}
	if cfg.RequestTimeout != 0 && (cfg.RequestTimeout < time.Second || cfg.RequestTimeout > MaxRequestTimeout) {
		return nil, fmt.Errorf("--request-timeout %s: give between 1s and %s (the servers' write timeout is 60 s)", cfg.RequestTimeout, MaxRequestTimeout)
	}
	if cfg.DatabaseWait < 0 {
		return nil, fmt.Errorf("--database-wait %s cannot be negative: give 0 to fail at once", cfg.DatabaseWait)
	}
	if err := CheckDatabaseURL(cfg.DatabaseURL); err != nil {
		return nil, err
	}
	if cfg.DrainDelay < 0 {
		return nil, fmt.Errorf("--drain-delay %s cannot be negative", cfg.DrainDelay)
	}
	cfg.Bills.Location = loc
	if err := cfg.Bills.Check(); err != nil {
		return nil, err
	}
	if p := cfg.DBPool; p.MaxConns < 0 || p.MaxIdleTime < 0 || p.MaxLifetime < 0 {
		return nil, fmt.Errorf("database pool: --db-max-conns, --db-conn-idle-time and --db-conn-lifetime cannot be negative")
	}
	if !phone.ValidRegion(cfg.DefaultRegion) {
		return nil, fmt.Errorf("default region %q is not a two-letter region of the numbering plan (KE, UG, TZ, …)", cfg.DefaultRegion)
	}
	return loc, nil
}

// New builds a gateway. Close releases its store.
func New(ctx context.Context, cfg Config, log *slog.Logger) (*Gateway, error) {
	loc, err := cfg.checked()
	if err != nil {
		return nil, err
	}
	cfg.Bills.Location = loc
	keys, err := keyRing(cfg)
	if err != nil {
		return nil, err
	}
	opts := []store.Option{store.WithLog(log), store.WithStartWait(cfg.DatabaseWait)}
	if cfg.DataDirHeld {
		opts = append(opts, store.WithDataDirHeld())
	}
	st, err := openStore(ctx, cfg.DataDir, cfg.DatabaseURL, keys, cfg.DBPool, opts...)
	if err != nil {
		return nil, err
	}
	if cfg.DatabaseURL == "" {
		warnIfShared(cfg.DataDir, log)
	} else {
		warnIfUnanalyzed(ctx, st, log)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	revoked := auth.NewRevocations()
	if err := revoked.Refresh(ctx, st, now()); err != nil {
		st.Close()
		return nil, fmt.Errorf("load revoked keys: %w", err)
	}
	g := &Gateway{Store: st, cfg: cfg, log: log, keys: keys}
	// As many password hashes at once as there are cores to run them; a
	// login storm waits in a short line, then gets 503 (docs/security.md).
	cores := runtime.GOMAXPROCS(0)
	g.Auth = &auth.Service{Repo: st, Signer: auth.NewRingSigner(keys.Purpose("token")), Revocations: revoked,
		TTL: cfg.TokenTTL, Lockout: auth.DefaultLockout, Throttle: auth.DefaultThrottle,
		Hashes: auth.NewHashGate(cores, 4*cores, 2*time.Second), Now: now, Log: log}
	g.Metrics = metrics.New()
	st.RegisterMetrics(g.Metrics)
	g.Bills = &bill.Service{Repo: st, Policy: cfg.Bills, Now: now, Metrics: bill.NewMetrics(g.Metrics)}
	acquirers := map[merchant.Mode]payment.Acquirer{merchant.Test: sim.New(keys.FixedKey("sim-acquirer"), st.SimLedger())}
	if cfg.LiveAcquirer != nil {
		acquirers[merchant.Live] = cfg.LiveAcquirer
	}
	g.Payments = &payment.Service{Repo: st, Acquirers: acquirers, FingerprintKey: keys.FixedKey("card-fingerprint"), Database: st,
		Now: now, Location: loc, Log: log, MaxFailures: 5, AcquirerTimeout: 30 * time.Second,
		ChallengeTTL: 15 * time.Minute, WaitInFlight: 5 * time.Second, Metrics: payment.NewMetrics(g.Metrics)}

	ipnCfg := cfg.IPN
	ipnCfg.AllowPrivate = cfg.AllowPrivateIPN
	ipnMetrics := ipn.NewMetrics(g.Metrics)
	g.Payments.IPNMetrics = ipnMetrics
	g.IPN = &ipn.Worker{Queue: st, Config: ipnCfg, Log: log, Metrics: ipnMetrics, Location: loc}
	st.OnIPNQueued(g.IPN.Nudge)
	if err := ipn.CheckHostAddresses(); err != nil {
		log.Warn("IPN deliveries will all be refused: this host's own network addresses cannot be read, so no receiver can be told apart from the gateway's own host; allow netlink sockets (under systemd, RestrictAddressFamilies= needs AF_NETLINK)", "err", err.Error())
	}

	health := &health{ping: st.Ping, every: healthEvery}
	g.ready = newReadiness(readyCheck{"database", st.Ping}, readyCheck{"migrations", st.Migrated},
		readyCheck{"ipn", func(context.Context) error {
			if !g.IPN.Running() {
				return errors.New("the IPN worker is not running")
			}
			return nil
		}},
		readyCheck{"keys", func(context.Context) error {
			if e := g.peerKeys.Load(); e != nil {
				return e
			}
			return nil
		}})
	g.peerKeysMissing = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kadi_master_keys_missing",
		Help: "Nodes sharing the database that sign with a master key this node's ring lacks (PostgreSQL): their tokens are refused here. Not 0: give this node the current ring."})
	g.Metrics.MustRegister(g.peerKeysMissing)
	g.nameShared = prometheus.NewGauge(prometheus.GaugeOpts{Name: "kadi_node_name_shared",
		Help: "1 while another running node publishes under this node's --node-name (PostgreSQL): give each node its own name. Meanwhile this node settles its earlier runs' payments only once they are abandoned by any node's measure."})
	g.Metrics.MustRegister(g.nameShared)
	g.ready.stopping = g.draining.Load
	// /metrics answers while the database is down, so up == 0 never said
	// a node could not serve: this does, read at each scrape as /readyz
	// reads it (its checks at most every 250 ms, the ping within 2 s).
	g.Metrics.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kadi_ready",
		Help: "1 while this node is ready (/readyz answers 200); 0 while it is not: its database unreachable, a migration missing, its IPN worker stopped, a shutdown begun."},
		func() float64 {
			if g.ready.ready(context.Background()) {
				return 1
			}
			return 0
		}))
	var forms *form.Handler // set below; the catch-all sends it a shop form sent by GET
	notFound := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"not_found","message":"no such endpoint"}`))
	}
	newMux := func() *http.ServeMux {
		m := http.NewServeMux()
		m.HandleFunc("GET /livez", live)
		m.Handle("GET /healthz", health)
		m.Handle("GET /readyz", g.ready)
		m.HandleFunc("GET /favicon.ico", favicon)
		m.Handle("GET /{$}", home{publicURL: cfg.PublicURL, mux: m})
		m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			if allow := allowedMethods(m, r); allow != "" {
				if notPosted := shopFormByGET(r); notPosted && forms != nil {
					forms.NotPosted(w, r) // a shopper's browser: a page, not JSON
					return
				}
				methodNotAllowed(w, allow)
				return
			}
			notFound(w, r)
		})
		return m
	}

	mux := newMux()
	(&api.Handler{Auth: g.Auth, Bills: g.Bills, Merchants: st, Verifications: st, Notifications: st, Payments: g.Payments,
		Location: loc, Log: log}).Register(mux)
	docs, err := apidocs.New()
	if err != nil {
		st.Close()
		return nil, err
	}
	docs.Register(mux)
	formMux := mux
	if cfg.FormAddr != "" {
		formMux = newMux()
	}
	pages, err := secret.NewRingSealer(keys.Purpose("hosted-pages"))
	if err != nil {
		st.Close()
		return nil, err
	}
	formURL := cfg.PublicURL
	if cfg.FormAddr != "" && cfg.FormPublicURL != "" {
		formURL = cfg.FormPublicURL
	}
	https := strings.HasPrefix(formURL, "https://")
	forms = &form.Handler{Auth: g.Auth, Bills: st, Checkouts: st, Payments: g.Payments, Location: loc, Log: log, Now: now,
		HTTPS: https, DefaultRegion: cfg.DefaultRegion, Sealer: pages}
	forms.Register(formMux)
	dashMux := mux
	if cfg.DashboardAddr != "" {
		dashMux = newMux()
	}
	(&dashboard.Handler{Auth: g.Auth, Store: st, IPN: g.IPN, Location: loc, Log: log, Now: now,
		PublicURL: cfg.PublicURL, FormURL: formURL, AllowPrivateIPN: cfg.AllowPrivateIPN, NAT64Prefixes: cfg.IPN.NAT64Prefixes}).Register(dashMux)
	g.ipnMetrics = ipnMetrics
	g.metricsHandler = g.Metrics.Handler()
	addrs := clientaddr.NewResolver(cfg.TrustedProxies)
	if cfg.MetricsAddr == "" {
		// Every method, so that to a peer outside --metrics-allow a POST
		// is the same 404 as a GET: the 405 of the catch-all told it the
		// path was there.
		mux.Handle("/metrics", onlyFrom(cfg.MetricsAllow, addrs, g.metricsHandler, http.HandlerFunc(notFound)))
	}
	routes := newHTTPMetrics(g.Metrics)
	budget := cfg.RequestTimeout
	if budget <= 0 {
		budget = DefaultRequestTimeout
	}
	wrap := func(h http.Handler) http.Handler {
		return withCleanPath(withRequest(withHSTS(withBudget(h, budget), https), log, addrs, routes))
	}
	g.Handler, g.FormHandler, g.DashboardHandler = wrap(mux), wrap(formMux), wrap(dashMux)
	return g, nil
}

// Close releases the store.
func (g *Gateway) Close() error { return g.Store.Close() }

// Serve answers on ln until ctx ends, then drains in-flight requests and,
// beside them, lets the IPN deliveries in flight finish and be recorded.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	// The IPN worker stops claiming as the shutdown begins, not once the
	// requests are drained: its deliveries in flight (up to the IPN
	// timeout) then end within the drain's 30 s, where after it they ran
	// past the 30 s that orchestrators commonly wait before SIGKILL, and
	// were sent again by another node.
	ipnCtx, stopIPN := context.WithCancel(bg)
	ipnDone := make(chan struct{})
	defer func() {
		stopIPN()
		stop()
		<-ipnDone
	}()
	// Payments name the run of the node charging them, so that this
	// node's next run can reconcile them at once after a crash. The name
	// must be unique among the nodes running: the host and the address
	// this node holds are, unless the operator names the node.
	name := g.cfg.NodeName
	if name == "" {
		host, _ := os.Hostname()
		name = host + " " + ln.Addr().String()
	}
	run := secret.NewID("run")
	g.Payments.NodeName, g.Payments.Node = name, payment.NodeID(name, run)
	go g.Auth.Revocations.Watch(bg, g.Store, g.cfg.RevocationPoll, g.Auth.Now, g.log)
	// A rotated key file is picked up on the same cadence (and at once
	// when a token or sealed value names a key this node lacks).
	go g.keys.Watch(bg, g.cfg.RevocationPoll, g.log)
	if g.cfg.DatabaseURL != "" {
		// Other nodes may share the database, and one of them the name:
		// until a publish shows none does, no earlier run's payment is
		// settled at once. This run's mark is on the name's row before it
		// serves a request.
		g.Payments.SoleName = g.soleNameNow(name, run)
		pctx, cancel := context.WithTimeout(bg, 5*time.Second)
		if _, _, err := g.Store.PublishNodeKey(pctx, g.keys.NodeKey(name), run, nodeKeysLive); err != nil {
			g.log.Warn("publish this node's key", "err", err)
		}
		cancel()
		keysCtx, stopKeys := context.WithCancel(bg)
		keysDone := make(chan struct{})
		go func() {
			defer close(keysDone)
			g.watchNodeKeys(keysCtx, name, run)
		}()
		// Last, once every request is answered: while it serves, its key
		// counts.
		defer func() {
			stopKeys()
			<-keysDone
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			if err := g.Store.RetireNodeKey(rctx, name, run); err != nil {
				g.log.Warn("say this node has stopped; the others count its key until it is 30 s silent", "err", err)
			}
		}()
	}
	go g.reconcile(bg)
	go g.refreshGauges(bg)
	go func() {
		defer close(ipnDone)
		g.IPN.Run(ipnCtx)
	}()

	// The API's listener is ln; the hosted form and the metrics get their
	// own when configured so.
	servers := []*http.Server{g.newHTTPServer(g.Handler)}
	listeners := []net.Listener{ln}
	for _, extra := range []struct {
		addr, what, flag string
		h                http.Handler
	}{{g.cfg.FormAddr, "hosted form", "--form-addr", g.FormHandler}, {g.cfg.DashboardAddr, "dashboard", "--dashboard-addr", g.DashboardHandler},
		{g.cfg.MetricsAddr, "metrics", "--metrics-addr", g.MetricsListener()}} {
		if extra.addr == "" {
			continue
		}
		l, err := Listen(extra.addr)
		if err != nil {
			for _, l := range listeners[1:] {
				l.Close()
			}
			if errors.Is(err, syscall.EADDRINUSE) {
				if sameListenAddr(extra.addr, ln.Addr()) {
					return fmt.Errorf("%s listen: %s is --addr's own address; pass %s with another port", extra.what, extra.addr, extra.flag)
				}
				return fmt.Errorf("%s listen: %s is in use; pass %s with a free address", extra.what, extra.addr, extra.flag)
			}
			return fmt.Errorf("%s listen: %w", extra.what, err)
		}
		g.log.Info("serving "+extra.what, "addr", l.Addr().String())
		if ap, err := netip.ParseAddrPort(l.Addr().String()); err == nil && extra.flag == "--metrics-addr" && !g.cfg.GuardMetricsAddr && !ap.Addr().Unmap().IsLoopback() {
			// Without --metrics-allow given, this listener has no guard,
			// and its profiler shows the process's memory and stacks.
			g.log.Warn("--metrics-addr is reachable beyond this host: /metrics and the profiler (/debug/pprof/) answer anyone who reaches it; bind it to a private interface and firewall it, or to 127.0.0.1", "addr", l.Addr().String())
		}
		servers, listeners = append(servers, g.newHTTPServer(extra.h)), append(listeners, l)
	}
	if g.cfg.Ready != nil {
		g.cfg.Ready(g.readyLine(listeners))
	}
	errc := make(chan error, len(servers))
	for i, srv := range servers {
		go func() { errc <- srv.Serve(listeners[i]) }()
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		g.draining.Store(true)
		g.log.Info("shutting down: draining requests and IPN deliveries in flight", "drain_delay", g.cfg.DrainDelay.String())
	}
	stopIPN()
	if err == nil && g.cfg.DrainDelay > 0 {
		// Still serving, now as not ready: the load balancer's next
		// probes take the node out before its listeners close.
		time.Sleep(g.cfg.DrainDelay)
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, srv := range servers {
		if serr := srv.Shutdown(sctx); err == nil {
			err = serr
		}
	}
	if err == nil {
		<-ipnDone // the deferred wait, here so that the line below is true
		g.log.Info("stopped: every request answered and every IPN delivery in flight recorded")
	}
	return err
}

// nodeKeysLive is how long a node's published key counts: one silent
// for longer is taken for stopped, and no node waits for the key of one
// that has stopped for good.
const nodeKeysLive = 30 * time.Second

// nodeKeysGone is how long a silent node's row is kept.
const nodeKeysGone = 7 * 24 * time.Hour

// watchNodeKeys publishes the key this node signs with, on the revocation
// poll's cadence, and checks that its ring holds the key of every other
// live node. One that lacks some logs an ERROR naming those nodes and
// counts them in kadi_master_keys_missing; when they are more than half
// of the live nodes (itself included) it is the one left behind, and it
// answers /readyz "not ready" (check "keys") until it has the ring, so
// that a balancer stops sending it requests whose tokens it would refuse.
// Half or fewer, it stays ready: during a rolling restart onto a new ring
// the nodes not yet restarted are the many, and no rule here may take
// every node out at once.
//
// The same row says whether another running node shares this one's name:
// after this run's first publish, finding another run's mark on it means
// a live node wrote it since (a crashed run writes nothing more). Then
// this node logs an ERROR and stops settling its earlier runs' payments
// at once (soleName), until its publishes find only its own mark again.
func (g *Gateway) watchNodeKeys(ctx context.Context, node, run string) {
	t := time.NewTicker(g.cfg.RevocationPoll)
	defer t.Stop()
	var said string
	// The error's text names the connection's ephemeral port: compared
	// by text, every turn of an outage was a new failure, logged.
	failed := &logging.Repeated{Log: g.log}
	var forgot time.Time
	var names nameWatch
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if time.Since(forgot) > time.Hour {
			if err := g.Store.ForgetNodeKeys(rctx, nodeKeysGone); err == nil {
				forgot = time.Now()
			}
		}
		peers, last, err := g.Store.PublishNodeKey(rctx, g.keys.NodeKey(node), run, nodeKeysLive)
		cancel()
		if err == nil {
			wasShared := names.shared
			sole, shared := names.saw(last, run, time.Now(), nodeKeysLive)
			switch {
			case shared && !wasShared:
				g.log.Error("another running node has this node's name: each would settle the other's payments in flight as its own crashed run's; give every node its own --node-name. Until then this node settles its earlier runs' payments only once any node may",
					"node_name", node, "other_run", last)
				g.nameShared.Set(1)
			case !shared && wasShared:
				g.log.Info("no other running node has this node's name any more", "node_name", node)
				g.nameShared.Set(0)
			}
			g.soleName.Store(sole)
		}
		switch {
		case err != nil && ctx.Err() == nil:
			failed.Fail(ctx, "check the nodes' master keys", "err", err)
		case err == nil:
			failed.OK(ctx, "check the nodes' master keys")
			missing := g.keys.Lacking(peers)
			behind := 2*len(missing) > len(peers)
			lacking := &keyring.LackingError{Peers: missing}
			if behind {
				g.peerKeys.Store(lacking)
			} else {
				g.peerKeys.Store(nil)
			}
			g.peerKeysMissing.Set(float64(len(missing)))
			now := ""
			if len(missing) > 0 {
				now = fmt.Sprint(behind, lacking)
			}
			if now != said {
				switch {
				case behind:
					g.log.Error("master key ring behind most nodes: not ready", "err", lacking)
				case len(missing) > 0:
					g.log.Error("master key ring behind some nodes (ready: they are not the most)", "err", lacking)
				default:
					g.log.Info("master key ring holds every node's key again")
				}
				said = now
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// soleNameNow is the payments' SoleName for run of the node called name:
// its publishes found no twin, and the name's row still bears this run's
// mark when a reconciliation pass asks, so that a twin started since the
// last publish is not taken for a crashed run either.
func (g *Gateway) soleNameNow(name, run string) func(context.Context) bool {
	return func(ctx context.Context) bool {
		if !g.soleName.Load() {
			return false
		}
		last, err := g.Store.NodeRun(ctx, name)
		return err == nil && last == run
	}
}

// nameWatch tells, from what each publish of a node's key found on its
// name's row, whether another running node shares the name.
type nameWatch struct {
	published bool
	foreign   time.Time // when another run's mark was last found
	shared    bool      // saw's last answer
}

// saw takes one publish's finding: last is the run whose mark the row bore
// before it. The first publish may find the node's own crashed run; from
// the second on, another run's mark means a live node wrote it since.
// shared holds for hold after the last such find, so that twins publishing
// at different paces are not seen at every beat; sole says this run is
// known to be the name's only one.
func (n *nameWatch) saw(last, run string, now time.Time, hold time.Duration) (sole, shared bool) {
	if n.published && last != run {
		n.foreign = now
	}
	shared = !n.foreign.IsZero() && now.Sub(n.foreign) < hold
	sole = n.published && !shared
	n.published, n.shared = true, shared
	return sole, shared
}

// refreshGauges reads the database-backed gauges at start and then every
// MetricsRefresh, until ctx ends.
func (g *Gateway) refreshGauges(ctx context.Context) {
	t := time.NewTicker(g.cfg.MetricsRefresh)
	defer t.Stop()
	said := &logging.Repeated{Log: g.log}
	for {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		switch err := g.ipnMetrics.Refresh(rctx, g.Store, time.Now()); {
		case err != nil && ctx.Err() == nil:
			said.Fail(ctx, "read IPN queue metrics", "err", err)
		case err == nil:
			said.OK(ctx, "read IPN queue metrics")
		}
		cancel()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// allowedMethods lists the methods mux serves r's path with, when r's own
// is not one: the catch-all "/" that answers unknown paths also caught
// those requests, and a GET of /payment/v2/bills said "no such endpoint",
// which sent integrators looking for another path.
func allowedMethods(mux *http.ServeMux, r *http.Request) string {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		// A shallow copy: the mux reads the method, host and path only,
		// and a deep Clone of a request with a large header, five times,
		// cost an unauthenticated caller's 404 three times as much.
		probe := *r
		probe.Method = m
		if _, pattern := mux.Handler(&probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 && slices.Contains(allow, http.MethodGet) {
		allow = append(allow, http.MethodHead)
	}
	return strings.Join(allow, ", ")
}

// shopFormByGET reports a shop's payment form sent by GET, a form
// without method="post", as browsers do.
func shopFormByGET(r *http.Request) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && (r.URL.Path == "/cardPay" || r.URL.Path == "/cardPay/")
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusMethodNotAllowed)
	body, _ := json.Marshal(map[string]string{"code": "method_not_allowed", "message": "this endpoint takes " + allow})
	_, _ = w.Write(body)
}

// onlyFrom serves h to peers inside allow that came straight to us
// (clientaddr's Direct: never through a proxy, whose loopback address
// would lend itself to everyone behind it), and other to everyone else.
func onlyFrom(allow []netip.Prefix, addrs clientaddr.Resolver, h, other http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if peer, direct := addrs.Direct(r.RemoteAddr, r.Header); direct && clientaddr.Within(peer, allow) {
			h.ServeHTTP(w, r)
			return
		}
		other.ServeHTTP(w, r)
	})
}

// sameListenAddr reports whether addr, as a flag gives it, names the port
// bound is listening on: the same port, on the same address or on every
// address (":8080" beside "[::]:8080" said "in use", by its text).
func sameListenAddr(addr string, bound net.Addr) bool {
	host, port, err := net.SplitHostPort(addr)
	b, ok := bound.(*net.TCPAddr)
	if err != nil || !ok || port != strconv.Itoa(b.Port) {
		return false
	}
	if host == "" || b.IP.IsUnspecified() {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsUnspecified() || ip.Equal(b.IP))
}

// readyLine says, for people reading a terminal, what each listener serves
// and which store the gateway runs on.
func (g *Gateway) readyLine(listeners []net.Listener) string {
	api := []string{"API"}
	if g.cfg.FormAddr == "" {
		api = append(api, "hosted form")
	}
	if g.cfg.DashboardAddr == "" {
		api = append(api, "dashboard")
	}
	allow := make([]string, len(g.cfg.MetricsAllow))
	for i, p := range g.cfg.MetricsAllow {
		allow[i] = p.String()
	}
	toAllowed := "/metrics (to " + strings.Join(allow, ",") + ")"
	if g.cfg.MetricsAddr == "" && len(g.cfg.MetricsAllow) > 0 {
		api = append(api, toAllowed)
	}
	metrics := "/metrics" // its own listener answers anyone, unless guarded
	if g.cfg.GuardMetricsAddr {
		metrics = toAllowed
	}
	parts := []string{strings.Join(api, ", ") + " on http://" + listeners[0].Addr().String()}
	i := 1
	for _, own := range []struct{ addr, what string }{{g.cfg.FormAddr, "hosted form"}, {g.cfg.DashboardAddr, "dashboard"}, {g.cfg.MetricsAddr, metrics}} {
		if own.addr != "" {
			parts = append(parts, own.what+" on http://"+listeners[i].Addr().String())
			i++
		}
	}
	store := "SQLite in " + g.cfg.DataDir
	if g.cfg.DatabaseURL != "" {
		store = "PostgreSQL"
	}
	return "Kadi is ready: " + strings.Join(parts, "; ") + "; " + store + "; public URL " + g.cfg.PublicURL
}

func (g *Gateway) newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second, ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn)}
}

// reconcile settles payments a crash left open (at start and every few
// seconds: an earlier run's at once, any node's once the acquirer timeout
// is well past) and forgets expired checkout sessions and auth failure
// counts that no longer matter.
func (g *Gateway) reconcile(ctx context.Context) {
	said := &logging.Repeated{Log: g.log}
	for i := 0; ; i++ {
		switch err := g.Payments.Reconcile(ctx, g.Payments.AcquirerTimeout+15*time.Second); {
		case err != nil && ctx.Err() == nil:
			said.Fail(ctx, "reconcile payments", "err", err)
		case err == nil:
			said.OK(ctx, "reconcile payments")
		}
		if i%6 == 0 {
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			if _, err := g.Store.DeleteExpiredCheckouts(dctx, g.Auth.Now()); err != nil && ctx.Err() == nil {
				g.log.Warn("delete expired checkout sessions", "err", err)
			}
			if _, err := g.Store.PruneAuthFailures(dctx, g.Auth.Now(), max(g.Auth.Lockout.Window, g.Auth.Throttle.Window)); err != nil && ctx.Err() == nil {
				g.log.Warn("prune auth failures", "err", err)
			}
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(reconcileEvery):
		}
	}
}

// reconcileEvery is how often payments left behind are looked for.
const reconcileEvery = 5 * time.Second

// warnIfUnanalyzed says which of the gateway's tables PostgreSQL will not
// analyze by itself: with no statistics its planner may read every bill of
// a merchant to find one by order reference (store.DB.Unanalyzed).
func warnIfUnanalyzed(ctx context.Context, st *store.DB, log *slog.Logger) {
	tables, err := st.Unanalyzed(ctx)
	if err != nil {
		log.Warn("could not read PostgreSQL's autovacuum settings", "err", err)
		return
	}
	if len(tables) > 0 {
		log.Warn("PostgreSQL will not analyze these tables by itself, and its plans go wrong as they grow: turn autovacuum on, or run ANALYZE after loading data and regularly (docs/operations.md)",
			"tables", strings.Join(tables, "; "))
	}
}

// warnIfShared tells the operator when other users of the machine may list
// or enter the data dir. Kadi's files in it are 0600 whatever the dir's
// mode, but the dir is the operator's to close.
func warnIfShared(dir string, log *slog.Logger) {
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm()&0o077 == 0 {
		return
	}
	log.Warn("the data dir is open to other users of this machine; its files are private, but close it too",
		"dir", dir, "mode", fmt.Sprintf("%04o", fi.Mode().Perm()), "fix", "chmod 700 "+dir)
}
