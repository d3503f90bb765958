package server_test

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
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server"
	"github.com/kadipay/kadi/internal/server/servertest"
	"github.com/kadipay/kadi/internal/store"
	"github.com/kadipay/kadi/internal/store/storetest"
)

// docs/api.md: every response carries a request id, whoever answers it.
func TestEveryResponseHasARequestID(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Id Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "ID1", "10")
	for name, req := range map[string]*http.Request{
		"token":                 servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password),
		"bad token":             servertest.TokenRequest("nope", c.Username, c.Password),
		"bill":                  servertest.BillRequest(tok, servertest.BillBody(c, "ID2", "10")),
		"query":                 servertest.QueryRequest(tok, b.Reference),
		"card page":             servertest.CardPayRequest(servertest.FormFields(c, tok, b)),
		"error page":            servertest.CardPayRequest(nil),
		"challenge":             servertest.ChallengeRequest("pay_nope", "1"),
		"static file":           httptest.NewRequest(http.MethodGet, "/static/kadi.css", nil),
		"health":                httptest.NewRequest(http.MethodGet, "/healthz", nil),
		"not found":             httptest.NewRequest(http.MethodGet, "/nowhere", nil),
		"form body over 64 KiB": servertest.CardPayRequest(map[string][]string{"address": {strings.Repeat("a", 70<<10)}}),
	} {
		rec := g.Serve(req)
		if rec.Header().Get(server.RequestIDHeader) == "" {
			t.Errorf("%s (%d): no %s", name, rec.Code, server.RequestIDHeader)
		}
		if rec.Code >= 500 {
			t.Errorf("%s: %d for a client's request", name, rec.Code)
		}
	}
}

