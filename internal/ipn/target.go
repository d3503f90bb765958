package ipn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/merchant"
)

// ErrRefusedTarget is wrapped by every refusal of a receiver address: the
// gateway does not send notifications into its own network.
var ErrRefusedTarget = errors.New("IPN target refused")

// CheckURL validates an IPN receiver URL when it is saved and again before
// every delivery: absolute http(s), https in live mode, no credentials or
// fragment, and no IPv4 address in the ambiguous forms ("2130706433",
// "0x7f000001", "0177.1") that some resolvers read as dotted quads. In live
// mode an address literal or a localhost name is refused outright; the
// address a name resolves to is checked at every connection.
func CheckURL(raw string, mode merchant.Mode) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Opaque != "":
		return errors.New("IPN URL must be an absolute http or https URL")
	case u.Scheme != "https" && u.Scheme != "http":
		return errors.New("IPN URL must be an absolute http or https URL")
	case mode == merchant.Live && u.Scheme != "https":
		return errors.New("live-mode IPN URL must use https")
	case u.User != nil:
		return errors.New("IPN URL must not carry credentials: give them as the IPN username and password")
	case u.Fragment != "":
		return errors.New("IPN URL must not have a fragment")
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if port := u.Port(); port != "" || strings.HasSuffix(u.Host, ":") {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("IPN URL port %q is not a port number", port)
		}
	}
	if a, ok := looseIPv4(host); ok {
		if _, err := netip.ParseAddr(host); err != nil {
			return fmt.Errorf("%w: host %q is the address %s in another notation; write it as %s", ErrRefusedTarget, u.Hostname(), a, a)
		}
	}
	addr, literal := netip.ParseAddr(host)
	if literal == nil && addr.Zone() != "" {
		return fmt.Errorf("%w: an IPv6 zone is not allowed in an IPN URL", ErrRefusedTarget)
	}
	if mode != merchant.Live {
		return nil
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return fmt.Errorf("%w: %s is loopback", ErrRefusedTarget, u.Hostname())
	}
	if literal == nil {
		if why := Refused(addr); why != "" {
			return fmt.Errorf("%w: %s is %s", ErrRefusedTarget, addr, why)
		}
	}
	return nil
}

// Resolver finds a host's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckUsername refuses an IPN username no receiver can check: HTTP Basic
// authentication splits "user:password" at the first colon (RFC 7617), so
// a colon in the username makes every delivery's credentials wrong.
func CheckUsername(u string) error {
	if card.HoldsPAN(u) {
		return errors.New("the IPN username must not hold a card number")
	}
	if strings.Contains(u, ":") {
		return errors.New("the IPN username may not contain ':' (HTTP Basic authentication splits at the first one)")
	}
	return nil
}

// CheckTarget is CheckURL plus, in live mode, a look-up of the host that
// refuses it when any of its addresses may not be reached. It catches a
// mistake when the URL is saved; the check that protects is the one made on
// the resolved address at connect time, since DNS may answer differently
// later. A name that does not resolve yet is accepted. nat64 are the
// network's NAT64 prefixes, as Refused takes them.
func CheckTarget(ctx context.Context, raw string, mode merchant.Mode, r Resolver, nat64 ...netip.Prefix) error {
	// Saved, the URL is in the settings, the audit log and every IPN log
	// line; the error does not repeat it.
	if card.HoldsPAN(raw) {
		return errors.New("the IPN URL must not hold a card number")
	}
	if err := CheckURL(raw, mode); err != nil {
		return err
	}
	if mode != merchant.Live {
		return nil
	}
	if why := Unreachable(ctx, raw, r, nat64...); why != "" {
		return fmt.Errorf("%w: %s", ErrRefusedTarget, why)
	}
	return nil
}

// Unreachable says why the address guard would refuse every delivery to
// raw's host as it resolves now ("" when it would not): in live mode always,
// in test mode unless the operator allows private addresses. A name that
// does not resolve yet says nothing.
func Unreachable(ctx context.Context, raw string, r Resolver, nat64 ...netip.Prefix) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	if a, ok := looseIPv4(host); ok {
		if why := refusedHere(a, nil, nil); why != "" {
			return fmt.Sprintf("%s is %s", host, why)
		}
		return ""
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if why := refusedHere(a, nat64, nil); why != "" {
			return fmt.Sprintf("%s is %s", host, why)
		}
		return ""
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		if why := refusedHere(a, nat64, nil); why != "" {
			return fmt.Sprintf("%s resolves to %s, which is %s", host, a, why)
		}
	}
	return ""
}

