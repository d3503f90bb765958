package clientaddr

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestResolve(t *testing.T) {
	proxies := NewResolver(prefixes("10.0.0.0/8", "2001:db8:feed::/48"))
	for _, tc := range []struct {
		name     string
		resolver Resolver
		peer     string
		xff      []string
		fwd      []string
		want     string
	}{
		{"no proxies trusted: the socket", Resolver{}, "203.0.113.7:5000", []string{"198.51.100.1"}, nil, "203.0.113.7"},
		{"no proxies trusted: Forwarded ignored", Resolver{}, "203.0.113.7:5000", nil, []string{"for=198.51.100.1"}, "203.0.113.7"},
		{"untrusted peer spoofs X-Forwarded-For", proxies, "203.0.113.7:5000", []string{"198.51.100.1"}, nil, "203.0.113.7"},
		{"untrusted peer spoofs Forwarded", proxies, "203.0.113.7:5000", nil, []string{`for="[2001:db8::1]:80"`}, "203.0.113.7"},
		{"trusted proxy, no header: the proxy", proxies, "10.0.0.2:5000", nil, nil, "10.0.0.2"},
		{"trusted proxy names the client", proxies, "10.0.0.2:5000", []string{"198.51.100.1"}, nil, "198.51.100.1"},
		{"client's forged hop left of the real one", proxies, "10.0.0.2:5000", []string{"1.2.3.4, 198.51.100.1"}, nil, "198.51.100.1"},
		{"chain of trusted proxies", proxies, "10.0.0.2:5000", []string{"1.2.3.4, 198.51.100.1, 10.9.9.9, 10.0.0.5"}, nil, "198.51.100.1"},
		{"chain over several header lines", proxies, "10.0.0.2:5000", []string{"1.2.3.4", "198.51.100.1, 10.9.9.9"}, nil, "198.51.100.1"},
		{"every hop trusted: the leftmost", proxies, "10.0.0.2:5000", []string{"10.1.1.1, 10.2.2.2"}, nil, "10.1.1.1"},
		{"client garbage left of the real hop is never read", proxies, "10.0.0.2:5000", []string{"<script>, 198.51.100.1"}, nil, "198.51.100.1"},
		{"garbage line before the proxy's line", proxies, "10.0.0.2:5000", []string{"not an address", "198.51.100.1"}, nil, "198.51.100.1"},
		{"garbage where the client should be: the socket", proxies, "10.0.0.2:5000", []string{"198.51.100.1, garbage"}, nil, "10.0.0.2"},
		{"garbage behind a trusted hop: the socket", proxies, "10.0.0.2:5000", []string{"garbage, 10.0.0.9"}, nil, "10.0.0.2"},
		{"empty header: the socket", proxies, "10.0.0.2:5000", []string{""}, nil, "10.0.0.2"},
		{"unknown: the socket", proxies, "10.0.0.2:5000", []string{"unknown"}, nil, "10.0.0.2"},
		{"IPv4 with a port", proxies, "10.0.0.2:5000", []string{"198.51.100.1:4711"}, nil, "198.51.100.1"},
		{"IPv6 bare", proxies, "10.0.0.2:5000", []string{"2001:db8::1"}, nil, "2001:db8::1"},
		{"IPv6 bracketed", proxies, "10.0.0.2:5000", []string{"[2001:db8::1]"}, nil, "2001:db8::1"},
		{"IPv6 bracketed with a port", proxies, "10.0.0.2:5000", []string{"[2001:db8::1]:4711"}, nil, "2001:db8::1"},
		{"IPv6 with a zone: the zone dropped", proxies, "10.0.0.2:5000", []string{"fe80::1%eth0"}, nil, "fe80::1"},
		{"IPv4-mapped IPv6 is the IPv4 client", proxies, "10.0.0.2:5000", []string{"::ffff:198.51.100.1"}, nil, "198.51.100.1"},
		{"IPv6 trusted proxy", proxies, "[2001:db8:feed::2]:443", []string{"198.51.100.1"}, nil, "198.51.100.1"},
		{"IPv6 trusted proxy in the chain", proxies, "10.0.0.2:1", []string{"2001:db8::9, 2001:db8:feed::3"}, nil, "2001:db8::9"},
		{"IPv4-mapped socket peer trusted as IPv4", proxies, "[::ffff:10.0.0.2]:5000", []string{"198.51.100.1"}, nil, "198.51.100.1"},
		{"Forwarded", proxies, "10.0.0.2:5000", nil, []string{"for=198.51.100.1;proto=https;by=10.0.0.2"}, "198.51.100.1"},
		{"Forwarded, case and spaces", proxies, "10.0.0.2:5000", nil, []string{"Proto=https; FOR=198.51.100.1"}, "198.51.100.1"},
		{"Forwarded IPv6 quoted with a port", proxies, "10.0.0.2:5000", nil, []string{`for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"Forwarded chain", proxies, "10.0.0.2:5000", nil, []string{`for=1.2.3.4, for=198.51.100.1, for="10.0.0.7"`}, "198.51.100.1"},
		{"Forwarded chain over lines", proxies, "10.0.0.2:5000", nil, []string{"for=1.2.3.4", "for=198.51.100.1;proto=http, for=10.0.0.7"}, "198.51.100.1"},
		{"Forwarded quoted comma and semicolon", proxies, "10.0.0.2:5000", nil, []string{`for=1.2.3.4;x="a,b;c", for=198.51.100.1`}, "198.51.100.1"},
		{"Forwarded unknown: the socket", proxies, "10.0.0.2:5000", nil, []string{"for=unknown"}, "10.0.0.2"},
		{"Forwarded obfuscated: the socket", proxies, "10.0.0.2:5000", nil, []string{"for=_hidden"}, "10.0.0.2"},
		{"Forwarded element without for: the socket", proxies, "10.0.0.2:5000", nil, []string{"proto=https"}, "10.0.0.2"},
		{"Forwarded unterminated quote: the socket", proxies, "10.0.0.2:5000", nil, []string{`for="198.51.100.1`}, "10.0.0.2"},
		{"Forwarded garbage line left of the proxy's", proxies, "10.0.0.2:5000", nil, []string{`for="oops`, "for=198.51.100.1"}, "198.51.100.1"},
		{"X-Forwarded-For wins over a passed-through Forwarded", proxies, "10.0.0.2:5000", []string{"198.51.100.1"}, []string{"for=1.2.3.4"}, "198.51.100.1"},
		{"socket address without a port", Resolver{}, "203.0.113.7", nil, nil, "203.0.113.7"},
		{"IPv6 socket", Resolver{}, "[2001:db8::5]:5000", []string{"1.2.3.4"}, nil, "2001:db8::5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range tc.xff {
				h.Add("X-Forwarded-For", v)
			}
			for _, v := range tc.fwd {
				h.Add("Forwarded", v)
			}
			if got := tc.resolver.Resolve(tc.peer, h); got != tc.want {
				t.Errorf("Resolve(%q, %v) = %q, want %q", tc.peer, h, got, tc.want)
			}
		})
	}
}

