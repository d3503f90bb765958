package form_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/form"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/outage/outagetest"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// Before the bill and callbackUrl are trusted, every problem is shown on our
// own error page: the browser is never sent to an unchecked URL.
func TestUntrustedFormsGetOurErrorPage(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	a, b := g.Onboard("Shop A"), g.Onboard("Shop B")
	tokA, tokB := g.Token(a, merchant.Test), g.Token(b, merchant.Test)
	billA := g.CreateBill(a, tokA, "ORDERA1", "1500.00")
	g.CreateBill(b, tokB, "ORDERB1", "1500.00")

	cases := []struct {
		name   string
		status int
		change func(v url.Values)
	}{
		{"bad token", http.StatusUnauthorized, func(v url.Values) { v.Set("token", "not-a-token") }},
		{"no token", http.StatusUnauthorized, func(v url.Values) { v.Del("token") }},
		{"token of another merchant", http.StatusForbidden, func(v url.Values) { v.Set("token", tokB) }},
		{"token and merchantCode of another merchant", http.StatusNotFound, func(v url.Values) {
			v.Set("token", tokB)
			v.Set("merchantCode", b.MerchantCode)
		}},
		{"merchantCode mismatch", http.StatusForbidden, func(v url.Values) { v.Set("merchantCode", b.MerchantCode) }},
		{"unknown bill", http.StatusNotFound, func(v url.Values) { v.Set("billReference", "ZZZZZZZZZZZZ") }},
		{"no bill", http.StatusNotFound, func(v url.Values) { v.Del("billReference") }},
		{"orderReference mismatch", http.StatusBadRequest, func(v url.Values) { v.Set("orderReference", "ORDERA2") }},
		{"amount mismatch", http.StatusBadRequest, func(v url.Values) { v.Set("amount", "1500.01") }},
		{"amount not a number", http.StatusBadRequest, func(v url.Values) { v.Set("amount", "1,500") }},
		{"amount missing", http.StatusBadRequest, func(v url.Values) { v.Del("amount") }},
		{"outletCode mismatch", http.StatusBadRequest, func(v url.Values) { v.Set("outletCode", b.OutletCode) }},
		{"callbackUrl with query", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example/kadi/return?order=1") }},
		{"callbackUrl with empty query", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example/kadi/return?") }},
		{"callbackUrl with fragment", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example/kadi/return#done") }},
		{"relative callbackUrl", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "/kadi/return") }},
		{"scheme-relative callbackUrl", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "//evil.example/kadi/return") }},
		{"javascript: callbackUrl", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "javascript:alert(document.domain)") }},
		{"ftp callbackUrl", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "ftp://shop.example/kadi/return") }},
		{"callbackUrl with credentials", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://user:pw@shop.example/kadi/return") }},
		{"callbackUrl without host", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https:///kadi/return") }},
		{"callbackUrl host writing a CSP directive", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example;sandbox/cb") }},
		{"callbackUrl host with a quote", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example'/cb") }},
		{"callbackUrl host with a comma", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://a.example,b.example/cb") }},
		// The result page's CSP names the callback's origin; browsers drop
		// a source that is no CSP host and then refuse the post back.
		{"callbackUrl to an IPv6 address", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "http://[::1]:8000/cb") }},
		{"callbackUrl to an IPv4-mapped IPv6 address", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "http://[::ffff:127.0.0.1]:8000/cb") }},
		{"callbackUrl host with a trailing dot", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example./cb") }},
		// A browser reads these as IPv4 addresses written short and posts
		// to 127.0.0.1, which the page's CSP does not name.
		{"callbackUrl host 127.1", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "http://127.1:8000/cb") }},
		{"callbackUrl host in hex", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "http://0x7f000001:8000/cb") }},
		{"callbackUrl host as one number", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "http://2130706433/cb") }},
		{"callbackUrl host with an octal part", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "http://017.0.0.1/cb") }},
		{"callbackUrl host ending in a hex label", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "http://shop.0xff/cb") }},
		{"no callbackUrl", http.StatusBadRequest, func(v url.Values) { v.Del("callbackUrl") }},
		{"a repeated field", http.StatusBadRequest, func(v url.Values) { v.Add("amount", "1.00") }},
		{"callbackUrl port 0", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example:0/cb") }},
		{"callbackUrl port 65536", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example:65536/cb") }},
		{"callbackUrl port 99999", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example:99999/cb") }},
		{"callbackUrl with an empty port", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example:/cb") }},
		{"callbackUrl with a huge port", http.StatusBadRequest, func(v url.Values) { v.Set("callbackUrl", "https://shop.example:18446744073709551617/cb") }},
		// What the bill is found by is checked before it is looked up; the
		// customer's fields once it is trusted (TestFailuresAfterTrustRedirect).
		{"billReference over 20 characters", http.StatusBadRequest, func(v url.Values) { v.Set("billReference", strings.Repeat("B", 21)) }},
		{"control character in orderReference", http.StatusBadRequest, func(v url.Values) { v.Set("orderReference", "ORDERA1\x00") }},
		{"orderReference not UTF-8", http.StatusBadRequest, func(v url.Values) { v.Set("orderReference", "ORDER\xe9") }},
		{"body over 64 KiB", http.StatusRequestEntityTooLarge, func(v url.Values) { v.Set("address", strings.Repeat("a", 70<<10)) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(a, tokA, billA))
			tc.change(v)
			errorPage(t, g.CardPay(v), tc.status)
		})
	}
	if n := g.CountPayments(billA.Reference, ""); n != 0 {
		t.Errorf("untrusted forms made %d payment attempts", n)
	}
	if st := billState(t, g, billA.Reference); st.State != "open" || st.FailedAttempts != 0 {
		t.Errorf("bill after untrusted forms: %s with %d failures", st.State, st.FailedAttempts)
	}
}

// A shop page served in Latin-1 posts "José" with é as one byte: the
// shop hears its form was not sent as UTF-8 (it was told the name held
// characters that are not allowed), and a control character is still
// called that.
func TestFormNotInUTF8IsSaidSo(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Latin Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "LATIN1", "1500.00")
	for _, tc := range []struct{ value, want string }{
		{"Jos\xe9", "customerFirstName is not UTF-8 text: post the form as UTF-8"},
		{"Jos\x07", "customerFirstName contains characters that are not allowed"},
	} {
		v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
		v.Set("customerFirstName", tc.value)
		if cb := callback(t, g.CardPay(v)); !strings.Contains(cb["message"], tc.want) {
			t.Errorf("customerFirstName %q: the shop hears %q, want it to say %q", tc.value, cb["message"], tc.want)
		}
	}
}

// docs/hosted-form.md: the amount is compared as a decimal.
func TestAmountComparedAsDecimal(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Decimal Shop")
	tok := g.Token(c, merchant.Test)
	for i, amount := range []string{"1500", "1500.0", "1500.00", "1500.000"} {
		b := g.CreateBill(c, tok, "DEC"+strconv.Itoa(i), "1500.00")
		v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
		v.Set("amount", amount)
		cb := callback(t, g.CardPay(v))
		if cb["orderStatus"] != "Transaction Successfull" || cb["orderAmount"] != "1500.00" {
			t.Errorf("amount %q for a 1500.00 bill: %v", amount, cb)
		}
	}
}