type refusedPrefix struct {
	prefix netip.Prefix
	why    string
}

// refusedPrefixes are the destinations a notification must never reach
// unless the operator allows them in test mode: the gateway's own host,
// its private network and cloud metadata services (169.254.169.254), and
// every other range IANA's special-purpose registries mark as not globally
// reachable (a network may number its own hosts from the documentation
// ranges, and some do).
var refusedPrefixes = func() []refusedPrefix {
	list := []struct{ cidr, why string }{
		{"0.0.0.0/8", "unspecified (this network)"},
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "shared address space (carrier-grade NAT)"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "reserved for protocol assignments"},
		{"192.0.2.0/24", "reserved for documentation"},
		{"192.88.99.0/24", "6to4 relay anycast (deprecated)"},
		{"192.168.0.0/16", "private"},
		{"198.18.0.0/15", "reserved for benchmarking"},
		{"198.51.100.0/24", "reserved for documentation"},
		{"203.0.113.0/24", "reserved for documentation"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved"},
		{"::/128", "unspecified"},
		{"::1/128", "loopback"},
		{"::/96", "an IPv4-compatible address (deprecated)"},
		{"100::/64", "discard-only"},
		{"2001::/23", "reserved for IETF protocol assignments (Teredo, benchmarking, ORCHID)"},
		{"2001:db8::/32", "reserved for documentation"},
		{"3fff::/20", "reserved for documentation"},
		{"fc00::/7", "unique-local"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local (deprecated)"},
		{"ff00::/8", "multicast"},
	}
	out := make([]refusedPrefix, len(list))
	for i, e := range list {
		out[i] = refusedPrefix{netip.MustParsePrefix(e.cidr), e.why}
	}
	return out
}()

var (
	wellKnownNAT64 = netip.MustParsePrefix("64:ff9b::/96")
	// nat64Local is RFC 8215's local-use NAT64 prefix. Where an address in
	// it carries its IPv4 address depends on the prefix the network chose
	// within it, of any RFC 6052 length: only its first /96 is read
	// unnamed, in the last 32 bits as the well-known prefix is; any other
	// address in it could carry a private IPv4 address where the /96
	// reading sees a public one, and is refused until --nat64-prefixes
	// names the network's prefix.
	nat64Local      = netip.MustParsePrefix("64:ff9b:1::/48")
	nat64LocalFirst = netip.MustParsePrefix("64:ff9b:1::/96")
	sixToFour       = netip.MustParsePrefix("2002::/16")
)

// Refused says why a notification may not go to a, or "" when it may.
// IPv6 forms that carry an IPv4 address (mapped ::ffff:a.b.c.d, NAT64,
// 6to4) are judged by that address. nat64 are the network's own NAT64
// prefixes (--nat64-prefixes): an address in one is judged by the IPv4
// address it carries at that prefix's length (RFC 6052), which the
// well-known prefixes' rule (the last 32 bits) would misread.
func Refused(a netip.Addr, nat64 ...netip.Prefix) string {
	if !a.IsValid() {
		return "not an address"
	}
	a = a.WithZone("")
	v4, form, why := carried(a, nat64)
	switch {
	case why != "":
		return why
	case form != "":
		if why := Refused(v4); why != "" {
			return why + " (" + form + ")"
		}
		return ""
	}
	for _, p := range refusedPrefixes {
		if p.prefix.Contains(a) {
			return p.why
		}
	}
	return ""
}

// carried is the IPv4 address a connection to a reaches, when a is an IPv6
// form that carries one, and which form ("" for none). why is set instead
// for an address whose IPv4 address cannot be read: one in the local-use
// NAT64 prefix past its first /96 that no named prefix covers. The
// translator's address decides where the connection goes, whatever range
// the prefix itself sits in (a unique-local one, say).
func carried(a netip.Addr, nat64 []netip.Prefix) (v4 netip.Addr, form, why string) {
	if a.Is4In6() {
		return a.Unmap(), "IPv4-mapped", ""
	}
	for _, p := range nat64 {
		if p.Contains(a) {
			return EmbeddedIPv4(a, p.Bits()), "embedded in IPv6", ""
		}
	}
	if !a.Is6() {
		return netip.Addr{}, "", ""
	}
	b := a.As16()
	switch {
	case nat64Local.Contains(a) && !nat64LocalFirst.Contains(a):
		return netip.Addr{}, "", "in the local-use NAT64 prefix 64:ff9b:1::/48, where it carries its IPv4 address depends on the network's prefix (name it with --nat64-prefixes)"
	case wellKnownNAT64.Contains(a), nat64LocalFirst.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), "embedded in IPv6", ""
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), "embedded in IPv6", ""
	}
	return netip.Addr{}, "", ""
}

