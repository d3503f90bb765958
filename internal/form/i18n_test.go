package form_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/i18n"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/server/servertest"
)

var (
	templateID = regexp.MustCompile(`\.T "((?:[^"\\]|\\.)*)"`)
	goID       = regexp.MustCompile(`(?:Title|Message): +"((?:[^"\\]|\\.)*)"|return "((?:[^"\\]|\\.)*)"|Problem\{[^,]+, "((?:[^"\\]|\\.)*)"\}`)
)

// Every message a hosted page can show is in every catalogue: the ids in
// the templates, the page errors and field problems in this package, and
// the payment outcomes shown back to the shopper.
func TestEveryMessageInEveryLanguage(t *testing.T) {
	ids := map[string]bool{}
	for _, glob := range []string{"templates/*.html", "*.go"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			re := templateID
			if strings.HasSuffix(f, ".go") {
				re = goID
			}
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				for _, id := range m[1:] {
					// Fragments ("callbackUrl ") build English details for
					// the shop's developers, shown as they are.
					if id != "" && !strings.HasSuffix(id, " ") && id != "'self'" {
						id, _ = strconv.Unquote(`"` + id + `"`)
						ids[id] = true
					}
				}
			}
		}
	}
	for _, id := range []string{payment.MsgApproved, payment.MsgExpired, payment.MsgBlocked, payment.MsgUnknown, payment.MsgNotReached,
		payment.MsgChallengeFail, payment.MsgChallengeStale, "Your card was declined", "Your card has insufficient funds",
		"Your card has expired", "Your card's security code is incorrect",
		"The card network could not process the payment; nothing was charged, please try again", "must be at most 50 characters"} {
		ids[id] = true
	}
	if len(ids) < 60 {
		t.Fatalf("found only %d message ids: the scan is broken", len(ids))
	}
	for _, l := range i18n.All() {
		if l == i18n.English {
			continue
		}
		for id := range ids {
			if l.T(id) == id {
				t.Errorf("%s has no translation of %q", l.Tag, id)
			}
		}
	}
}

