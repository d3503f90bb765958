package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// The client address the throttle counts: behind a trusted proxy, the
// client it names; from anyone else, the socket's peer, whatever headers
// say. A header anyone can send must not choose the address a guess is
// counted against (nor spread guesses over made-up addresses).
func TestThrottleCountsTheClientAddress(t *testing.T) {
	const proxy = "10.0.0.2:4000"
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name    string
		trusted []netip.Prefix
		peer    string
		header  string
		guesses func(i int) string // the header's value on the ith failure
		probe   string             // the header's value on the request after them
		want    int                // the probe's status
	}{
		{"trusted proxy: another client is not slowed", trusted, proxy, "X-Forwarded-For",
			func(int) string { return "198.51.100.1" }, "198.51.100.2", http.StatusUnauthorized},
		{"trusted proxy: the guessing client is slowed", trusted, proxy, "X-Forwarded-For",
			func(int) string { return "198.51.100.1" }, "198.51.100.1", http.StatusTooManyRequests},
		{"trusted proxy, Forwarded: another client is not slowed", trusted, proxy, "Forwarded",
			func(int) string { return `for="[2001:db8::1]:1234"` }, "for=198.51.100.2", http.StatusUnauthorized},
		{"trusted proxy, Forwarded: the guessing client is slowed", trusted, proxy, "Forwarded",
			func(int) string { return `for="[2001:db8::1]:1234"` }, "for=2001:db8::1", http.StatusTooManyRequests},
		{"trusted proxy: a forged hop left of the real one changes nothing", trusted, proxy, "X-Forwarded-For",
			func(i int) string { return fmt.Sprintf("192.0.2.%d, 198.51.100.1", i) }, "198.51.100.1", http.StatusTooManyRequests},
		{"untrusted peer: spoofed X-Forwarded-For ignored", trusted, "203.0.113.7:4000", "X-Forwarded-For",
			func(i int) string { return fmt.Sprintf("198.51.100.%d", i) }, "198.51.100.200", http.StatusTooManyRequests},
		{"untrusted peer: spoofed Forwarded ignored", trusted, "203.0.113.7:4000", "Forwarded",
			func(i int) string { return fmt.Sprintf("for=198.51.100.%d", i) }, "for=198.51.100.200", http.StatusTooManyRequests},
		{"no trusted proxies: the header ignored", nil, proxy, "X-Forwarded-For",
			func(i int) string { return fmt.Sprintf("198.51.100.%d", i) }, "198.51.100.200", http.StatusTooManyRequests},
		{"trusted proxy, garbage: the proxy's own address", trusted, proxy, "X-Forwarded-For",
			func(i int) string { return fmt.Sprintf("garbage%d", i) }, "198.51.100.200, junk", http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := servertest.Start(t, servertest.Options{TrustedProxies: tc.trusted})
			try := func(value string) int {
				req := servertest.TokenRequest("kadi_test_no_such_key", "4900000001", "wrong-password-1")
				req.RemoteAddr = tc.peer
				req.Header.Set(tc.header, value)
				return g.Serve(req).Code
			}
			// The free failures and one more: the address now waits a second.
			for i := range 11 {
				if code := try(tc.guesses(i)); code != http.StatusUnauthorized {
					t.Fatalf("guess %d: %d, want 401", i+1, code)
				}
			}
			if code := try(tc.probe); code != tc.want {
				t.Errorf("probe %s: %s: %d, want %d", tc.header, tc.probe, code, tc.want)
			}
		})
	}
}

// The merchant's lockout is audited with the client's address, and the
// access line names the client and the proxy that vouched for it.
func TestAuditAndLogNameTheClientBehindAProxy(t *testing.T) {
	g := servertest.Start(t, servertest.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	c := g.Onboard("Proxied Shop")
	for i := range 10 {
		req := servertest.TokenRequest(c.Test.APIKey, c.Username, "wrong-password-1")
		req.RemoteAddr = "127.0.0.1:5555"
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("192.0.2.%d, 2001:db8::7", i))
		if rec := g.Serve(req); rec.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s", i+1, rec.Code, rec.Body)
		}
	}
	evs, err := g.Store.AuditEvents(t.Context(), c.MerchantCode, 10)
	if err != nil {
		t.Fatal(err)
	}
	var actors []string
	for _, e := range evs {
		if e.Action == audit.LockedOut {
			actors = append(actors, e.Actor)
		}
	}
	if len(actors) != 1 || actors[0] != "ip:2001:db8::7" {
		t.Errorf("lockout audited by %q, want the client ip:2001:db8::7", actors)
	}

	var found bool
	sc := bufio.NewScanner(strings.NewReader(g.Logs.String()))
	for sc.Scan() {
		var l struct{ Msg, Remote, Proxy, Path string }
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "request" || l.Path != "/identity/v2/token" {
			continue
		}
		found = true
		if l.Remote != "2001:db8::7" || l.Proxy != "127.0.0.1" {
			t.Errorf("access line: remote %q proxy %q, want the client 2001:db8::7 via 127.0.0.1", l.Remote, l.Proxy)
		}
	}
	if !found {
		t.Fatalf("no access line for the token requests in:\n%s", g.Logs)
	}
}

// /metrics goes by the socket's peer, never by a client a header names,
// and never answers what came through a proxy: behind a proxy on loopback
// every outside request arrives from 127.0.0.1 (it was answered 200: the
// world read /metrics through the docs' own nginx).
func TestMetricsAllowIgnoresForwardedClients(t *testing.T) {
	g := servertest.Start(t, servertest.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	for _, tc := range []struct {
		peer, xff string
		want      int
	}{
		{"127.0.0.1:5555", "", http.StatusNotFound},             // the trusted proxy: passing someone's request on
		{"127.0.0.1:5555", "198.51.100.1", http.StatusNotFound}, // the proxy, naming its client
		{"[::1]:5555", "", http.StatusOK},                       // a local scraper, not the proxy
		{"[::1]:5555", "198.51.100.1", http.StatusNotFound},     // forwarded by some proxy
		{"198.51.100.1:5555", "127.0.0.1", http.StatusNotFound},
	} {
		req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = tc.peer
		if tc.xff != "" {
			req.Header.Set("X-Forwarded-For", tc.xff)
		}
		if code := g.Serve(req).Code; code != tc.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %d, want %d", tc.peer, tc.xff, code, tc.want)
		}
	}
}