func TestHealth(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	rec := g.Serve(httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"status":"ok"}` {
		t.Errorf("healthz: %d %s", rec.Code, rec.Body)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	// One ping answers probes for a quarter of a second; within that the
	// closed database shows.
	deadline := time.Now().Add(2 * time.Second)
	for {
		rec = g.Serve(httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healthz with the database closed: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Without a configured key the single-node default makes one in the data
// dir, readable by the owner only, and uses it again after a restart: a
// token issued before the restart still verifies after it.
func TestMasterKeyFileSurvivesRestart(t *testing.T) {
	t.Setenv("KADI_SECRET_KEY", "")
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	dir := t.TempDir()
	cfg := server.Defaults()
	cfg.DataDir = dir
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	g1, err := server.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := merchant.Onboard(context.Background(), g1.Store, "Restart Shop", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	g1.Handler.ServeHTTP(rec, servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password))
	if rec.Code != http.StatusOK {
		t.Fatalf("token: %d %s", rec.Code, rec.Body)
	}
	token := strings.Split(strings.Split(rec.Body.String(), `"access_token":"`)[1], `"`)[0]
	if err := g1.Close(); err != nil {
		t.Fatal(err)
	}

	info, err := os.Stat(filepath.Join(dir, "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("secret.key has mode %v, want owner-only", perm)
	}

	g2, err := server.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	rec = httptest.NewRecorder()
	g2.Handler.ServeHTTP(rec, servertest.QueryRequest(token, "NOSUCHBILL01"))
	if rec.Code != http.StatusNotFound {
		t.Errorf("token from before the restart: %d %s, want 404 (accepted, no such bill)", rec.Code, rec.Body)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := func(t *testing.T) server.Config {
		cfg := server.Defaults()
		cfg.DataDir = t.TempDir()
		cfg.MasterKey = make([]byte, 32)
		return cfg
	}
	cases := map[string]func(t *testing.T) server.Config{
		"unknown time zone":   func(t *testing.T) server.Config { c := base(t); c.TimeZone = "Mars/Olympus"; return c },
		"zero token lifetime": func(t *testing.T) server.Config { c := base(t); c.TokenTTL = 0; return c },
		"bill TTL beyond --bill-max-ttl": func(t *testing.T) server.Config {
			c := base(t)
			c.Bills.TTL, c.Bills.MaxTTL = 48*time.Hour, 24*time.Hour
			return c
		},
		"unknown default region": func(t *testing.T) server.Config { c := base(t); c.DefaultRegion = "XX"; return c },
		"negative pool size":     func(t *testing.T) server.Config { c := base(t); c.DBPool.MaxConns = -1; return c },
		"token lifetime over a day": func(t *testing.T) server.Config {
			c := base(t)
			c.TokenTTL = 25 * time.Hour
			return c
		},
		"short key in the environment": func(t *testing.T) server.Config {
			c := base(t)
			c.MasterKey = nil
			t.Setenv("KADI_SECRET_KEY", "abcd")
			return c
		},
		"both the key and a key file": func(t *testing.T) server.Config {
			c := base(t)
			c.MasterKey = nil
			ring := filepath.Join(t.TempDir(), "ring")
			if err := os.WriteFile(ring, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			t.Setenv("KADI_SECRET_KEY", strings.Repeat("cd", 32))
			t.Setenv("KADI_SECRET_KEY_FILE", ring)
			return c
		},
		"shared database without a key": func(t *testing.T) server.Config {
			c := base(t)
			c.MasterKey = nil
			t.Setenv("KADI_SECRET_KEY", "")
			t.Setenv("KADI_SECRET_KEY_FILE", "")
			c.DatabaseURL = "postgres://127.0.0.1:1/none"
			return c
		},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			if g, err := server.New(context.Background(), cfg(t), log); err == nil {
				g.Close()
				t.Error("New accepted the configuration")
			}
		})
	}
}

// /metrics sits beside the API by default; with MetricsAddr it moves to its
// own listener and the public one no longer answers it.
func TestMetricsListener(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	get := func(h http.Handler) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = "127.0.0.1:5555"
		h.ServeHTTP(rec, req)
		return rec.Code
	}

	cfg := server.Defaults()
	cfg.DataDir, cfg.MasterKey = t.TempDir(), secret.RandomBytes(32)
	g, err := server.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if code := get(g.Handler); code != http.StatusOK {
		t.Errorf("default /metrics: %d, want 200", code)
	}

	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MetricsAddr = free.Addr().String()
	free.Close()
	cfg.DataDir = t.TempDir()
	g2, err := server.New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	if code := get(g2.Handler); code != http.StatusNotFound {
		t.Errorf("public /metrics with a metrics address: %d, want 404", code)
	}
	defer serve(t, g2).stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + cfg.MetricsAddr + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "kadi_") {
				t.Fatalf("metrics listener: %s\n%s", resp.Status, body)
			}
			// Not the command line: a --database-url holds a password.
			if resp, err := http.Get("http://" + cfg.MetricsAddr + "/debug/pprof/cmdline"); err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "server.test") {
					t.Errorf("the command line on the metrics listener: %s\n%s", resp.Status, body)
				}
			}
			// Twice the slash, as a scrape whose base URL ends in one asks
			// (Prometheus follows no redirect).
			noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			if resp, err := noRedirect.Get("http://" + cfg.MetricsAddr + "//metrics"); err != nil {
				t.Errorf("//metrics on the metrics listener: %v", err)
			} else {
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("//metrics on the metrics listener: %s, want 200", resp.Status)
				}
			}
			// The profiler lives there, and only there.
			resp, err = http.Get("http://" + cfg.MetricsAddr + "/debug/pprof/goroutine?debug=1")
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine profile") {
				t.Errorf("pprof on the metrics listener: %s", resp.Status)
			}
			for _, h := range []http.Handler{g2.Handler, g2.FormHandler, g2.DashboardHandler} {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pprof/", nil))
				if rec.Code != http.StatusNotFound {
					t.Errorf("pprof on a public listener: %d", rec.Code)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics listener never answered: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Given, --metrics-allow also names who --metrics-addr's /metrics and
// profiler answer (it was silently ignored there, and they answered
// anyone); not given, that listener answers anyone who reaches it, as
// before. Its /livez and /readyz answer anyone: a kubelet probes them from
// the node's address.
func TestMetricsListenerAllowList(t *testing.T) {
	ask := func(h http.Handler, method, path, peer string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, nil)
		req.RemoteAddr = peer
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	scraper, outsider := "10.1.2.3:40000", "127.0.0.1:5555"
	for _, guarded := range []bool{true, false} {
		cfg := server.Defaults()
		cfg.DataDir, cfg.MasterKey, cfg.MetricsAddr = t.TempDir(), secret.RandomBytes(32), "127.0.0.1:0"
		cfg.MetricsAllow, cfg.GuardMetricsAddr = []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")}, guarded
		g, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		h := g.MetricsListener()
		for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/symbol"} {
			if code := ask(h, http.MethodGet, path, scraper); code != http.StatusOK {
				t.Errorf("guarded %t: %s from a named scraper: %d", guarded, path, code)
			}
			want := http.StatusOK
			if guarded {
				want = http.StatusNotFound
			}
			if code := ask(h, http.MethodGet, path, outsider); code != want {
				t.Errorf("guarded %t: %s from a peer not named: %d, want %d", guarded, path, code, want)
			}
		}
		if code := ask(h, http.MethodGet, "/livez", outsider); code != http.StatusOK {
			t.Errorf("guarded %t: /livez from a peer not named: %d", guarded, code)
		}
		if code := ask(h, http.MethodGet, "/readyz", outsider); code == http.StatusNotFound {
			t.Errorf("guarded %t: /readyz from a peer not named: %d", guarded, code)
		}
		g.Close()
	}
}

// A metrics listener reachable beyond the host is warned about (its
// profiler answers anyone), unless --metrics-allow guards it; one on
// loopback is not. One on --addr's own
// address says so, not "in use".
func TestMetricsListenerBeyondLoopbackWarns(t *testing.T) {
	for _, tt := range []struct {
		host    string
		guarded bool
		warn    bool
	}{{"0.0.0.0", false, true}, {"127.0.0.1", false, false}, {"0.0.0.0", true, false}} {
		free, err := net.Listen("tcp", tt.host+":0")
		if err != nil {
			t.Fatal(err)
		}
		var logs servertest.LogBuffer
		cfg := server.Defaults()
		cfg.DataDir, cfg.MasterKey, cfg.MetricsAddr = t.TempDir(), secret.RandomBytes(32), free.Addr().String()
		cfg.GuardMetricsAddr = tt.guarded
		free.Close()
		ready := make(chan struct{})
		cfg.Ready = func(string) { close(ready) }
		g, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		s := serve(t, g)
		select {
		case <-ready:
		case <-s.done:
			t.Fatalf("serve: %v", s.err)
		}
		s.stop()
		g.Close()
		if warned := strings.Contains(logs.String(), "--metrics-addr is reachable beyond this host"); warned != tt.warn {
			t.Errorf("metrics on %s, guarded %t: warned %t, want %t\n%s", tt.host, tt.guarded, warned, tt.warn, logs.String())
		}
	}

	cfg := server.Defaults()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.MasterKey, cfg.MetricsAddr = t.TempDir(), secret.RandomBytes(32), ln.Addr().String()
	g, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Serve(context.Background(), ln); err == nil || !strings.Contains(err.Error(), "is --addr's own address") {
		t.Errorf("metrics on --addr's address: %v", err)
	}
}

// With FormAddr the hosted form leaves the API's listener for its own, and
// the API stays off the form's; both keep /healthz.
func TestFormListener(t *testing.T) {
	cfg := server.Defaults()
	cfg.DataDir, cfg.MasterKey, cfg.FormAddr = t.TempDir(), secret.RandomBytes(32), "127.0.0.1:0"
	g, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	do := func(h http.Handler, method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("token=x")))
		return rec
	}
	if rec := do(g.Handler, http.MethodPost, "/cardPay"); rec.Code != http.StatusNotFound {
		t.Errorf("API listener answers /cardPay: %d", rec.Code)
	}
	if rec := do(g.FormHandler, http.MethodPost, "/cardPay"); rec.Code != http.StatusSeeOther {
		t.Errorf("form listener /cardPay with a bad token: %d, want 303 to our error page", rec.Code)
	} else if rec := do(g.FormHandler, http.MethodGet, rec.Header().Get("Location")); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Header().Get("Content-Type"), "text/html") {
		t.Errorf("form listener's error page: %d %s, want our 401 page", rec.Code, rec.Header().Get("Content-Type"))
	}
	if rec := do(g.FormHandler, http.MethodPost, "/payment/v2/bills"); rec.Code != http.StatusNotFound {
		t.Errorf("form listener answers the bill API: %d", rec.Code)
	}
	for _, h := range []http.Handler{g.Handler, g.FormHandler} {
		if rec := do(h, http.MethodGet, "/healthz"); rec.Code != http.StatusOK || rec.Header().Get("X-Request-Id") == "" {
			t.Errorf("healthz: %d, request id %q", rec.Code, rec.Header().Get("X-Request-Id"))
		}
		// Browsers ask every listener whose page they show for its icon.
		rec := do(h, http.MethodGet, "/favicon.ico")
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "image/x-icon" || !bytes.HasPrefix(rec.Body.Bytes(), []byte{0, 0, 1, 0}) {
			t.Errorf("favicon.ico: %d %s, starts % x", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Bytes()[:min(4, rec.Body.Len())])
		}
	}
	// GET / lists what its own listener serves: each listed a 404 of the
	// other's, and the form's linked the dashboard it does not serve.
	for _, tt := range []struct {
		h          http.Handler
		has, hasNo []string
	}{
		{g.Handler, []string{"/payment/v2/bills", "/identity/v2/token", "/dashboard/"}, []string{"/cardPay"}},
		{g.FormHandler, []string{"/cardPay", "/healthz"}, []string{"/payment/v2/bills", "/identity/v2/token", "/dashboard/"}},
	} {
		body := do(tt.h, http.MethodGet, "/").Body.String()
		for _, p := range tt.has {
			if !strings.Contains(body, `"`+p) {
				t.Errorf("GET / does not list %s:\n%s", p, body)
			}
		}
		for _, p := range tt.hasNo {
			if strings.Contains(body, `"`+p) {
				t.Errorf("GET / lists %s, which this listener does not serve:\n%s", p, body)
			}
		}
	}
}

