package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// TestBrowserPendingPageFollowsThePayment: the "being confirmed" page a
// shopper meets while another attempt on the bill is with the network
// passes axe (no timed refresh, which would move a keyboard's focus and a
// screen reader to the top every 3 s) and still turns into the result by
// itself once that attempt is settled, posting the result to the shop.
func TestBrowserPendingPageFollowsThePayment(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	g := servertest.Start(t, servertest.Options{})
	srv := httptest.NewServer(g.Handler)
	defer srv.Close()
	c := g.Onboard("Pending Browser Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "PENDB1", "10")
	posts := make(chan url.Values, 4)
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ParseForm() == nil && r.Method == http.MethodPost {
			posts <- r.PostForm
		}
		fmt.Fprint(w, "<!doctype html><title>shop</title><p>thanks</p>")
	}))
	defer shop.Close()
	fields := servertest.FormFields(c, tok, b)
	fields.Set("callbackUrl", shop.URL+"/callback")
	entry := g.ServeOnce(servertest.CardPayRequest(fields)).Header().Get("Location")
	inflight := g.PaymentInFlight(b.Reference, "pay_inflight_browser")

	ctx, console := newBrowser(t)
	mark := console.mark()
	// A status, not an error: the payment may well have gone through.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	run(t, wctx, chromedp.Navigate(srv.URL+entry), chromedp.WaitVisible(chromedp.CSS(`p.notice[role="status"]`)))
	if txt := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(txt, "being confirmed") {
		t.Fatalf("not the pending page:\n%s", txt)
	}
	if os.Getenv("KADI_SCREENSHOTS") == "1" {
		saveScreenshot(t, ctx, "card-pending.png")
	}
	axeCheck(t, ctx, "payment being confirmed")

	inflight.Status, inflight.NetworkRef, inflight.Message, inflight.UpdatedAt = payment.Succeeded, "NETPENDB1", payment.MsgApproved, g.Clock.Now()
	if err := g.Store.FinishPayment(context.Background(), inflight, 5, nil); err != nil {
		t.Fatal(err)
	}
	// The result posts itself to the shop: the shop hears of the payment
	// from the shopper's browser too, not only by IPN.
	select {
	case got := <-posts:
		if got.Get("orderStatus") != "Transaction Successfull" || got.Get("transactionRef") != "NETPENDB1" {
			t.Errorf("the shop's callback: %v", got)
		}
	case <-time.After(20 * time.Second):
		txt := value(t, ctx, chromedp.Text(chromedp.CSS("body")))
		t.Fatalf("the settled page did not post the result to the shop; it shows:\n%s", txt)
	}
	for _, msg := range console.cspSince(mark) {
		t.Errorf("browser console: %s", msg)
	}
}
