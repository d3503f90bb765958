package ipn

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
)

// Even with --allow-private-ipn, a live-mode delivery's connection to a
// private address is refused when dialling: the check sits on the resolved
// address, so a live host name that resolves to loopback (DNS rebinding)
// meets the same refusal as the literal address tried here.
func TestLiveClientRefusesPrivateAddressesAtConnect(t *testing.T) {
	var connections atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			connections.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	w := &Worker{Config: Config{AllowPrivate: true, Timeout: 2 * time.Second}}
	w.initOnce.Do(w.init)
	resp, err := w.clientFor(merchant.Live).Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("live mode reached a loopback receiver")
	}
	if !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("refusal does not name the address: %v", err)
	}
	if n := connections.Load(); n != 0 {
		t.Errorf("%d connections reached the receiver", n)
	}

	resp, err = w.clientFor(merchant.Test).Get(srv.URL)
	if err != nil {
		t.Fatalf("test mode with AllowPrivate: %v", err)
	}
	resp.Body.Close()
}
