package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// BenchmarkQuery runs a merchant's verification through the whole
// handler, middleware included, on SQLite, beside /healthz through the
// same handler: kadi-load's query scenario without the network, so that
// a change to the query's own path shows apart from the machine's noise.
func BenchmarkQuery(b *testing.B) {
	g := servertest.Start(b, servertest.Options{})
	c := g.Onboard("Bench Shop")
	token := g.Token(c, merchant.Test)
	bill := g.CreateBill(c, token, "BENCH1", "10")
	for _, tc := range []struct {
		name, path string
		want       int
	}{
		{"healthz", "/healthz", http.StatusOK},
		{"no such bill", "/payment/v2/query?billReference=NOSUCHBILL", http.StatusNotFound},
		{"unpaid bill", "/payment/v2/query?billReference=" + bill.Reference, http.StatusOK},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+token)
			b.ReportAllocs()
			for b.Loop() {
				if rec := g.ServeOnce(req); rec.Code != tc.want {
					b.Fatalf("%s: %d, want %d", tc.path, rec.Code, tc.want)
				}
			}
		})
	}
}