// A Swahili browser gets Swahili pages (lang, text, formatted amount); the
// switch on the page changes the language and the page remembers it; what
// the shop receives stays English.
func TestSwahili(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Duka la Mama")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "SWA1", "1500.00")
	req := servertest.CardPayRequest(servertest.FormFields(c, tok, b))
	req.Header.Set("Accept-Language", "sw-KE,sw;q=0.9,en;q=0.5")
	rec := g.Serve(req)
	body := rec.Body.String()
	for _, want := range []string{`<html lang="sw">`, "Lipa kwa kadi", "Nambari ya kadi", "Lipa KES\u00a01,500.00", "Ghairi na urudi dukani"} {
		if !strings.Contains(body, want) {
			t.Errorf("Swahili card page lacks %q", want)
		}
	}
	if strings.Contains(body, "Pay by card") || rec.Header().Get("Content-Language") != "sw" {
		t.Errorf("Swahili card page still in English, or Content-Language %q", rec.Header().Get("Content-Language"))
	}
	page := servertest.ParsePage(body)
	f, _ := page.FormTo("/cardPay")
	id := f.Values()["checkout"]

	// A decline on the Swahili page is explained in Swahili.
	rec = g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: cardDeclined, CVV: cvv}))
	_ = rec // the cookie-less post above is English: the browser's header is on each request
	decl := httptest.NewRequest(http.MethodPost, "/cardPay", strings.NewReader(servertest.CheckoutPost(id, servertest.Card{Number: cardInsufficient, CVV: cvv}).Encode()))
	decl.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	decl.Header.Set("Accept-Language", "sw")
	if body := g.Serve(decl).Body.String(); !strings.Contains(body, "Kadi yako haina pesa za kutosha. Hakuna pesa iliyotozwa.") {
		t.Errorf("Swahili decline:\n%s", body)
	}

	// The switch: English → Kiswahili, remembered by a cookie, then the
	// same page again by GET.
	lf, ok := page.FormTo("/cardPay/language")
	if !ok || lf.Values()["page"] == "" {
		t.Fatalf("the card page has no language switch naming its page:\n%s", body)
	}
	sw := httptest.NewRequest(http.MethodPost, "/cardPay/language", strings.NewReader(url.Values{"page": {lf.Values()["page"]}, "language": {"sw"}}.Encode()))
	sw.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec = g.ServeOnce(sw)
	var cookie *http.Cookie
	for _, ck := range rec.Result().Cookies() {
		if ck.Name == "kadi_lang" {
			cookie = ck
		}
	}
	back := rec.Header().Get("Location")
	if rec.Code != http.StatusSeeOther || back != "/cardPay/page/"+lf.Values()["page"] || cookie == nil || cookie.Value != "sw" {
		t.Fatalf("switch to Swahili: %d to %q, cookie %v", rec.Code, back, cookie)
	}
	again := httptest.NewRequest(http.MethodGet, back, nil)
	again.AddCookie(cookie)
	if body := g.Serve(again).Body.String(); !strings.Contains(body, "Lipa kwa kadi") {
		t.Fatalf("the page after the switch is not in Swahili:\n%s", body)
	}
	// A forged or damaged page id switches nothing and says so.
	sw = httptest.NewRequest(http.MethodPost, "/cardPay/language", strings.NewReader(url.Values{"page": {"forged"}, "language": {"sw"}}.Encode()))
	sw.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	errorPage(t, g.Serve(sw), http.StatusGone)
	pay := httptest.NewRequest(http.MethodPost, "/cardPay", strings.NewReader(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv}).Encode()))
	pay.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	pay.AddCookie(cookie)
	rec = g.Serve(pay)
	if body := rec.Body.String(); !strings.Contains(body, "Malipo yamefanikiwa") || !strings.Contains(body, "Rudi dukani") {
		t.Errorf("the remembered language on the result page:\n%s", body)
	}
	// The shop hears English, whatever the shopper reads.
	if cb := callback(t, rec); cb["orderStatus"] != "Transaction Successfull" || cb["message"] != "Payment approved" {
		t.Errorf("callback in Swahili: %v", cb)
	}
}

// The shop's form is at fault: the page says so in Swahili, and the
// technical detail for the shop's developers, which stays English as
// callbacks do, is introduced in Swahili and marked as English for
// screen readers (it was English text in a Swahili sentence).
func TestSwahiliErrorDetail(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Duka la Mama")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "SWA2", "1500.00")
	v := servertest.FormFields(c, tok, b)
	v.Set("billReference", strings.Repeat("B", 21))
	req := servertest.CardPayRequest(v)
	req.Header.Set("Accept-Language", "sw")
	rec := g.Serve(req)
	body := rec.Body.String()
	if rec.Code != http.StatusBadRequest || !strings.Contains(body, `Kwa wasanidi programu wa duka: <span lang="en">Invalid payment details: billReference`) {
		t.Fatalf("Swahili error page %d:\n%s", rec.Code, body)
	}
}

// The result of a form refused for the shop's own fields reads in Swahili
// on a Swahili page as the shop's doing, its English detail marked as
// English and as the shop developers'; the shop hears the English message.
func TestSwahiliResultOfTheShopsRefusedForm(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Duka la Baba")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "SWA3", "1500.00")
	v := servertest.Card{Number: visa, CVV: "123"}.Apply(servertest.FormFields(c, tok, b))
	v.Set("emailAddress", "not an address")
	req := servertest.CardPayRequest(v)
	req.Header.Set("Accept-Language", "sw")
	rec := g.Serve(req)
	if rec.Code == http.StatusSeeOther {
		page := httptest.NewRequest(http.MethodGet, rec.Header().Get("Location"), nil)
		page.Header.Set("Accept-Language", "sw")
		rec = g.Serve(page)
	}
	cb := callback(t, rec)
	if !strings.HasPrefix(cb["message"], "Invalid payment details: emailAddress") {
		t.Fatalf("callback message %q", cb["message"])
	}
	// The shop's form, not the card network, refused the payment: the
	// shopper reads that in their language, and the detail as the shop
	// developers'.
	want := `Fomu ya malipo ya duka haikuweza kukubaliwa, kwa hiyo hakuna malipo yaliyofanyika. Kwa wasanidi programu wa duka: <span lang="en">Invalid payment details: emailAddress`
	if body := rec.Body.String(); !strings.Contains(body, want) || strings.Contains(body, "Malipo hayakupita") {
		t.Errorf("the Swahili result page:\n%s", body)
	}
}