// hostAddrs are the addresses of the gateway host's own interfaces. A
// notification sent to one reaches the host itself (any service listening
// on all its interfaces, the metrics listener), however public the address
// is. They are read again at most every hostAddrsFresh, as interfaces come
// and go.
type hostAddrs struct {
	list func() ([]net.Addr, error)

	mu    sync.Mutex
	read  time.Time
	addrs []netip.Addr
	err   error
}

const hostAddrsFresh = 5 * time.Second

// thisHost reads the interfaces of the machine the gateway runs on.
var thisHost = &hostAddrs{list: net.InterfaceAddrs}

// CheckHostAddresses says why this host's own addresses cannot be read,
// or nil. While they cannot, every notification is refused (the guard
// cannot tell a receiver from the gateway's own host): a sandbox that
// forbids netlink sockets (systemd's RestrictAddressFamilies= without
// AF_NETLINK) stopped every delivery, said only on each attempt's line.
func CheckHostAddresses() error {
	_, err := thisHost.current()
	return err
}

// refused says why a is refused as one of the host's addresses, directly
// or carried in an IPv6 form, or "". When the interfaces cannot be listed
// every address is refused: the guard cannot tell.
func (h *hostAddrs) refused(a netip.Addr, nat64 []netip.Prefix) string {
	addrs, err := h.current()
	if err != nil {
		return "not checked against this host's own addresses (" + err.Error() + ")"
	}
	a = a.WithZone("")
	v4, form, _ := carried(a, nat64)
	for _, own := range addrs {
		switch {
		case own == a:
			return "an address of the gateway's own host"
		case form != "" && own == v4:
			return "an address of the gateway's own host (" + form + ")"
		}
	}
	return ""
}

func (h *hostAddrs) current() ([]netip.Addr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if time.Since(h.read) < hostAddrsFresh {
		return h.addrs, h.err
	}
	list, err := h.list()
	h.read, h.err = time.Now(), nil
	if err != nil {
		h.addrs, h.err = nil, fmt.Errorf("listing its interfaces: %w", err)
		return nil, h.err
	}
	// A new slice each time: callers read the last one after the lock.
	addrs := make([]netip.Addr, 0, len(list))
	for _, n := range list {
		if p, err := netip.ParsePrefix(n.String()); err == nil {
			addrs = append(addrs, p.Addr().Unmap().WithZone(""))
		}
	}
	h.addrs = addrs
	return addrs, nil
}

// nat64Lengths are the prefix lengths RFC 6052 defines an IPv4 address's
// place in an IPv6 one for.
var nat64Lengths = []int{32, 40, 48, 56, 64, 96}

