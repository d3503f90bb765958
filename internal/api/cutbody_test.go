package api_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// A body the client cuts short or mangles (a bad chunked encoding, fewer
// bytes than its Content-Length) is the client's fault: 400, never a 500
// nor the 503 that says the database is down.
func TestBodyCutShortIsABadRequest(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Cut Shop")
	tok := g.Token(c, merchant.Test)
	srv := httptest.NewServer(g.Handler)
	defer srv.Close()
	for _, tt := range []struct {
		name, path, auth, head, body string
	}{
		{"bill, bad chunk", "/payment/v2/bills", "Bearer " + tok, "Transfer-Encoding: chunked\r\n", "5\r\n{\"a\":\r\nZZ\r\n\r\n"},
		{"bill, shorter than its length", "/payment/v2/bills", "Bearer " + tok, "Content-Length: 100\r\n", `{"a":1`},
		{"token, bad chunk", "/identity/v2/token", "Basic " + c.Test.APIKey, "Transfer-Encoding: chunked\r\n", "5\r\nusern\r\nZZ\r\n\r\n"},
		{"token, shorter than its length", "/identity/v2/token", "Basic " + c.Test.APIKey, "Content-Length: 100\r\n", "username=1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			req := "POST " + tt.path + " HTTP/1.1\r\nHost: kadi.test\r\nAuthorization: " + tt.auth + "\r\nContent-Type: application/json\r\n" + tt.head + "\r\n" + tt.body
			if _, err := io.WriteString(conn, req); err != nil {
				t.Fatal(err)
			}
			_ = conn.(*net.TCPConn).CloseWrite()
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "invalid_request") {
				t.Errorf("%d %s, want 400 invalid_request", resp.StatusCode, body)
			}
		})
	}
}
