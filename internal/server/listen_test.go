package server

import (
	"net"
	"strconv"
	"testing"
)

func TestListenNetwork(t *testing.T) {
	for addr, want := range map[string]string{
		"0.0.0.0:8080":      "tcp4",
		"127.0.0.1:8080":    "tcp4",
		"[::]:8080":         "tcp6",
		"[::1]:0":           "tcp6",
		":8080":             "tcp",
		"localhost:8080":    "tcp",
		"kadi.example:8080": "tcp",
		"no port":           "tcp",
	} {
		if got := listenNetwork(addr); got != want {
			t.Errorf("listenNetwork(%q) = %s, want %s", addr, got, want)
		}
	}
}

// An operator's 0.0.0.0 is every IPv4 interface, not every IPv6 one too.
func TestListenOnEveryIPv4InterfaceOnly(t *testing.T) {
	ln, err := Listen("0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if ip := ln.Addr().(*net.TCPAddr).IP; ip.To4() == nil {
		t.Errorf("0.0.0.0 listens on %s", ln.Addr())
	}
	if c, err := net.Dial("tcp6", net.JoinHostPort("::1", strconv.Itoa(port))); err == nil {
		c.Close()
		t.Error("0.0.0.0 answers on IPv6's loopback")
	}
}

// An extra listener's flag names --addr's own port whether written as the
// listener's text or another way to the same place.
func TestSameListenAddr(t *testing.T) {
	any4 := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	any6 := &net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	for _, tc := range []struct {
		addr  string
		bound *net.TCPAddr
		same  bool
	}{
		{":8080", any6, true},
		{"[::]:8080", any6, true},
		{"0.0.0.0:8080", any4, true},
		{"127.0.0.1:8080", any4, true},
		{":8080", loop, true},
		{"127.0.0.1:8080", loop, true},
		{"[::ffff:127.0.0.1]:8080", loop, true},
		{"127.0.0.1:8081", loop, false},
		{"10.0.0.1:8080", loop, false},
		{"localhost:8080", loop, false}, // a name: only listening tells
		{"nonsense", loop, false},
	} {
		if got := sameListenAddr(tc.addr, tc.bound); got != tc.same {
			t.Errorf("sameListenAddr(%q, %s) = %v, want %v", tc.addr, tc.bound, got, tc.same)
		}
	}
}
