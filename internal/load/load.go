// Package load drives a running gateway through the merchant flow over real
// HTTP and reports throughput and latency as ratios against a baseline
// measured in the same run (GET /healthz), because shared machines are too
// noisy for absolute figures to mean much.
package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kadipay/kadi/client"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// Options configure a run. Requests and Duration both bound it.
type Options struct {
	// BaseURLs are the gateway's nodes (one, or several sharing a
	// database): requests go to each in turn, and a bill is paid on the
	// node after the one that created it, as behind a load balancer.
	BaseURLs    []string
	Credentials merchant.Credentials
	Concurrency int
	Duration    time.Duration // per scenario
	MaxRequests int           // per scenario
	// Card is an approving test card number, supplied by the caller.
	Card string
	// ServerPIDs are the gateway's processes, whose CPU time is read
	// from /proc and summed; none finds the processes listening on the
	// BaseURLs' ports.
	ServerPIDs []int
	// Warn hears what the run could not measure.
	Warn func(string)
	// IPNListen, when set, is where the IPN scenarios' receiver listens
	// (ipn.go); IPNRate is their payments a second.
	IPNListen string
	IPNRate   int
	// MetricsURLs are where the nodes serve /metrics, one for each of
	// BaseURLs, for the SQLite writer's counters; none means each base
	// URL's /metrics (a gateway serving with --metrics-addr has them
	// there instead).
	MetricsURLs []string
	// Only, when set, keeps the scenarios whose name it matches (the two
	// baselines always run: every figure is a ratio against them).
	Only *regexp.Regexp
}

// Result of one scenario.
type Result struct {
	Name   string
	Count  int
	Errors int
	// FirstError is what the first of Errors said: a count alone left a
	// run with a node killed under it, or a card that declines, a mystery.
	FirstError string
	Elapsed    time.Duration
	Latencies  []time.Duration
	// ServerCPU is the CPU time the measured server used during the
	// scenario; zero when it could not be read.
	ServerCPU time.Duration
	// Writer is the change of the SQLite writer's counters over the
	// scenario; zero on PostgreSQL.
	Writer writerStats
	// LoadCPU is kadi-load's own CPU time over the scenario (its clients,
	// and its IPN receiver): the other half of what a request costs the
	// machine when both share it.
	LoadCPU time.Duration
	// PeakRSS is the most memory the measured server (the largest of its
	// nodes) has held since it started, read after the scenario; zero
	// when it could not be read.
	PeakRSS int64
	// Paired is the baseline run in alternating slices with this
	// scenario (alternate): /healthz for a gateway scenario, the minimal
	// server for /healthz and /healthz for the minimal server; nil for the
	// scenarios no ratio is asked of (the paced and IPN ones).
	Paired *Result
}

// rounds is how many slices of a scenario and of its baseline alternate.
const rounds = 5

// alternate runs a and b in turns, rounds times each, and returns what
// each measured over all its slices. A ratio of two figures measured a
// minute apart on a shared machine moved by a quarter from run to run
// with the machine's load (the same build's bills ran 0.219× and 0.278×
// of a /healthz measured once at the start); slices of a second, side by
// side, see the same machine.
func alternate(ctx context.Context, a, b func() Result) (Result, Result) {
	var ra, rb Result
	for i := 0; i < rounds && ctx.Err() == nil; i++ {
		ra = ra.plus(a())
		rb = rb.plus(b())
	}
	for _, r := range []*Result{&ra, &rb} {
		sort.Slice(r.Latencies, func(i, j int) bool { return r.Latencies[i] < r.Latencies[j] })
	}
	return ra, rb
}

// plus is r and s, two slices of one scenario, as one result. The
// latencies are left unsorted.
func (r Result) plus(s Result) Result {
	r.Name = s.Name
	r.Count += s.Count
	r.Errors += s.Errors
	if r.FirstError == "" {
		r.FirstError = s.FirstError
	}
	r.Elapsed += s.Elapsed
	r.Latencies = append(r.Latencies, s.Latencies...)
	r.ServerCPU += s.ServerCPU
	r.LoadCPU += s.LoadCPU
	r.Writer = r.Writer.add(s.Writer, 1)
	r.PeakRSS = max(r.PeakRSS, s.PeakRSS)
	return r
}

