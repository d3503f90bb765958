package server

import (
	"net"
	"net/netip"
)

// Listen opens a TCP listener on addr in the family its host names: an
// IPv4 address (0.0.0.0 included) listens on IPv4 only, an IPv6 one on
// IPv6. Go's "tcp" turns 0.0.0.0 into a dual-stack socket, so a gateway an
// operator bound to every IPv4 interface also answered on every IPv6 one,
// which a firewall written for IPv4 does not cover.
func Listen(addr string) (net.Listener, error) {
	return net.Listen(listenNetwork(addr), addr)
}

func listenNetwork(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "tcp" // net.Listen says what is wrong with it
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return "tcp" // a name, or no host: every interface, both families
	case ip.Is4():
		return "tcp4"
	default:
		return "tcp6"
	}
}
