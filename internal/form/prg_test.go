package form_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/form"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/server/servertest"
)

func post(path string, v url.Values) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// seeOther checks rec is a 303 to one of our pages and returns its URL.
func seeOther(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	loc := rec.Header().Get("Location")
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/cardPay/page/") {
		t.Fatalf("want 303 to /cardPay/page/…, got %d to %q:\n%s", rec.Code, loc, rec.Body)
	}
	if rec.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("303 Cache-Control %q, want no-store", rec.Header().Get("Cache-Control"))
	}
	return loc
}

func get(g *servertest.Gateway, path string) *httptest.ResponseRecorder {
	return g.Serve(httptest.NewRequest(http.MethodGet, path, nil))
}

// Every POST of the hosted pages answers 303 to a page read by GET, so
// back and reload never offer to resubmit a form; the page's URL carries
// no token, no card data and no checkout id, and is worth nothing forged,
// damaged or late.
func TestPagesAreReachedByGET(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("PRG Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "PRG1", "1500.00")
	fields := servertest.FormFields(c, tok, b)

	entry := seeOther(t, g.ServeOnce(servertest.CardPayRequest(fields)))
	page := servertest.ParsePage(get(g, entry).Body.String())
	f, ok := page.FormTo("/cardPay")
	if !ok {
		t.Fatal("the 303 of the merchant's form does not lead to the card page")
	}
	id := f.Values()["checkout"]
	if again := get(g, entry); again.Code != http.StatusOK || !strings.Contains(again.Body.String(), id) {
		t.Errorf("reloading the card page: %d", again.Code)
	}

	bad := seeOther(t, g.ServeOnce(post("/cardPay", servertest.CheckoutPost(id, servertest.Card{Number: badLuhn, CVV: cvv}))))
	if rec := get(g, bad); rec.Code != http.StatusUnprocessableEntity || !strings.Contains(rec.Body.String(), `aria-invalid="true"`) {
		t.Errorf("a bad card number: %d\n%s", rec.Code, rec.Body)
	}
	declined := seeOther(t, g.ServeOnce(post("/cardPay", servertest.CheckoutPost(id, servertest.Card{Number: cardDeclined, CVV: cvv}))))
	paid := seeOther(t, g.ServeOnce(post("/cardPay", servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv}))))
	cb := callback(t, get(g, paid))
	if cb["orderStatus"] != "Transaction Successfull" {
		t.Fatalf("result page: %v", cb)
	}
	untrusted := fields
	untrusted.Set("token", "nope")
	refused := seeOther(t, g.ServeOnce(servertest.CardPayRequest(untrusted)))
	errorPage(t, get(g, refused), http.StatusUnauthorized)

	urls := []string{entry, bad, declined, paid, refused}
	pages := g.Sealer("hosted-pages")
	for i, u := range urls {
		// The URL's text is sealed, and a sealed text's random letters
		// hold any three digits now and then (CI met "737" once): the
		// CVV is looked for in what the URL carries, opened.
		for _, leak := range []string{tok, id, checkout.Hash(id), visa, cardDeclined, badLuhn, b.Reference, "PRG1"} {
			if strings.Contains(u, leak) {
				t.Errorf("page URL %d carries %q", i, leak)
			}
		}
		opened, err := form.OpenPageURL(pages, strings.TrimPrefix(u, "/cardPay/page/"))
		if err != nil {
			t.Fatalf("page URL %d does not open: %v", i, err)
		}
		for _, leak := range []string{visa, cardDeclined, badLuhn, tok} {
			if strings.Contains(string(opened), leak) {
				t.Errorf("page URL %d holds %q: %s", i, leak, opened)
			}
		}
		// Three digits can be part of a date or a network reference: the
		// CVV would be a value of its own.
		if slices.Contains(jsonStrings(t, opened), cvv) {
			t.Errorf("page URL %d holds the CVV: %s", i, opened)
		}
		if strings.Contains(g.Logs.String(), strings.TrimPrefix(u, "/cardPay/page/")) {
			t.Errorf("page URL %d is in the logs", i)
		}
		for j := range i {
			if urls[j] == u {
				t.Errorf("pages %d and %d share a URL", j, i)
			}
		}
	}

	// Back to the card page after paying: the result, not the card form.
	back := get(g, entry)
	if _, ok := servertest.ParsePage(back.Body.String()).FormTo("/cardPay"); ok {
		t.Error("the card page of a paid bill still offers to pay")
	}
	if again := callback(t, back); again["transactionRef"] != cb["transactionRef"] {
		t.Errorf("the card page after paying: %v, want the payment %v", again, cb)
	}
	if strings.Contains(back.Body.String(), "autosubmit") {
		t.Error("the card page revisited after paying posts the result to the shop again by itself")
	}
	if !strings.Contains(back.Body.String(), "<title>Payment successful ·") {
		t.Error("the card page revisited after paying is not titled by its result")
	}
	if !strings.Contains(get(g, paid).Body.String(), `data-autosubmit="1"`) {
		t.Error("the result page the payment led to does not post itself to the shop")
	}
	if n := g.CountPayments(b.Reference, payment.Succeeded); n != 1 {
		t.Errorf("%d successful payments", n)
	}

	// Forged, damaged and late page ids.
	name := strings.TrimPrefix(paid, "/cardPay/page/")
	flipped := []byte(name)
	flipped[len(flipped)/2] ^= 1
	for _, u := range []string{"/cardPay/page/forged", "/cardPay/page/" + string(flipped), "/cardPay/page/" + name[:len(name)-4]} {
		errorPage(t, get(g, u), http.StatusGone)
	}
	// Past its half hour, the result page has expired; it still knows
	// the shop it was for.
	g.Clock.Advance(checkout.TTL)
	closedPage(t, get(g, paid), http.StatusGone, "PRG Shop")
}