// CPUPerRequest is the server's CPU time per successful request.
func (r Result) CPUPerRequest() time.Duration { return perRequest(r.ServerCPU, r.Count) }

// LoadCPUPerRequest is kadi-load's own CPU time per successful request.
func (r Result) LoadCPUPerRequest() time.Duration { return perRequest(r.LoadCPU, r.Count) }

func perRequest(cpu time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return cpu / time.Duration(n)
}

// PerSecond is throughput.
func (r Result) PerSecond() float64 { return float64(r.Count) / r.Elapsed.Seconds() }

// Percentile returns the p-th latency percentile (0–100).
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(r.Latencies)-1) * p / 100)
	return r.Latencies[i]
}

// CheckLoopback refuses targets off this machine: a load run must never
// leave it.
func CheckLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--url %q is not an absolute URL", base)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--url must point at a loopback address (127.0.0.0/8, ::1 or localhost), not %s", host)
}

// Run runs the baseline and each scenario in turn.
func Run(ctx context.Context, o Options) ([]Result, error) {
	if len(o.BaseURLs) == 0 {
		return nil, errors.New("no gateway to load: give --url")
	}
	for _, b := range o.BaseURLs {
		if err := CheckLoopback(b); err != nil {
			return nil, err
		}
	}
	if n := len(o.MetricsURLs); n > 0 && n != len(o.BaseURLs) {
		return nil, fmt.Errorf("--metrics gives %d URLs and --url %d: give one for each node", n, len(o.BaseURLs))
	}
	httpc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency * 2},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	nodes := make([]node, len(o.BaseURLs))
	for i, b := range o.BaseURLs {
		c, err := client.New(client.Config{BaseURL: b, APIKey: o.Credentials.Test.APIKey,
			Username: o.Credentials.Username, Password: o.Credentials.Password, HTTPClient: httpc})
		if err != nil {
			return nil, err
		}
		nodes[i] = node{base: strings.TrimSuffix(b, "/"), c: c}
	}
	// One token serves every node: nodes sharing a database share the key.
	token, err := nodes[0].c.Token(ctx)
	if err != nil {
		return nil, fmt.Errorf("get a token: %w", err)
	}
	var turn atomic.Uint64
	next := func() (node, node) {
		i := int(turn.Add(1) % uint64(len(nodes)))
		return nodes[i], nodes[(i+1)%len(nodes)]
	}
	minimal, minimalPID, stopMinimal, err := startMinimal()
	if err != nil {
		return nil, err
	}
	defer stopMinimal()
	gatewayPIDs := o.ServerPIDs
	if len(gatewayPIDs) == 0 {
		for _, n := range nodes {
			pid, err := gatewayProcess(n.base)
			if err != nil {
				if o.Warn != nil {
					o.Warn("no server CPU figures: " + err.Error() + " (give --pid)")
				}
				gatewayPIDs = nil
				break
			}
			gatewayPIDs = append(gatewayPIDs, pid)
		}
	}
	// The paid-bill query verifies bills paid before it starts, in turn,
	// as merchants verify their own customers' payments.
	var paid []string
	var paidTurn atomic.Uint64
	scenarios := []struct {
		name      string
		onGateway bool // false: the minimal server
		op        func(ctx context.Context) error
		setup     func(ctx context.Context) error // before the first slice; nil: none
	}{
		{"minimal net/http handler", false, func(ctx context.Context) error { return get(ctx, httpc, minimal+"/healthz") }, nil},
		{"GET /healthz", true, func(ctx context.Context) error { n, _ := next(); return get(ctx, httpc, n.base+"/healthz") }, nil},
		{"POST /payment/v2/bills", true, func(ctx context.Context) error { n, _ := next(); _, err := newBill(ctx, n.c, o); return err }, nil},
		{"GET /payment/v2/query (no such bill)", true, func(ctx context.Context) error {
			n, _ := next()
			return do(httpc, queryRequest(ctx, n.base, token, "NOSUCHBILL"), http.StatusNotFound)
		}, nil},
		{"GET /payment/v2/query (paid bill)", true, func(ctx context.Context) error {
			n, _ := next()
			ref := paid[paidTurn.Add(1)%uint64(len(paid))]
			return do(httpc, queryRequest(ctx, n.base, token, ref), http.StatusOK)
		}, func(ctx context.Context) (err error) {
			paid, err = payBills(ctx, o, nodes[0].c, httpc, token, paidBills)
			return err
		}},
		{"bill + POST /cardPay (approved)", true, func(ctx context.Context) error {
			n, pay := next()
			b, err := newBill(ctx, n.c, o)
			if err != nil {
				return err
			}
			// The browser's whole trip: the POST, then the result page
			// its 303 names (POST-redirect-GET).
			loc, err := seeOther(httpc, cardPost(ctx, o, pay.c, token, b))
			if err != nil {
				return err
			}
			// Approved, as the scenario is named: a declining --card was
			// counted as served checkouts.
			return getSaying(ctx, httpc, pay.base+loc, approvedResult)
		}, nil},
	}
	// The receiver listens from the start, so that the checkouts' own
	// notifications are delivered (and cost what they cost) while they
	// run, as a merchant's would, rather than failing and coming back as
	// retries in the middle of the IPN scenarios.
	var rcv *receiver
	if o.IPNListen != "" {
		if rcv, err = startReceiver(o.IPNListen); err != nil {
			return nil, err
		}
		defer rcv.srv.Close()
	}
	metricsURLs := o.MetricsURLs
	if len(metricsURLs) == 0 {
		for _, n := range nodes {
			metricsURLs = append(metricsURLs, n.base+"/metrics")
		}
	}
	hint := " (a gateway serving with --metrics-addr has them there: give --metrics)"
	if len(o.MetricsURLs) > 0 {
		hint = " (check --metrics)"
	}
	for _, u := range metricsURLs {
		if _, _, err := scrapeWriterStats(ctx, httpc, u); err != nil && o.Warn != nil {
			o.Warn("no writer figures: " + err.Error() + hint)
			break
		}
	}
	// measure runs a scenario and adds what the servers spent on it (CPU
	// time, and for the gateway the writer's counters) and what kadi-load
	// itself spent.
	measure := func(onGateway bool, scenario func() Result) Result {
		pids := []int{minimalPID}
		if onGateway {
			pids = gatewayPIDs
		}
		before, cpuErr := cpuOf(pids)
		self, selfErr := OwnCPU()
		var wBefore writerStats
		if onGateway {
			wBefore, onGateway = readWriterStats(ctx, httpc, metricsURLs)
		}
		r := scenario()
		if after, err := cpuOf(pids); cpuErr == nil && err == nil {
			r.ServerCPU = after - before
		}
		if after, err := OwnCPU(); selfErr == nil && err == nil {
			r.LoadCPU = after - self
		}
		if wAfter, ok := readWriterStats(ctx, httpc, metricsURLs); onGateway && ok {
			r.Writer = wAfter.sub(wBefore)
		}
		r.PeakRSS = peakRSSOf(pids)
		return r
	}
	// Each ratio's two sides run in alternating slices (see alternate):
	// the minimal server with /healthz, then /healthz with each scenario.
	slice := o
	slice.Duration, slice.MaxRequests = o.Duration/rounds, max(o.MaxRequests/rounds, 1)
	measured := func(i int) func() Result {
		s := scenarios[i]
		return func() Result { return measure(s.onGateway, func() Result { return run(ctx, s.name, slice, s.op) }) }
	}
	minimalRes, healthRes := alternate(ctx, measured(0), measured(1))
	minimalRes.Paired, healthRes.Paired = &healthRes, &minimalRes
	out := []Result{minimalRes, healthRes}
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	for i, s := range scenarios[2:] {
		if o.Only != nil && !o.Only.MatchString(s.name) {
			continue
		}
		if s.setup != nil {
			if err := s.setup(ctx); err != nil {
				return out, fmt.Errorf("%s: %w", s.name, err)
			}
		}
		health, r := alternate(ctx, measured(1), measured(i+2))
		r.Paired = &health
		out = append(out, r)
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		if s.name == "POST /payment/v2/bills" && r.Count > 0 {
			// Latency where it matters: at half the peak, not at the
			// peak, where every request queues.
			half := max(int(r.PerSecond()/2), 1)
			out = append(out, measure(true, func() Result {
				return runPaced(ctx, fmt.Sprintf("bills at half the peak (%d/s)", half), o, half, s.op)
			}))
		}
	}
	if rcv != nil && (o.Only == nil || o.Only.MatchString("IPN")) {
		// On the first node: the receiver measures one node's worker.
		rs, err := ipnScenarios(ctx, o, rcv, nodes[0].c, httpc, token)
		if err != nil {
			return out, err
		}
		// The peak so far, once both have run: the run's peak.
		rs[len(rs)-1].PeakRSS = peakRSSOf(gatewayPIDs)
		out = append(out, rs...)
	}
	return out, nil
}

