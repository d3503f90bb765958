package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/server/servertest"
)

// Served over https, every answer asks browsers to keep to https: the
// dashboard's sign-in sets a Secure cookie, and only the card pages said
// so before. Over http none does.
func TestHSTSOnEveryAnswerOverHTTPS(t *testing.T) {
	for _, tc := range []struct {
		public string
		want   bool
	}{{"https://pay.kadi.test", true}, {"", false}} {
		g := servertest.Start(t, servertest.Options{PublicURL: tc.public})
		for _, req := range []*http.Request{
			httptest.NewRequest(http.MethodGet, "/healthz", nil),
			httptest.NewRequest(http.MethodGet, "/dashboard/", nil),
			httptest.NewRequest(http.MethodPost, "/dashboard/sign-in", strings.NewReader("username=1&password=2")),
			httptest.NewRequest(http.MethodGet, "/", nil),
			httptest.NewRequest(http.MethodGet, "/no/such/page", nil),
			httptest.NewRequest(http.MethodPost, "/cardPay", strings.NewReader("token=nope")),
		} {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			rec := g.ServeOnce(req)
			if got := strings.HasPrefix(rec.Header().Get("Strict-Transport-Security"), "max-age="); got != tc.want {
				t.Errorf("public URL %q, %s %s (%d): HSTS %q", tc.public, req.Method, req.URL.Path, rec.Code, rec.Header().Get("Strict-Transport-Security"))
			}
		}
	}
}
