package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// Every HTML page goes out whole, with its Content-Length: a page over
// 2 KB written without one is sent chunked, in more writes to the socket,
// and a shopper's browser cannot tell how much is left to load.
func TestPagesAreSentWhole(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	srv := httptest.NewServer(g.Handler)
	defer srv.Close()
	c := g.Onboard("Whole Shop")
	tok := g.Token(c, merchant.Test)
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(v url.Values) *http.Response {
		resp, err := noRedirects.Post(srv.URL+"/cardPay", "application/x-www-form-urlencoded", strings.NewReader(v.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// followed is the page a 303 from /cardPay names, fetched with the
	// cookies it set, as a browser does.
	followed := func(resp *http.Response) *http.Response {
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST /cardPay: %d, want a 303", resp.StatusCode)
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+resp.Header.Get("Location"), nil)
		for _, ck := range resp.Cookies() {
			req.AddCookie(ck)
		}
		page, err := noRedirects.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return page
	}
	get := func(path string) *http.Response {
		resp, err := noRedirects.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	open := g.CreateBill(c, tok, "WHOLE1", "10")
	paid := g.CreateBill(c, tok, "WHOLE2", "10")
	for _, tc := range []struct {
		name string
		resp func() *http.Response
	}{
		{"card-entry page", func() *http.Response { return followed(post(servertest.FormFields(c, tok, open))) }},
		{"result page", func() *http.Response {
			return followed(post(servertest.Card{Number: "4242424242424242", CVV: "123"}.Apply(servertest.FormFields(c, tok, paid))))
		}},
		{"error page", func() *http.Response { return followed(post(url.Values{})) }},
		{"dashboard sign-in", func() *http.Response { return get("/dashboard/") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.resp()
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Fatalf("%d %s, not a page", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			t.Logf("%d bytes", len(body))
			if len(resp.TransferEncoding) > 0 || resp.ContentLength != int64(len(body)) {
				t.Errorf("%d bytes sent %v with Content-Length %d, want whole with its length", len(body), resp.TransferEncoding, resp.ContentLength)
			}
		})
	}
}
