// Package clientaddr decides which address a request comes from: the
// socket's peer, or, when that peer is a reverse proxy the operator trusts,
// the client the proxy's X-Forwarded-For or Forwarded header names. It is
// decided once per request and carried in the context, so the throttle, the
// lockout, the audit log and the access log all count the same address.
package clientaddr

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// Resolver decides the client address of requests. The zero value trusts
// no proxy: every request is its socket's peer.
type Resolver struct {
	trusted []netip.Prefix
}

// NewResolver believes forwarding headers only from peers inside trusted.
func NewResolver(trusted []netip.Prefix) Resolver {
	return Resolver{trusted: trusted}
}

// Resolve returns the client address of a request that arrived from the
// socket address remoteAddr ("ip:port") with headers h.
//
// Forwarding headers are believed only when the peer is a trusted proxy.
// Their hops are then walked from the right (the one nearest to us)
// skipping trusted proxies, and the first untrusted address is the client:
// anything left of it was written by the client itself and can be forged.
// X-Forwarded-For wins over Forwarded, since that is what common proxies
// set and append to; a Forwarded header they pass through untouched must
// not let a client choose its address. A hop that cannot be read (garbage,
// "unknown", an obfuscated name) ends the walk at the socket's peer: an
// address cannot be made up for it.
func (r Resolver) Resolve(remoteAddr string, h http.Header) string {
	peer, ok := socketAddr(remoteAddr)
	if !ok {
		return Socket(remoteAddr)
	}
	if !r.isTrusted(peer) {
		return peer.String()
	}
	var hops func(yield func(netip.Addr, bool) bool)
	if lines := h.Values("X-Forwarded-For"); len(lines) > 0 {
		hops = fromRight(lines, parseXFF)
	} else if lines := h.Values("Forwarded"); len(lines) > 0 {
		hops = fromRight(lines, ParseForwarded)
	} else {
		return peer.String()
	}
	client := peer
	for a, ok := range hops {
		if !ok {
			return peer.String()
		}
		client = a
		if !r.isTrusted(a) {
			break
		}
	}
	// Every hop trusted: the leftmost is as far back as anyone can see.
	return client.String()
}

func (r Resolver) isTrusted(a netip.Addr) bool { return Within(a, r.trusted) }

// Direct is the socket's peer of a request that came to us straight, not
// through a proxy: not from a trusted proxy, and carrying no forwarding
// header (a proxy on the same host connects from loopback and need not be
// listed as trusted). ok is false for any other request. It decides who
// may read /metrics: a proxy must not lend its address to everyone behind
// it.
func (r Resolver) Direct(remoteAddr string, h http.Header) (peer netip.Addr, ok bool) {
	peer, ok = socketAddr(remoteAddr)
	if !ok || r.isTrusted(peer) || h.Get("X-Forwarded-For") != "" || h.Get("Forwarded") != "" || h.Get("X-Real-Ip") != "" {
		return netip.Addr{}, false
	}
	return peer, true
}