// docs/hosted-form.md: once the bill and callback are trusted, every outcome goes
// back to the merchant as Transaction Failed with a message and no
// transactionRef.
func TestFailuresAfterTrustRedirect(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Failing Shop")
	tok := g.Token(c, merchant.Test)
	lastYear := strconv.Itoa(time.Now().Year() - 1)

	cases := []struct {
		name     string
		card     servertest.Card
		change   func(v url.Values)
		message  string
		attempts int // payment rows the submission may create
	}{
		{"generic decline", servertest.Card{Number: cardDeclined, CVV: cvv}, nil, "declined", 1},
		{"insufficient funds", servertest.Card{Number: cardInsufficient, CVV: cvv}, nil, "insufficient funds", 1},
		{"expired card", servertest.Card{Number: cardExpired, CVV: cvv}, nil, "expired", 1},
		{"incorrect CVV", servertest.Card{Number: cardIncorrectCVV, CVV: cvv}, nil, "security code", 1},
		{"acquirer error", servertest.Card{Number: cardAcquirerError, CVV: cvv}, nil, "nothing was charged", 1},
		{"invalid Luhn", servertest.Card{Number: badLuhn, CVV: cvv}, nil, "cardNumber", 0},
		{"unknown brand", servertest.Card{Number: "9999999999999995", CVV: cvv}, nil, "cardNumber", 0},
		{"letters in card number", servertest.Card{Number: "4242x42424242424", CVV: cvv}, nil, "cardNumber", 0},
		{"past expiry", servertest.Card{Number: visa, CVV: cvv, Month: "01", Year: lastYear}, nil, "cardExpiry", 0},
		{"expiry month 13", servertest.Card{Number: visa, CVV: cvv, Month: "13"}, nil, "cardExpiry", 0},
		{"three-digit CVV on Amex", servertest.Card{Number: amex, CVV: "123"}, nil, "cardSecurity", 0},
		{"four-digit CVV on Visa", servertest.Card{Number: visa, CVV: "1234"}, nil, "cardSecurity", 0},
		{"letters in CVV", servertest.Card{Number: visa, CVV: "12a"}, nil, "cardSecurity", 0},
		{"no CVV", servertest.Card{Number: visa}, nil, "cardSecurity", 0},
		{"landline for mobile", servertest.Card{Number: visa, CVV: cvv}, func(v url.Values) { v.Set("mobileNumber", "+254 20 2222222") }, "mobileNumber", 0},
		{"mobile of no country", servertest.Card{Number: visa, CVV: cvv}, func(v url.Values) { v.Set("mobileNumber", "+999 712345678") }, "mobileNumber", 0},
		{"mobile with 16 digits", servertest.Card{Number: visa, CVV: cvv}, func(v url.Values) { v.Set("mobileNumber", "+254 7123456789012") }, "mobileNumber", 0},
		{"mobile with letters", servertest.Card{Number: visa, CVV: cvv}, func(v url.Values) { v.Set("mobileNumber", "+254 7123ABC") }, "mobileNumber", 0},
		{"email without domain", servertest.Card{Number: visa, CVV: cvv}, func(v url.Values) { v.Set("emailAddress", "jane@") }, "emailAddress", 0},
		{"email with display name", servertest.Card{Number: visa, CVV: cvv}, func(v url.Values) { v.Set("emailAddress", "Jane <jane@example.com>") }, "emailAddress", 0},
		{"email without dot in domain", servertest.Card{Number: visa, CVV: cvv}, func(v url.Values) { v.Set("emailAddress", "jane@localhost") }, "emailAddress", 0},
		// A customer field too long, or holding a control character, is
		// the shop's to fix as a malformed one is: it stranded the
		// shopper on our error page, with no way back.
		{"productDescription over 200 characters", servertest.Card{Number: visa, CVV: cvv}, func(v url.Values) { v.Set("productDescription", strings.Repeat("d", 201)) }, "productDescription must be at most 200 characters", 0},
		{"control character in city", servertest.Card{Number: visa, CVV: cvv}, func(v url.Values) { v.Set("city", "Nairobi\x00") }, "city contains characters that are not allowed", 0},
		{"address too long, no card fields", servertest.Card{}, func(v url.Values) { v.Set("address", strings.Repeat("a", 201)) }, "address must be at most 200 characters", 0},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := g.CreateBill(c, tok, "FAIL"+strconv.Itoa(i), "1500.00")
			v := tc.card.Apply(servertest.FormFields(c, tok, b))
			if tc.change != nil {
				tc.change(v)
			}
			cb := callback(t, g.CardPay(v))
			failed(t, cb, b, tc.message)
			if n := g.CountPayments(b.Reference, ""); n != tc.attempts {
				t.Errorf("%d payment rows, want %d", n, tc.attempts)
			}
			if n := g.CountPayments(b.Reference, payment.Succeeded); n != 0 {
				t.Errorf("%d successful payments", n)
			}
			if g.Query(tok, b.Reference).Status {
				t.Error("the bill verifies as paid")
			}
			// Nothing was charged, so the customer can try again.
			if st := billState(t, g, b.Reference); st.State != "open" {
				t.Errorf("bill is %s after one failure, want open", st.State)
			}
		})
	}
}

// Mobile numbers as integrations send them (docs/hosted-form.md): E.123, E.164 and
// the national form of the operator's default region all pay, and the
// payment (and so its IPN) carries the number in E.123 international form.
func TestMobileNumberForms(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Mobile Shop")
	tok := g.Token(c, merchant.Test)
	for i, typed := range []string{"+254 712345678", "+254712345678", "0712345678", "0712 345 678", ""} {
		b := g.CreateBill(c, tok, "MOBILE"+strconv.Itoa(i), "10")
		v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
		v.Set("mobileNumber", typed)
		if cb := callback(t, g.CardPay(v)); cb["orderStatus"] != "Transaction Successfull" {
			t.Errorf("mobile %q: %v", typed, cb)
			continue
		}
		p, err := g.Store.SuccessfulPayment(t.Context(), b.Reference)
		want := "+254 712345678"
		if typed == "" {
			want = ""
		}
		if err != nil || p.MobileNumber != want {
			t.Errorf("mobile %q stored as %q (%v), want %q", typed, p.MobileNumber, err, want)
		}
	}
}

func TestExpiredBillRedirectsFailed(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Slow Shop")
	tok := g.Token(c, merchant.Test)
	body := servertest.BillBody(c, "EXPIRES1", "20")
	servertest.Order(body)["expiry"] = g.Clock.Now().Add(time.Minute).Format(time.RFC3339)
	b := g.MustBill(tok, body)

	g.Clock.Advance(2 * time.Minute)
	cb := callback(t, g.CardPay(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))))
	failed(t, cb, b, "expired")
	if n := g.CountPayments(b.Reference, ""); n != 0 {
		t.Errorf("an expired bill was charged: %d payment rows", n)
	}
}

func TestSuccessfulPayment(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Happy Shop")
	tok := g.Token(c, merchant.Test)
	cards := []servertest.Card{
		{Number: visa, CVV: cvv}, {Number: visa2, CVV: cvv}, {Number: mastercard, CVV: cvv},
		{Number: mastercard2, CVV: cvv}, {Number: amex, CVV: amexCVV},
		{Number: "4242 4242 4242 4242", CVV: cvv}, {Number: "3782-822463-10005", CVV: amexCVV},
	}
	refs := map[string]bool{}
	for i, card := range cards {
		b := g.CreateBill(c, tok, "HAPPY"+strconv.Itoa(i), "1500.00")
		rec := g.CardPay(card.Apply(servertest.FormFields(c, tok, b)))
		cb := callback(t, rec)
		securityHeaders(t, rec, "'self'", "https://shop.example")
		if cb["orderStatus"] != "Transaction Successfull" || strings.TrimSpace(cb["message"]) == "" || cb["transactionRef"] == "" {
			t.Fatalf("card %d: %v", i, cb)
		}
		sameBill(t, cb, b)
		v := g.Query(tok, b.Reference)
		if !v.Status || v.TransactionID != cb["transactionRef"] || v.Amount != "1500.00" {
			t.Errorf("card %d: verification %+v, callback transactionRef %q", i, v, cb["transactionRef"])
		}
		if refs[cb["transactionRef"]] {
			t.Errorf("transactionRef %s reused across bills", cb["transactionRef"])
		}
		refs[cb["transactionRef"]] = true
		if st := billState(t, g, b.Reference); st.State != "paid" {
			t.Errorf("card %d: bill is %s after success", i, st.State)
		}
	}
}