// After the bill is blocked, its card page says so instead of asking for
// another card.
func TestCardPageOfABlockedBill(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Blocked Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "BLOCK1", "10")
	entry := seeOther(t, g.ServeOnce(servertest.CardPayRequest(servertest.FormFields(c, tok, b))))
	id, _ := servertest.ParsePage(get(g, entry).Body.String()).FormTo("/cardPay")
	for range 5 {
		g.CardPay(servertest.CheckoutPost(id.Values()["checkout"], servertest.Card{Number: cardDeclined, CVV: cvv}))
	}
	failed(t, callback(t, get(g, entry)), b, payment.MsgBlocked)
}

// An error after the shop's callback is trusted offers the way back to the
// shop; one before it never names the shop's address.
func TestErrorPageWayBack(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Way Back Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "BACK1", "10")
	entry := seeOther(t, g.ServeOnce(servertest.CardPayRequest(servertest.FormFields(c, tok, b))))

	// A payment in flight from elsewhere: the page says so, with a link
	// back to the shop's site.
	g.PaymentInFlight(b.Reference, "pay_inflight")
	rec := get(g, entry)
	page := servertest.ParsePage(rec.Body.String())
	if rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `href="https://shop.example/"`) || !strings.Contains(rec.Body.String(), "Back to Way Back Shop") {
		t.Errorf("payment in progress: %d\n%s", rec.Code, rec.Body)
	}
	// Being confirmed, not failed: the page never says nothing was
	// charged, and asks again by itself until the result is known.
	if body := rec.Body.String(); !strings.Contains(body, "being confirmed") || strings.Contains(body, "Nothing more was charged") ||
		!strings.Contains(body, `<meta http-equiv="refresh" content="3">`) {
		t.Errorf("payment in progress page:\n%s", body)
	}
	if _, ok := page.FormTo("/cardPay"); ok {
		t.Error("a bill being paid still shows the card form")
	}
}

// The 3-D Secure page has a way back too: cancelling fails the challenge,
// so its code can no longer pay, ends the checkout and tells the shop.
func TestCancelOnTheChallengePage(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Cancel 3DS Shop")
	tok := g.Token(c, merchant.Test)
	for _, entryPage := range []bool{true, false} {
		b := g.CreateBill(c, tok, map[bool]string{true: "C3DS1", false: "C3DS2"}[entryPage], "10")
		fields := servertest.FormFields(c, tok, b)
		var rec *httptest.ResponseRecorder
		if entryPage {
			rec = g.CardPay(servertest.CheckoutPost(g.OpenCheckout(fields), servertest.Card{Number: card3DS, CVV: cvv}))
		} else {
			rec = g.CardPay(servertest.Card{Number: card3DS, CVV: cvv}.Apply(fields))
		}
		page := servertest.ParsePage(rec.Body.String())
		cancelForm, ok := page.FormTo("/cardPay/cancel")
		if _, challenge := page.FormTo("/cardPay/3ds"); !challenge || !ok {
			t.Fatalf("entry page %v: want the challenge page with a cancel button:\n%s", entryPage, rec.Body)
		}
		id := cancelForm.Values()["checkout"]
		failed(t, callback(t, g.Serve(post("/cardPay/cancel", url.Values{"checkout": {id}}))), b, "cancelled by the customer")
		if n := g.CountPayments(b.Reference, payment.Failed); n != 1 {
			t.Errorf("entry page %v: %d failed payments after cancelling the challenge, want 1", entryPage, n)
		}
		errorPage(t, g.Serve(servertest.ChallengeRequest(id, "123456")), http.StatusNotFound)
		if n := g.CountPayments(b.Reference, payment.Succeeded); n != 0 {
			t.Errorf("entry page %v: the code paid after the cancel", entryPage)
		}
	}
}