func TestDirect(t *testing.T) {
	r := NewResolver(prefixes("10.0.0.0/8"))
	for _, tt := range []struct {
		name, remote string
		header       http.Header
		want         string // "" when not direct
	}{
		{"a peer of its own", "127.0.0.1:5000", nil, "127.0.0.1"},
		{"IPv4 in IPv6", "[::ffff:127.0.0.1]:5000", nil, "127.0.0.1"},
		{"a zone dropped", "[fe80::1%eth0]:5000", nil, "fe80::1"},
		{"a trusted proxy", "10.1.2.3:5000", nil, ""},
		{"X-Forwarded-For", "127.0.0.1:5000", http.Header{"X-Forwarded-For": {"203.0.113.9"}}, ""},
		{"Forwarded", "127.0.0.1:5000", http.Header{"Forwarded": {"for=203.0.113.9"}}, ""},
		{"X-Real-Ip", "127.0.0.1:5000", http.Header{"X-Real-Ip": {"203.0.113.9"}}, ""},
		{"no port", "127.0.0.1", nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			peer, ok := r.Direct(tt.remote, tt.header)
			if got := map[bool]string{true: peer.String(), false: ""}[ok]; got != tt.want {
				t.Errorf("Direct(%q) = %q, want %q", tt.remote, got, tt.want)
			}
		})
	}
}

func TestParseNode(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"192.0.2.1", "192.0.2.1"}, {"192.0.2.1:80", "192.0.2.1"}, {"[2001:db8::1]", "2001:db8::1"},
		{"[2001:db8::1]:80", "2001:db8::1"}, {"2001:db8::1", "2001:db8::1"}, {"::ffff:192.0.2.1", "192.0.2.1"},
		{"", ""}, {"unknown", ""}, {"_obf", ""}, {"[192.0.2.1]", ""}, {"192.0.2.1:", ""}, {"192.0.2.256", ""},
		{"[2001:db8::1", ""}, {"example.com", ""}, {" 192.0.2.1", ""},
	} {
		a, err := ParseNode(tc.in)
		got := ""
		if err == nil {
			got = a.String()
		}
		if got != tc.want {
			t.Errorf("ParseNode(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestFromContextElseSocket(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "[2001:db8::5]:4000"
	if got := From(r); got != "2001:db8::5" {
		t.Errorf("without the middleware: %q, want the socket's host", got)
	}
	r = r.WithContext(With(context.Background(), "198.51.100.1"))
	if got := From(r); got != "198.51.100.1" {
		t.Errorf("with the middleware's decision: %q", got)
	}
}

// FuzzResolve: whatever the headers, the answer is the socket's peer or an
// address the headers name, never a panic, and an untrusted peer is never
// moved by them.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"198.51.100.1", "1.2.3.4, 10.0.0.1", `for="[2001:db8::1]:80";proto=https`, `for="x`, "[::1]:1, unknown", ""} {
		f.Add(s, s)
	}
	trusted := NewResolver(prefixes("10.0.0.0/8"))
	f.Fuzz(func(t *testing.T, xff, fwd string) {
		h := http.Header{}
		if xff != "" {
			h.Set("X-Forwarded-For", xff)
		}
		h.Set("Forwarded", fwd)
		got := trusted.Resolve("10.0.0.2:80", h)
		if _, err := netip.ParseAddr(got); err != nil {
			t.Fatalf("Resolve gave %q, not an address", got)
		}
		if got := trusted.Resolve("203.0.113.7:80", h); got != "203.0.113.7" {
			t.Fatalf("an untrusted peer became %q", got)
		}
		_, _ = ParseForwarded(fwd)
		_, _ = parseXFF(xff)
	})
}