// A shop form posted with a UTF-8 byte order mark first (.NET's default
// encoder writes one) is read as without it: the mark became part of the
// first field's name, and the page blamed the shop's token.
func TestByteOrderMarkBeforeTheFields(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Dotnet Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "BOM1", "1500.00")
	v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
	// The token first, as the field whose name the mark spoiled.
	body := "\ufefftoken=" + url.QueryEscape(v.Get("token"))
	v.Del("token")
	req := httptest.NewRequest(http.MethodPost, "/cardPay", strings.NewReader(body+"&"+v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cb := callback(t, g.Serve(req)); cb["orderStatus"] != "Transaction Successfull" {
		t.Errorf("a form posted with a byte order mark: %v", cb)
	}
}

// The callback's dateTime is "yyyy-MM-ddZ" in the operator's zone.
func TestCallbackDateInOperatorZone(t *testing.T) {
	for _, zone := range []string{"UTC", "America/New_York", "Asia/Kolkata"} {
		t.Run(zone, func(t *testing.T) {
			loc, err := time.LoadLocation(zone)
			if err != nil {
				t.Skip(err)
			}
			g := servertest.Start(t, servertest.Options{TimeZone: zone})
			c := g.Onboard("Zoned Shop")
			tok := g.Token(c, merchant.Test)
			_, cb := g.Pay(c, tok, "ZONE1", "10", servertest.Card{Number: visa, CVV: cvv})
			now := time.Now().In(loc)
			if want := now.Format("2006-01-02-0700"); cb["dateTime"] != want && cb["dateTime"] != now.Add(-time.Minute).Format("2006-01-02-0700") {
				t.Errorf("dateTime %q, want %q", cb["dateTime"], want)
			}
		})
	}
}

func TestSecurityHeadersOnEveryPage(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Header Shop")
	tok := g.Token(c, merchant.Test)

	b := g.CreateBill(c, tok, "HDR1", "10")
	rec := g.CardPay(servertest.FormFields(c, tok, b))
	if rec.Code != http.StatusOK {
		t.Fatalf("card page: %d", rec.Code)
	}
	securityHeaders(t, rec, "'self'")

	b = g.CreateBill(c, tok, "HDR2", "10")
	rec = g.CardPay(servertest.Card{Number: card3DS, CVV: cvv}.Apply(servertest.FormFields(c, tok, b)))
	if _, ok := servertest.ParsePage(rec.Body.String()).FormTo("/cardPay/3ds"); rec.Code != http.StatusOK || !ok {
		t.Fatalf("challenge page: %d\n%s", rec.Code, rec.Body)
	}
	securityHeaders(t, rec, "'self'")

	// The redirect page names the callback's origin, port included.
	b = g.CreateBill(c, tok, "HDR3", "10")
	v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
	v.Set("callbackUrl", "http://127.0.0.1:8443/pay/done")
	rec = g.CardPay(v)
	callbackTo(t, rec, "http://127.0.0.1:8443/pay/done")
	securityHeaders(t, rec, "'self'", "http://127.0.0.1:8443")

	rec = g.CardPay(url.Values{"token": {"nope"}})
	errorPage(t, rec, http.StatusUnauthorized)
	if rec.Header().Get("Strict-Transport-Security") != "" {
		t.Error("HSTS sent although the public URL is http")
	}
}

// Served over https, the pages that carry card data ask browsers to keep
// to https (HSTS).
func TestHSTSOverHTTPS(t *testing.T) {
	g := servertest.Start(t, servertest.Options{PublicURL: "https://pay.kadi.test"})
	c := g.Onboard("TLS Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "TLS1", "10")
	for _, rec := range []*httptest.ResponseRecorder{
		g.CardPay(servertest.FormFields(c, tok, b)), // card-entry page
		g.CardPay(url.Values{"token": {"nope"}}),    // error page
	} {
		if h := rec.Header().Get("Strict-Transport-Security"); !strings.HasPrefix(h, "max-age=") {
			t.Errorf("%d page: Strict-Transport-Security %q", rec.Code, h)
		}
	}
}

func TestEchoedValuesAreEscaped(t *testing.T) {
	const evil = `"><script>alert(1)</script>`
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard(`Shop "><script>alert(2)</script>`)
	tok := g.Token(c, merchant.Test)

	b := g.CreateBill(c, tok, "XSS1", "10")
	v := servertest.FormFields(c, tok, b)
	v.Set("customerFirstName", evil)
	v.Set("productDescription", evil)
	rec := g.CardPay(v)
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("card page: %d\n%s", rec.Code, body)
	}
	if strings.Contains(body, "<script>alert") {
		t.Errorf("card page echoes markup unescaped:\n%s", body)
	}
	f, _ := servertest.ParsePage(body).FormTo("/cardPay")
	if in, _ := f.Input("cardFirstName"); in.Attrs["value"] != evil {
		t.Errorf("cardFirstName prefill %q, want the escaped customer name", in.Attrs["value"])
	}

	// A callback path with markup in it is escaped on the redirect page.
	b = g.CreateBill(c, tok, "XSS2", "10")
	v = servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
	v.Set("callbackUrl", "https://shop.example/"+evil)
	rec = g.CardPay(v)
	if strings.Contains(rec.Body.String(), "<script>alert") {
		t.Errorf("redirect page echoes markup unescaped:\n%s", rec.Body)
	}
}

func TestCardEntryPage(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Entry Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "ENTRY1", "1500.00")
	posted := servertest.FormFields(c, tok, b)

	rec := g.CardPay(posted)
	securityHeaders(t, rec, "'self'")
	page := servertest.ParsePage(rec.Body.String())
	form, ok := page.FormTo("/cardPay")
	if rec.Code != http.StatusOK || !ok {
		t.Fatalf("card page: %d\n%s", rec.Code, rec.Body)
	}
	if cancel, ok := page.FormTo("/cardPay/cancel"); !ok || cancel.Values()["checkout"] != form.Values()["checkout"] {
		t.Errorf("card page forms %v, want the payment and a cancel of the same checkout", page.Forms)
	}
	if form.Action() != "/cardPay" {
		t.Errorf("card page posts to %q", form.Action())
	}
	// The page carries one opaque checkout session id and nothing of the
	// merchant's form: above all not the bearer token, which would let
	// anyone who reads the page act as the merchant.
	id := sessionInputs(t, page, form)
	if strings.Contains(rec.Body.String(), tok) {
		t.Error("the card-entry page writes the bearer token into its HTML")
	}
	for _, name := range []string{"cardNumber", "cardSecurity"} {
		in, ok := form.Input(name)
		if !ok {
			t.Errorf("card page has no %s input", name)
		} else if _, hasValue := in.Attrs["value"]; hasValue {
			t.Errorf("%s input carries a value", name)
		}
	}

	// A typo in the card on our page is shown back, not counted.
	rec = g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: badLuhn, CVV: cvv}))
	body := rec.Body.String()
	if rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("bad card number on our page: %d\n%s", rec.Code, body)
	}
	if _, ok := servertest.ParsePage(body).Redirect(); ok {
		t.Error("a typo on our page redirected to the merchant")
	}
	if !strings.Contains(body, `class="error"`) || !strings.Contains(body, "not a valid card number") {
		t.Errorf("no error shown:\n%s", body)
	}
	if strings.Contains(body, badLuhn) || strings.Contains(body, tok) {
		t.Error("the re-rendered page echoes the card number or the token")
	}
	if again, _ := servertest.ParsePage(body).FormTo("/cardPay"); again.Values()["checkout"] != id {
		t.Errorf("the re-rendered page carries checkout %q, want the same session %q", again, id)
	}
	securityHeaders(t, rec, "'self'")
	if n := g.CountPayments(b.Reference, ""); n != 0 {
		t.Errorf("a typo made %d payment attempts", n)
	}
	if st := billState(t, g, b.Reference); st.State != "open" || st.FailedAttempts != 0 {
		t.Errorf("bill after a typo: %s, %d failures", st.State, st.FailedAttempts)
	}

	// The corrected card pays.
	cb := callback(t, g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv})))
	if cb["orderStatus"] != "Transaction Successfull" || cb["billReference"] != b.Reference {
		t.Errorf("corrected card: %v", cb)
	}
}

// The checkout session, not the browser, says what is paid and where the
// result goes: fields a tampered page adds to its post change nothing.
func TestCheckoutSessionOwnsTheMerchantFields(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Entry Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "ENTRY2", "1500.00")
	cheap := g.CreateBill(c, tok, "ENTRY3", "1.00")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))

	v := servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv})
	for name, value := range servertest.FormFields(c, tok, cheap) {
		v.Set(name, value[0])
	}
	v.Set("callbackUrl", "https://evil.example/steal")
	v.Set("mobileNumber", "not a number")
	cb := callback(t, g.CardPay(v))
	if cb["orderStatus"] != "Transaction Successfull" || cb["billReference"] != b.Reference || cb["orderAmount"] != "1500.00" {
		t.Errorf("tampered post from our page: %v, want bill %s paid in full", cb, b.Reference)
	}
	if n := g.CountPayments(cheap.Reference, ""); n != 0 {
		t.Errorf("the bill named by the tampered fields got %d payments", n)
	}
}

// A merchant-posted form keeps the spec's one-shot behaviour: claiming to
// come from our page (the old entry marker) does not make a bad card a
// retry.
func TestMerchantFormWithBadCardIsOneShot(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Entry Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "ENTRY4", "10")
	v := servertest.Card{Number: badLuhn, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
	v.Set("kadiEntry", "1")
	failed(t, callback(t, g.CardPay(v)), b, "cardNumber")
}

// A checkout session lives checkout.TTL; after that its page is refused
// with our own error page, and nothing is charged.
func TestCheckoutSessionExpires(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Slow Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "SLOW1", "10")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))
	g.Clock.Advance(checkout.TTL)
	errorPage(t, g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv})), http.StatusGone)
	errorPage(t, g.CardPay(servertest.CheckoutPost(strings.Repeat("A", 43), servertest.Card{Number: visa, CVV: cvv})), http.StatusGone)
	// Not a session's id at all: a post without the shop's token.
	for _, bad := range []string{"x", id + "A"} {
		errorPage(t, g.CardPay(servertest.CheckoutPost(bad, servertest.Card{Number: visa, CVV: cvv})), http.StatusUnauthorized)
	}
	if n := g.CountPayments(b.Reference, ""); n != 0 {
		t.Errorf("%d payments through an expired or unknown session", n)
	}
}

// A shop's own form may carry a field named checkout (a cart's
// "checkout=1"): it is the shop's, and the payment goes ahead. It made
// the post a 410 "Payment page expired".
func TestShopFieldNamedCheckout(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Cart Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "CART1", "10")
	v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
	v.Set("checkout", "1")
	v.Add("checkout", "proceed")
	if cb := callback(t, g.CardPay(v)); cb["orderStatus"] != "Transaction Successfull" {
		t.Fatalf("callback %v", cb)
	}
}

