// Package e2e drives the real kadi binary as a separate process, the way an
// operator runs it and a merchant integrates with it: the CLI onboards, the
// public client package talks HTTP, and a headless browser clicks through
// the hosted pages.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
	"github.com/kadipay/kadi/internal/contract"
)

// kadiBin is the binary under test, built once per test binary by TestMain.
var kadiBin string

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "kadi-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	kadiBin = filepath.Join(dir, "kadi")
	build := exec.Command("go", "build", "-o", kadiBin, "../cmd/kadi")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building kadi:", err)
		return 1
	}
	if contractCheck, err = contract.Load(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// Every response the suite reads through net/http's default transport
	// (http.Get, http.DefaultClient, clients without a transport of their
	// own) and through the merchant clients of gateway.Client is checked
	// against api/openapi.yaml.
	http.DefaultTransport = contractCheck.Transport(http.DefaultTransport, contractBroken.add)
	code := m.Run()
	// A test may ignore a request's error; the run still fails.
	if broken := contractBroken.all(); len(broken) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: %d responses break api/openapi.yaml:\n", len(broken))
		for _, err := range broken {
			fmt.Fprintln(os.Stderr, " ", err)
		}
		if code == 0 {
			code = 1
		}
	}
	return code
}

// contractCheck is api/openapi.yaml, which every response of the gateway
// to a documented operation must follow: status, headers and body.
var contractCheck *contract.Validator

// contractBroken collects the responses that did not.
var contractBroken mismatches

type mismatches struct {
	mu   sync.Mutex
	errs []error
}

func (m *mismatches) add(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, err)
}

func (m *mismatches) all() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.errs...)
}

// Generous bounds: the suite must pass on a loaded 2-core machine.
const (
	startTimeout = 20 * time.Second
	stopTimeout  = 40 * time.Second // above the server's own 30 s drain
	cliTimeout   = 60 * time.Second
)

// merchantCreds is the JSON `kadi merchant create --json` prints.
type merchantCreds struct {
	MerchantCode      string    `json:"merchantCode"`
	Username          string    `json:"username"`
	Password          string    `json:"password"`
	BillerCode        string    `json:"billerCode"`
	OutletCode        string    `json:"outletCode"`
	ServiceID         string    `json:"serviceId"`
	SystemCode        string    `json:"systemCode"`
	SettlementAccount string    `json:"settlementAccount"`
	Test              modeCreds `json:"test"`
	Live              modeCreds `json:"live"`
}

type modeCreds struct {
	APIKey             string `json:"apiKey"`
	NotificationSecret string `json:"notificationSecret"`
}

// runKadi runs one CLI command to completion and returns its output.
func runKadi(t testing.TB, args ...string) (stdout, stderr []byte, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kadiBin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}

// setTestIPN points a merchant's test-mode notifications at url through
// the CLI; where names the store ("--data-dir", DIR or "--database-url",
// URL).
func setTestIPN(t testing.TB, where []string, code, url, username, password string) {
	t.Helper()
	args := append(append([]string{"merchant", "set-ipn"}, where...),
		"--merchant", code, "--mode", "test", "--url", url, "--username", username, "--password", password)
	if out, errOut, err := runKadi(t, args...); err != nil {
		t.Fatalf("kadi merchant set-ipn: %v\n%s%s", err, out, errOut)
	}
}

