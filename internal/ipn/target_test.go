package ipn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
)

// fakeResolver answers from a table; names not in it do not resolve.
// Hosts named localhost are left to the system's resolver, as in
// production.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	if host == "localhost" {
		return net.DefaultResolver.LookupNetIP(ctx, network, host)
	}
	addrs, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

var dns = fakeResolver{
	"ipn.shop.example": {"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"},
	// DNS64 behind a translator on a unique-local prefix: 8.8.8.8, then
	// 169.254.169.254.
	"dns64.shop.example":      {"fd00:64::808:808"},
	"dns64-meta.shop.example": {"fd00:64::a9fe:a9fe"},
	"rebind.shop.example":     {"127.0.0.1"},
	"metadata.shop.example":   {"169.254.169.254"},
	"mixed.shop.example":      {"93.184.216.34", "10.1.2.3"},
	"v6private.shop.example":  {"fd00::5"},
}

// The live-mode guard, from the URL a merchant saves down to the address a
// connection is about to use.
func TestLiveGuard(t *testing.T) {
	refuse := []struct {
		host string
		dial string // the resolved address the dialer would connect to; empty for names
	}{
		{"127.0.0.1", "127.0.0.1:443"},
		{"127.8.9.10", "127.8.9.10:443"},
		{"10.0.0.1", "10.0.0.1:443"},
		{"10.255.255.255", "10.255.255.255:443"},
		{"172.16.0.1", "172.16.0.1:443"},
		{"172.31.255.254", "172.31.255.254:443"},
		{"192.168.1.1", "192.168.1.1:443"},
		{"100.64.0.1", "100.64.0.1:443"},
		{"169.254.169.254", "169.254.169.254:443"},
		{"169.254.1.1", "169.254.1.1:443"},
		{"0.0.0.0", "0.0.0.0:443"},
		{"224.0.0.1", "224.0.0.1:443"},
		{"255.255.255.255", "255.255.255.255:443"},
		{"[::1]", "[::1]:443"},
		{"[::]", "[::]:443"},
		{"[fc00::1]", "[fc00::1]:443"},
		{"[fd12:3456:789a::1]", "[fd12:3456:789a::1]:443"},
		{"[fe80::1]", "[fe80::1]:443"},
		{"[ff02::1]", "[ff02::1]:443"},
		{"[::ffff:127.0.0.1]", "[::ffff:127.0.0.1]:443"},
		{"[::ffff:7f00:1]", "[::ffff:7f00:1]:443"},
		{"[::ffff:169.254.169.254]", "[::ffff:169.254.169.254]:443"},
		{"[::ffff:10.0.0.1]", "[::ffff:10.0.0.1]:443"},
		{"[64:ff9b::a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]:443"},     // NAT64 of 169.254.169.254
		{"[64:ff9b:1::a9fe:a9fe]", "[64:ff9b:1::a9fe:a9fe]:443"}, // local-use NAT64 (RFC 8215) of 169.254.169.254
		{"[2002:7f00:1::1]", "[2002:7f00:1::1]:443"},             // 6to4 of 127.0.0.1
		{"[::127.0.0.1]", "[::7f00:1]:443"},                      // IPv4-compatible
		// Not globally reachable (IANA's special-purpose registries); some
		// networks number their own hosts from these.
		{"192.0.2.2", "192.0.2.2:443"},
		{"198.51.100.7", "198.51.100.7:443"},
		{"203.0.113.9", "203.0.113.9:443"},
		{"192.88.99.1", "192.88.99.1:443"},
		{"[::ffff:192.0.2.2]", "[::ffff:c000:202]:443"},
		{"[64:ff9b::c000:202]", "[64:ff9b::c000:202]:443"},
		{"[2001:db8::1]", "[2001:db8::1]:443"},
		{"[3fff::1]", "[3fff::1]:443"},
		{"[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "[2001:0:4136:e378:8000:63bf:3fff:fdd2]:443"}, // Teredo
		// Other spellings of 127.0.0.1 that C resolvers accept.
		{"2130706433", ""},
		{"0x7f000001", ""},
		{"0X7F000001", ""},
		{"0177.0.0.1", ""},
		{"0x7f.0.0.1", ""},
		{"127.1", ""},
		{"017700000001", ""},
		{"2852039166", ""}, // 169.254.169.254
		// Names.
		{"localhost", ""},
		{"LocalHost.", ""},
		{"ipn.localhost", ""},
		{"rebind.shop.example", ""},
		{"metadata.shop.example", ""},
		{"mixed.shop.example", ""},
		{"v6private.shop.example", ""},
	}
	g := guard{allowPrivate: false}
	for _, tt := range refuse {
		t.Run("refuse "+tt.host, func(t *testing.T) {
			raw := "https://" + tt.host + ":8443/ipn"
			if err := CheckTarget(t.Context(), raw, merchant.Live, dns); !errors.Is(err, ErrRefusedTarget) {
				t.Errorf("CheckTarget(%s) = %v, want refused", raw, err)
			}
			if tt.dial != "" {
				if err := g.control("tcp", tt.dial, nil); !errors.Is(err, ErrRefusedTarget) {
					t.Errorf("connect to %s allowed", tt.dial)
				}
				if err := (guard{allowPrivate: true}).control("tcp", tt.dial, nil); err != nil {
					t.Errorf("with private addresses allowed, connect to %s refused: %v", tt.dial, err)
				}
			}
		})
	}

	allow := []struct{ host, dial string }{
		{"93.184.216.34", "93.184.216.34:443"},
		{"8.8.8.8", "8.8.8.8:443"},
		{"1.1.1.1", "1.1.1.1:443"},
		{"172.32.0.1", "172.32.0.1:443"},         // just past 172.16/12
		{"172.15.255.255", "172.15.255.255:443"}, // just before it
		{"192.169.0.1", "192.169.0.1:443"},
		{"100.128.0.1", "100.128.0.1:443"}, // just past 100.64/10
		{"11.0.0.1", "11.0.0.1:443"},
		{"[2606:4700:4700::1111]", "[2606:4700:4700::1111]:443"},
		{"[::ffff:8.8.8.8]", "[::ffff:8.8.8.8]:443"},
		{"[64:ff9b::808:808]", "[64:ff9b::808:808]:443"}, // NAT64 of 8.8.8.8
		{"ipn.shop.example", ""},
		{"not-yet-in-dns.shop.example", ""},
	}
	for _, tt := range allow {
		t.Run("allow "+tt.host, func(t *testing.T) {
			raw := "https://" + tt.host + "/ipn"
			if err := CheckTarget(t.Context(), raw, merchant.Live, dns); err != nil {
				t.Errorf("CheckTarget(%s) = %v, want allowed", raw, err)
			}
			if tt.dial != "" {
				if err := g.control("tcp", tt.dial, nil); err != nil {
					t.Errorf("connect to %s refused: %v", tt.dial, err)
				}
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url  string
		mode merchant.Mode
		ok   bool
	}{
		{"https://shop.example/ipn", merchant.Live, true},
		{"http://shop.example/ipn", merchant.Live, false},
		{"http://shop.example/ipn", merchant.Test, true},
		{"http://127.0.0.1:9000/ipn", merchant.Test, true}, // test mode: decided at connect time
		{"http://localhost:9000/ipn", merchant.Test, true},
		{"https://127.0.0.1/ipn", merchant.Live, false},
		{"http://2130706433/ipn", merchant.Test, false}, // ambiguous in every mode
		{"ftp://shop.example/ipn", merchant.Test, false},
		{"/ipn", merchant.Test, false},
		{"https://user:pw@shop.example/ipn", merchant.Live, false},
		{"https://shop.example/ipn#x", merchant.Live, false},
		{"https://shop.example:99999/ipn", merchant.Live, false},
		{"https://shop.example:/ipn", merchant.Live, false},
		{"https://shop.example:0/ipn", merchant.Live, false},
		{"https://shop.example:8443/ipn", merchant.Live, true},
		{"https://[fe80::1%25eth0]/ipn", merchant.Test, false},
	}
	for _, tt := range tests {
		if err := CheckURL(tt.url, tt.mode); (err == nil) != tt.ok {
			t.Errorf("CheckURL(%q, %s) = %v, want ok=%v", tt.url, tt.mode, err, tt.ok)
		}
	}
}

func TestLooseIPv4(t *testing.T) {
	tests := []struct {
		host string
		want string // "" when not an address
	}{
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"10.0x10.1", "10.16.0.1"},
		{"1.2.3.4", "1.2.3.4"},
		{"4294967296", ""}, // too big
		{"1.2.3.256", ""},
		{"256.1.1.1", ""},
		{"1.2.3.4.5", ""},
		{"08.0.0.1", ""}, // 8 is not octal
		{"shop.example", ""},
		{"1e3", ""},
		{"", ""},
	}
	for _, tt := range tests {
		a, ok := looseIPv4(tt.host)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tt.want {
			t.Errorf("looseIPv4(%q) = %q, want %q", tt.host, got, tt.want)
		}
	}
}

// The check happens when connecting, on the address the name resolved to:
// a name (here localhost, in production a rebinding DNS name) that was
// never looked at when saved is refused, and the receiver sees nothing.
// An address of the gateway's own host is the host itself, however public:
// refused directly and in the IPv6 forms that carry it, and refused
// altogether when the host's addresses cannot be listed.
func TestGuardRefusesTheHostsOwnAddresses(t *testing.T) {
	own := func() ([]net.Addr, error) {
		return []net.Addr{
			&net.IPNet{IP: net.ParseIP("8.8.4.4"), Mask: net.CIDRMask(24, 32)},
			&net.IPNet{IP: net.ParseIP("2606:4700::6810:84e5"), Mask: net.CIDRMask(64, 128)},
		}, nil
	}
	g := guard{host: &hostAddrs{list: own}, nat64: []netip.Prefix{netip.MustParsePrefix("2600:64::/96")}}
	for _, tt := range []struct {
		dial    string
		refused bool
	}{
		{"8.8.4.4:443", true},
		{"[::ffff:8.8.4.4]:443", true},
		{"[64:ff9b::808:404]:443", true},
		{"[2002:808:404::1]:443", true},  // 6to4
		{"[2600:64::808:404]:443", true}, // behind the network's NAT64 prefix
		{"[2606:4700::6810:84e5]:443", true},
		{"8.8.8.8:443", false},
		{"8.8.4.5:443", false}, // the host's network is not the host
		{"[2606:4700::6810:84e6]:443", false},
		{"[2600:64::808:808]:443", false},
	} {
		err := g.control("tcp", tt.dial, nil)
		if refused := errors.Is(err, ErrRefusedTarget); refused != tt.refused {
			t.Errorf("connect to %s: %v, want refused %t", tt.dial, err, tt.refused)
		}
		if tt.refused && (err == nil || !strings.Contains(err.Error(), "own host")) {
			t.Errorf("connect to %s: %v, want the reason", tt.dial, err)
		}
	}

	broken := guard{host: &hostAddrs{list: func() ([]net.Addr, error) { return nil, errors.New("netlink: permission denied") }}}
	if err := broken.control("tcp", "8.8.8.8:443", nil); !errors.Is(err, ErrRefusedTarget) || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("with the interfaces unlisted: %v, want refused with the reason", err)
	}

	// This machine's own interfaces are listed: loopback at least.
	addrs, err := thisHost.current()
	if err != nil || !slices.Contains(addrs, netip.MustParseAddr("127.0.0.1")) {
		t.Errorf("this host's addresses: %v, %v; want 127.0.0.1 among them", addrs, err)
	}
	if err := CheckHostAddresses(); err != nil {
		t.Errorf("CheckHostAddresses on this machine: %v", err)
	}
	was := thisHost
	defer func() { thisHost = was }()
	thisHost = broken.host
	if err := CheckHostAddresses(); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("CheckHostAddresses with the interfaces unlisted: %v, want the reason", err)
	}
}

func TestConnectTimeGuard(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]

	strict := newHTTPClient(guard{}, 5*time.Second, 2)
	for _, u := range []string{"http://localhost:" + port + "/", srv.URL + "/", "http://[::ffff:127.0.0.1]:" + port + "/"} {
		resp, err := strict.Post(u, "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: connected", u)
			continue
		}
		if !errors.Is(err, ErrRefusedTarget) {
			t.Errorf("%s: %v, want ErrRefusedTarget", u, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("receiver got %d requests through the guard", n)
	}
	// The same request gets through when private targets are allowed, so
	// the refusal above is the guard's doing.
	resp, err := newHTTPClient(guard{allowPrivate: true}, 5*time.Second, 2).Post(srv.URL+"/", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if hits.Load() != 1 {
		t.Fatalf("allowed request did not arrive")
	}
}

// A redirect is a failure, never followed: the target of a redirect was
// never checked and the merchant must fix the URL.
func TestNoRedirects(t *testing.T) {
	var followed atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) { followed.Add(1) })
	mux.HandleFunc("/ipn", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := newHTTPClient(guard{allowPrivate: true}, 5*time.Second, 2).Post(srv.URL+"/ipn", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || followed.Load() != 0 {
		t.Fatalf("status %d, redirect followed %d times", resp.StatusCode, followed.Load())
	}
}

// Unreachable tells `kadi merchant set-ipn` (and the dashboard) at once that
// a test-mode URL leads where the guard will refuse every delivery.
func TestUnreachable(t *testing.T) {
	tests := []struct {
		url, want string // want: a part of the reason, "" for reachable
	}{
		{"http://127.0.0.1:9000/ipn", "loopback"},
		{"http://localhost:9000/ipn", "loopback"},
		{"http://[::1]/ipn", "loopback"},
		{"http://10.0.0.7/ipn", "private"},
		{"http://0x7f000001/ipn", "loopback"},
		{"https://rebind.shop.example/ipn", "resolves to 127.0.0.1"},
		{"https://metadata.shop.example/ipn", "169.254.169.254"},
		{"https://mixed.shop.example/ipn", "10.1.2.3"},
		{"https://ipn.shop.example/ipn", ""},
		{"https://unknown.shop.example/ipn", ""},
		{"https://93.184.216.34/ipn", ""},
	}
	for _, tt := range tests {
		got := Unreachable(context.Background(), tt.url, dns)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("Unreachable(%s) = %q, want %q", tt.url, got, tt.want)
		}
	}
}

// RFC 6052's table (section 2.4): 192.0.2.33 under prefixes of each length.
func TestEmbeddedIPv4(t *testing.T) {
	for _, tt := range []struct {
		addr string
		bits int
	}{
		{"2001:db8:c000:221::", 32},
		{"2001:db8:1c0:2:21::", 40},
		{"2001:db8:122:c000:2:2100::", 48},
		{"2001:db8:122:3c0:0:221::", 56},
		{"2001:db8:122:344:c0:2:2100:0", 64},
		{"2001:db8:122:344::192.0.2.33", 96},
	} {
		if got := EmbeddedIPv4(netip.MustParseAddr(tt.addr), tt.bits); got != netip.MustParseAddr("192.0.2.33") {
			t.Errorf("EmbeddedIPv4(%s, %d) = %s, want 192.0.2.33", tt.addr, tt.bits, got)
		}
	}
}

func TestCheckNAT64Prefix(t *testing.T) {
	for p, ok := range map[string]bool{
		"2001:db8:64::/96": true, "2001:db8:122::/48": true, "2001:db8::/32": true, "64:ff9b:1:2::/64": true,
		"2001:db8:64::/80":  false, // a length RFC 6052 does not place an address after
		"10.0.0.0/8":        false,
		"::ffff:0:0/96":     false, // IPv4-mapped, not NAT64
		"2001:db8:64::1/96": false, // bits past the length
		"fe80::/64":         false, // link-local: an address there is no translator's
		"::/96":             false, // loopback among them
		"ff02::/32":         false,
		"fd00:64::/96":      true,
		"2002:a00::/32":     false, // 6to4: its own rule would be replaced
		"2001:0:a00::/48":   false, // Teredo
	} {
		if err := CheckNAT64Prefix(netip.MustParsePrefix(p)); (err == nil) != ok {
			t.Errorf("CheckNAT64Prefix(%s) = %v, want ok %t", p, err, ok)
		}
	}
	if err := (Config{NAT64Prefixes: []netip.Prefix{netip.MustParsePrefix("2001:db8:64::/80")}}).Validate(); err == nil {
		t.Error("Config.Validate took a /80 NAT64 prefix")
	}
	// Nested: the /32 would read the /96's addresses at its own length.
	nested := []netip.Prefix{netip.MustParsePrefix("fd00:64::/32"), netip.MustParsePrefix("fd00:64:808:808::/96")}
	if err := (Config{NAT64Prefixes: nested}).Validate(); err == nil {
		t.Errorf("Config.Validate took overlapping NAT64 prefixes %v", nested)
	}
}

// On a network with a NAT64 prefix of its own, an address in it reaches
// the IPv4 address it carries: the guard judges that one, at the prefix's
// length: 169.254.169.254 behind 2600:db8:122::/48 is refused, where the
// well-known prefixes' rule (the last 32 bits) reads no address there and
// let it through.
func TestGuardJudgesTheNetworksNAT64Prefixes(t *testing.T) {
	prefixes := []netip.Prefix{netip.MustParsePrefix("2600:db8:122::/48"), netip.MustParsePrefix("2001:db8:64::/96"),
		netip.MustParsePrefix("fd00:64::/96")}
	g := guard{nat64: prefixes}
	for _, tt := range []struct {
		dial    string
		refused bool
	}{
		{"[2600:db8:122:a9fe:a9:fe00::]:443", true}, // 169.254.169.254 at /48
		{"[2600:db8:122:a00:1::]:443", true},        // 10.0.0.1 at /48
		{"[2600:db8:122:808:8:800::]:443", false},   // 8.8.8.8 at /48
		{"[2001:db8:64::7f00:1]:443", true},         // 127.0.0.1 at /96
		{"[2001:db8:64::808:808]:443", false},       // 8.8.8.8 at /96
		{"[fd00:64::808:808]:443", false},           // 8.8.8.8 behind a unique-local prefix
		{"[fd00:64::a00:1]:443", true},              // 10.0.0.1 behind it
		{"[fd00:65::808:808]:443", true},            // unique-local, not the translator's
		{"[64:ff9b::a9fe:a9fe]:443", true},          // the well-known prefix still judged
		{"[2606:4700:4700::1111]:443", false},       // outside every prefix
	} {
		err := g.control("tcp", tt.dial, nil)
		if refused := errors.Is(err, ErrRefusedTarget); refused != tt.refused {
			t.Errorf("connect to %s with the network's prefixes: %v, want refused %t", tt.dial, err, tt.refused)
		}
	}
	// Without them, the metadata address behind the /48 reads as public.
	if err := (guard{}).control("tcp", "[2600:db8:122:a9fe:a9:fe00::]:443", nil); err != nil {
		t.Errorf("without the prefixes: %v; the test's /48 address should read as public then", err)
	}
	// A worker's deliveries use them.
	w := &Worker{Config: Config{NAT64Prefixes: prefixes}}
	w.init()
	if _, err := w.clientFor(merchant.Live).Post("http://[2001:db8:64::7f00:1]:1/ipn", "application/json", strings.NewReader("{}")); !errors.Is(err, ErrRefusedTarget) {
		t.Errorf("a live delivery to 127.0.0.1 behind the network's /96: %v, want refused", err)
	}
}

// RFC 8215's local-use prefix, unnamed: its first /96 is read as the
// well-known prefix is, and any other address in it, whose IPv4 address
// sits where the network's own prefix puts it, is refused until that
// prefix is named; named, it is read at its length.
func TestLocalUseNAT64(t *testing.T) {
	for _, tt := range []struct {
		addr  string
		named string // the network's prefix given to --nat64-prefixes, if any
		why   string // a part of the refusal, "" for allowed
	}{
		{"64:ff9b:1::808:808", "", ""},                                    // 8.8.8.8 in the first /96
		{"64:ff9b:1::a9fe:a9fe", "", "link-local"},                        // 169.254.169.254 in it
		{"64:ff9b:1:a9fe:a9:fe00::", "", "name it with --nat64-prefixes"}, // 169.254.169.254 at /48, 0.0.0.0 at /96
		{"64:ff9b:1:a9fe:a9:fe00:808:808", "", "name it with --nat64-prefixes"},
		{"64:ff9b:1:2:a::100:0", "", "name it with --nat64-prefixes"},                    // 10.0.0.1 at /64
		{"64:ff9b:1:a9fe:a9:fe00::", "64:ff9b:1::/48", "link-local"},                     // named, read at /48
		{"64:ff9b:1:808:8:800::", "64:ff9b:1::/48", ""},                                  // 8.8.8.8 at /48
		{"64:ff9b:1:2:8:808:800:0", "64:ff9b:1:2::/64", ""},                              // 8.8.8.8 at /64
		{"64:ff9b:1:2:a::100:0", "64:ff9b:1:2::/64", "private"},                          // 10.0.0.1 at /64
		{"64:ff9b:1:3:8:808:800:0", "64:ff9b:1:2::/64", "name it with --nat64-prefixes"}, // outside the one named
	} {
		var named []netip.Prefix
		if tt.named != "" {
			named = append(named, netip.MustParsePrefix(tt.named))
		}
		got := Refused(netip.MustParseAddr(tt.addr), named...)
		if (tt.why == "") != (got == "") || !strings.Contains(got, tt.why) {
			t.Errorf("Refused(%s, named %q) = %q, want %q", tt.addr, tt.named, got, tt.why)
		}
	}
}

// Saving a URL checks its addresses as the nodes' deliveries will: through
// the network's NAT64 prefixes when it has some (the dashboard and set-ipn
// are given kadi serve's), so a receiver reached through a unique-local
// translator can be saved, and one whose translated address is private
// still cannot.
func TestCheckTargetThroughTheNetworksNAT64(t *testing.T) {
	prefix := netip.MustParsePrefix("fd00:64::/96")
	ctx := t.Context()
	if err := CheckTarget(ctx, "https://dns64.shop.example/ipn", merchant.Live, dns); !errors.Is(err, ErrRefusedTarget) {
		t.Errorf("without the prefix: %v, want refused (unique-local)", err)
	}
	if err := CheckTarget(ctx, "https://dns64.shop.example/ipn", merchant.Live, dns, prefix); err != nil {
		t.Errorf("with the prefix: %v, want saved", err)
	}
	if err := CheckTarget(ctx, "https://dns64-meta.shop.example/ipn", merchant.Live, dns, prefix); !errors.Is(err, ErrRefusedTarget) {
		t.Errorf("169.254.169.254 through the translator: %v, want refused", err)
	}
	if why := Unreachable(ctx, "http://dns64.shop.example/ipn", dns, prefix); why != "" {
		t.Errorf("Unreachable with the prefix: %q, want none", why)
	}
}

// The host's addresses are read again while deliveries check theirs: a
// check never sees a list being rewritten (the refill reused the slice it
// had handed out, and a reordered list let the host's own address through).
func TestHostAddressesReadAgainWhileChecked(t *testing.T) {
	own := netip.MustParseAddr("8.8.4.4")
	var flip atomic.Bool
	h := &hostAddrs{list: func() ([]net.Addr, error) {
		others := []net.Addr{&net.IPNet{IP: net.ParseIP("1.1.1.1"), Mask: net.CIDRMask(32, 32)}, &net.IPNet{IP: net.ParseIP("9.9.9.9"), Mask: net.CIDRMask(32, 32)}}
		mine := &net.IPNet{IP: own.AsSlice(), Mask: net.CIDRMask(32, 32)}
		if flip.Load() {
			return append(others, mine), nil
		}
		return append([]net.Addr{mine}, others...), nil
	}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				flip.Store(!flip.Load())
				h.mu.Lock()
				h.read = time.Time{} // due again
				h.mu.Unlock()
				_, _ = h.current()
			}
		}
	}()
	for range 20000 {
		if h.refused(own, nil) == "" {
			t.Error("the host's own address let through while its list was read again")
			break
		}
	}
	close(stop)
	<-done
}

// A card number in an IPN URL or username is refused when saved, and the
// refusal does not repeat it: saved, it would be in the settings, the
// audit log and every delivery's log line.
func TestSettingsRefuseCardNumbers(t *testing.T) {
	const pan = "4242424242424242"
	for _, raw := range []string{"https://shop.example/ipn/" + pan, "https://shop.example/ipn?c=4242-4242-4242-4242"} {
		err := CheckTarget(t.Context(), raw, merchant.Test, nil)
		if err == nil || strings.Contains(err.Error(), "4242") {
			t.Errorf("CheckTarget(%q) = %v, want a refusal that does not repeat the number", raw, err)
		}
	}
	if err := CheckUsername("shop " + pan); err == nil || strings.Contains(err.Error(), "4242") {
		t.Errorf("CheckUsername with a card number: %v", err)
	}
	if err := CheckTarget(t.Context(), "https://shop.example/ipn/order/1000000000000008", merchant.Test, nil); err != nil {
		t.Errorf("a long number of no card brand: %v", err)
	}
	if err := CheckUsername("shop-1"); err != nil {
		t.Errorf("CheckUsername(shop-1): %v", err)
	}
}