// A card posted from the card page while another attempt on the bill is
// with the network lands on "being confirmed", which reloads itself and,
// once that attempt is settled, becomes its result: a sealed notice would
// say "being confirmed" at every reload, for ever.
func TestPendingAfterACardPostFollowsThePayment(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	g.Payments.WaitInFlight = 50 * time.Millisecond
	c := g.Onboard("Pending Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "PEND1", "10")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))
	inflight := g.PaymentInFlight(b.Reference, "pay_inflight")
	loc := seeOther(t, g.ServeOnce(servertest.CardPayRequest(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv}))))
	if rec := get(g, loc); rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `<meta http-equiv="refresh" content="3">`) {
		t.Fatalf("after the card post: %d\n%s", rec.Code, rec.Body)
	}
	inflight.Status, inflight.NetworkRef, inflight.Message, inflight.UpdatedAt = payment.Succeeded, "NETX", payment.MsgApproved, g.Clock.Now()
	if err := g.Store.FinishPayment(context.Background(), inflight, 5, nil); err != nil {
		t.Fatal(err)
	}
	if cb := callback(t, get(g, loc)); cb["orderStatus"] != "Transaction Successfull" || cb["transactionRef"] != "NETX" {
		t.Errorf("the page reloaded once the other attempt succeeded: %v", cb)
	}
	settledPosts(t, g, loc)
}

// settledPosts checks the page at loc once its payment settled: come back
// to, it waits for the button; asked for again by the waiting page's
// script (?settled), it posts the result to the shop by itself.
func settledPosts(t *testing.T, g *servertest.Gateway, loc string) {
	t.Helper()
	if strings.Contains(get(g, loc).Body.String(), `data-autosubmit="1"`) {
		t.Error("the settled page, come back to, posts to the shop by itself")
	}
	if rec := get(g, loc+"?settled"); !strings.Contains(rec.Body.String(), `data-autosubmit="1"`) {
		t.Errorf("the settled page, as the waiting page asks for it, does not post to the shop: %d\n%s", rec.Code, rec.Body)
	}
}

// A merchant's own form posted while its first submit is still with the
// card network: the "being confirmed" page follows that payment (it was
// sealed as it was, 202 for its whole life) and posts the result to the
// shop once it settles.
func TestDoubleSubmitOfAMerchantFormFollowsThePayment(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	g.Payments.WaitInFlight = 50 * time.Millisecond
	c := g.Onboard("Double Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "DOUBLE1", "10")
	inflight := g.PaymentInFlight(b.Reference, "pay_first")
	loc := seeOther(t, g.ServeOnce(servertest.CardPayRequest(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b)))))
	if rec := get(g, loc); rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), "follow.js") {
		t.Fatalf("the second submit's page: %d\n%s", rec.Code, rec.Body)
	}
	inflight.Status, inflight.NetworkRef, inflight.Message, inflight.UpdatedAt = payment.Succeeded, "NETD", payment.MsgApproved, g.Clock.Now()
	if err := g.Store.FinishPayment(context.Background(), inflight, 5, nil); err != nil {
		t.Fatal(err)
	}
	if cb := callback(t, get(g, loc)); cb["orderStatus"] != "Transaction Successfull" || cb["transactionRef"] != "NETD" {
		t.Errorf("the page once the first submit's payment succeeded: %v", cb)
	}
	settledPosts(t, g, loc)
	if n := g.CountPayments(b.Reference, ""); n != 1 {
		t.Errorf("%d payments for one bill submitted twice", n)
	}
}