// createMerchant onboards a merchant through the CLI and checks that every
// credential the JSON promises is there.
func createMerchant(t testing.TB, dataDir, name string) merchantCreds {
	t.Helper()
	out, errOut, err := runKadi(t, "merchant", "create", "--data-dir", dataDir, "--name", name, "--json")
	if err != nil {
		t.Fatalf("kadi merchant create: %v\nstderr: %s", err, errOut)
	}
	if bytes.Contains(errOut, []byte("database is locked")) {
		t.Fatalf("kadi merchant create met a locked database: %s", errOut)
	}
	var m merchantCreds
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("kadi merchant create --json printed %q: %v", out, err)
	}
	for field, v := range map[string]string{
		"merchantCode": m.MerchantCode, "username": m.Username, "password": m.Password,
		"billerCode": m.BillerCode, "outletCode": m.OutletCode, "serviceId": m.ServiceID,
		"systemCode": m.SystemCode, "settlementAccount": m.SettlementAccount,
		"test.apiKey": m.Test.APIKey, "test.notificationSecret": m.Test.NotificationSecret,
		"live.apiKey": m.Live.APIKey, "live.notificationSecret": m.Live.NotificationSecret,
	} {
		if v == "" {
			t.Fatalf("kadi merchant create --json: %s is empty in %s", field, out)
		}
	}
	// docs/security.md and the issue: the username is the merchant code, each
	// mode has its own key, secrets are in Standard Webhooks form.
	if m.Username != m.MerchantCode || m.Test.APIKey == m.Live.APIKey ||
		!strings.HasPrefix(m.Test.NotificationSecret, "whsec_") || !strings.HasPrefix(m.Live.NotificationSecret, "whsec_") {
		t.Fatalf("kadi merchant create --json: inconsistent credentials %s", out)
	}
	return m
}

// gateway is one `kadi serve` process on a loopback port, restartable on the
// same data dir and port.
type gateway struct {
	t       testing.TB
	DataDir string
	Addr    string // 127.0.0.1:PORT
	BaseURL string // http://127.0.0.1:PORT
	logDir  string

	// transports of the clients made by Client, to drop their connections
	// to a killed process.
	transports []*http.Transport

	extra  []string // flags for kadi serve beyond the address and data dir
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	state  *os.ProcessState
	starts int
}

// startGateway starts a gateway on a fresh data dir, with extra flags for
// kadi serve. onboard, if not nil, runs before the first start (the CLI
// also works on a running server; see TestCLIWhileServing).
func startGateway(t testing.TB, onboard func(dataDir string), extra ...string) *gateway {
	t.Helper()
	g := &gateway{t: t, DataDir: filepath.Join(t.TempDir(), "data"), logDir: t.TempDir(), extra: extra}
	g.Addr = "127.0.0.1:" + freePort(t)
	g.BaseURL = "http://" + g.Addr
	if onboard != nil {
		onboard(g.DataDir)
	}
	t.Cleanup(func() {
		if g.running() {
			g.signal(syscall.SIGKILL)
			<-g.exited
		}
		if t.Failed() {
			t.Logf("server log (last lines):\n%s", tail(g.Logs(), 40))
		}
	})
	g.Start()
	return g
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}

// Start runs `kadi serve` and waits until /healthz answers 200. Its stderr
// (the JSON log) goes to a file of its own for each start.
func (g *gateway) Start() {
	g.t.Helper()
	if g.running() {
		g.t.Fatal("gateway already running")
	}
	for attempt := 1; ; attempt++ {
		err := g.launch()
		if err == nil {
			return
		}
		// Between freePort and the child's listen, a parallel test may take
		// the port. Only a first start may move: clients of a restarted
		// gateway know its address.
		if g.starts == 1 && attempt < 3 && bytes.Contains(g.Logs(), []byte("the port is in use")) {
			g.t.Logf("port %s taken meanwhile; trying another", g.Addr)
			g.Addr = "127.0.0.1:" + freePort(g.t)
			g.BaseURL = "http://" + g.Addr
			g.starts = 0
			continue
		}
		g.t.Fatalf("%v; log:\n%s", err, tail(g.Logs(), 40))
	}
}

func (g *gateway) launch() error {
	g.starts++
	logFile, err := os.Create(filepath.Join(g.logDir, fmt.Sprintf("server-%d.log", g.starts)))
	if err != nil {
		return err
	}
	defer logFile.Close() // the child holds its own descriptor
	// stdout carries the plain lines for people (kadi serve's ready line);
	// stderr the JSON log.
	outFile, err := os.Create(filepath.Join(g.logDir, fmt.Sprintf("server-%d.out", g.starts)))
	if err != nil {
		return err
	}
	defer outFile.Close()
	cmd := exec.Command(kadiBin, append([]string{"serve", "--addr", g.Addr, "--data-dir", g.DataDir, "--public-url", g.BaseURL}, g.extra...)...)
	cmd.Stdout, cmd.Stderr = outFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start kadi serve: %w", err)
	}
	g.cmd, g.exited, g.state = cmd, make(chan struct{}), nil
	exited := g.exited
	go func() {
		_ = cmd.Wait()
		g.state = cmd.ProcessState
		close(exited)
	}()

	if err := waitReady(exited, outFile.Name(), g.BaseURL); err != nil {
		return fmt.Errorf("%w (%v)", err, g.state)
	}
	return nil
}

