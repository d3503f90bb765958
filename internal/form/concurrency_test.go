package form_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/server/servertest"
)

type submitResult struct {
	status int
	body   string
	err    error
}

// submitAll posts every form at once through a real HTTP server and
// returns the answers in the same order.
func submitAll(t *testing.T, g *servertest.Gateway, forms []url.Values) []submitResult {
	t.Helper()
	srv := httptest.NewServer(g.Handler)
	defer srv.Close()
	client := srv.Client()
	start := make(chan struct{})
	out := make([]submitResult, len(forms))
	var wg sync.WaitGroup
	for i, f := range forms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := client.PostForm(srv.URL+"/cardPay", f)
			if err != nil {
				out[i].err = err
				return
			}
			defer resp.Body.Close()
			out[i] = submitResult{status: resp.StatusCode, body: servertest.ReadAll(t, resp.Body)}
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func redirectOf(t *testing.T, i int, r submitResult) map[string]string {
	t.Helper()
	if r.err != nil {
		t.Fatalf("submit %d: %v", i, r.err)
	}
	f, ok := servertest.ParsePage(r.body).Redirect()
	if r.status != http.StatusOK || !ok {
		t.Fatalf("submit %d: want a redirect page, got %d:\n%s", i, r.status, r.body)
	}
	return f.Values()
}

// slowAcquirer widens the window in which concurrent submits find the
// bill processing, so they must wait for the first charge's result.
type slowAcquirer struct {
	payment.Acquirer
	delay time.Duration
}

func (s slowAcquirer) Charge(ctx context.Context, req payment.ChargeRequest) (payment.Result, error) {
	time.Sleep(s.delay)
	return s.Acquirer.Charge(ctx, req)
}

// docs/hosted-form.md, the key rule: concurrent submits of one bill charge it once
// and all see that one result.
func TestConcurrentSubmitsChargeOnce(t *testing.T) {
	for _, delay := range []time.Duration{0, 200 * time.Millisecond} {
		t.Run("acquirer delay "+delay.String(), func(t *testing.T) {
			g := servertest.Start(t, servertest.Options{})
			if delay > 0 {
				g.Payments.Acquirers[merchant.Test] = slowAcquirer{g.Payments.Acquirers[merchant.Test], delay}
			}
			c := g.Onboard("Busy Shop")
			tok := g.Token(c, merchant.Test)
			b := g.CreateBill(c, tok, "RACE1", "1500.00")

			forms := make([]url.Values, 30)
			for i := range forms {
				forms[i] = servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
			}
			ref := ""
			for i, r := range submitAll(t, g, forms) {
				cb := redirectOf(t, i, r)
				if cb["orderStatus"] != "Transaction Successfull" || cb["transactionRef"] == "" {
					t.Errorf("submit %d: %v", i, cb)
					continue
				}
				if ref == "" {
					ref = cb["transactionRef"]
				} else if cb["transactionRef"] != ref {
					t.Errorf("submit %d got transactionRef %s, another got %s", i, cb["transactionRef"], ref)
				}
			}
			if n := g.CountPayments(b.Reference, payment.Succeeded); n != 1 {
				t.Errorf("%d successful payments, want exactly 1", n)
			}
			if n := g.CountPayments(b.Reference, ""); n != 1 {
				t.Errorf("%d payment attempts, want 1: every other submit must wait for the first", n)
			}
			won, err := g.Store.SuccessfulPayment(context.Background(), b.Reference)
			if err != nil || won.NetworkRef != ref {
				t.Errorf("stored success %q (%v), callbacks said %q", won.NetworkRef, err, ref)
			}
		})
	}
}

func TestConcurrentMixedSubmitsChargeAtMostOnce(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Mixed Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "RACE2", "1500.00")

	forms := make([]url.Values, 30)
	for i := range forms {
		number := visa
		if i%2 == 0 {
			number = cardDeclined
		}
		forms[i] = servertest.Card{Number: number, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
	}
	refs := map[string]bool{}
	for i, r := range submitAll(t, g, forms) {
		cb := redirectOf(t, i, r)
		switch cb["orderStatus"] {
		case "Transaction Successfull":
			refs[cb["transactionRef"]] = true
		case "Transaction Failed":
			if cb["transactionRef"] != "" || strings.TrimSpace(cb["message"]) == "" {
				t.Errorf("submit %d: failure %v", i, cb)
			}
		default:
			t.Errorf("submit %d: orderStatus %q", i, cb["orderStatus"])
		}
	}
	if len(refs) > 1 {
		t.Errorf("submits report %d different successful charges: %v", len(refs), refs)
	}
	succeeded := g.CountPayments(b.Reference, payment.Succeeded)
	if succeeded > 1 {
		t.Errorf("%d successful payments, want at most 1", succeeded)
	}
	if failures := g.CountPayments(b.Reference, payment.Failed); failures > 5 {
		t.Errorf("%d failed attempts, but a bill is blocked after 5", failures)
	}
	if total := g.CountPayments(b.Reference, ""); total != succeeded+g.CountPayments(b.Reference, payment.Failed) {
		t.Errorf("%d attempts left unsettled", total-succeeded)
	}
	st := billState(t, g, b.Reference)
	switch {
	case succeeded == 1 && st.State != "paid":
		t.Errorf("a payment succeeded but the bill is %s", st.State)
	case succeeded == 1:
		won, err := g.Store.SuccessfulPayment(context.Background(), b.Reference)
		if err != nil || !refs[won.NetworkRef] || len(refs) != 1 {
			t.Errorf("stored success %q (%v), callbacks reported %v", won.NetworkRef, err, refs)
		}
	case len(refs) > 0:
		t.Errorf("callbacks report success %v but none is stored", refs)
	}
}

// A double click on the challenge's Confirm button, or two tabs answering
// with different codes: every answer reports the one recorded result.
func TestConcurrentChallengeAnswersAgree(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Clicky Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "RACE3DS", "10")
	page := servertest.ParsePage(g.CardPay(servertest.Card{Number: card3DS, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))).Body.String())
	f, ok := page.FormTo("/cardPay/3ds")
	if !ok {
		t.Fatal("no challenge page")
	}
	id := f.Values()["checkout"]

	srv := httptest.NewServer(g.Handler)
	defer srv.Close()
	start := make(chan struct{})
	results := make([]submitResult, 10)
	var wg sync.WaitGroup
	for i := range results {
		code := "123456"
		if i%2 == 1 {
			code = "000000"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := srv.Client().PostForm(srv.URL+"/cardPay/3ds", url.Values{"checkout": {id}, "code": {code}})
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			results[i] = submitResult{status: resp.StatusCode, body: servertest.ReadAll(t, resp.Body)}
		}()
	}
	close(start)
	wg.Wait()

	first := redirectOf(t, 0, results[0])
	for i, r := range results {
		cb := redirectOf(t, i, r)
		if cb["orderStatus"] != first["orderStatus"] || cb["transactionRef"] != first["transactionRef"] {
			t.Errorf("answer %d: %s %q; answer 0: %s %q", i, cb["orderStatus"], cb["transactionRef"], first["orderStatus"], first["transactionRef"])
		}
	}
	stored, err := g.Store.LatestPayment(context.Background(), b.Reference)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]payment.Status{true: payment.Succeeded, false: payment.Failed}[first["orderStatus"] == "Transaction Successfull"]; stored.Status != want || stored.NetworkRef != first["transactionRef"] {
		t.Errorf("stored %s %q, callbacks %v", stored.Status, stored.NetworkRef, first)
	}
	if n := g.CountPayments(b.Reference, ""); n != 1 {
		t.Errorf("%d payment rows", n)
	}
}