// A merchant's own form whose charge was answered but whose outcome could
// not be stored: the "being confirmed" page follows the payment, left
// processing for the reconciler, and posts the result once it is known.
func TestUnrecordedChargeOfAMerchantFormFollowsThePayment(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	g.Payments.WaitInFlight = 50 * time.Millisecond
	c := g.Onboard("Unrecorded Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "UNREC1", "10")
	store := g.Payments.Repo
	g.Payments.Repo = unrecorded{store}
	loc := seeOther(t, g.ServeOnce(servertest.CardPayRequest(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b)))))
	g.Payments.Repo = store
	if rec := get(g, loc); rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), "follow.js") {
		t.Fatalf("the page of an unrecorded charge: %d\n%s", rec.Code, rec.Body)
	}
	p, err := g.Store.LatestPayment(t.Context(), b.Reference)
	if err != nil || p.Status != payment.Processing {
		t.Fatalf("the unrecorded payment: %+v, %v", p, err)
	}
	p.Status, p.NetworkRef, p.Message, p.UpdatedAt = payment.Succeeded, "NETU", payment.MsgApproved, g.Clock.Now()
	if err := g.Store.FinishPayment(t.Context(), p, 5, nil); err != nil {
		t.Fatal(err)
	}
	if cb := callback(t, get(g, loc)); cb["orderStatus"] != "Transaction Successfull" || cb["transactionRef"] != "NETU" {
		t.Errorf("the page once the payment was recorded: %v", cb)
	}
}

// unrecorded is a store that cannot record a charge's outcome.
type unrecorded struct{ payment.Repo }

func (unrecorded) FinishPayment(context.Context, payment.Payment, int, *ipn.Event) error {
	return errors.New("connection reset by peer")
}

// jsonStrings is every string and number in a JSON document, as text.
func jsonStrings(t *testing.T, doc []byte) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(doc)))
	dec.UseNumber()
	var out []string
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch v := tok.(type) {
		case string:
			out = append(out, v)
		case json.Number:
			out = append(out, v.String())
		}
	}
	return out
}

// A charge the card network did not answer may yet be found charged: the
// shopper is told it is being confirmed, the shop hears nothing until it
// is known (never "Transaction Failed" of a card that was charged), and
// once the reconciler learns the outcome the page posts it. On the card
// page and on a merchant's own form alike.
func TestUnansweredChargeIsBeingConfirmed(t *testing.T) {
	for _, entryPage := range []bool{true, false} {
		g := servertest.Start(t, servertest.Options{})
		g.Payments.WaitInFlight = 50 * time.Millisecond
		g.Payments.Acquirers[merchant.Test] = reconciledAs{g.Payments.Acquirers[merchant.Test],
			payment.Result{Outcome: payment.Approved, NetworkRef: "NETLATE", ApprovalCode: "A1"}}
		c := g.Onboard("Silent Shop")
		tok := g.Token(c, merchant.Test)
		b := g.CreateBill(c, tok, "SILENT1", "10")
		fields := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
		if entryPage {
			id := g.OpenCheckout(servertest.FormFields(c, tok, b))
			fields = servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv})
		}
		loc := seeOther(t, g.ServeOnce(servertest.CardPayRequest(fields)))
		rec := get(g, loc)
		if body := rec.Body.String(); rec.Code != http.StatusAccepted || !strings.Contains(body, "being confirmed") || strings.Contains(body, "Transaction Failed") {
			t.Fatalf("entry page %v: the page of an unanswered charge: %d\n%s", entryPage, rec.Code, body)
		}
		// Not an error: it reads as a status, and does not put a big
		// button back to the shop, where a worried shopper pays again.
		if body := rec.Body.String(); !strings.Contains(body, `class="notice" role="status"`) || strings.Contains(body, `role="alert"`) || strings.Contains(body, `class="button"`) {
			t.Errorf("entry page %v: the page of an unanswered charge looks like a failure:\n%s", entryPage, body)
		}
		if n := g.CountPayments(b.Reference, payment.Unknown); n != 1 {
			t.Fatalf("entry page %v: %d unknown payments, want 1", entryPage, n)
		}
		if err := g.Payments.Reconcile(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
		if cb := callback(t, get(g, loc)); cb["orderStatus"] != "Transaction Successfull" || cb["transactionRef"] != "NETLATE" {
			t.Errorf("entry page %v: the page once the charge was found: %v", entryPage, cb)
		}
		settledPosts(t, g, loc)
	}
}