func TestThreeDSecure(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Secure Shop")
	tok := g.Token(c, merchant.Test)

	challenge := func(t *testing.T, ref string) (checkoutID string, form url.Values) {
		t.Helper()
		b := g.CreateBill(c, tok, ref, "1500.00")
		form = servertest.Card{Number: card3DS, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
		rec := g.CardPay(form)
		page := servertest.ParsePage(rec.Body.String())
		cf, ok := page.FormTo("/cardPay/3ds")
		if rec.Code != http.StatusOK || !ok {
			t.Fatalf("want the challenge page, got %d\n%s", rec.Code, rec.Body)
		}
		if _, ok := cf.Input("code"); !ok {
			t.Fatal("challenge page has no code input")
		}
		checkoutID = sessionInputs(t, page, cf)
		if checkoutID == "" {
			t.FailNow()
		}
		if strings.Contains(rec.Body.String(), tok) {
			t.Error("the challenge page writes the bearer token into its HTML")
		}
		// Posting the form again while the challenge waits shows a
		// challenge again, for the same payment: no second charge.
		again := servertest.ParsePage(g.CardPay(form).Body.String())
		if _, ok := again.FormTo("/cardPay/3ds"); !ok {
			t.Errorf("resubmitting during the challenge did not show the challenge")
		}
		if n := g.CountPayments(form.Get("billReference"), ""); n != 1 {
			t.Errorf("%d payments after resubmitting during the challenge, want 1", n)
		}
		return checkoutID, form
	}

	t.Run("right code", func(t *testing.T) {
		id, form := challenge(t, "TDS1")
		rec := g.Serve(servertest.ChallengeRequest(id, "123456"))
		cb := callback(t, rec)
		securityHeaders(t, rec, "'self'", "https://shop.example")
		if cb["orderStatus"] != "Transaction Successfull" || cb["transactionRef"] == "" {
			t.Fatalf("right code: %v", cb)
		}
		if v := g.Query(tok, cb["billReference"]); v.TransactionID != cb["transactionRef"] {
			t.Errorf("verification %q, callback %q", v.TransactionID, cb["transactionRef"])
		}
		for _, code := range []string{"123456", "000000"} {
			replay := callback(t, g.Serve(servertest.ChallengeRequest(id, code)))
			if replay["orderStatus"] != cb["orderStatus"] || replay["transactionRef"] != cb["transactionRef"] {
				t.Errorf("replayed answer %q: %v, first %v", code, replay, cb)
			}
		}
		if again := callback(t, g.CardPay(form)); again["transactionRef"] != cb["transactionRef"] {
			t.Errorf("form posted again after success: %v", again)
		}
		if n := g.CountPayments(cb["billReference"], ""); n != 1 {
			t.Errorf("%d payment rows, want 1", n)
		}
	})

	t.Run("wrong code", func(t *testing.T) {
		id, form := challenge(t, "TDS2")
		cb := callback(t, g.Serve(servertest.ChallengeRequest(id, "654321")))
		if cb["orderStatus"] != "Transaction Failed" || cb["transactionRef"] != "" || !strings.Contains(cb["message"], "3-D Secure") {
			t.Fatalf("wrong code: %v", cb)
		}
		replay := callback(t, g.Serve(servertest.ChallengeRequest(id, "123456")))
		if replay["orderStatus"] != "Transaction Failed" || replay["transactionRef"] != "" {
			t.Errorf("the right code after a wrong one changed the first result: %v", replay)
		}
		// The failure reopened the bill for another card.
		ok := callback(t, g.CardPay(servertest.Card{Number: visa, CVV: cvv}.Apply(form)))
		if ok["orderStatus"] != "Transaction Successfull" {
			t.Errorf("another card after a failed challenge: %v", ok)
		}
	})

	t.Run("unknown session", func(t *testing.T) {
		errorPage(t, g.Serve(servertest.ChallengeRequest(strings.Repeat("A", 43), "123456")), http.StatusNotFound)
	})

	// The challenge is bound to the checkout session: knowing the payment
	// id, as the page used to reveal, answers nothing.
	t.Run("payment id alone", func(t *testing.T) {
		_, form := challenge(t, "TDS3")
		p, err := g.Store.LatestPayment(t.Context(), form.Get("billReference"))
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/cardPay/3ds", strings.NewReader(url.Values{"payment": {p.ID}, "code": {"123456"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		errorPage(t, g.Serve(req), http.StatusNotFound)
		if p, _ := g.Store.LatestPayment(t.Context(), form.Get("billReference")); p.Status != payment.Challenge {
			t.Errorf("payment after an answer by payment id: %s, want still waiting", p.Status)
		}
	})

	// Kadi's card-entry page leads into the challenge with its own session.
	t.Run("from the card-entry page", func(t *testing.T) {
		b := g.CreateBill(c, tok, "TDS4", "1500.00")
		id := g.OpenCheckout(servertest.FormFields(c, tok, b))
		page := servertest.ParsePage(g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: card3DS, CVV: cvv})).Body.String())
		if cf, ok := page.FormTo("/cardPay/3ds"); !ok || cf.Values()["checkout"] != id {
			t.Fatalf("challenge from the card page does not continue its session")
		}
		if cb := callback(t, g.Serve(servertest.ChallengeRequest(id, "123456"))); cb["orderStatus"] != "Transaction Successfull" {
			t.Errorf("right code: %v", cb)
		}
	})
}

// docs/hosted-form.md: at most 5 failed attempts per bill, then it is blocked.
func TestAttemptLimitBlocksTheBill(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Unlucky Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "BLOCK1", "10")
	for i := 1; i <= 5; i++ {
		rec := g.CardPay(servertest.Card{Number: cardDeclined, CVV: cvv}.Apply(servertest.FormFields(c, tok, b)))
		failed(t, callback(t, rec), b, "declined")
		if says := strings.Contains(rec.Body.String(), "cannot take another card"); says != (i == 5) {
			t.Errorf("decline %d: the page says the bill is blocked: %v", i, says)
		}
	}
	if st := billState(t, g, b.Reference); st.State != "blocked" {
		t.Errorf("after 5 declines the bill is %s", st.State)
	}
	refused := g.CardPay(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b)))
	failed(t, callback(t, refused), b, payment.MsgBlocked)
	if strings.Contains(refused.Body.String(), "cannot take another card") {
		t.Error("the refusal of a blocked bill says it is blocked twice")
	}
	if n := g.CountPayments(b.Reference, ""); n != 5 {
		t.Errorf("%d payment rows, want the 5 declines only", n)
	}
	if g.Query(tok, b.Reference).Status {
		t.Error("a blocked bill verifies as paid")
	}
}

// docs/hosted-form.md: replays get the first result, never a second charge.
func TestReplayAfterSuccess(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Replay Shop")
	tok := g.Token(c, merchant.Test)
	b, first := g.Pay(c, tok, "REPLAY1", "10", servertest.Card{Number: visa, CVV: cvv})
	if first["orderStatus"] != "Transaction Successfull" {
		t.Fatalf("first payment: %v", first)
	}
	// A typo in the card, a bad customer field, no card at all: the first
	// result again, never "Transaction Failed" of a paid bill.
	for i, card := range []servertest.Card{{Number: visa, CVV: cvv}, {Number: mastercard, CVV: cvv}, {Number: cardDeclined, CVV: cvv},
		{Number: badLuhn, CVV: cvv}, {Number: visa, CVV: cvv}, {}} {
		v := card.Apply(servertest.FormFields(c, tok, b))
		v.Set("callbackUrl", "https://elsewhere.example/return")
		if i == 4 {
			v.Set("mobileNumber", "1")
		}
		// The replay goes where the first result went.
		cb := callback(t, g.CardPay(v))
		if cb["orderStatus"] != "Transaction Successfull" || cb["transactionRef"] != first["transactionRef"] {
			t.Errorf("replay %d: %v, first %v", i, cb, first)
		}
	}
	if n := g.CountPayments(b.Reference, ""); n != 1 {
		t.Errorf("%d payment rows, want 1", n)
	}
}

// A live bill made while the gateway had a live connector, paid after it
// lost it: refused on our page, nothing stored.
func TestLiveModeWithoutAcquirer(t *testing.T) {
	before := servertest.Start(t, servertest.Options{LiveAcquirer: sim.New(secret.RandomBytes(32), nil)})
	c := before.Onboard("Live Shop")
	b := before.CreateBill(c, before.Token(c, merchant.Live), "LIVE1", "10")
	before.Close()
	g := servertest.Start(t, servertest.Options{Restart: before})
	tok := g.Token(c, merchant.Live)
	v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
	errorPage(t, g.CardPay(v), http.StatusServiceUnavailable)

	v.Set("callbackUrl", "http://shop.example/kadi/return") // https only in live mode
	errorPage(t, g.CardPay(v), http.StatusBadRequest)
	if n := g.CountPayments(b.Reference, ""); n != 0 {
		t.Errorf("%d live payment rows", n)
	}
}

// After an acquirer error nothing was charged, so the bill reopens.
func TestAcquirerErrorLetsTheCustomerRetry(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Retry Shop")
	tok := g.Token(c, merchant.Test)
	b, cb := g.Pay(c, tok, "AQERR1", "10", servertest.Card{Number: cardAcquirerError, CVV: cvv})
	failed(t, cb, b, "nothing was charged")
	// On our card page the shopper is told so once: the acquirer's message
	// says it already.
	entry := g.OpenCheckout(servertest.FormFields(c, tok, b))
	page := strings.ToLower(g.CardPay(servertest.CheckoutPost(entry, servertest.Card{Number: cardAcquirerError, CVV: cvv})).Body.String())
	if n := strings.Count(page, "nothing was charged"); n != 1 {
		t.Errorf("the card page after an acquirer error says %d times that nothing was charged", n)
	}
	cb = callback(t, g.CardPay(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))))
	if cb["orderStatus"] != "Transaction Successfull" {
		t.Errorf("retry after an acquirer error: %v", cb)
	}
}