// Notification secrets and IPN passwords must be stored usable, so they are
// sealed rather than hashed: a copy of the data dir's database shows neither,
// while the gateway still reads them back.
func TestSecretsSealedAtRest(t *testing.T) {
	cfg := server.Defaults()
	cfg.DataDir, cfg.MasterKey = t.TempDir(), secret.RandomBytes(32)
	g, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := merchant.Onboard(ctx, g.Store, "Sealed Shop", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const ipnPassword = "ipn-Password-0123456789"
	if _, err := g.Store.SetIPN(ctx, c.MerchantCode, merchant.Test, merchant.IPNConfig{URL: "https://shop.example/ipn", Username: "u", Password: ipnPassword}); err != nil {
		t.Fatal(err)
	}
	st, err := g.Store.Settings(ctx, c.MerchantCode, merchant.Test)
	if err != nil || st.NotificationSecret != c.Test.NotificationSecret || st.IPN.Password != ipnPassword {
		t.Fatalf("settings read back %+v, %v", st, err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	var disk []byte
	for _, name := range []string{"kadi.db", "kadi.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(cfg.DataDir, name))
		disk = append(disk, b...)
	}
	if !bytes.Contains(disk, []byte("sealed:v2:")) {
		t.Fatal("no sealed value in the database: the scan reads the wrong bytes")
	}
	for _, clear := range []string{c.Test.NotificationSecret, c.Live.NotificationSecret, ipnPassword} {
		if bytes.Contains(disk, []byte(clear)) {
			t.Errorf("%s… is in the database in clear", clear[:8])
		}
	}
}

// GET / tells whoever opens the gateway's address what it is, in HTML for
// a browser and JSON for curl, instead of a JSON 404.
func TestHome(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	rec := g.Serve(req)
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(body, "Kadi payment gateway") || !strings.Contains(body, "/payment/v2/bills") || !strings.Contains(body, "/docs") {
		t.Errorf("GET / from a browser: %d %s\n%s", rec.Code, rec.Header().Get("Content-Type"), body)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("home page CSP %q", csp)
	}
	rec = g.Serve(httptest.NewRequest(http.MethodGet, "/", nil))
	var doc struct {
		Name      string
		Docs      string
		Endpoints []struct{ Method, Path string }
	}
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &doc) != nil || doc.Name == "" || len(doc.Endpoints) == 0 {
		t.Errorf("GET / from curl: %d %s", rec.Code, rec.Body)
	}
	if rec := g.Serve(httptest.NewRequest(http.MethodGet, "/nowhere", nil)); rec.Code != http.StatusNotFound {
		t.Errorf("an unknown path: %d, want 404", rec.Code)
	}
}

// kadi serve warns when other users may enter the data dir, and says how
// to close it; a private dir gets no warning.
func TestWarnsAboutASharedDataDir(t *testing.T) {
	for _, tt := range []struct {
		mode os.FileMode
		warn bool
	}{{0o755, true}, {0o750, true}, {0o700, false}} {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(dir, tt.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, tt.mode); err != nil {
			t.Fatal(err)
		}
		cfg := server.Defaults()
		cfg.DataDir, cfg.MasterKey = dir, make([]byte, 32)
		var logs bytes.Buffer
		g, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		g.Close()
		if warned := strings.Contains(logs.String(), "chmod 700 "+dir); warned != tt.warn {
			t.Errorf("data dir %04o: warned %t, want %t\n%s", tt.mode, warned, tt.warn, logs.String())
		}
	}
}

// /metrics beside the API answers only the peers --metrics-allow names
// (loopback by default); anyone else gets the 404 of an unknown path, so
// its existence says nothing. Forwarded headers are not believed.
func TestMetricsOnlyForAllowedPeers(t *testing.T) {
	scrape := func(g *servertest.Gateway, peer string, header http.Header) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = peer
		maps.Copy(req.Header, header)
		return g.Serve(req)
	}
	g := servertest.Start(t, servertest.Options{})
	for peer, want := range map[string]int{
		"127.0.0.1:5555": http.StatusOK, "127.9.9.9:1": http.StatusOK, "[::1]:5555": http.StatusOK,
		"203.0.113.7:5555": http.StatusNotFound, "10.1.2.3:80": http.StatusNotFound, "[2001:db8::1]:443": http.StatusNotFound,
	} {
		rec := scrape(g, peer, nil)
		if rec.Code != want {
			t.Errorf("default allow list, peer %s: %d, want %d", peer, rec.Code, want)
		}
		if want == http.StatusNotFound && rec.Body.String() != g.Serve(httptest.NewRequest(http.MethodGet, "/nowhere", nil)).Body.String() {
			t.Errorf("refused scrape from %s does not look like an unknown path: %s", peer, rec.Body)
		}
	}
	// Nor with another method: a 405 with Allow: GET told an outsider
	// the path was there.
	post := httptest.NewRequest(http.MethodPost, "/metrics", nil)
	post.RemoteAddr = "203.0.113.7:5555"
	if rec := g.Serve(post); rec.Code != http.StatusNotFound || rec.Header().Get("Allow") != "" {
		t.Errorf("POST /metrics from an outside peer: %d, Allow %q", rec.Code, rec.Header().Get("Allow"))
	}
	spoofed := http.Header{"X-Forwarded-For": {"127.0.0.1"}, "Forwarded": {"for=127.0.0.1"}}
	if rec := scrape(g, "203.0.113.7:5555", spoofed); rec.Code != http.StatusNotFound {
		t.Errorf("a forwarded header from an outside peer opened /metrics: %d", rec.Code)
	}

	// Through a proxy on the same host every outside request comes from
	// loopback: one that says it was forwarded, or comes from a trusted
	// proxy, is not a local scrape (/metrics was public behind the docs'
	// own nginx).
	for _, h := range []http.Header{{"X-Forwarded-For": {"203.0.113.7"}}, {"Forwarded": {"for=203.0.113.7"}}, {"X-Real-Ip": {"203.0.113.7"}}} {
		if rec := scrape(g, "127.0.0.1:5555", h); rec.Code != http.StatusNotFound {
			t.Errorf("a request from loopback forwarded with %v opened /metrics: %d", h, rec.Code)
		}
	}
	proxied := servertest.Start(t, servertest.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	if rec := scrape(proxied, "127.0.0.1:5555", nil); rec.Code != http.StatusNotFound {
		t.Errorf("a request from the trusted proxy opened /metrics: %d", rec.Code)
	}
	if rec := scrape(proxied, "[::1]:5555", nil); rec.Code != http.StatusOK {
		t.Errorf("a local scrape beside the proxy: %d", rec.Code)
	}

	custom := servertest.Start(t, servertest.Options{MetricsAllow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	for peer, want := range map[string]int{"10.1.2.3:80": http.StatusOK, "127.0.0.1:5555": http.StatusNotFound} {
		if rec := scrape(custom, peer, nil); rec.Code != want {
			t.Errorf("allow 10.0.0.0/8, peer %s: %d, want %d", peer, rec.Code, want)
		}
	}
}

// A scrape only reads: the gauges that come from the database are
// refreshed in the background, so scraping (or a flood of scrapes) costs
// the database nothing.
func TestScrapeDoesNotQueryTheDatabase(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Gauge Shop")
	g.Pay(c, g.Token(c, merchant.Test), "GAUGE1", "10", servertest.Card{Number: "4242424242424242", CVV: "737"})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr = "127.0.0.1:5555"
	body := g.Serve(req).Body.String()
	// One notification waits in the queue, but no background refresh has
	// run (the test never starts Serve): the gauge still reads 0.
	if !strings.Contains(body, "kadi_ipn_queue_depth 0\n") {
		t.Errorf("a scrape read the queue depth from the database:\n%s", body)
	}
}

// TestARefusalIsOneLogLine: a refused request (4xx) is the client's doing;
// its reason goes on its access line rather than a line of its own, so a
// flood of bad requests costs one write each and an operator reads one
// line per request.
func TestARefusalIsOneLogLine(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Shop")
	tok := g.Token(c, merchant.Test)
	for name, tt := range map[string]struct {
		req        *http.Request
		status     int
		refused    string
		reasonPart string
	}{
		"query miss": {servertest.QueryRequest(tok, "NOSUCHBILL"), http.StatusNotFound, "request refused", "not found"},
		"bad bill":   {servertest.BillRequest(tok, `{"order":`), http.StatusBadRequest, "bill refused", "invalid_json"},
		"bad token":  {servertest.TokenRequest("nope", c.Username, c.Password), http.StatusUnauthorized, "token refused", ""},
		"error page": {servertest.CardPayRequest(nil), http.StatusSeeOther, "payment page refused", "session"},
	} {
		t.Run(name, func(t *testing.T) {
			before := len(g.Logs.String())
			rec := g.ServeOnce(tt.req)
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, rec.Body)
			}
			id := rec.Header().Get(server.RequestIDHeader)
			var lines []map[string]any
			for _, line := range strings.Split(strings.TrimSpace(g.Logs.String()[before:]), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("log line %q: %v", line, err)
				}
				if m["request_id"] == id {
					lines = append(lines, m)
				}
			}
			if len(lines) == 0 || lines[len(lines)-1]["msg"] != "request" {
				t.Fatalf("lines of the request: %v", lines)
			}
			var refusal map[string]any
			for _, l := range lines {
				if l["msg"] != "request" {
					t.Errorf("a line of its own besides the access line: %v", l)
				}
				if l["refused"] != nil {
					refusal = l
				}
			}
			if refusal == nil || refusal["refused"] != tt.refused {
				t.Fatalf("no access line says %q: %v", tt.refused, lines)
			}
			if !strings.Contains(fmt.Sprint(refusal), tt.reasonPart) {
				t.Errorf("the refusal's line lacks %q: %v", tt.reasonPart, refusal)
			}
		})
	}
}

// A shutdown stops the IPN worker's claims as it begins, beside the
// requests' drain: after it, deliveries in flight ran past the 30 s that
// orchestrators wait before SIGKILL.
func TestShutdownStopsNotificationsBesideTheDrain(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	s := serve(t, g.Gateway)
	waitUntil(t, "the IPN worker to run", g.IPN.Running)

	// A request whose body is still coming keeps the drain waiting.
	conn, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /payment/v2/bills HTTP/1.1\r\nHost: kadi.test\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
	time.Sleep(100 * time.Millisecond) // for the server to read the headers
	s.cancel()
	waitUntil(t, "the IPN worker to stop while the request drains", func() bool { return !g.IPN.Running() })
	select {
	case <-s.done:
		t.Fatalf("Serve returned (%v) before the request in flight ended", s.err)
	default:
	}
	conn.Close()
	if err := s.stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// serving is a gateway serving on a loopback port of its own, for the
// tests of what Serve itself does: its listeners, its shutdown, the
// background work it runs.
type serving struct {
	addr   string
	cancel context.CancelFunc // begins the shutdown
	done   chan struct{}      // closed when Serve has returned err
	err    error
}

// serve runs g.Serve until stop, which the test's end calls if the test
// did not (before a gateway's own clean-up: a defer of g.Close runs
// first, so such a test defers stop after it).
func serve(t *testing.T, g *server.Gateway) *serving {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &serving{addr: ln.Addr().String(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = g.Serve(ctx, ln)
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

// stop shuts the gateway down and gives Serve's error once it returned.
func (s *serving) stop() error {
	s.cancel()
	<-s.done
	return s.err
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A data dir holding a database but no secret.key has its key elsewhere
// (KADI_SECRET_KEY_FILE, which sudo drops): a command run without it made
// a new key, sealed the next secret under it, and that merchant's tokens
// failed. It is refused, saying where the key should come from; a new
// data dir still gets its key made.
func TestNoNewKeyBesideAnExistingDatabase(t *testing.T) {
	t.Setenv("KADI_SECRET_KEY", "")
	ring := filepath.Join(t.TempDir(), "ring")
	t.Setenv("KADI_SECRET_KEY_FILE", ring)
	if err := os.WriteFile(ring, []byte(strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := server.OpenStore(t.Context(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	t.Setenv("KADI_SECRET_KEY_FILE", "")
	_, err = server.OpenStore(t.Context(), dir, "")
	if err == nil || !strings.Contains(err.Error(), "holds a Kadi database but no secret.key") || !strings.Contains(err.Error(), "KADI_SECRET_KEY_FILE") {
		t.Fatalf("opened without its key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "secret.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a key was made beside the database: %v", err)
	}
	fresh := t.TempDir()
	db, err = server.OpenStore(t.Context(), fresh, "")
	if err != nil {
		t.Fatalf("a new data dir: %v", err)
	}
	db.Close()
}

// A --database-url that is not a PostgreSQL URL is refused: the store read
// it as a SQLite file's path, and a keyword/value string became a local
// database named after it, password and all.
func TestDatabaseURLMustBePostgres(t *testing.T) {
	for url, ok := range map[string]bool{
		"": true, "postgres://u@h/db": true, "postgresql://u@h/db?sslmode=disable": true,
		"host=127.0.0.1 user=postgres password=S3cret dbname=kadi": false,
		"POSTGRES://u@h/db": false, "kadi.db": false, "sqlite:kadi.db": false,
	} {
		if err := server.CheckDatabaseURL(url); (err == nil) != ok {
			t.Errorf("CheckDatabaseURL(%q) = %v", url, err)
		}
	}
	t.Setenv("KADI_SECRET_KEY", strings.Repeat("ab", 32))
	t.Chdir(t.TempDir())
	const dsn = "host=127.0.0.1 password=S3cret dbname=kadi"
	if _, err := server.OpenStore(t.Context(), t.TempDir(), dsn); err == nil || strings.Contains(err.Error(), "S3cret") {
		t.Fatalf("OpenStore(%q): %v", dsn, err)
	}
	if _, err := os.Stat(dsn); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file named after the string was made: %v", err)
	}
}

// With --drain-delay a shutdown first answers /readyz 503, still serving,
// so a load balancer probing it stops sending before the listeners close:
// they closed at once, and requests sent meanwhile were refused.
func TestDrainDelayAnswersNotReadyFirst(t *testing.T) {
	cfg := server.Defaults()
	cfg.DataDir, cfg.MasterKey = t.TempDir(), secret.RandomBytes(32)
	cfg.DrainDelay = time.Second
	logs := &syncWriter{w: &bytes.Buffer{}}
	g, err := server.New(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	s := serve(t, g)
	defer s.stop()
	base := "http://" + s.addr
	readyz := func() (int, string) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	waitUntil(t, "ready", func() bool { code, _ := readyz(); return code == http.StatusOK })
	s.cancel()
	waitUntil(t, "not ready while still serving", func() bool {
		code, body := readyz()
		return code == http.StatusServiceUnavailable && strings.Contains(body, `"failed":"shutting down"`)
	})
	if err := s.stop(); err != nil {
		t.Errorf("Serve: %v", err)
	}
	// An operator watching the log sees the end, not only the start.
	if !strings.Contains(logs.String(), "stopped: every request answered") {
		t.Errorf("no line says the shutdown finished:\n%s", logs.String())
	}
}

// syncWriter lets the gateway's goroutines share one buffer.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// A key ring that does not open the database's secrets (another install's
// key file, a restore with the wrong one) is refused before anything
// starts: the node reported ready and answered every token request with a
// 500, and the CLI sealed new merchants under the stray key.
func TestForeignKeyRingRefused(t *testing.T) {
	t.Setenv("KADI_SECRET_KEY", "")
	dir := t.TempDir()
	right, wrong := filepath.Join(t.TempDir(), "right"), filepath.Join(t.TempDir(), "wrong")
	for path, key := range map[string]string{right: strings.Repeat("ab", 32), wrong: strings.Repeat("cd", 32)} {
		if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KADI_SECRET_KEY_FILE", wrong)
	empty, err := server.OpenStore(t.Context(), dir, "")
	if err != nil {
		t.Fatalf("nothing sealed yet: %v", err)
	}
	empty.Close()

	t.Setenv("KADI_SECRET_KEY_FILE", right)
	db, err := server.OpenStore(t.Context(), dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := merchant.Onboard(t.Context(), db, "Sealed Shop", time.Now()); err != nil {
		t.Fatal(err)
	}
	db.Close()

	t.Setenv("KADI_SECRET_KEY_FILE", wrong)
	var foreign *store.ForeignKeysError
	if _, err := server.OpenStore(t.Context(), dir, ""); !errors.As(err, &foreign) || !strings.Contains(err.Error(), "KADI_SECRET_KEY_FILE") {
		t.Fatalf("opened with another install's key: %v", err)
	}
	t.Setenv("KADI_SECRET_KEY_FILE", right)
	db, err = server.OpenStore(t.Context(), dir, "")
	if err != nil {
		t.Fatalf("the right key again: %v", err)
	}
	db.Close()
}

// On a shared database a ring lacking the key that sealed a secret is a
// node behind a rotation: it starts (the nodes' key check takes it out of
// the balancer when the others are ahead). A ring holding that key id
// with other bytes is another install's: refused there too.
func TestForeignKeyRingOnPostgreSQL(t *testing.T) {
	base := os.Getenv("KADI_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("KADI_TEST_DATABASE_URL is not set")
	}
	dsn := storetest.FreshSchema(t, base)
	t.Setenv("KADI_SECRET_KEY_FILE", "")
	old, fresh, other := strings.Repeat("ab", 32), strings.Repeat("cd", 32), strings.Repeat("ef", 32)
	open := func(ring string) error {
		t.Setenv("KADI_SECRET_KEY", ring)
		db, err := server.OpenStore(t.Context(), "", dsn)
		if err == nil {
			db.Close()
		}
		return err
	}
	t.Setenv("KADI_SECRET_KEY", "k1 "+fresh+", k0 "+old)
	db, err := server.OpenStore(t.Context(), "", dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := merchant.Onboard(t.Context(), db, "Rotated Shop", time.Now()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := open("k0 " + old); err != nil {
		t.Errorf("a node behind the rotation: %v", err)
	}
	t.Setenv("KADI_SECRET_KEY", "k0 "+old)
	if db, err := server.OpenStore(t.Context(), "", dsn); err != nil || db.BehindKey() != "k1" {
		t.Errorf("behind the rotation: BehindKey %q, %v", db.BehindKey(), err)
	} else {
		db.Close()
	}
	var foreign *store.ForeignKeysError
	if err := open("k1 " + other); !errors.As(err, &foreign) {
		t.Errorf("another install's ring with the same key id: %v", err)
	}
	// Once a ring that opens the secrets has started, its keys are known:
	// another install's ring whose only key shares the older id, which
	// lacks the newer key as a node behind does, is refused (it was taken
	// for one behind, and sealed new merchants' secrets no node could open
	// after), and the node behind still starts.
	if err := open("k1 " + fresh + ", k0 " + old); err != nil {
		t.Fatal(err)
	}
	if err := open("k0 " + other); !errors.As(err, &foreign) || foreign.KeyID != "k0" {
		t.Errorf("another install's ring, its only key under the older id: %v", err)
	}
	if err := open("k7 " + other); !errors.As(err, &foreign) {
		t.Errorf("another install's ring sharing no key id with the database: %v", err)
	}
	if err := open("k0 " + old); err != nil {
		t.Errorf("a node behind the rotation, once the keys are recorded: %v", err)
	}
}