// answeringWithText is a card network whose answers carry words of its
// own, which no catalogue has.
type answeringWithText struct {
	payment.Acquirer
	outcome payment.Outcome
	message string
}

func (a answeringWithText) Charge(ctx context.Context, req payment.ChargeRequest) (payment.Result, error) {
	r := payment.Result{Outcome: a.outcome, Message: a.message}
	if a.outcome == payment.Approved {
		r.NetworkRef, r.ApprovalCode = "NETW", "A1"
	}
	return r, nil
}

// A card network's answer that is not in the catalogue reads on a Swahili
// page as what it is, a success or a failure, with its English words
// marked as English; never as the shop's doing.
func TestSwahiliResultOfAnUncataloguedAnswer(t *testing.T) {
	for _, tt := range []struct {
		outcome     payment.Outcome
		message     string
		status      string
		want, never string
	}{
		{payment.Approved, "Approved by the issuer", "Transaction Successfull", `Malipo yamekubaliwa. <span lang="en">Approved by the issuer</span>`, "Malipo hayakupita"},
		{payment.Declined, "Refer to card issuer", "Transaction Failed", `Malipo hayakupita. <span lang="en">Refer to card issuer</span>`, "Fomu ya malipo ya duka"},
		// The words the gateway begins a refused shop form's message with:
		// from the network they are still the network's answer.
		{payment.Declined, "Invalid payment details: card blocked by the issuer", "Transaction Failed",
			`Malipo hayakupita. <span lang="en">Invalid payment details: card blocked by the issuer</span>`, "Fomu ya malipo ya duka"},
	} {
		t.Run(tt.message, func(t *testing.T) {
			g := servertest.Start(t, servertest.Options{})
			g.Payments.Acquirers[merchant.Test] = answeringWithText{g.Payments.Acquirers[merchant.Test], tt.outcome, tt.message}
			c := g.Onboard("Duka la Dada")
			tok := g.Token(c, merchant.Test)
			b := g.CreateBill(c, tok, "SWA4", "1500.00")
			req := servertest.CardPayRequest(servertest.Card{Number: visa, CVV: "123"}.Apply(servertest.FormFields(c, tok, b)))
			req.Header.Set("Accept-Language", "sw")
			rec := g.ServeOnce(req)
			page := httptest.NewRequest(http.MethodGet, rec.Header().Get("Location"), nil)
			page.Header.Set("Accept-Language", "sw")
			rec = g.Serve(page)
			if cb := callback(t, rec); cb["orderStatus"] != tt.status {
				t.Fatalf("callback %v", cb)
			}
			if body := rec.Body.String(); strings.Contains(body, tt.never) || !strings.Contains(body, tt.want) {
				t.Errorf("the Swahili result page:\n%s", body)
			}
		})
	}
}