// A customer field the customer cannot fix fails back to the merchant
// before the card page is shown: nobody types a card for a form that is
// bound to fail.
func TestBadCustomerFieldFailsBeforeTheCardPage(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Entry Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "ENTRY3", "10")
	v := servertest.FormFields(c, tok, b) // no card fields: would show our card page
	v.Set("emailAddress", "not an address")
	rec := g.CardPay(v)
	if strings.Contains(rec.Body.String(), `name="cardNumber"`) {
		t.Fatal("the card page was shown for a form with a bad e-mail address")
	}
	failed(t, callback(t, rec), b, "emailAddress")
}

// On Kadi's own card page a failed attempt keeps the shopper there, with
// why and, when few are left, how many attempts remain; typed names and
// expiry stay, the card number and CVV never come back; another card pays.
func TestRetryOnTheCardPage(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Retry Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "RETRY1", "1500.00")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))

	for i, card := range []string{cardDeclined, cardInsufficient, cardAcquirerError} {
		rec := g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: card, CVV: cvv, Month: "07", FirstName: "Amina", LastName: "Otieno"}))
		body := rec.Body.String()
		page := servertest.ParsePage(body)
		f, ok := page.FormTo("/cardPay")
		if rec.Code != http.StatusOK || !ok || f.Values()["checkout"] != id || !strings.Contains(body, `id="declined"`) {
			t.Fatalf("attempt %d (%s…): %d\n%s", i+1, card[:6], rec.Code, body)
		}
		if strings.Contains(body, card) || strings.Contains(body, cvv) {
			t.Fatalf("the retry page writes the card number or CVV back")
		}
		if in, _ := f.Input("cardFirstName"); in.Attrs["value"] != "Amina" {
			t.Errorf("typed first name not kept: %q", in.Attrs["value"])
		}
		// The card number, where the page starts, is described by the
		// decline: a screen reader says why the shopper is back.
		if in, _ := f.Input("cardNumber"); in.Attrs["aria-describedby"] != "declined" {
			t.Errorf("attempt %d: the card number is described by %q, want the decline", i+1, in.Attrs["aria-describedby"])
		}
		if left := 5 - (i + 1); (left <= 3) != strings.Contains(body, fmt.Sprintf("%d attempts left", left)) {
			t.Errorf("attempt %d: attempts left shown wrongly:\n%s", i+1, body)
		}
	}
	cb := callback(t, g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv})))
	if cb["orderStatus"] != "Transaction Successfull" {
		t.Fatalf("another card after three failures: %v", cb)
	}
	if n, ok := g.CountPayments(b.Reference, ""), g.CountPayments(b.Reference, payment.Succeeded); n != 4 || ok != 1 {
		t.Errorf("%d attempts, %d successful; want 4 and 1", n, ok)
	}
}

// The fifth failure blocks the bill: then the shop hears it.
func TestRetryEndsWhenTheBillIsBlocked(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Blocked Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "BLOCK1", "10")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))
	for range 4 {
		if rec := g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: cardDeclined, CVV: cvv})); !strings.Contains(rec.Body.String(), `id="declined"`) {
			t.Fatalf("an early decline left the card page:\n%s", rec.Body)
		}
	}
	last := g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: cardAcquirerError, CVV: cvv}))
	failed(t, callback(t, last), b, "nothing was charged")
	// The last attempt's words may say "try again" (the acquirer's here):
	// the page says only that this bill will take no other card.
	shown := regexp.MustCompile(`value="[^"]*"`).ReplaceAllString(last.Body.String(), "") // not the callback's fields
	if body := shown; !strings.Contains(body, "cannot take another card") || strings.Contains(body, "try again") {
		t.Errorf("the last attempt's page does not say the bill is blocked, or says to try again:\n%s", body)
	}
	failed(t, callback(t, g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv}))), b, "blocked")
}

// A wrong 3-D Secure code on the card page's checkout is a retry too.
func TestRetryAfterFailedChallenge(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Challenge Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "RETRY3DS", "10")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))
	g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: card3DS, CVV: cvv, Month: "07", Year: "2031", FirstName: "Achieng", LastName: "Otieno"}))
	rec := g.Serve(servertest.ChallengeRequest(id, "000000"))
	// In the words of the challenge page ("Confirm it's you", a
	// verification code), not the network's jargon the shop hears.
	if !strings.Contains(rec.Body.String(), `id="declined"`) || !strings.Contains(rec.Body.String(), "The verification code was not accepted. Nothing was charged.") ||
		strings.Contains(rec.Body.String(), "3-D Secure authentication") {
		t.Fatalf("wrong code on the card page's checkout:\n%s", rec.Body)
	}
	// What was typed before the challenge is still there; the card is not.
	for _, want := range []string{`value="Achieng"`, `value="Otieno"`, `value="07 / 31"`} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("the card page after a failed code lacks %s", want)
		}
	}
	if strings.Contains(rec.Body.String(), card3DS) || strings.Contains(rec.Body.String(), `value="`+cvv+`"`) {
		t.Error("the card page after a failed code shows the card number or CVV")
	}
	if cb := callback(t, g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv}))); cb["orderStatus"] != "Transaction Successfull" {
		t.Errorf("another card after a failed challenge: %v", cb)
	}
}

// "Cancel and return to the shop" tells the shop Transaction Failed;
// after a payment it tells the payment.
func TestCancel(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Cancel Shop")
	tok := g.Token(c, merchant.Test)
	cancel := func(id string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/cardPay/cancel", strings.NewReader(url.Values{"checkout": {id}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return g.Serve(req)
	}
	b := g.CreateBill(c, tok, "CANCEL1", "10")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))
	failed(t, callback(t, cancel(id)), b, "cancelled by the customer")
	if n := g.CountPayments(b.Reference, ""); n != 0 {
		t.Errorf("a cancel made %d payments", n)
	}
	// Back to the card page and Pay: the page says it is closed and why
	// that may be, not that it expired.
	back := g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv}))
	errorPage(t, back, http.StatusGone)
	if body := back.Body.String(); !strings.Contains(body, "Payment page closed") || !strings.Contains(body, "finished or cancelled") || strings.Contains(body, "expired") {
		t.Errorf("the card page posted after a cancel:\n%s", body)
	}

	paid := g.CreateBill(c, tok, "CANCEL2", "10")
	id = g.OpenCheckout(servertest.FormFields(c, tok, paid))
	first := callback(t, g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv})))
	if again := callback(t, cancel(id)); again["orderStatus"] != "Transaction Successfull" || again["transactionRef"] != first["transactionRef"] {
		t.Errorf("cancel after paying: %v", again)
	}
	errorPage(t, cancel(strings.Repeat("A", 43)), http.StatusGone)
}

// Concurrent submits on one checkout after a decline still charge once.
func TestConcurrentRetriesChargeOnce(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Race Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "RACE1", "10")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))
	g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: cardDeclined, CVV: cvv}))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 10 {
		wg.Go(func() {
			<-start
			g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv}))
		})
	}
	close(start)
	wg.Wait()
	if n := g.CountPayments(b.Reference, payment.Succeeded); n != 1 {
		t.Errorf("%d successful charges after concurrent retries, want 1", n)
	}
}

// The card page's one MM / YY field: the ways people type it pay, a wrong
// one is shown back with what was typed.
func TestOneExpiryField(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Expiry Shop")
	tok := g.Token(c, merchant.Test)
	yy := time.Now().AddDate(1, 0, 0).Format("06")
	for i, typed := range []string{"12 / " + yy, "12/" + yy, "12" + yy, "12/20" + yy} {
		b := g.CreateBill(c, tok, fmt.Sprintf("EXP%d", i), "10")
		id := g.OpenCheckout(servertest.FormFields(c, tok, b))
		v := url.Values{"checkout": {id}, "cardNumber": {visa}, "cardSecurity": {cvv}, "cardExpiry": {typed}, "cardFirstName": {"A"}, "cardLastName": {"B"}}
		if cb := callback(t, g.CardPay(v)); cb["orderStatus"] != "Transaction Successfull" {
			t.Errorf("expiry %q: %v", typed, cb)
		}
	}
	b := g.CreateBill(c, tok, "EXPBAD", "10")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))
	rec := g.CardPay(url.Values{"checkout": {id}, "cardNumber": {visa}, "cardSecurity": {cvv}, "cardExpiry": {"13 / " + yy}, "cardFirstName": {"A"}, "cardLastName": {"B"}})
	body := rec.Body.String()
	if rec.Code != http.StatusUnprocessableEntity || !strings.Contains(body, `id="cardExpiry-error"`) || !strings.Contains(body, `value="13 / `+yy+`"`) {
		t.Errorf("a wrong expiry: %d\n%s", rec.Code, body)
	}
	// A card number or the security code typed into the expiry box is not
	// shown back (nor kept in the session, whose notice the page is drawn
	// from).
	for _, typed := range []string{visa, "855"} {
		b := g.CreateBill(c, tok, "EXPPAN"+typed[:3], "10")
		id := g.OpenCheckout(servertest.FormFields(c, tok, b))
		rec := g.CardPay(url.Values{"checkout": {id}, "cardNumber": {mastercard}, "cardSecurity": {"855"}, "cardExpiry": {typed}, "cardFirstName": {"A"}, "cardLastName": {"B"}})
		body := rec.Body.String()
		if rec.Code != http.StatusUnprocessableEntity || strings.Contains(body, `value="`+typed) || strings.Contains(body, `value="855`) {
			t.Errorf("expiry typed as %q: %d, and the page shows it again:\n%s", typed, rec.Code, body)
		}
	}
}

