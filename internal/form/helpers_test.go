package form_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/api"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// Test cards of docs/hosted-form.md. They may appear only in tests, testdata, docs
// and the simulator's table.
const (
	visa              = "4242424242424242"
	visa2             = "4111111111111111"
	mastercard        = "5555555555554444"
	mastercard2       = "2223003122003222"
	amex              = "378282246310005"
	cardDeclined      = "4000000000000002"
	cardInsufficient  = "4000000000009995"
	cardExpired       = "4000000000000069"
	cardIncorrectCVV  = "4000000000000127"
	cardAcquirerError = "4000000000000119"
	card3DS           = "4000000000003220"
	badLuhn           = "4242424242424241"

	cvv     = "737" // distinctive, so a leak can be searched for
	amexCVV = "7373"
)

// callbackFields are spec 2.5's fields, in the spec's order.
var callbackFields = []string{"orderAmount", "orderReference", "orderStatus", "message", "dateTime", "billReference", "transactionRef"}

var nairobiDate = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}\+0300$`)

// callback checks rec is our redirect page carrying exactly spec 2.5's
// fields, posting to servertest.CallbackURL, and returns the fields.
func callback(t *testing.T, rec *httptest.ResponseRecorder) map[string]string {
	t.Helper()
	return callbackTo(t, rec, servertest.CallbackURL)
}

func callbackTo(t *testing.T, rec *httptest.ResponseRecorder, action string) map[string]string {
	t.Helper()
	page := servertest.ParsePage(rec.Body.String())
	f, ok := page.Redirect()
	if rec.Code != http.StatusOK || !ok {
		t.Fatalf("want the redirect page, got %d:\n%s", rec.Code, rec.Body)
	}
	// Besides the callback, only the language switch of a page come back
	// to (one that posts itself has none: it leaves at once).
	for _, other := range page.Forms {
		if other.Attrs["id"] != "kadi-callback" && (other.Action() != "/cardPay/language" || strings.Contains(rec.Body.String(), `data-autosubmit="1"`)) {
			t.Errorf("redirect page has a form to %q besides the callback", other.Action())
		}
	}
	if f.Action() != action || !strings.EqualFold(f.Attrs["method"], "post") {
		t.Errorf("redirect form: %s %q, want POST %q", f.Attrs["method"], f.Action(), action)
	}
	var names []string
	for _, h := range f.Hidden() {
		names = append(names, h.Name)
	}
	if !slices.Equal(names, callbackFields) {
		t.Errorf("callback fields %v, want exactly %v", names, callbackFields)
	}
	if len(f.Inputs) != len(callbackFields) {
		t.Errorf("redirect form has %d inputs, want only the %d hidden callback fields", len(f.Inputs), len(callbackFields))
	}
	cb := f.Values()
	if !nairobiDate.MatchString(cb["dateTime"]) {
		t.Errorf("dateTime %q is not yyyy-MM-ddZ in Africa/Nairobi", cb["dateTime"])
	}
	return cb
}

// failed checks cb reports a failure for b with a message containing want.
func failed(t *testing.T, cb map[string]string, b api.BillResponse, want string) {
	t.Helper()
	if cb["orderStatus"] != "Transaction Failed" {
		t.Errorf("orderStatus %q, want Transaction Failed", cb["orderStatus"])
	}
	if strings.TrimSpace(cb["message"]) == "" || !strings.Contains(cb["message"], want) {
		t.Errorf("message %q, want one containing %q", cb["message"], want)
	}
	if cb["transactionRef"] != "" {
		t.Errorf("failed payment has transactionRef %q", cb["transactionRef"])
	}
	sameBill(t, cb, b)
}

// sameBill checks the callback names bill b.
func sameBill(t *testing.T, cb map[string]string, b api.BillResponse) {
	t.Helper()
	if cb["billReference"] != b.Reference || cb["orderReference"] != b.OrderRef || cb["orderAmount"] != b.Amount {
		t.Errorf("callback names bill %s/%s/%s, want %s/%s/%s", cb["billReference"], cb["orderReference"], cb["orderAmount"],
			b.Reference, b.OrderRef, b.Amount)
	}
}

// errorPage checks rec is our own error page with status want: no form
// at all, so the browser cannot be sent anywhere, and headers that forbid
// posting anywhere.
// sessionInputs checks that form f of checkout page p carries two hidden
// fields, both opaque: its checkout session's id, which it returns, and
// the page's own sealed id, which leads a post of a closed page back to
// the shop. Nothing of the merchant's form.
func sessionInputs(t *testing.T, p servertest.Page, f servertest.Form) string {
	t.Helper()
	lang, _ := p.FormTo("/cardPay/language")
	id := f.Values()["checkout"]
	if len(f.Hidden()) != 2 || !checkout.ValidID(id) || f.Values()["page"] == "" || f.Values()["page"] != lang.Values()["page"] {
		t.Errorf("hidden inputs %v, want the checkout session's id and the page's own", f.Hidden())
		return ""
	}
	return id
}

// closedPage checks the page of a checkout page that has closed or
// expired, of test-mode shop: it says so, labels the test, offers the
// way back to the shop's home page (never its callback, which expects a
// post) and, as the payment may have been made, does not say to pay again.
func closedPage(t *testing.T, rec *httptest.ResponseRecorder, want int, shop string) {
	t.Helper()
	body := rec.Body.String()
	if rec.Code != want || !strings.Contains(body, `role="alert"`) {
		t.Errorf("status %d, want %d and our error page:\n%s", rec.Code, want, body)
	}
	home := `<a href="https://shop.example/" class="button" rel="noreferrer">Back to ` + shop + `</a>`
	if !strings.Contains(body, home) || strings.Contains(body, "/kadi/return") {
		t.Errorf("no way back to %s's home page, %s:\n%s", shop, home, body)
	}
	if !strings.Contains(body, `class="badge"`) {
		t.Errorf("a test-mode checkout's page, closed, is not labelled a test:\n%s", body)
	}
	if !strings.Contains(body, "If you already paid") || strings.Contains(body, "start the payment again") {
		t.Errorf("a closed page must not tell a shopper who may have paid to pay again:\n%s", body)
	}
	securityHeaders(t, rec, "'self'")
}

func errorPage(t *testing.T, rec *httptest.ResponseRecorder, want int) {
	t.Helper()
	if rec.Code != want {
		t.Errorf("status %d, want %d:\n%s", rec.Code, want, rec.Body)
	}
	body := rec.Body.String()
	// The language switch is the one form an error page may carry: it
	// posts to us, never to the shop.
	forms := servertest.ParsePage(body).Forms
	if len(forms) > 1 || len(forms) == 1 && forms[0].Action() != "/cardPay/language" || strings.Count(body, "action=") != len(forms) {
		t.Errorf("error page carries forms other than the language switch: %v", forms)
	}
	for _, leak := range []string{"shop.example", "javascript:", "evil.example"} {
		if strings.Contains(body, leak) {
			t.Errorf("error page mentions %q", leak)
		}
	}
	if !strings.Contains(body, `role="alert"`) {
		t.Errorf("not our error page:\n%s", body)
	}
	// Refused before any card could be charged: the page says the card was
	// not, where "nothing more was charged" read as if it once had been.
	switch want {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusMethodNotAllowed,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		if strings.Contains(body, "Nothing more was charged") || !strings.Contains(body, "Your card was not charged") && !strings.Contains(body, `class="button"`) {
			t.Errorf("a %d page does not say the card was not charged:\n%s", want, body)
		}
	}
	securityHeaders(t, rec, "'self'")
}

// securityHeaders checks docs/hosted-form.md's headers; formAction lists the
// form-action sources the page must name, exactly.
func securityHeaders(t *testing.T, rec *httptest.ResponseRecorder, formAction ...string) {
	t.Helper()
	h := rec.Header()
	if got := h.Get("Cache-Control"); !strings.Contains(got, "no-store") {
		t.Errorf("Cache-Control %q, want no-store", got)
	}
	if got := h.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", got)
	}
	if got := h.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("Referrer-Policy %q", got)
	}
	if h.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id")
	}
	csp := servertest.CSP(h)
	for directive, want := range map[string][]string{
		"default-src":     {"'self'"},
		"object-src":      {"'none'"},
		"base-uri":        {"'none'"},
		"frame-ancestors": {"'none'"},
		"form-action":     formAction,
	} {
		if got, ok := csp[directive]; !ok || !slices.Equal(got, want) {
			t.Errorf("CSP %s = %v, want %v (header %q)", directive, got, want, h.Get("Content-Security-Policy"))
		}
	}
}

func billState(t *testing.T, g *servertest.Gateway, ref string) bill.Bill {
	t.Helper()
	b, err := g.Store.BillByID(context.Background(), ref)
	if err != nil {
		t.Fatalf("load bill %s: %v", ref, err)
	}
	return b
}