// newBill creates a bill under a fresh order reference.
func newBill(ctx context.Context, c *client.Client, o Options) (*client.Bill, error) {
	return c.CreateBill(ctx, client.BillRequest{Customer: client.Customer{Name: "Load Test"},
		Order: client.Order{BillerCode: o.Credentials.BillerCode, Reference: "LOAD" + secret.RandomUpperAlnum(12), Amount: "100.00", Currency: "KES",
			Description: "load test", Outlet: o.Credentials.OutletCode}})
}

// paidBills is how many bills the paid-bill query takes turns over: more
// than the clients, so that no two ask for one bill at once.
const paidBills = 256

// payBills creates n bills and pays each with the run's card, the way a
// checkout does, and returns their references once a query says each is
// paid.
func payBills(ctx context.Context, o Options, c *client.Client, httpc *http.Client, token string, n int) ([]string, error) {
	refs := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, o.Concurrency)
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				b, err := newBill(ctx, c, o)
				if err == nil {
					_, err = seeOther(httpc, cardPost(ctx, o, c, token, b))
				}
				if err == nil {
					var v *client.Verification
					if v, err = c.Verify(ctx, b.Reference); err == nil && !v.Paid {
						err = fmt.Errorf("bill %s is not paid after paying it with --card (an approving test card?): %+v", b.Reference, *v)
					}
				}
				if err != nil {
					errs <- err
					return
				}
				refs[i] = b.Reference
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, fmt.Errorf("pay the bills to query: %w", err)
	}
	return refs, nil
}