// Our card page is prefilled with the cardholder's names the shop posted
// (decisions.md: "prefilled with the rest"), else with its customer's.
func TestCardPagePrefillsTheCardholder(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Prefill Shop")
	tok := g.Token(c, merchant.Test)
	for i, tt := range []struct{ cardFirst, cardLast, wantFirst, wantLast string }{
		{"Amina", "Otieno", "Amina", "Otieno"},
		{"", "", "Jo", "Doe"},
	} {
		b := g.CreateBill(c, tok, "PREFILL"+strconv.Itoa(i), "10")
		v := servertest.FormFields(c, tok, b)
		v.Set("customerFirstName", "Jo")
		v.Set("customerLastName", "Doe")
		v.Set("cardFirstName", tt.cardFirst)
		v.Set("cardLastName", tt.cardLast)
		form, ok := servertest.ParsePage(g.CardPay(v).Body.String()).FormTo("/cardPay")
		if !ok {
			t.Fatalf("case %d: no card page", i)
		}
		first, _ := form.Input("cardFirstName")
		last, _ := form.Input("cardLastName")
		if first.Attrs["value"] != tt.wantFirst || last.Attrs["value"] != tt.wantLast {
			t.Errorf("case %d: card page names %q %q, want %q %q", i, first.Attrs["value"], last.Attrs["value"], tt.wantFirst, tt.wantLast)
		}
	}
}

// Every page says when it is about a test (hosted-form.md: "Test mode is
// labelled on every page"), the result and notice pages too, and the
// result shows the amount as the card page did, with its currency, and
// the shop's name.
func TestResultAndNoticePagesSayTestMode(t *testing.T) {
	g := servertest.Start(t, servertest.Options{LiveAcquirer: sim.New(secret.RandomBytes(32), nil)})
	c := g.Onboard("Labelled Shop")
	for _, mode := range []merchant.Mode{merchant.Test, merchant.Live} {
		tok := g.Token(c, mode)
		b := g.CreateBill(c, tok, "LABEL"+strings.ToUpper(string(mode)), "1500000.00")
		body := g.CardPay(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))).Body.String()
		if badge := strings.Contains(body, `class="badge"`); badge != (mode == merchant.Test) || !strings.Contains(body, "KES\u00a01,500,000.00") {
			t.Errorf("%s result page: test badge %v, want %v; amount shown with currency and grouping: %v", mode, badge, mode == merchant.Test, strings.Contains(body, "KES\u00a01,500,000.00"))
		}
		if !strings.Contains(body, `<p class="merchant">Labelled Shop`) {
			t.Errorf("%s result page does not name the shop:\n%s", mode, body)
		}
	}
	// A notice about a test bill: payment being confirmed.
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "LABELPEND", "10")
	entry := seeOther(t, g.ServeOnce(servertest.CardPayRequest(servertest.FormFields(c, tok, b))))
	g.PaymentInFlight(b.Reference, "pay_label")
	if rec := get(g, entry); rec.Code != http.StatusAccepted || !strings.Contains(rec.Body.String(), `class="badge"`) {
		t.Errorf("the notice about a test bill: %d, labelled %v", rec.Code, strings.Contains(rec.Body.String(), `class="badge"`))
	}
}

// /cardPay answers with one trailing slash too, as every API path does
// (api.md): a form posting to /cardPay/ got a JSON 404 in the shopper's
// browser.
func TestCardPayTrailingSlash(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Slash Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "SLASH1", "10")
	req := servertest.CardPayRequest(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b)))
	req.URL.Path = "/cardPay/"
	if cb := callback(t, g.Serve(req)); cb["orderStatus"] != "Transaction Successfull" {
		t.Fatalf("callback %v", cb)
	}
}

// A shop form with enctype="multipart/form-data" posts the same fields in
// parts: the payment goes ahead (it was "not valid form encoding"); a file
// part is refused on our error page.
func TestCardPayMultipart(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Multipart Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "MULTI1", "10")
	post := func(file bool) *httptest.ResponseRecorder {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		fields := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
		for k, vs := range fields {
			_ = mw.WriteField(k, vs[0])
		}
		if file {
			w, _ := mw.CreateFormFile("receipt", "r.txt")
			_, _ = w.Write([]byte("x"))
		}
		mw.Close()
		req := httptest.NewRequest(http.MethodPost, "/cardPay", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		return g.Serve(req)
	}
	errorPage(t, post(true), http.StatusBadRequest)
	if cb := callback(t, post(false)); cb["orderStatus"] != "Transaction Successfull" {
		t.Fatalf("callback %v", cb)
	}
}

// A merchant that registered its callback origins has its forms' results
// sent back there only: a form naming another origin (anyone can read a
// shop's page, token included) is refused on our own page before any
// charge; a registered origin, however its case or default port is
// written, pays.
func TestCallbackOrigins(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Origin Shop")
	tok := g.Token(c, merchant.Test)
	if err := g.Store.SetCallbackOrigins(t.Context(), c.MerchantCode, merchant.Test, []string{"https://shop.example"}); err != nil {
		t.Fatal(err)
	}
	b := g.CreateBill(c, tok, "ORIGIN1", "10")
	evil := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
	evil.Set("callbackUrl", "https://shop.example.evil.example/phish")
	rec := g.CardPay(evil)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "not one of the callback origins") ||
		strings.Contains(rec.Body.String(), `action="https://shop.example.evil.example`) {
		t.Errorf("a form sending the result elsewhere: %d\n%s", rec.Code, rec.Body)
	}
	if n := g.CountPayments(b.Reference, ""); n != 0 {
		t.Errorf("%d payments after a refused callbackUrl", n)
	}
	for i, cb := range []string{"https://shop.example/kadi/return", "HTTPS://Shop.Example:443/kadi/return"} {
		b := g.CreateBill(c, tok, fmt.Sprintf("ORIGINOK%d", i), "10")
		v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
		v.Set("callbackUrl", cb)
		if got := g.Callback(g.CardPay(v)); got["orderStatus"] != "Transaction Successfull" {
			t.Errorf("%s: %v", cb, got)
		}
	}
	// Live mode keeps its own list: none, any callbackUrl.
	if st, err := g.Store.Settings(t.Context(), c.MerchantCode, merchant.Live); err != nil || len(st.CallbackOrigins) != 0 {
		t.Errorf("live mode's origins: %v, %v", st.CallbackOrigins, err)
	}
}

func TestParseCallbackOrigin(t *testing.T) {
	for _, tt := range []struct {
		raw  string
		mode merchant.Mode
		want string // "": refused
	}{
		{"https://shop.example", merchant.Live, "https://shop.example"},
		{"https://Shop.Example:443/", merchant.Live, "https://shop.example"},
		{"https://shop.example:8443", merchant.Live, "https://shop.example:8443"},
		{"http://127.0.0.1:8081", merchant.Test, "http://127.0.0.1:8081"},
		{"http://shop.example:80", merchant.Test, "http://shop.example"},
		{"http://shop.example", merchant.Live, ""},
		{"https://shop.example/return", merchant.Live, ""},
		{"https://shop.example?x", merchant.Live, ""},
		{"shop.example", merchant.Live, ""},
		{"https://127.1", merchant.Live, ""},
	} {
		got, err := form.ParseCallbackOrigin(tt.raw, tt.mode)
		if got != tt.want || (tt.want == "") != (err != nil) {
			t.Errorf("ParseCallbackOrigin(%q, %s) = %q, %v; want %q", tt.raw, tt.mode, got, err, tt.want)
		}
	}
}

