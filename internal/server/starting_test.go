package server_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

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
	get := func(path, accept string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
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
	for _, tt := range []struct {
		path, accept string
		status       int
		body         string
	}{
		{"/livez", "", http.StatusOK, `{"status":"alive"}`},
		{"/readyz", "", http.StatusServiceUnavailable, `"failed":"starting"`},
		{"/healthz", "", http.StatusServiceUnavailable, `{"status":"unavailable"}`},
		{"/payment/v2/query?billReference=x", "", http.StatusServiceUnavailable, `"code":"temporarily_unavailable"`},
		{"/identity/v2/token", "application/json", http.StatusServiceUnavailable, `"error":"temporarily_unavailable"`},
		{"/cardPay/page/x", "text/html,application/xhtml+xml", http.StatusServiceUnavailable, "Nothing was charged"},
	} {
		status, h, body := get(tt.path, tt.accept)
		if status != tt.status || !strings.Contains(body, tt.body) {
			t.Errorf("%s while starting: %d %s, want %d with %s", tt.path, status, body, tt.status, tt.body)
		}
		if status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
			t.Errorf("%s while starting: a 503 without Retry-After", tt.path)
		}
	}
	// A client's kept-alive connection to the interim server is closed
	// by the handoff; its next request reaches the gateway.
	stop()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "the gateway") })}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	for range 3 {
		if status, _, body := get("/livez", ""); status != http.StatusOK || body != "the gateway" {
			t.Fatalf("after the handoff: %d %q, want the gateway's answer", status, body)
		}
	}
	if _, ok := ln.(*net.TCPListener); !ok {
		t.Fatalf("Listen gave a %T: the handoff needs a TCP listener", ln)
	}
}