// A result page come back to (it waits for the button) has the language
// switch, and switching keeps it waiting: the shop is not posted to again.
// A page that posts itself at once has none.
func TestResultPageComeBackToSwitchesLanguage(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Lugha Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "LANG1", "10")
	loc := seeOther(t, g.ServeOnce(servertest.CardPayRequest(servertest.FormFields(c, tok, b)))) // the card page
	f, ok := servertest.ParsePage(get(g, loc).Body.String()).FormTo("/cardPay")
	if !ok {
		t.Fatal("no card form")
	}
	paid := g.CardPay(servertest.CheckoutPost(f.Values()["checkout"], servertest.Card{Number: visa, CVV: cvv}))
	if _, ok := servertest.ParsePage(paid.Body.String()).FormTo("/cardPay/language"); ok || !strings.Contains(paid.Body.String(), `data-autosubmit="1"`) {
		t.Error("the page that posts the result at once has a language switch")
	}
	back := get(g, loc)
	sw, ok := servertest.ParsePage(back.Body.String()).FormTo("/cardPay/language")
	if !ok || strings.Contains(back.Body.String(), `data-autosubmit="1"`) {
		t.Fatalf("the result come back to: no language switch, or it posts itself:\n%s", back.Body)
	}
	if !strings.Contains(back.Body.String(), `<p class="merchant">Lugha Shop`) {
		t.Errorf("the result come back to does not name the shop:\n%s", back.Body)
	}
	form := url.Values{"language": {"sw"}}
	for k, v := range sw.Values() {
		if k != "language" {
			form.Set(k, v)
		}
	}
	rec := g.ServeOnce(post("/cardPay/language", form))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != loc {
		t.Fatalf("switch: %d to %q, want %q", rec.Code, rec.Header().Get("Location"), loc)
	}
	again := httptest.NewRequest(http.MethodGet, loc, nil)
	for _, ck := range rec.Result().Cookies() {
		again.AddCookie(ck)
	}
	page := g.Serve(again).Body.String()
	if !strings.Contains(page, "Malipo yamefanikiwa") || strings.Contains(page, `data-autosubmit="1"`) {
		t.Errorf("after switching to Swahili:\n%s", page)
	}
}

// A page past its life has the language switch too: switching shows it
// gone again, in the language chosen; an id no page could have is not
// echoed into the switch.
func TestExpiredPageSwitchesLanguage(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	const dead = "k0.not-a-page"
	rec := get(g, "/cardPay/page/"+dead)
	sw, ok := servertest.ParsePage(rec.Body.String()).FormTo("/cardPay/language")
	if rec.Code != http.StatusGone || !ok || sw.Values()["page"] != dead {
		t.Fatalf("the expired page: %d, switch %v %v\n%s", rec.Code, ok, sw.Values(), rec.Body)
	}
	switched := g.ServeOnce(post("/cardPay/language", url.Values{"page": {dead}, "language": {"sw"}}))
	loc := seeOther(t, switched)
	again := httptest.NewRequest(http.MethodGet, loc, nil)
	for _, ck := range switched.Result().Cookies() {
		again.AddCookie(ck)
	}
	if body := g.Serve(again).Body.String(); !strings.Contains(body, "Ukurasa wa malipo umeisha muda") {
		t.Errorf("after switching, the expired page:\n%s", body)
	}
	if body := get(g, "/cardPay/page/"+url.PathEscape(`"><x`)).Body.String(); strings.Contains(body, `action="/cardPay/language"`) {
		t.Error("an id no page could have went into the language switch")
	}
	// A card number where the id goes is not repeated on the page.
	for _, id := range []string{"4242424242424242", "4242-4242-4242-4242"} {
		if body := get(g, "/cardPay/page/"+id).Body.String(); strings.Contains(body, "4242") {
			t.Errorf("the gone page of %q repeats it", id)
		}
	}
}

// reconciledAs is a card network that does not answer a charge in time
// and, asked later, gives outcome: one timing out.
type reconciledAs struct {
	payment.Acquirer
	outcome payment.Result
}

func (reconciledAs) Charge(ctx context.Context, req payment.ChargeRequest) (payment.Result, error) {
	return payment.Result{}, context.DeadlineExceeded
}

func (a reconciledAs) Lookup(ctx context.Context, id string) (payment.Result, error) {
	return a.outcome, nil
}