// A shop's form sent by GET (no method="post") or as JSON gets our own
// page saying what is wrong with it, never the API's JSON or a page
// blaming the token; the token sent in the address is not echoed.
func TestShopFormSentWrongly(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Wrong Form Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "WRONG1", "10")
	fields := servertest.FormFields(c, tok, b)

	get := httptest.NewRequest(http.MethodGet, "/cardPay?"+fields.Encode(), nil)
	rec := g.Serve(get)
	if body := rec.Body.String(); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "POST" ||
		!strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") || !strings.Contains(body, `method=&#34;post&#34;`) || strings.Contains(body, tok) {
		t.Errorf("the form sent by GET: %d %q\n%s", rec.Code, rec.Header().Get("Content-Type"), body)
	}

	asJSON := map[string]string{}
	for k := range fields {
		asJSON[k] = fields.Get(k)
	}
	raw, _ := json.Marshal(asJSON)
	post := httptest.NewRequest(http.MethodPost, "/cardPay", bytes.NewReader(raw))
	post.Header.Set("Content-Type", "application/json")
	rec = g.Serve(post)
	if body := rec.Body.String(); rec.Code != http.StatusUnsupportedMediaType || !strings.Contains(body, "form-encoded") || strings.Contains(body, "session") {
		t.Errorf("the form sent as JSON: %d\n%s", rec.Code, body)
	}
	if n := g.CountPayments(b.Reference, ""); n != 0 {
		t.Errorf("%d payments", n)
	}
	// A multipart form whose random boundary happens to spell "json" is a
	// form all the same.
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	if err := mw.SetBoundary("----WebKitFormBoundaryjsonA1b2C3d4"); err != nil {
		t.Fatal(err)
	}
	for k := range fields {
		_ = mw.WriteField(k, fields.Get(k))
	}
	_ = mw.Close()
	form := httptest.NewRequest(http.MethodPost, "/cardPay", &body)
	form.Header.Set("Content-Type", mw.FormDataContentType())
	if rec := g.Serve(form); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="cardNumber"`) {
		t.Errorf("a multipart form with json in its boundary: %d\n%s", rec.Code, rec.Body)
	}
}

// Origins are checked on the shop's post: a checkout started before the
// merchant changed them goes on (its callback was checked when it
// started), and the shopper pays and sees the result.
func TestCallbackOriginsChangedDuringACheckout(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Changing Origins Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "MIDWAY1", "10")
	id := g.OpenCheckout(servertest.FormFields(c, tok, b))
	if err := g.Store.SetCallbackOrigins(t.Context(), c.MerchantCode, merchant.Test, []string{"https://elsewhere.example"}); err != nil {
		t.Fatal(err)
	}
	g.Clock.Advance(2 * time.Second) // past the settings cache
	if cb := callback(t, g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv}))); cb["orderStatus"] != "Transaction Successfull" {
		t.Errorf("the checkout after the origins changed: %v", cb)
	}
}

// Without the page's script the server is the only check: a security code
// that is no brand's is said with a number that is wrong, not a round trip
// later once the number is right; one that could be any brand's waits for
// the number. The names, optional, are not marked required.
func TestCardPageSaysEveryProblemAtOnce(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Checks Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "ATONCE1", "10")
	entry := g.OpenCheckout(servertest.FormFields(c, tok, b))
	for _, tt := range []struct {
		cvv     string
		cvvBad  bool
		comment string
	}{
		{"1", true, "one digit"},
		{"12345", true, "five digits"},
		{"12a", true, "a letter"},
		{"123", false, "three digits: any brand but Amex"},
		{"1234", false, "four digits: Amex"},
	} {
		page := g.CardPay(servertest.CheckoutPost(entry, servertest.Card{Number: badLuhn, CVV: tt.cvv})).Body.String()
		if !strings.Contains(page, `id="cardNumber-error"`) {
			t.Errorf("%s: no error for the card number", tt.comment)
		}
		if got := strings.Contains(page, `id="cardSecurity-error"`); got != tt.cvvBad {
			t.Errorf("%s: security code error shown %v, want %v", tt.comment, got, tt.cvvBad)
		}
		f, _ := servertest.ParsePage(page).FormTo("/cardPay")
		for _, name := range []string{"cardFirstName", "cardLastName"} {
			if in, _ := f.Input(name); in.Attrs != nil {
				if _, required := in.Attrs["required"]; required {
					t.Errorf("%s is marked required, and nothing requires it", name)
				}
			}
		}
	}
}

// The card-number check on the shop's fields is for what a shopper types:
// an order reference the bills API took (a long number that passes Luhn)
// and a callback URL carrying it are the shop's, and the bill pays.
func TestShopNumbersThatPassLuhnPay(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Numbers Shop")
	tok := g.Token(c, merchant.Test)
	const ref = "4100000000000001" // Luhn-valid, a Visa's shape: an invoice number
	body := servertest.BillBody(c, ref, "10")
	servertest.Order(body)["description"] = "Invoice"
	b := g.MustBill(tok, body)
	v := servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))
	v.Set("callbackUrl", "https://shop.example/return/"+ref)
	v.Set("mobileNumber", "+4915112345670")
	rec := g.CardPay(v)
	f, ok := servertest.ParsePage(rec.Body.String()).FormTo("https://shop.example/return/" + ref)
	if !ok || f.Values()["orderStatus"] != "Transaction Successfull" {
		t.Errorf("a bill whose order reference passes Luhn: %v\n%s", f.Values(), rec.Body)
	}
}

// A card posted for a bill whose attempt is still with the card network
// waits for that attempt, at most the request's time, then says the
// payment is being confirmed: not an internal error because the wait
// outlasted the request.
func TestWaitForAnAttemptInFlightEndsWithTheRequest(t *testing.T) {
	g := servertest.Start(t, servertest.Options{RequestTimeout: time.Second})
	c := g.Onboard("Waiting Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "WAIT1", "10")
	g.PaymentInFlight(b.Reference, "pay_inflight")
	rec := g.CardPay(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b)))
	if body := rec.Body.String(); rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, "being confirmed") {
		t.Errorf("a card posted while another attempt is in flight: %d\n%s", rec.Code, body)
	}
}

// A card posted on our page while the store takes no writes (another
// process holds its write lock) comes back to the card form saying why
// and that nothing was charged: it came back silent, and the shopper
// could not tell whether the card was charged.
func TestCardPageSaysPaymentsArePaused(t *testing.T) {
	g := servertest.Start(t, servertest.Options{RequestTimeout: time.Second})
	c := g.Onboard("Paused Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "PAUSED1", "10")
	entry := g.OpenCheckout(servertest.FormFields(c, tok, b))

	unlock := holdWriteLock(t, g)
	posted := g.ServeOnce(servertest.CardPayRequest(servertest.CheckoutPost(entry, servertest.Card{Number: visa, CVV: cvv})))
	page := posted.Header().Get("Location")
	rec := g.ServeOnce(httptest.NewRequest(http.MethodGet, page, nil))
	body := rec.Body.String()
	f, ok := servertest.ParsePage(body).FormTo("/cardPay")
	if !ok || !strings.Contains(body, "Payments paused for a moment") || !strings.Contains(body, "not charged") {
		t.Fatalf("a card posted while the store takes no writes: %d %d\n%s", posted.Code, rec.Code, body)
	}
	if in, _ := f.Input("cardNumber"); in.Attrs["aria-describedby"] != "paused" {
		t.Errorf("the card number is described by %q, want the pause", in.Attrs["aria-describedby"])
	}
	// The names typed could not be kept: none comes back, not the
	// shop's customer, who would be sent as the cardholder.
	for _, name := range []string{"cardFirstName", "cardLastName"} {
		if in, ok := f.Input(name); !ok || in.Attrs["value"] != "" {
			t.Errorf("after the pause %s is %q, want it empty", name, in.Attrs["value"])
		}
	}
	// The page's address lives on; the pause is not said of it later.
	g.Clock.Advance(2 * time.Minute)
	later := g.ServeOnce(httptest.NewRequest(http.MethodGet, page, nil)).Body.String()
	if strings.Contains(later, "Payments paused") {
		t.Errorf("the pause is still said two minutes on")
	}
	// Nor do the shop's names take the place of the shopper's then.
	if f, ok := servertest.ParsePage(later).FormTo("/cardPay"); ok {
		if in, _ := f.Input("cardFirstName"); in.Attrs["value"] != "" {
			t.Errorf("two minutes on, the first name is %q, want it empty", in.Attrs["value"])
		}
	}
	unlock()
	// Once it takes them, the same page pays, and says nothing of a pause.
	rec = g.CardPay(servertest.CheckoutPost(entry, servertest.Card{Number: visa, CVV: cvv}))
	if cb := callback(t, rec); cb["orderStatus"] != "Transaction Successfull" {
		t.Errorf("after the pause: %v", cb)
	}
}

// A decline the card itself causes (it has expired) does not invite the
// shopper to try the same card again; other declines do.
func TestDeclineSaysWhichCardMayBeTried(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Decline Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "DECLINES1", "10")
	entry := g.OpenCheckout(servertest.FormFields(c, tok, b))
	for _, tt := range []struct{ number, want, not string }{
		{cardExpired, "You can try again with another card.", "with this card or another"},
		{cardDeclined, "You can try again, with this card or another.", "again with another card"},
	} {
		body := g.CardPay(servertest.CheckoutPost(entry, servertest.Card{Number: tt.number, CVV: cvv})).Body.String()
		if !strings.Contains(body, tt.want) || strings.Contains(body, tt.not) {
			t.Errorf("decline of %s…: the page does not say %q\n%s", tt.number[:6], tt.want, body)
		}
	}
	// The page goes by the decline's code, not its wording: another
	// acquirer words an expired card its own way.
	page := g.ServeOnce(servertest.CardPayRequest(servertest.CheckoutPost(entry, servertest.Card{Number: cardDeclined, CVV: cvv}))).Header().Get("Location")
	for _, tt := range []struct {
		notice    checkout.Notice
		want, not string
	}{
		{checkout.Notice{Declined: "Expired card", DeclineCode: payment.DeclineExpiredCard}, "You can try again with another card.", "with this card or another"},
		{checkout.Notice{Declined: "Your card has expired", DeclineCode: "do_not_honor"}, "You can try again, with this card or another.", "again with another card"},
	} {
		if err := g.Store.SetCheckoutNotice(context.Background(), checkout.Hash(entry), tt.notice); err != nil {
			t.Fatal(err)
		}
		body := g.ServeOnce(httptest.NewRequest(http.MethodGet, page, nil)).Body.String()
		if !strings.Contains(body, tt.notice.Declined) || !strings.Contains(body, tt.want) || strings.Contains(body, tt.not) {
			t.Errorf("decline %+v: the page does not say %q\n%s", tt.notice, tt.want, body)
		}
	}
}

// The language cookie is Secure when shoppers reach the form over https:
// the form's own public URL decides, not the API's, when it has one.
func TestLanguageCookieSecureByTheFormsURL(t *testing.T) {
	for _, tt := range []struct {
		opts   servertest.Options
		secure bool
	}{
		{servertest.Options{PublicURL: "http://kadi.test"}, false},
		{servertest.Options{PublicURL: "https://pay.kadi.test"}, true},
		{servertest.Options{PublicURL: "http://kadi.test", FormAddr: "127.0.0.1:0", FormPublicURL: "https://checkout.kadi.test"}, true},
		{servertest.Options{PublicURL: "https://pay.kadi.test", FormAddr: "127.0.0.1:0", FormPublicURL: "http://checkout.kadi.test"}, false},
	} {
		g := servertest.Start(t, tt.opts)
		req := httptest.NewRequest(http.MethodPost, "/cardPay/language", strings.NewReader("language=sw"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := httptest.NewRecorder()
		g.FormHandler.ServeHTTP(rec, req)
		cookies := rec.Result().Cookies()
		if len(cookies) != 1 || cookies[0].Secure != tt.secure {
			t.Errorf("%+v: cookies %v, want one, Secure %v", tt.opts, cookies, tt.secure)
		}
	}
}

// A checkout's page asked again while the records are out of reach may
// stand for a payment with the card network or done: it says not to pay
// again, never that the card was not charged (it said so of a card
// approved a moment before, on a node that lost its database).
func TestPageReloadedInAnOutageDoesNotSayNotCharged(t *testing.T) {
	g := servertest.Start(t, servertest.Options{RequestTimeout: time.Second})
	c := g.Onboard("Reloaded Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "RELOAD1", "10")
	entry := g.OpenCheckout(servertest.FormFields(c, tok, b))
	g.PaymentInFlight(b.Reference, "pay_reloaded")
	posted := g.ServeOnce(servertest.CardPayRequest(servertest.CheckoutPost(entry, servertest.Card{Number: visa, CVV: cvv})))
	page := posted.Header().Get("Location")
	if body := g.ServeOnce(httptest.NewRequest(http.MethodGet, page, nil)).Body.String(); !strings.Contains(body, "being confirmed") {
		t.Fatalf("the page while the payment is in flight: %d\n%s", posted.Code, body)
	}

	mux := http.NewServeMux()
	(&form.Handler{Auth: g.Auth, Bills: g.Store, Checkouts: unreachableCheckouts{g.Store}, Payments: g.Payments, Location: time.UTC,
		Log: slog.New(slog.DiscardHandler), Now: g.Clock.Now, Sealer: g.Sealer("hosted-pages")}).Register(mux)
	for _, lang := range []string{"en", "sw"} {
		req := httptest.NewRequest(http.MethodGet, page, nil)
		req.Header.Set("Accept-Language", lang)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		body := rec.Body.String()
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Errorf("%s: reloaded in an outage: %d, want 503 with Retry-After", lang, rec.Code)
		}
		for _, never := range []string{"not charged", "haikutozwa", "Nothing more was charged"} {
			if strings.Contains(body, never) {
				t.Errorf("%s: the reloaded page says %q:\n%s", lang, never, body)
			}
		}
		if want := map[string]string{"en": "do not pay again", "sw": "usilipe tena"}[lang]; !strings.Contains(body, want) {
			t.Errorf("%s: the reloaded page does not say %q:\n%s", lang, want, body)
		}
	}
}

// unreachableCheckouts is the store with its checkout sessions out of
// reach, as PostgreSQL's connections reset.
type unreachableCheckouts struct{ checkout.Repo }

func (unreachableCheckouts) CheckoutByHash(context.Context, string, time.Time) (checkout.Session, error) {
	return checkout.Session{}, fmt.Errorf("load checkout session: %w", outagetest.SQLStateError("08006"))
}

// Back to a checkout's page after paying, once its half hour is over: the
// page no longer knows the payment, and must not tell a shopper who paid
// to start the payment again (a shop that makes a bill per checkout took
// the money twice). In both languages.
func TestClosedPageAfterPayingDoesNotSayPayAgain(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Closed Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "CLOSED1", "10")
	page := g.ServeOnce(servertest.CardPayRequest(servertest.FormFields(c, tok, b))).Header().Get("Location")
	form, ok := servertest.ParsePage(g.ServeOnce(httptest.NewRequest(http.MethodGet, page, nil)).Body.String()).FormTo("/cardPay")
	if !ok {
		t.Fatal("no card form on the checkout's page")
	}
	id := form.Values()["checkout"]
	callback(t, g.CardPay(servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv})))
	// The session's half hour over, its page's not yet (it was made a
	// moment later).
	if err := g.Store.EndCheckout(t.Context(), checkout.Hash(id), g.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	for lang, want := range map[string]string{"en": "If you already paid, your payment stands", "sw": "Ikiwa tayari ulilipa"} {
		req := httptest.NewRequest(http.MethodGet, page, nil)
		req.Header.Set("Accept-Language", lang)
		body := g.ServeOnce(req).Body.String()
		if !strings.Contains(body, "Payment page closed") && lang == "en" || !strings.Contains(body, want) || strings.Contains(body, "start the payment again") || strings.Contains(body, "uanze malipo upya") {
			t.Errorf("%s: Back after paying, the page closed:\n%s", lang, body)
		}
	}
}

// The page a card post is sent to when the gateway could not even start
// a checkout (the store out of reach) is a sealed copy: it does not claim
// to update itself, and does not poll for half an hour a page that never
// changes.
func TestSealedPausedPageDoesNotClaimToUpdate(t *testing.T) {
	g := servertest.Start(t, servertest.Options{RequestTimeout: time.Second})
	c := g.Onboard("Sealed Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "SEALED1", "10")
	unlock := holdWriteLock(t, g)
	posted := g.ServeOnce(servertest.CardPayRequest(servertest.Card{Number: visa, CVV: cvv}.Apply(servertest.FormFields(c, tok, b))))
	unlock()
	rec := g.ServeOnce(httptest.NewRequest(http.MethodGet, posted.Header().Get("Location"), nil))
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, "Payments paused") {
		t.Fatalf("the page of a post that met the pause: %d\n%s", rec.Code, body)
	}
	if strings.Contains(body, "updates itself") || strings.Contains(body, "follow.js") || strings.Contains(body, `http-equiv="refresh"`) {
		t.Errorf("a sealed page claims to update itself:\n%s", body)
	}
}

// holdWriteLock takes g's SQLite write lock, as another process holding
// it would, until the returned func.
func holdWriteLock(t *testing.T, g *servertest.Gateway) (unlock func()) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(g.Dir, "kadi.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lock, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	if _, err := lock.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := lock.ExecContext(t.Context(), "ROLLBACK"); err != nil {
			t.Fatal(err)
		}
		lock.Close()
	}
}

// A holder name the card page would refuse (too long, a control
// character, not UTF-8) is neither prefilled from a merchant's post without
// the card nor shown back after the page refused it: both were, as sent
// (a merchant's went unchecked into its checkout session). A name the page
// takes is.
func TestHolderNamesShownOnlyAsThePageTakesThem(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Names Shop")
	tok := g.Token(c, merchant.Test)
	shown := func(t *testing.T, rec *httptest.ResponseRecorder) string {
		t.Helper()
		f, ok := servertest.ParsePage(rec.Body.String()).FormTo("/cardPay")
		if !ok {
			t.Fatalf("no card page: %d\n%s", rec.Code, rec.Body)
		}
		in, _ := f.Input("cardFirstName")
		return in.Attrs["value"]
	}
	// Without a holder name the page offers the shop's customer's, Jane.
	for i, tc := range []struct{ name, want string }{
		{strings.Repeat("A", 51), "Jane"},
		{"Ann\x01e", "Jane"},
		{"Jos\xe9", "Jane"},
		{"José", "José"},
	} {
		b := g.CreateBill(c, tok, "NAMES"+strconv.Itoa(i), "10")
		v := servertest.FormFields(c, tok, b)
		v.Set("cardFirstName", tc.name)
		if got := shown(t, g.CardPay(v)); got != tc.want {
			t.Errorf("the merchant's cardFirstName %.20q prefilled as %.20q, want %q", tc.name, got, tc.want)
		}
		if tc.want == "Jane" {
			// What the shopper types on our page and the page refuses.
			id := g.OpenCheckout(servertest.FormFields(c, tok, g.CreateBill(c, tok, "AGAIN"+strconv.Itoa(i), "10")))
			post := servertest.CheckoutPost(id, servertest.Card{Number: visa, CVV: cvv})
			post.Set("cardFirstName", tc.name)
			if got := shown(t, g.CardPay(post)); got != "" {
				t.Errorf("a refused cardFirstName %.20q shown back as %.20q", tc.name, got)
			}
		}
	}
}
