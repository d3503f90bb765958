package server_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/contract"
	"github.com/kadipay/kadi/internal/server"
)

// While a node starts (its database waited for, its migrations run) its
// port answers: alive, not ready, and 503 with Retry-After to anything
// else, a page to a browser; then the listener goes on to the gateway,
// still open.
func TestAnswerWhileStarting(t *testing.T) {
	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	base := "http://" + ln.Addr().String()
	stop := server.AnswerWhileStarting(ln)
	client := &http.Client{Timeout: 5 * time.Second}
	do := func(method, path, accept string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body)
	}
	// Each answer is its endpoint's outage answer, as api/openapi.yaml
	// describes it, so clients read it as any 503.
	v, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		method, path, accept string
		status               int
		body                 string
	}{
		{"GET", "/livez", "", http.StatusOK, `{"status":"alive"}`},
		{"GET", "/readyz", "", http.StatusServiceUnavailable, `"failed":"starting"`},
		{"GET", "/healthz", "", http.StatusServiceUnavailable, `{"status":"unavailable"}`},
		{"GET", "/payment/v2/query?billReference=x", "", http.StatusServiceUnavailable, `"code":"temporarily_unavailable"`},
		{"POST", "/payment/v2/bills", "", http.StatusServiceUnavailable, `"status":false`},
		{"POST", "//payment/v2/bills", "", http.StatusServiceUnavailable, `"status":false`},
		{"GET", "//livez", "", http.StatusOK, `{"status":"alive"}`},
		{"POST", "/identity/v2/token", "application/json", http.StatusServiceUnavailable, `"error":"temporarily_unavailable"`},
		{"POST", "/token/", "", http.StatusServiceUnavailable, `"error":"temporarily_unavailable"`},
		{"POST", "/cardPay", "", http.StatusServiceUnavailable, "Nothing was charged"},
		{"GET", "/cardPay/page/x", "text/html,application/xhtml+xml", http.StatusServiceUnavailable, "Nothing was charged"},
		{"GET", "/dashboard/payments", "", http.StatusServiceUnavailable, "Nothing was charged"},
	} {
		status, h, body := do(tt.method, tt.path, tt.accept)
		if status != tt.status || !strings.Contains(body, tt.body) {
			t.Errorf("%s while starting: %d %s, want %d with %s", tt.path, status, body, tt.status, tt.body)
		}
		if status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
			t.Errorf("%s while starting: a 503 without Retry-After", tt.path)
		}
		// A refresh reloads by GET: never on the answer to a post.
		if refresh := strings.Contains(body, `http-equiv="refresh"`); refresh != (tt.method == "GET" && strings.Contains(body, "<html")) {
			t.Errorf("%s %s while starting: refresh %v", tt.method, tt.path, refresh)
		}
		req := httptest.NewRequest(tt.method, tt.path, nil)
		if err := v.Response(req, status, h, []byte(body)); err != nil && !errors.Is(err, contract.ErrNoOperation) {
			t.Errorf("%s %s while starting breaks api/openapi.yaml: %v", tt.method, tt.path, err)
		}
	}
	// A client's kept-alive connection to the interim server is closed
	// by the handoff; its next request reaches the gateway.
	stop()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the gateway") })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	for range 3 {
		if status, _, body := do("GET", "/livez", ""); status != http.StatusOK || body != "the gateway" {
			t.Fatalf("after the handoff: %d %q, want the gateway's answer", status, body)
		}
	}
	if _, ok := ln.(*net.TCPListener); !ok {
		t.Fatalf("Listen gave a %T: the handoff needs a TCP listener", ln)
	}
}