// queryRequest asks the gateway at base for bill ref's transaction.
func queryRequest(ctx context.Context, base, token, ref string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/payment/v2/query?billReference="+url.QueryEscape(ref), nil)
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// approvedResult is in the result page of an approved payment: the
// callback's orderStatus, as the spec spells it.
var approvedResult = []byte(`value="Transaction Successfull"`)

// getSaying gets u and wants a 200 whose body holds want.
func getSaying(ctx context.Context, c *http.Client, u string, want []byte) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	return doSaying(c, req, http.StatusOK, want)
}

func get(ctx context.Context, c *http.Client, u string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	return do(c, req, http.StatusOK)
}

// cardPost is the hosted form for bill b posted with the run's approving
// card, as a shop's page posts it.
func cardPost(ctx context.Context, o Options, c *client.Client, token string, b *client.Bill) *http.Request {
	form := client.PaymentForm{Token: token, OutletCode: o.Credentials.OutletCode, MerchantCode: o.Credentials.MerchantCode,
		Amount: b.Amount, OrderReference: b.OrderRef, BillReference: b.Reference, CallbackURL: "http://127.0.0.1/callback",
		Card: &client.CardFields{FirstName: "Load", LastName: "Test", Number: o.Card, Security: "123", ExpiryMonth: "12",
			ExpiryYear: fmt.Sprint(time.Now().Year() + 3)}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.PaymentFormAction(), strings.NewReader(form.Values().Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// seeOther sends req and returns the page its 303 names.
func seeOther(c *http.Client, req *http.Request) (string, error) {
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/") {
		return "", fmt.Errorf("%s %s: status %d to %q, want 303 to a page", req.Method, req.URL.Path, resp.StatusCode, loc)
	}
	return loc, nil
}

func do(c *http.Client, req *http.Request, want int) error {
	return doSaying(c, req, want, nil)
}

// doSaying sends req and wants status want and, unless says is nil, a body
// holding says: only then is the body kept, so that the other scenarios'
// client cost stays what it was.
func doSaying(c *http.Client, req *http.Request, want int, says []byte) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body []byte
	if says == nil {
		_, err = io.Copy(io.Discard, resp.Body)
	} else {
		body, err = io.ReadAll(resp.Body)
	}
	switch {
	case resp.StatusCode != want:
		return fmt.Errorf("%s %s: status %d, want %d", req.Method, req.URL.Path, resp.StatusCode, want)
	case says == nil:
		return nil
	case err != nil:
		return err
	case !bytes.Contains(body, says):
		return fmt.Errorf("%s %s: the page does not hold %s (a declining --card?)", req.Method, req.URL.Path, says)
	}
	return nil
}

// failed counts err, keeping the first's text.
func (r *Result) failed(err error) {
	if r.Errors++; r.FirstError == "" {
		r.FirstError = err.Error()
	}
}

// Failed is how many requests of rs failed: a run with any is no figure
// of record, whatever its rates.
func Failed(rs []Result) int {
	n := 0
	for _, r := range rs {
		n += r.Errors
	}
	return n
}

func run(ctx context.Context, name string, o Options, op func(context.Context) error) Result {
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var mu sync.Mutex
	res := Result{Name: name}
	var issued atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && issued.Add(1) <= int64(o.MaxRequests) {
				t := time.Now()
				err := op(ctx)
				d := time.Since(t)
				mu.Lock()
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
					res.failed(err)
				} else if err == nil {
					res.Count++
					res.Latencies = append(res.Latencies, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	sort.Slice(res.Latencies, func(i, j int) bool { return res.Latencies[i] < res.Latencies[j] })
	return res
}

// node is one of the gateway's nodes under load.
type node struct {
	base string
	c    *client.Client
}

// cpuOf is the CPU time the processes have used, together.
func cpuOf(pids []int) (time.Duration, error) {
	if len(pids) == 0 {
		return 0, errors.New("no process")
	}
	var sum time.Duration
	for _, pid := range pids {
		t, err := CPUTime(pid)
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// peakRSSOf is the largest peak RSS among pids; zero if one cannot be read.
func peakRSSOf(pids []int) int64 {
	var peak int64
	for _, pid := range pids {
		rss, err := PeakRSS(pid)
		if err != nil {
			return 0
		}
		peak = max(peak, rss)
	}
	return peak
}

// gatewayProcess finds the process listening on base's port.
func gatewayProcess(base string) (int, error) {
	u, err := url.Parse(base)
	if err != nil {
		return 0, err
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return 0, err
	}
	return ListenerPID(n)
}

// runPaced is run with requests issued at rate a second, whether or not
// earlier ones have answered (up to 8×Concurrency in flight), for
// o.Duration.
func runPaced(ctx context.Context, name string, o Options, rate int, op func(context.Context) error) Result {
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	n := rate * int(o.Duration/time.Second)
	var mu sync.Mutex
	res := Result{Name: name}
	start := time.Now()
	paced(ctx, o.Concurrency*8, n, rate, func(int) {
		t := time.Now()
		err := op(ctx)
		d := time.Since(t)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			res.Count++
			res.Latencies = append(res.Latencies, d)
		} else if ctx.Err() == nil {
			res.failed(err)
		}
	})
	res.Elapsed = time.Since(start)
	sort.Slice(res.Latencies, func(i, j int) bool { return res.Latencies[i] < res.Latencies[j] })
	return res
}

// Report writes a table with every scenario's throughput as a ratio of the
// two baselines measured in the same run: the minimal net/http handler
// (the first result) and the gateway's /healthz (the second), each taken
// from the baseline the scenario alternated with where it has one
// (Paired; against the minimal server through /healthz's own ratio), the
// server's CPU time per request and, on SQLite, the group-commit writer's
// writes per commit, the share of the scenario it was busy, the
// buckets its slowest commits and its writes' slowest waits fell in, and
// the share of its commits a WAL checkpoint ran beside, with the bucket
// of their slowest; and
// how many of this machine's cores the server and kadi-load kept busy
// together: near all of them the cores are the ceiling, well short of it
// something else is (the writer, when it is near 100 % busy).
func Report(w io.Writer, rs []Result) {
	if len(rs) < 2 {
		return
	}
	minimal, health := rs[0], rs[1]
	// The names' column is as wide as the longest, so the columns line up
	// for a reader as well as for a parser.
	width := 0
	for _, r := range rs {
		width = max(width, utf8.RuneCountInString(r.Name))
	}
	fmt.Fprintf(w, "%-*s %8s %6s %9s %9s %9s %11s %11s %10s %13s %11s %10s %10s %17s %9s %13s %10s %14s\n", width, "scenario", "ok", "errors", "per sec", "p50", "p99",
		"vs minimal", "vs /healthz", "CPU/req", "writes/commit", "writer busy", "commit p99", "wait p99", "beside checkpoint", "peak RSS", "load CPU/req", "cores used", "paired per sec")
	for i, r := range rs {
		vsMinimal, vsHealth := r.PerSecond()/minimal.PerSecond(), r.PerSecond()/health.PerSecond()
		paired := "—"
		if p := r.Paired; p != nil && p.Count > 0 {
			paired = fmt.Sprintf("%.0f", p.PerSecond())
			if i == 1 {
				vsMinimal = r.PerSecond() / p.PerSecond()
			} else {
				vsHealth = r.PerSecond() / p.PerSecond()
			}
			// A scenario's ratio to the minimal server goes through
			// that of the /healthz beside it.
			if m := health.Paired; i > 1 && m != nil && m.Count > 0 {
				vsMinimal = vsHealth * health.PerSecond() / m.PerSecond()
			}
		}
		cpu, loadCPU, cores := "—", "—", "—"
		if r.ServerCPU > 0 {
			cpu = r.CPUPerRequest().Round(time.Microsecond).String()
		}
		if r.LoadCPU > 0 {
			loadCPU = r.LoadCPUPerRequest().Round(time.Microsecond).String()
		}
		if r.ServerCPU > 0 && r.LoadCPU > 0 && r.Elapsed > 0 {
			cores = fmt.Sprintf("%.2f/%d", (r.ServerCPU+r.LoadCPU).Seconds()/r.Elapsed.Seconds(), runtime.NumCPU())
		}
		perCommit, busy, commitP99, waitP99, beside := "—", "—", "—", "—", "—"
		if st := r.Writer; st.commits > 0 && r.Elapsed > 0 {
			perCommit = fmt.Sprintf("%.1f", float64(st.writes)/float64(st.commits))
			busy = fmt.Sprintf("%.0f%%", 100*st.busy.Seconds()/r.Elapsed.Seconds())
			commitP99, waitP99, beside = st.commitTime.p99(), st.waitTime.p99(), st.beside()
		}
		rss := "—"
		if r.PeakRSS > 0 {
			rss = fmt.Sprintf("%dMB", r.PeakRSS>>20)
		}
		fmt.Fprintf(w, "%-*s %8d %6d %9.0f %9s %9s %10.3fx %10.3fx %10s %13s %11s %10s %10s %17s %9s %13s %10s %14s\n", width, r.Name, r.Count, r.Errors, r.PerSecond(),
			r.Percentile(50).Round(10*time.Microsecond), r.Percentile(99).Round(10*time.Microsecond),
			vsMinimal, vsHealth, cpu, perCommit, busy, commitP99, waitP99, beside, rss, loadCPU, cores, paired)
	}
	for _, r := range rs {
		if r.Errors > 0 {
			fmt.Fprintf(w, "\n%s: %d errors; the first: %s", r.Name, r.Errors, r.FirstError)
		}
	}
	if Failed(rs) > 0 {
		fmt.Fprintln(w)
	}
}