// gatedAcquirer holds each charge until the test releases it.
type gatedAcquirer struct {
	payment.Acquirer
	entered, release chan struct{}
}

func (a gatedAcquirer) Charge(ctx context.Context, req payment.ChargeRequest) (payment.Result, error) {
	close(a.entered)
	<-a.release
	return a.Acquirer.Charge(ctx, req)
}

// "Cancel and return to the shop" while the Pay click is still with the
// card network waits for the charge: the shop hears what happened to the
// card, never "cancelled by the customer" of a card that was charged.
func TestCancelDuringAChargeAnswersTheCharge(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	acq := gatedAcquirer{g.Payments.Acquirers[merchant.Test], make(chan struct{}), make(chan struct{})}
	g.Payments.Acquirers[merchant.Test] = acq
	c := g.Onboard("Slow Network Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "SLOW1", "10")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))

	paid := make(chan *httptest.ResponseRecorder, 1)
	go func() { paid <- g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv})) }()
	<-acq.entered
	cancelled := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		req := httptest.NewRequest(http.MethodPost, "/cardPay/cancel", strings.NewReader(url.Values{"checkout": {id}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		cancelled <- g.Serve(req)
	}()
	select {
	case <-cancelled:
		close(acq.release)
		t.Fatal("the cancel answered while the charge was still with the network")
	case <-time.After(100 * time.Millisecond):
	}
	close(acq.release)
	charged := callback(t, <-paid)
	if got := callback(t, <-cancelled); got["orderStatus"] != "Transaction Successfull" || got["transactionRef"] != charged["transactionRef"] {
		t.Errorf("cancel during the charge told the shop %v; the charge: %v", got, charged)
	}
}
