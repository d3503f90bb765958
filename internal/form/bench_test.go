package form_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// BenchmarkCardPay measures one approved /cardPay through the gateway's
// handler: trust checks, card checks, the durable charge and the redirect.
func BenchmarkCardPay(b *testing.B) {
	g := servertest.Start(b, servertest.Options{})
	c := g.Onboard("Bench Shop")
	tok := g.Token(c, merchant.Test)
	card := servertest.Card{Number: visa, CVV: cvv}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Each charge needs its own bill; making it is not what we measure.
		b.StopTimer()
		bill := g.CreateBill(c, tok, "BENCH"+strconv.Itoa(i), "1500.00")
		form := card.Apply(servertest.FormFields(c, tok, bill))
		req := servertest.CardPayRequest(form)
		b.StartTimer()

		rec := g.Serve(req)

		b.StopTimer()
		if rec.Code != http.StatusOK {
			b.Fatalf("cardPay: %d\n%s", rec.Code, rec.Body)
		}
		if f, ok := servertest.ParsePage(rec.Body.String()).Redirect(); !ok || f.Values()["orderStatus"] != "Transaction Successfull" {
			b.Fatalf("not an approved redirect:\n%s", rec.Body)
		}
		b.StartTimer()
	}
}

// BenchmarkCardPayBaseline is the floor BenchmarkCardPay is read against:
// GET /healthz through the same handler and middleware, with its one
// database round trip.
func BenchmarkCardPayBaseline(b *testing.B) {
	g := servertest.Start(b, servertest.Options{})
	b.ReportAllocs()
	for b.Loop() {
		rec := g.Serve(httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("healthz: %d", rec.Code)
		}
	}
}