// Within reports whether a is inside one of prefixes.
func Within(a netip.Addr, prefixes []netip.Prefix) bool {
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// fromRight yields the hops of header lines from the last one back; ok is
// false for a hop that cannot be read, after which nothing more is yielded.
// A line is parsed only when the walk reaches it, so garbage a client put
// in an earlier line never spoils a later line a proxy wrote.
func fromRight(lines []string, parse func(string) ([]netip.Addr, error)) func(yield func(netip.Addr, bool) bool) {
	return func(yield func(netip.Addr, bool) bool) {
		for i := len(lines) - 1; i >= 0; i-- {
			addrs, err := parse(lines[i])
			for j := len(addrs) - 1; j >= 0; j-- {
				if !yield(addrs[j], true) {
					return
				}
			}
			if err != nil {
				yield(netip.Addr{}, false)
				return
			}
		}
	}
}

// ErrMalformed is a forwarding header hop that names no IP address.
var ErrMalformed = errors.New("forwarding header: not an IP address")

// parseXFF reads one X-Forwarded-For line, "client, proxy1, proxy2". It
// returns the readable hops to the right of the last unreadable one, and
// ErrMalformed if there was one: the walk from the right uses what it can.
func parseXFF(line string) ([]netip.Addr, error) {
	parts := strings.Split(line, ",")
	var out []netip.Addr
	for i := len(parts) - 1; i >= 0; i-- {
		a, err := ParseNode(strings.TrimSpace(parts[i]))
		if err != nil {
			reverse(out)
			return out, err
		}
		out = append(out, a)
	}
	reverse(out)
	return out, nil
}

// ParseForwarded reads the for= of each element of one RFC 7239
// Forwarded line, `for=192.0.2.60;proto=https, for="[2001:db8::17]:4711"`,
// left to right. Like parseXFF it returns the readable hops right of the
// last unreadable one, with ErrMalformed if there was one; an element
// without for= is unreadable (it names no hop we can count).
func ParseForwarded(line string) ([]netip.Addr, error) {
	elems, err := splitElements(line)
	var out []netip.Addr
	for i := len(elems) - 1; i >= 0; i-- {
		a, perr := forOf(elems[i])
		if perr != nil {
			reverse(out)
			return out, perr
		}
		out = append(out, a)
	}
	reverse(out)
	return out, err
}

// splitElements splits a Forwarded line at the commas outside quoted
// strings. On a syntax error (an unterminated quote) it returns the
// elements after the last comma that parsed, with ErrMalformed.
func splitElements(line string) ([]string, error) {
	var elems []string
	start, quoted := 0, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			elems = append(elems, line[start:i])
			start = i + 1
		}
	}
	if quoted {
		// The quote runs to the end: nothing of this line can be trusted
		// to be split right.
		return nil, ErrMalformed
	}
	return append(elems, line[start:]), nil
}

// forOf is the address of an element's for= parameter.
func forOf(elem string) (netip.Addr, error) {
	for _, pair := range splitPairs(elem) {
		name, value, ok := strings.Cut(pair, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "for") {
			continue
		}
		value = strings.TrimSpace(value)
		if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
			value = strings.ReplaceAll(value[1:len(value)-1], `\`, "")
		}
		return ParseNode(value)
	}
	return netip.Addr{}, ErrMalformed
}

// splitPairs splits an element at the semicolons outside quoted strings.
func splitPairs(elem string) []string {
	var pairs []string
	start, quoted := 0, false
	for i := 0; i < len(elem); i++ {
		switch c := elem[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ';':
			pairs = append(pairs, elem[start:i])
			start = i + 1
		}
	}
	return append(pairs, elem[start:])
}

// ParseNode reads one hop as proxies write it: 192.0.2.1, 192.0.2.1:443,
// 2001:db8::1, [2001:db8::1] or [2001:db8::1]:443. IPv4 mapped into IPv6
// is the IPv4 address, and a zone is dropped, so that one client is one key.
func ParseNode(s string) (netip.Addr, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return normal(a), nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normal(ap.Addr()), nil
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() {
			return normal(a), nil
		}
	}
	return netip.Addr{}, ErrMalformed
}

func normal(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

func reverse(a []netip.Addr) {
	for i, j := 0, len(a)-1; i < j; i, j = i+1, j-1 {
		a[i], a[j] = a[j], a[i]
	}
}

func socketAddr(remoteAddr string) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(remoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	return normal(ap.Addr()), true
}

// Socket is the host of a socket address, without trusting any header.
func Socket(remoteAddr string) string {
	if a, ok := socketAddr(remoteAddr); ok {
		return a.String()
	}
	if host, _, err := net.SplitHostPort(remoteAddr); err == nil {
		return host
	}
	return remoteAddr
}

type ctxKey struct{}

// With returns ctx carrying the client address addr.
func With(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, ctxKey{}, addr)
}

// From is the client address of r: the one the request middleware decided,
// or, for a request that did not pass through it, the socket's peer.
func From(r *http.Request) string {
	if a, ok := r.Context().Value(ctxKey{}).(string); ok {
		return a
	}
	return Socket(r.RemoteAddr)
}