// waitReady waits until the child started on base has printed its ready
// line into outPath and answers /healthz. Only the ready line proves the
// child holds the port: before it, a healthy answer may come from another
// test's gateway that took the port in the meantime.
func waitReady(exited <-chan struct{}, outPath, base string) error {
	deadline := time.Now().Add(startTimeout)
	hc := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		select {
		case <-exited:
			return errors.New("kadi serve exited during start")
		default:
		}
		if out, _ := os.ReadFile(outPath); bytes.Contains(out, []byte("Kadi is ready")) {
			resp, err := hc.Get(base + "/healthz")
			last = err
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return nil
				}
				last = fmt.Errorf("/healthz answered %s", resp.Status)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kadi serve not ready after %s (last: %v)", startTimeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (g *gateway) running() bool {
	if g.cmd == nil {
		return false
	}
	select {
	case <-g.exited:
		return false
	default:
		return true
	}
}

func (g *gateway) signal(sig os.Signal) {
	if err := g.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		g.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Stop shuts the gateway down gracefully with SIGTERM and requires a clean
// exit.
func (g *gateway) Stop() {
	g.t.Helper()
	g.StopWith(syscall.SIGTERM)
}

// StopWith shuts the gateway down with sig and requires a clean exit.
func (g *gateway) StopWith(sig os.Signal) {
	g.t.Helper()
	g.signal(sig)
	select {
	case <-g.exited:
	case <-time.After(stopTimeout):
		g.signal(syscall.SIGKILL)
		<-g.exited
		g.t.Fatalf("kadi serve ignored %v for %s", sig, stopTimeout)
	}
	if !g.state.Success() {
		g.t.Fatalf("kadi serve after %v: %v; log:\n%s", sig, g.state, tail(g.Logs(), 20))
	}
}

// Kill ends the gateway with SIGKILL: no drain, no checkpoint, no cleanup.
func (g *gateway) Kill() {
	g.t.Helper()
	g.signal(syscall.SIGKILL)
	<-g.exited
	// Keep-alive connections to the dead process are gone; a POST is not
	// retried on a dead pooled connection, so drop them now.
	for _, tr := range g.transports {
		tr.CloseIdleConnections()
	}
	browserless.CloseIdleConnections()
	if ws, ok := g.state.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		g.t.Fatalf("kadi serve did not die of SIGKILL: %v", g.state)
	}
}

// Logs returns everything every start of the gateway has logged so far.
func (g *gateway) Logs() []byte {
	var all []byte
	for i := 1; i <= g.starts; i++ {
		b, _ := os.ReadFile(filepath.Join(g.logDir, fmt.Sprintf("server-%d.log", i)))
		all = append(all, b...)
	}
	return all
}

// Stdout is what every start printed on stdout: the lines for people.
func (g *gateway) Stdout() []byte {
	var all []byte
	for i := 1; i <= g.starts; i++ {
		b, _ := os.ReadFile(filepath.Join(g.logDir, fmt.Sprintf("server-%d.out", i)))
		all = append(all, b...)
	}
	return all
}