// notNAT64 are ranges no translator's prefix may overlap: an address in a
// NAT64 prefix is judged by its IPv4 address alone, so one of these named
// by mistake would let a notification reach the gateway's own host or
// link; nor may one overlap the other forms that carry an IPv4 address,
// whose own rule it would replace.
var notNAT64 = []netip.Prefix{
	netip.MustParsePrefix("::/96"), // unspecified, loopback, IPv4-compatible
	netip.MustParsePrefix("::ffff:0:0/96"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/32"), // Teredo
	netip.MustParsePrefix("2002::/16"), // 6to4
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fec0::/10"),
	netip.MustParsePrefix("ff00::/8"),
}

// CheckNAT64Prefix refuses a prefix that cannot be a NAT64 prefix: not
// IPv6, a length RFC 6052 does not define, bits past its length, or a
// range a translator cannot sit in.
func CheckNAT64Prefix(p netip.Prefix) error {
	switch {
	case !p.Addr().Is6() || p.Addr().Is4In6():
		return fmt.Errorf("NAT64 prefix %s is not an IPv6 prefix", p)
	case slices.ContainsFunc(notNAT64, p.Overlaps):
		return fmt.Errorf("NAT64 prefix %s overlaps loopback, link-local, multicast, IPv4-mapped, 6to4 or Teredo addresses", p)
	case !slices.Contains(nat64Lengths, p.Bits()):
		return fmt.Errorf("NAT64 prefix %s: its length must be one of RFC 6052's, /32, /40, /48, /56, /64 or /96", p)
	case p != p.Masked():
		return fmt.Errorf("NAT64 prefix %s has bits set past its length (%s?)", p, p.Masked())
	}
	return nil
}

// CheckNAT64Prefixes checks each of ps, and that no two overlap: an
// address in both would be read at the length of whichever came first,
// and a /32 listed before the /96 inside it read the metadata address
// behind the /96 as a public one.
func CheckNAT64Prefixes(ps []netip.Prefix) error {
	for i, p := range ps {
		if err := CheckNAT64Prefix(p); err != nil {
			return err
		}
		for _, q := range ps[:i] {
			if p.Overlaps(q) {
				return fmt.Errorf("NAT64 prefixes %s and %s overlap: name each translator's prefix once", q, p)
			}
		}
	}
	return nil
}

// EmbeddedIPv4 is the IPv4 address a carries after a NAT64 prefix of bits
// bits (RFC 6052, section 2.2): right after it, skipping bits 64 to 71,
// which are always zero.
func EmbeddedIPv4(a netip.Addr, bits int) netip.Addr {
	b := a.As16()
	var v4 [4]byte
	n := 0
	for i := bits / 8; n < 4 && i < 16; i++ {
		if i == 8 {
			continue // the u octet
		}
		v4[n] = b[i]
		n++
	}
	return netip.AddrFrom4(v4)
}

// looseIPv4 parses host the way inet_aton does: one to four parts, each
// decimal, 0x-hex or 0-octal, the last filling the remaining bytes. Such
// hosts are IPv4 addresses to a C resolver, whatever they look like.
func looseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "0X"):
			base, digits = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" && base != 16 {
			return netip.Addr{}, false
		}
		if digits == "" {
			digits = "0" // "0x" alone is zero to inet_aton
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var n uint64
	for i, v := range vals[:len(vals)-1] {
		if v > 0xff {
			return netip.Addr{}, false
		}
		n |= v << (8 * (3 - i))
	}
	last := vals[len(vals)-1]
	if last >= 1<<(8*(5-len(vals))) {
		return netip.Addr{}, false
	}
	n |= last
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// guard refuses connections to refused addresses. It runs in the dialer's
// Control hook, after DNS, on the address actually being connected to, so a
// name that resolved to a public address when the URL was saved and to
// 127.0.0.1 now (DNS rebinding) is still refused.
type guard struct {
	allowPrivate bool
	nat64        []netip.Prefix
	host         *hostAddrs // nil: thisHost
}

func (g guard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read address %q", ErrRefusedTarget, address)
	}
	if g.allowPrivate {
		return nil
	}
	if why := refusedHere(ap.Addr(), g.nat64, g.host); why != "" {
		return fmt.Errorf("%w: %s is %s", ErrRefusedTarget, ap.Addr(), why)
	}
	return nil
}

// refusedHere is Refused, then a check against the host's own addresses.
func refusedHere(a netip.Addr, nat64 []netip.Prefix, host *hostAddrs) string {
	if why := Refused(a, nat64...); why != "" {
		return why
	}
	if host == nil {
		host = thisHost
	}
	return host.refused(a, nat64)
}

// newHTTPClient returns the client deliveries use. It follows no redirect
// (a 3xx is a failed delivery, and a redirect would skip the URL check),
// ignores proxy settings (a proxy would connect on our behalf, past the
// guard) and checks every address it connects to.
func newHTTPClient(g guard, connTimeout time.Duration, perHost int) *http.Client {
	d := &net.Dialer{Timeout: connTimeout, KeepAlive: 30 * time.Second, Control: g.control}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   connTimeout,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   max(perHost, 2),
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