// A merchant's own form whose fifth attempt went unanswered and is found
// declined: the page that followed it says the bill takes no other card.
func TestLastAttemptReconciledAsDeclinedSaysBlocked(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	g.Payments.WaitInFlight = 50 * time.Millisecond
	c := g.Onboard("Last Try Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "LAST1", "10")
	for range 4 {
		g.CardPay(servertest.Card{Number: cardDeclined, CVV: cvv}.Apply(servertest.FormFields(c, tok, b)))
	}
	g.Payments.Acquirers[merchant.Test] = reconciledAs{g.Payments.Acquirers[merchant.Test],
		payment.Result{Outcome: payment.Declined, DeclineCode: "generic_decline", Message: "Your card was declined"}}
	loc := seeOther(t, g.ServeOnce(servertest.CardPayRequest(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b)))))
	if rec := get(g, loc); rec.Code != http.StatusAccepted {
		t.Fatalf("the unanswered fifth attempt: %d\n%s", rec.Code, rec.Body)
	}
	if err := g.Payments.Reconcile(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	rec := get(g, loc)
	failed(t, callback(t, rec), b, "declined")
	if !strings.Contains(rec.Body.String(), "cannot take another card") {
		t.Errorf("the page of the last attempt, found declined:\n%s", rec.Body)
	}
}

// A checkout's page that has closed (the shopper cancelled, then pressed
// Back and Pay) or expired (a tab left open past its half hour) still
// offers the way back to the shop and says it was a test: it used to be a
// dead end. Its forms post the page's sealed id along, so a post from it
// knows the shop too; a forged id knows nothing.
func TestClosedPagesLeadBackToTheShop(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Closing Shop")
	tok := g.Token(c, merchant.Test)
	open := func(ref string, card string) (string, servertest.Page) {
		t.Helper()
		b := g.CreateBill(c, tok, ref, "10")
		v := servertest.FormFields(c, tok, b)
		if card != "" {
			v = servertest.Card{Number: card, CVV: cvv}.Apply(v)
		}
		loc := seeOther(t, g.ServeOnce(servertest.CardPayRequest(v)))
		return loc, servertest.ParsePage(get(g, loc).Body.String())
	}
	form := func(p servertest.Page, action string) url.Values {
		t.Helper()
		f, ok := p.FormTo(action)
		if !ok {
			t.Fatalf("no form to %s on the page", action)
		}
		v := url.Values{}
		for name, value := range f.Values() {
			v.Set(name, value)
		}
		return v
	}

	loc, page := open("CLOSING1", "")
	cardForm, cancelForm := form(page, "/cardPay"), form(page, "/cardPay/cancel")
	callback(t, g.Serve(post("/cardPay/cancel", cancelForm)))
	closedPage(t, get(g, loc), http.StatusGone, "Closing Shop")
	closedPage(t, g.Serve(post("/cardPay", servertest.Card{Number: visa, CVV: cvv}.Apply(cardForm))), http.StatusGone, "Closing Shop")
	closedPage(t, g.Serve(post("/cardPay/cancel", cancelForm)), http.StatusGone, "Closing Shop")
	for _, forged := range []string{"forged", loc[len("/cardPay/page/"):] + "A"} {
		cancelForm.Set("page", forged)
		errorPage(t, g.Serve(post("/cardPay/cancel", cancelForm)), http.StatusGone)
	}

	// The 3-D Secure page's forms, after its session ended.
	_, page = open("CLOSING2", card3DS)
	codeForm := form(page, "/cardPay/3ds")
	if err := g.Store.EndCheckout(t.Context(), checkout.Hash(codeForm.Get("checkout")), g.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	codeForm.Set("code", "123456")
	closedPage(t, g.Serve(post("/cardPay/3ds", codeForm)), http.StatusNotFound, "Closing Shop")

	// Left open past the half hour: the page's address has expired too.
	loc, page = open("CLOSING3", "")
	g.Clock.Advance(checkout.TTL)
	closedPage(t, get(g, loc), http.StatusGone, "Closing Shop")
	closedPage(t, g.Serve(post("/cardPay", servertest.Card{Number: visa, CVV: cvv}.Apply(form(page, "/cardPay")))), http.StatusGone, "Closing Shop")
	lang := form(page, "/cardPay/language")
	lang.Set("language", "sw")
	if body := g.Serve(post("/cardPay/language", lang)).Body.String(); !strings.Contains(body, `href="https://shop.example/"`) || !strings.Contains(body, "Rudi kwa Closing Shop") {
		t.Errorf("the expired page's language switch lost the way back to the shop:\n%s", body)
	}
}