// LogFiles lists the files the gateway wrote to, stdout and stderr.
func (g *gateway) LogFiles() []string {
	var out []string
	for i := 1; i <= g.starts; i++ {
		out = append(out, filepath.Join(g.logDir, fmt.Sprintf("server-%d.out", i)))
		out = append(out, filepath.Join(g.logDir, fmt.Sprintf("server-%d.log", i)))
	}
	return out
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logLine is the part of the gateway's JSON log lines the tests read.
type logLine struct {
	Level  string `json:"level"`
	Msg    string `json:"msg"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	// RequestID ties every line of one request together, and to the
	// X-Request-Id header a merchant quotes to support.
	RequestID string `json:"request_id"`
}

// LogLines decodes the gateway's log; a line that is not JSON fails the
// test, since operators feed these lines to log processors.
func (g *gateway) LogLines() []logLine {
	g.t.Helper()
	var out []logLine
	sc := bufio.NewScanner(bytes.NewReader(g.Logs()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l logLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			g.t.Fatalf("server log line is not JSON: %q", sc.Text())
		}
		out = append(out, l)
	}
	return out
}

// Client returns a merchant client for this gateway in test mode, with a
// transport of its own so a test can drop connections to a killed server.
func (g *gateway) Client(t testing.TB, m merchantCreds) *client.Client {
	t.Helper()
	return g.clientWithKey(t, m, m.Test.APIKey)
}

func (g *gateway) clientWithKey(t testing.TB, m merchantCreds, apiKey string) *client.Client {
	t.Helper()
	tr := &http.Transport{}
	g.transports = append(g.transports, tr)
	c, err := client.New(client.Config{
		BaseURL: g.BaseURL, APIKey: apiKey, Username: m.MerchantCode, Password: m.Password,
		HTTPClient: &http.Client{Timeout: 60 * time.Second, Transport: contractCheck.Transport(tr, contractBroken.add)},
	})
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}

// browserless posts like a browser that the test steers by hand: it
// follows the hosted form's one 303 to its own page (POST-redirect-GET), as
// a browser does, and no other redirect, so any other 3xx from the gateway
// shows up as such.
var browserless = &http.Client{
	Timeout: 60 * time.Second,
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) == 1 && req.Response.StatusCode == http.StatusSeeOther &&
			req.URL.Host == via[0].URL.Host && strings.HasPrefix(req.URL.Path, "/cardPay/page/") {
			return nil
		}
		return http.ErrUseLastResponse
	},
}

// page is an HTML answer of the hosted form, reduced to what the tests need.
type page struct {
	Status int
	Header http.Header
	Body   string
	Forms  []htmlForm
}

type htmlForm struct {
	ID     string
	Action string
	Inputs url.Values // every named input with its value, hidden or not
}

// Form returns the page's form posting to a URL with the given path, or
// fails.
func (p page) Form(t testing.TB, actionPath string) htmlForm {
	t.Helper()
	for _, f := range p.Forms {
		u, err := url.Parse(f.Action)
		if err == nil && u.Path == actionPath {
			return f
		}
	}
	t.Fatalf("no form posting to %s on the page (HTTP %d):\n%s", actionPath, p.Status, p.Body)
	return htmlForm{}
}

func (p page) hasForm(actionPath string) bool {
	for _, f := range p.Forms {
		if u, err := url.Parse(f.Action); err == nil && u.Path == actionPath {
			return true
		}
	}
	return false
}

// postPage posts form values and reads the HTML answer.
func postPage(t testing.TB, target string, values url.Values) page {
	t.Helper()
	resp, err := browserless.PostForm(target, values)
	if err != nil {
		t.Fatalf("POST %s: %v", target, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading body: %v", target, err)
	}
	return page{Status: resp.StatusCode, Header: resp.Header, Body: string(body), Forms: parseForms(string(body))}
}

var (
	formRE  = regexp.MustCompile(`(?is)<form\b([^>]*)>(.*?)</form>`)
	inputRE = regexp.MustCompile(`(?is)<input\b([^>]*)>`)
	attrRE  = regexp.MustCompile(`(?s)([a-zA-Z_:-]+)\s*=\s*"([^"]*)"`)
)

// parseForms reads the forms of a page the gateway rendered. The gateway's
// templates quote every attribute, which keeps this a few regular
// expressions instead of an HTML parser dependency.
func parseForms(body string) []htmlForm {
	var out []htmlForm
	for _, m := range formRE.FindAllStringSubmatch(body, -1) {
		attrs := parseAttrs(m[1])
		f := htmlForm{ID: attrs["id"], Action: attrs["action"], Inputs: url.Values{}}
		for _, in := range inputRE.FindAllStringSubmatch(m[2], -1) {
			a := parseAttrs(in[1])
			if a["name"] != "" {
				f.Inputs.Add(a["name"], a["value"])
			}
		}
		out = append(out, f)
	}
	return out
}

