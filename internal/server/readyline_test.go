package server

import (
	"net"
	"net/netip"
	"testing"
)

// The ready line says what each listener serves, and /metrics only to
// whom it answers, beside the API or on its own guarded listener: with
// --metrics-allow empty it answers nobody beside the API, and the line
// said it was served.
func TestReadyLine(t *testing.T) {
	ln := func(port int) net.Listener {
		return fakeListener{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}
	}
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	for _, tt := range []struct {
		cfg       Config
		listeners []net.Listener
		want      string
	}{
		{Config{DataDir: "kadi-data", PublicURL: "http://127.0.0.1:8080", MetricsAllow: loopback}, []net.Listener{ln(8080)},
			"Kadi is ready: API, hosted form, dashboard, /metrics (to 127.0.0.0/8,::1/128) on http://127.0.0.1:8080; SQLite in kadi-data; public URL http://127.0.0.1:8080"},
		{Config{DataDir: "kadi-data", PublicURL: "https://pay.example"}, []net.Listener{ln(8080)},
			"Kadi is ready: API, hosted form, dashboard on http://127.0.0.1:8080; SQLite in kadi-data; public URL https://pay.example"},
		{Config{DatabaseURL: "postgres://db/kadi", PublicURL: "https://pay.example", DashboardAddr: "127.0.0.1:8082", MetricsAddr: "127.0.0.1:9090", MetricsAllow: loopback},
			[]net.Listener{ln(8080), ln(8082), ln(9090)},
			"Kadi is ready: API, hosted form on http://127.0.0.1:8080; dashboard on http://127.0.0.1:8082; /metrics on http://127.0.0.1:9090; PostgreSQL; public URL https://pay.example"},
		{Config{DataDir: "kadi-data", PublicURL: "https://pay.example", MetricsAddr: "0.0.0.0:9090", MetricsAllow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, GuardMetricsAddr: true},
			[]net.Listener{ln(8080), ln(9090)},
			"Kadi is ready: API, hosted form, dashboard on http://127.0.0.1:8080; /metrics (to 10.1.0.0/16) on http://127.0.0.1:9090; SQLite in kadi-data; public URL https://pay.example"},
	} {
		g := &Gateway{cfg: tt.cfg}
		if got := g.readyLine(tt.listeners); got != tt.want {
			t.Errorf("readyLine:\n got %s\nwant %s", got, tt.want)
		}
	}
}

type fakeListener struct{ addr net.Addr }

func (fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (fakeListener) Close() error              { return nil }
func (l fakeListener) Addr() net.Addr          { return l.addr }