// A language switch from the card page keeps the names and expiry typed
// (card.js sends them along): the page came back in the new language
// with everything typed gone. A card number typed as a name is not kept,
// nor is anything sent as the card number.
func TestLanguageSwitchKeepsWhatWasTyped(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Duka la Mama")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "SWA2", "1500.00")
	page := servertest.ParsePage(g.CardPay(servertest.FormFields(c, tok, b)).Body.String())
	lf, ok := page.FormTo("/cardPay/language")
	if !ok {
		t.Fatal("no language switch on the card page")
	}
	for _, tt := range []struct {
		first, last, expiry      string
		wantFirst, wantLast, exp string
	}{
		{"Amina", "Otieno", "12 / 30", "Amina", "Otieno", "12 / 30"},
		{visa, "Otieno", "1230", "", "Otieno", "12 / 30"},
		{"Amina", strings.Repeat("x", 51), "12 / 30 / 40", "Amina", "", ""},
		// A card number or a security code typed into the expiry box is
		// neither kept nor shown back.
		{"Amina", "Otieno", visa, "Amina", "Otieno", ""},
		{"Amina", "Otieno", "855", "Amina", "Otieno", ""},
	} {
		form := url.Values{"page": {lf.Values()["page"]}, "language": {"sw"},
			"cardFirstName": {tt.first}, "cardLastName": {tt.last}, "cardExpiry": {tt.expiry}, "cardNumber": {mastercard}}
		sw := httptest.NewRequest(http.MethodPost, "/cardPay/language", strings.NewReader(form.Encode()))
		sw.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := g.ServeOnce(sw)
		if rec.Code != http.StatusSeeOther {
			t.Fatalf("switch: %d", rec.Code)
		}
		body := g.Serve(httptest.NewRequest(http.MethodGet, rec.Header().Get("Location"), nil)).Body.String()
		f, ok := servertest.ParsePage(body).FormTo("/cardPay")
		if !ok {
			t.Fatalf("no card page after the switch:\n%s", body)
		}
		var got []string
		for _, name := range []string{"cardFirstName", "cardLastName", "cardExpiry"} {
			in, _ := f.Input(name)
			got = append(got, in.Attrs["value"])
		}
		if want := []string{tt.wantFirst, tt.wantLast, tt.exp}; !slices.Equal(got, want) {
			t.Errorf("after switching with %q %q %q: the page holds %q, want %q", tt.first, tt.last, tt.expiry, got, want)
		}
		if strings.Contains(body, visa) || strings.Contains(body, mastercard) {
			t.Error("a card number came back on the page")
		}
	}
}

// A field the shopper corrected before switching language is no longer
// marked wrong on the page in the other language; one left as it was
// still is.
func TestLanguageSwitchForgetsCorrectedErrors(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Duka la Mama")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "SWA3", "1500.00")
	entry := g.OpenCheckout(servertest.FormFields(c, tok, b))
	posted := g.ServeOnce(servertest.CardPayRequest(servertest.CheckoutPost(entry,
		servertest.Card{Number: visa, CVV: cvv, Month: "01", Year: "2001", FirstName: "Wanjiku 1234567", LastName: "Kamau"})))
	page := g.Serve(httptest.NewRequest(http.MethodGet, posted.Header().Get("Location"), nil)).Body.String()
	invalid := func(body, name string) bool {
		f, _ := servertest.ParsePage(body).FormTo("/cardPay")
		in, _ := f.Input(name)
		return in.Attrs["aria-invalid"] == "true"
	}
	if !invalid(page, "cardFirstName") || !invalid(page, "cardExpiry") {
		t.Fatalf("a name with digits and a past expiry are not both marked:\n%s", page)
	}
	lf, ok := servertest.ParsePage(page).FormTo("/cardPay/language")
	if !ok {
		t.Fatal("no language switch on the card page")
	}
	form := url.Values{"page": {lf.Values()["page"]}, "language": {"sw"},
		"cardFirstName": {"Wanjiku"}, "cardLastName": {"Kamau"}, "cardExpiry": {"01 / 01"}}
	sw := httptest.NewRequest(http.MethodPost, "/cardPay/language", strings.NewReader(form.Encode()))
	sw.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := g.ServeOnce(sw)
	after := g.Serve(httptest.NewRequest(http.MethodGet, rec.Header().Get("Location"), nil)).Body.String()
	if invalid(after, "cardFirstName") {
		t.Error("the corrected first name is still marked wrong after the switch")
	}
	if !invalid(after, "cardExpiry") {
		t.Error("the expiry left as it was is no longer marked wrong after the switch")
	}
}