func parseAttrs(s string) map[string]string {
	out := map[string]string{}
	for _, m := range attrRE.FindAllStringSubmatch(s, -1) {
		out[strings.ToLower(m[1])] = html.UnescapeString(m[2])
	}
	return out
}

// callbackReceiver is the merchant's callback endpoint: it parses what the
// browser posts with client.ParseCallback and answers with it as JSON, so a
// test sees exactly what the merchant's code would.
type callbackReceiver struct {
	*httptest.Server
}

func newCallbackReceiver(t testing.TB) callbackReceiver {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/callback" {
			http.NotFound(w, r)
			return
		}
		cb, err := client.ParseCallback(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cb)
	}))
	t.Cleanup(srv.Close)
	return callbackReceiver{srv}
}

// URL of the callback route, as the payment form names it.
func (r callbackReceiver) CallbackURL() string { return r.URL + "/callback" }

// follow does what the redirect page's script does: post its form to the
// merchant's callback. It checks the page first, as docs/hosted-form.md asks: a 200
// page whose only form posts the spec's seven fields to callbackURL.
func (r callbackReceiver) follow(t testing.TB, p page) client.Callback {
	t.Helper()
	if p.Status != http.StatusOK {
		t.Fatalf("redirect page: HTTP %d, want 200:\n%s", p.Status, p.Body)
	}
	f := p.Form(t, "/callback")
	if f.Action != r.CallbackURL() {
		t.Fatalf("redirect page posts to %q, want the callbackUrl %q", f.Action, r.CallbackURL())
	}
	want := []string{"orderAmount", "orderReference", "orderStatus", "message", "dateTime", "billReference", "transactionRef"}
	if len(f.Inputs) != len(want) {
		t.Errorf("redirect form fields %v, want exactly %v", keys(f.Inputs), want)
	}
	for _, k := range want {
		if _, ok := f.Inputs[k]; !ok {
			t.Errorf("redirect form lacks %s: %v", k, keys(f.Inputs))
		}
	}
	resp, err := http.PostForm(f.Action, f.Inputs)
	if err != nil {
		t.Fatalf("post callback: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("client.ParseCallback refused the gateway's callback: HTTP %d %s", resp.StatusCode, body)
	}
	var cb client.Callback
	if err := json.Unmarshal(body, &cb); err != nil {
		t.Fatalf("callback receiver answered %q: %v", body, err)
	}
	return cb
}

func keys(v url.Values) []string {
	var out []string
	for k := range v {
		out = append(out, k)
	}
	return out
}

// shopper is one merchant integration against a running gateway: the
// merchant's credentials, its client and its callback endpoint.
type shopper struct {
	g        *gateway
	m        merchantCreds
	c        *client.Client
	callback callbackReceiver
}

func newShopper(t testing.TB, g *gateway, m merchantCreds) *shopper {
	t.Helper()
	return &shopper{g: g, m: m, c: g.Client(t, m), callback: newCallbackReceiver(t)}
}

// billRequest is the bill every test creates, differing only in reference
// and amount.
func (s *shopper) billRequest(orderRef, amount string) client.BillRequest {
	return client.BillRequest{
		Customer: client.Customer{Name: "Wanjiku Kamau"},
		Order: client.Order{
			BillerCode: s.m.BillerCode, Reference: orderRef, Amount: amount, Currency: "KES",
			Description: "Order " + orderRef, Outlet: s.m.OutletCode,
		},
	}
}

func (s *shopper) createBill(t testing.TB, orderRef, amount string) *client.Bill {
	t.Helper()
	b, err := s.c.CreateBill(context.Background(), s.billRequest(orderRef, amount))
	if err != nil {
		t.Fatalf("CreateBill %s: %v", orderRef, err)
	}
	if b.OrderRef != orderRef || b.Channel != "CARD" {
		t.Fatalf("CreateBill %s: got %+v", orderRef, b)
	}
	return b
}

// paymentForm is the hosted form for b; card nil leaves the card fields out
// so the gateway shows its own card-entry page.
func (s *shopper) paymentForm(t testing.TB, b *client.Bill, card *client.CardFields) client.PaymentForm {
	t.Helper()
	token, err := s.c.Token(context.Background())
	if err != nil {
		t.Fatalf("Token: %v", err)
	}
	return s.paymentFormWith(token, b, card)
}

// paymentFormWith is paymentForm with a token already in hand.
func (s *shopper) paymentFormWith(token string, b *client.Bill, card *client.CardFields) client.PaymentForm {
	return client.PaymentForm{
		Token: token, OutletCode: s.m.OutletCode, MerchantCode: s.m.MerchantCode,
		Amount: b.Amount, OrderReference: b.OrderRef, BillReference: b.Reference,
		ProductType: "tickets", ProductDescription: "Two tickets", ServiceDate: "2026-11-21",
		CustomerFirstName: "Wanjiku", CustomerLastName: "Kamau", Country: "KE",
		MobileNumber: "+254 712345678", EmailAddress: "wanjiku@example.com",
		PostalcodeZip: "00100", Address: "1 Kenyatta Avenue", City: "Nairobi", IPAddress: "198.51.100.7",
		CallbackURL: s.callback.CallbackURL(), Card: card,
	}
}

// submit posts a payment form to the hosted form's /cardPay.
func (s *shopper) submit(t testing.TB, f client.PaymentForm) page {
	t.Helper()
	return postPage(t, s.c.PaymentFormAction(), f.Values())
}

// answerChallenge posts a 3-D Secure code on a challenge page's form.
func (s *shopper) answerChallenge(t testing.TB, challenge page, code string) page {
	t.Helper()
	f := challenge.Form(t, "/cardPay/3ds")
	if f.Inputs.Get("checkout") == "" {
		t.Fatalf("challenge page carries no checkout session id:\n%s", challenge.Body)
	}
	v := url.Values{"checkout": {f.Inputs.Get("checkout")}, "code": {code}}
	return postPage(t, s.g.BaseURL+"/cardPay/3ds", v)
}

// testCard is a card of docs/hosted-form.md with the form fields to pay with it.
func testCard(number string) *client.CardFields {
	cvv := "123"
	if strings.HasPrefix(number, "34") || strings.HasPrefix(number, "37") {
		cvv = "1234"
	}
	return &client.CardFields{
		FirstName: "Wanjiku", LastName: "Kamau", Number: number, Security: cvv,
		ExpiryMonth: "12", ExpiryYear: fmt.Sprint(time.Now().Year() + 3),
	}
}

// verify calls Verify and fails the test on an error.
func (s *shopper) verify(t testing.TB, ref string) *client.Verification {
	t.Helper()
	v, err := s.c.Verify(context.Background(), ref)
	if err != nil {
		t.Fatalf("Verify %s: %v", ref, err)
	}
	return v
}

// billLoad keeps a gateway busy with bill writes in the background, one
// every pace (the machine is shared), noting each acknowledged reference.
type billLoad struct {
	stop chan struct{}
	wg   sync.WaitGroup
	err  chan error

	mu    sync.Mutex
	acked []string
}

// startBillLoad creates bills for s under order references prefix0,
// prefix1… until Stop or the first error; the test's end stops it too.
func startBillLoad(t testing.TB, s *shopper, prefix, amount string, pace time.Duration) *billLoad {
	l := &billLoad{stop: make(chan struct{}), err: make(chan error, 1)}
	l.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			default:
			}
			ref := fmt.Sprintf("%s%d", prefix, i)
			if _, err := s.c.CreateBill(context.Background(), s.billRequest(ref, amount)); err != nil {
				l.err <- fmt.Errorf("create %s: %w", ref, err)
				return
			}
			l.mu.Lock()
			l.acked = append(l.acked, ref)
			l.mu.Unlock()
			time.Sleep(pace)
		}
	})
	t.Cleanup(func() { l.Stop() })
	return l
}

// Acked is the references acknowledged so far, in order.
func (l *billLoad) Acked() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.acked)
}

// Stop ends the load, waits for it, and returns the error that ended it
// early, if one did.
func (l *billLoad) Stop() error {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	select {
	case err := <-l.err:
		return err
	default:
		return nil
	}
}
