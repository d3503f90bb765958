package dashboard_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/dashboard"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server/servertest"
	"github.com/kadipay/kadi/internal/session"
	"github.com/kadipay/kadi/internal/store"
	"github.com/kadipay/kadi/internal/store/storetest"
)

const visa = "4242424242424242"

// browser is a cookie jar and the CSRF token and mode of the page it last
// read.
type browser struct {
	t              *testing.T
	g              *servertest.Gateway
	cookie         *http.Cookie
	others         map[string]*http.Cookie // the note a redirect leaves
	csrf, formMode string
}

func (b *browser) do(method, path string, form url.Values, header http.Header) *httptest.ResponseRecorder {
	b.t.Helper()
	var req *http.Request
	if method == http.MethodPost {
		req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if b.cookie != nil {
		req.AddCookie(b.cookie)
	}
	for _, c := range b.others {
		req.AddCookie(c)
	}
	rec := b.g.Serve(req)
	for _, c := range rec.Result().Cookies() {
		switch {
		case strings.HasSuffix(c.Name, "kadi_session") && c.MaxAge < 0:
			b.cookie = nil
		case strings.HasSuffix(c.Name, "kadi_session"):
			b.cookie = c
		case c.MaxAge < 0:
			delete(b.others, c.Name)
		default:
			if b.others == nil {
				b.others = map[string]*http.Cookie{}
			}
			b.others[c.Name] = c
		}
	}
	if v, ok := hiddenValue(rec.Body.String(), "csrf"); ok {
		b.csrf = v
	}
	if v, ok := hiddenValue(rec.Body.String(), "form_mode"); ok {
		b.formMode = v
	}
	return rec
}

// hiddenValue is the value of the first input named name on page.
func hiddenValue(page, name string) (string, bool) {
	i := strings.Index(page, `name="`+name+`" value="`)
	if i < 0 {
		return "", false
	}
	rest := page[i+len(`name="`+name+`" value="`):]
	return rest[:strings.Index(rest, `"`)], true
}

func (b *browser) get(path string) *httptest.ResponseRecorder {
	return b.do(http.MethodGet, path, nil, nil)
}

// post sends a form with the session's CSRF token.
func (b *browser) post(path string, form url.Values) *httptest.ResponseRecorder {
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", b.csrf)
	if !form.Has("form_mode") {
		form.Set("form_mode", b.formMode)
	}
	rec := b.do(http.MethodPost, path, form, nil)
	if path == "/dashboard/mode" && rec.Code == http.StatusSeeOther {
		b.get(rec.Header().Get("Location")) // as a browser does: the page, in the new mode
	}
	return rec
}

func signIn(t *testing.T, g *servertest.Gateway, c merchant.Credentials) *browser {
	t.Helper()
	b := &browser{t: t, g: g}
	rec := b.do(http.MethodPost, "/dashboard/sign-in", url.Values{"username": {c.Username}, "password": {c.Password}}, nil)
	if rec.Code != http.StatusSeeOther || b.cookie == nil {
		t.Fatalf("sign in: %d %s", rec.Code, rec.Body)
	}
	b.get("/dashboard/")
	return b
}

// modeChanges are the forms that change one mode's keys and settings,
// by path, filled in as a merchant would.
func modeChanges(c merchant.Credentials) map[string]url.Values {
	return map[string]url.Values{
		"/dashboard/developers/regenerate":    {"confirm": {"yes"}, "password": {c.Password}},
		"/dashboard/developers/rotate-secret": {"confirm": {"yes"}, "password": {c.Password}},
		"/dashboard/developers/end-overlap":   {"confirm": {"yes"}, "password": {c.Password}},
		"/dashboard/developers/reveal-secret": {"password": {c.Password}},
		"/dashboard/settings/ipn":             {"url": {"https://shop.example/ipn"}},
		"/dashboard/settings/ipn/test":        nil,
		"/dashboard/settings/callbacks":       {"origins": {"https://shop.example"}},
	}
}

// totpSecret is the authenticator secret enableTOTP gives every merchant.
const totpSecret = "JBSWY3DPEHPK3PXP"

// enableTOTP turns two-step verification on for c, with the hashes of
// recovery codes.
func enableTOTP(t *testing.T, g *servertest.Gateway, c merchant.Credentials, recovery ...string) {
	t.Helper()
	if err := g.Store.EnableTOTP(t.Context(), c.MerchantCode, totpSecret, recovery, g.Clock.Now()); err != nil {
		t.Fatal(err)
	}
}

// signInTwoStep turns two-step verification on for c and signs in with it,
// as live mode asks.
func signInTwoStep(t *testing.T, g *servertest.Gateway, c merchant.Credentials) *browser {
	t.Helper()
	const secret = totpSecret
	if _, enabled, err := g.Store.TOTP(t.Context(), c.MerchantCode); err != nil {
		t.Fatal(err)
	} else if enabled.IsZero() {
		enableTOTP(t, g, c)
	}
	b := signIn(t, g, c)
	// A code opens one sign-in: a second one in the same test takes the
	// next time step.
	g.Clock.Advance(30 * time.Second)
	if rec := b.post("/dashboard/verify", url.Values{"code": {mustCode(t, secret, g.Clock.Now())}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("two-step verification: %d", rec.Code)
	}
	return b
}

func TestSignInPageWithoutSession(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	rec := g.Serve(httptest.NewRequest(http.MethodGet, "/dashboard/", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="username"`) {
		t.Fatalf("GET /dashboard/ without a session: %d\n%s", rec.Code, rec.Body)
	}
	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options"} {
		if rec.Header().Get(h) == "" {
			t.Errorf("no %s", h)
		}
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
		t.Errorf("CSP %q", csp)
	}
	if rec := g.Serve(httptest.NewRequest(http.MethodGet, "/dashboard/payments", nil)); rec.Code != http.StatusSeeOther {
		t.Errorf("a page without a session: %d, want a redirect to sign in", rec.Code)
	}
	if rec := g.Serve(httptest.NewRequest(http.MethodHead, "/dashboard/payments", nil)); rec.Code != http.StatusSeeOther {
		t.Errorf("HEAD of a page without a session: %d, want a redirect to sign in", rec.Code)
	}
	c := g.Onboard("Head Shop")
	if rec := signIn(t, g, c).do(http.MethodHead, "/dashboard/payments", nil, nil); rec.Code != http.StatusOK {
		t.Errorf("HEAD of a page in a session: %d, want 200 as its GET", rec.Code)
	}
}

// The session cookie: HttpOnly, SameSite, and __Host- with Secure when the
// gateway is reached over https.
func TestSessionCookie(t *testing.T) {
	for _, tt := range []struct {
		public, name string
		secure       bool
	}{{"http://kadi.test", "kadi_session", false}, {"https://pay.kadi.example", "__Host-kadi_session", true}} {
		g := servertest.Start(t, servertest.Options{PublicURL: tt.public})
		c := g.Onboard("Cookie Shop")
		b := signIn(t, g, c)
		ck := b.cookie
		if ck.Name != tt.name || ck.Secure != tt.secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || len(ck.Value) != 43 {
			t.Errorf("%s: cookie %+v", tt.public, ck)
		}
		// The Developers page gives the public URL as the base, whatever
		// Host the request named (a proxy's, the dashboard listener's, or
		// one a stranger chose).
		if page := b.get("http://evil.example/dashboard/developers").Body.String(); !strings.Contains(page, "<code>"+tt.public+"</code>") ||
			strings.Contains(page, "evil.example") {
			t.Errorf("%s: the Developers page's base URL is not the public URL", tt.public)
		}
	}
}

// With the hosted form on an address of its own, the Developers page
// names it as where a checkout posts (it named the API's, where /cardPay
// is a 404).
func TestDevelopersPageNamesTheFormsOwnAddress(t *testing.T) {
	g := servertest.Start(t, servertest.Options{FormAddr: "127.0.0.1:0", FormPublicURL: "http://checkout.kadi.test"})
	page := signIn(t, g, g.Onboard("Split Shop")).get("/dashboard/developers").Body.String()
	for _, want := range []string{"<p>API: <code>http://kadi.test</code></p>", "<p>Hosted form: <code>http://checkout.kadi.test</code></p>",
		"posts your form to http://checkout.kadi.test/cardPay", "http://kadi.test/payment/v2/bills"} {
		if !strings.Contains(page, want) {
			t.Errorf("the Developers page has no %q", want)
		}
	}
	if strings.Contains(page, "http://kadi.test/cardPay") || strings.Contains(page, "API and hosted form") {
		t.Error("the Developers page sends checkouts to the API's address")
	}
}

// A session id the browser brought along is never the signed-in session.
func TestSessionFixation(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Fixed Shop")
	planted := &http.Cookie{Name: "kadi_session", Value: strings.Repeat("A", 43)}
	b := &browser{t: t, g: g, cookie: planted}
	b.do(http.MethodPost, "/dashboard/sign-in", url.Values{"username": {c.Username}, "password": {c.Password}}, nil)
	if b.cookie == nil || b.cookie.Value == planted.Value {
		t.Fatalf("sign-in kept the planted session id")
	}
	first := b.cookie.Value
	again := signIn(t, g, c)
	if again.cookie.Value == first {
		t.Error("two sign-ins got the same session id")
	}
}

// Every state change must be same-origin and carry the session's token.
func TestCSRF(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Forged Shop")
	b := signInTwoStep(t, g, c)
	form := url.Values{"mode": {"live"}, "csrf": {b.csrf}}
	cross := http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}
	if rec := b.do(http.MethodPost, "/dashboard/mode", form, cross); rec.Code != http.StatusForbidden {
		t.Errorf("cross-origin POST: %d, want 403", rec.Code)
	}
	noToken := url.Values{"mode": {"live"}}
	if rec := b.do(http.MethodPost, "/dashboard/mode", noToken, nil); rec.Code != http.StatusForbidden {
		t.Errorf("POST without the CSRF token: %d, want 403", rec.Code)
	}
	wrong := url.Values{"mode": {"live"}, "csrf": {strings.Repeat("x", 43)}}
	if rec := b.do(http.MethodPost, "/dashboard/mode", wrong, nil); rec.Code != http.StatusForbidden {
		t.Errorf("POST with another token: %d, want 403", rec.Code)
	}
	if strings.Contains(b.get("/dashboard/").Body.String(), "LIVE MODE") {
		t.Error("a refused request switched the mode")
	}
	if rec := b.post("/dashboard/mode", url.Values{"mode": {"live"}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("same-origin POST with the token: %d", rec.Code)
	}
	if !strings.Contains(b.get("/dashboard/").Body.String(), "LIVE MODE") {
		t.Error("the mode switch did not take")
	}
}

// Merchant A opening merchant B's bill or replaying B's notification by URL
// gets the 404 of a missing one; test data is invisible in live mode.
func TestScopedToMerchantAndMode(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	a, bm := g.Onboard("Shop A"), g.Onboard("Shop B")
	billB, _ := g.Pay(bm, g.Token(bm, merchant.Test), "BSECRET", "10", servertest.Card{Number: visa, CVV: "737"})
	browserA := signIn(t, g, a)
	if rec := browserA.get("/dashboard/payments/" + billB.Reference); rec.Code != http.StatusNotFound {
		t.Errorf("A opening B's bill: %d", rec.Code)
	}
	if rec := browserA.get("/dashboard/payments?q=" + billB.Reference); strings.Contains(rec.Body.String(), billB.Reference+"<") {
		t.Errorf("A's search finds B's bill")
	}
	browserB := signInTwoStep(t, g, bm)
	page := browserB.get("/dashboard/payments/" + billB.Reference).Body.String()
	// Paid: when it was paid, not an expiry it no longer has.
	if !strings.Contains(page, "<dt>Paid</dt>") || strings.Contains(page, "<dt>Expires</dt>") {
		t.Errorf("a paid bill's page shows no payment time, or an expiry")
	}
	i := strings.Index(page, "IPN msg_")
	if i < 0 {
		t.Fatalf("B's bill page shows no IPN:\n%s", page)
	}
	event := page[i+4 : i+4+28]
	if rec := browserA.post("/dashboard/ipn/"+event+"/replay", nil); rec.Code != http.StatusNotFound {
		t.Errorf("A replaying B's notification: %d", rec.Code)
	}
	// B's own replay, from the IPN log and from the bill's page: one
	// audit row each, saying who (the dashboard and its address).
	if rec := browserB.post("/dashboard/ipn/"+event+"/replay", nil); rec.Code != http.StatusSeeOther {
		t.Errorf("B replaying its notification: %d", rec.Code)
	}
	if rec := browserB.post("/dashboard/payments/"+billB.Reference+"/resend-ipn", nil); rec.Code != http.StatusSeeOther {
		t.Errorf("B resending its notification: %d", rec.Code)
	}
	if n := g.Count(`SELECT COUNT(*) FROM audit_events WHERE action = 'ipn.replayed' AND actor LIKE 'dashboard %'`); n != 2 {
		t.Errorf("%d audit rows for two replays, want 2", n)
	}
	// B in live mode sees none of its test payments.
	browserB.post("/dashboard/mode", url.Values{"mode": {"live"}})
	if rec := browserB.get("/dashboard/payments/" + billB.Reference); rec.Code != http.StatusNotFound {
		t.Errorf("a test bill opened in live mode: %d", rec.Code)
	}
	if body := browserB.get("/dashboard/payments").Body.String(); strings.Contains(body, billB.Reference) {
		t.Error("a test bill listed in live mode")
	}
}

// Everything a merchant or customer typed is rendered inert.
func TestEscaping(t *testing.T) {
	const evil = `<script>alert(1)</script>`
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard(`Shop ` + evil)
	tok := g.Token(c, merchant.Test)
	body := servertest.BillBody(c, "XSS1", "10")
	body["customer"].(map[string]any)["name"] = "Zoë O'Brien-Kamau"
	b := g.MustBill(tok, body)
	br := signIn(t, g, c)
	for _, path := range []string{"/dashboard/", "/dashboard/payments", "/dashboard/payments/" + b.Reference, "/dashboard/developers", "/dashboard/audit"} {
		if page := br.get(path).Body.String(); strings.Contains(page, "<script>alert") {
			t.Errorf("%s renders markup from data:\n%s", path, page)
		}
	}
	// The IPN URL is checked as a URL, and shown escaped if odd.
	rec := br.post("/dashboard/settings/ipn", url.Values{"url": {`https://shop.example/ipn"><script>alert(1)</script>`}, "username": {"u"}, "password": {"p"}})
	if strings.Contains(rec.Body.String(), "<script>alert") {
		t.Errorf("IPN settings echo markup:\n%s", rec.Body)
	}
	// A username no receiver could check (Basic splits at the first colon).
	br.get("/dashboard/settings/ipn")
	if rec := br.post("/dashboard/settings/ipn", url.Values{"url": {"https://shop.example/ipn"}, "username": {"shop:1"}, "password": {"p"}}); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "may not contain") {
		t.Errorf("an IPN username with a colon: %d", rec.Code)
	}
}

// A notification parked for want of a URL is listed under its status, and
// saving the IPN settings sends it and says so.
func TestSavingIPNSendsParked(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Late Shop")
	b, _ := g.Pay(c, g.Token(c, merchant.Test), "LATE1", "10", servertest.Card{Number: visa, CVV: "737"})
	ctx := t.Context()
	// Parked as the payment stored it: no worker took it.
	evs, err := g.Store.IPNEvents(ctx, ipn.Filter{MerchantCode: c.MerchantCode, Status: ipn.Parked})
	if err != nil || len(evs) != 1 {
		t.Fatalf("parked: %d, %v", len(evs), err)
	}
	br := signIn(t, g, c)
	if page := br.get("/dashboard/ipn?status=parked").Body.String(); !strings.Contains(page, evs[0].ID+": parked") || !strings.Contains(page, "no IPN URL configured") {
		t.Fatalf("parked filter, with why it is parked:\n%s", page)
	}
	// The count of attempts, not the attempts themselves printed as Go
	// values (a field of the page's row hid the event's count).
	if page := br.get("/dashboard/ipn").Body.String(); !strings.Contains(page, "attempts this round: 0 · replays: 0") || strings.Contains(page, "[{") {
		t.Errorf("IPN log:\n%s", page)
	}
	// What the notification is about, linked; a replay button named for
	// it; and a replay from a filtered list goes back to that list.
	page := br.get("/dashboard/ipn?status=parked").Body.String()
	for _, want := range []string{`Bill <a href="/dashboard/payments/` + b.Reference + `">`, "· order LATE1 · amount 10.00", `aria-label="Replay notification ` + evs[0].ID + `"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the IPN log lacks %s:\n%s", want, page)
		}
	}

	if page := br.get("/dashboard/settings/ipn").Body.String(); !strings.Contains(page, "No receiver yet: notifications of payments are parked") {
		t.Errorf("IPN settings without a URL:\n%s", page)
	}
	rec := br.post("/dashboard/settings/ipn", url.Values{"url": {"https://shop.example/ipn"}, "username": {"shop"}, "password": {"p"}})
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("save: %d", rec.Code)
	}
	if page := br.get(rec.Header().Get("Location")).Body.String(); !strings.Contains(page, "1 parked notification (from the last 3 days) is being sent there now.") {
		t.Fatalf("the page after the save:\n%s", page)
	}
	// Shown once; and a note in the address is not shown at all (it was
	// the dashboard's own words for whoever wrote the link).
	if page := br.get("/dashboard/settings/ipn?note=Your+account+is+suspended").Body.String(); strings.Contains(page, "parked notification (from") || strings.Contains(page, "suspended") {
		t.Errorf("the note again, or one from the address:\n%s", page)
	}
	if ev, _ := g.Store.IPNEvent(ctx, evs[0].ID); ev.Status != ipn.Pending {
		t.Errorf("after the save the event is %s", ev.Status)
	}
	if page := br.get("/dashboard/ipn?status=pending").Body.String(); !strings.Contains(page, "next attempt ") {
		t.Errorf("a pending notification does not say when it is tried next:\n%s", page)
	}
	if rec := br.post("/dashboard/ipn/"+evs[0].ID+"/replay", url.Values{"from_status": {"pending"}}); rec.Header().Get("Location") != "/dashboard/ipn?status=pending" {
		t.Errorf("a replay from the pending list goes back to %q", rec.Header().Get("Location"))
	}
}

// 15 idle minutes end a session; so do 12 hours, however active.
func TestSessionTimeouts(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Idle Shop")
	b := signIn(t, g, c)
	g.Clock.Advance(session.IdleTimeout - time.Second)
	if rec := b.get("/dashboard/payments"); rec.Code != http.StatusOK {
		t.Fatalf("a request before the idle timeout: %d", rec.Code)
	}
	g.Clock.Advance(session.IdleTimeout)
	if rec := b.get("/dashboard/payments"); rec.Code != http.StatusSeeOther {
		t.Errorf("after 15 idle minutes: %d, want a redirect to sign in", rec.Code)
	}

	b = signIn(t, g, c)
	for elapsed := time.Duration(0); elapsed < session.MaxAge-10*time.Minute; elapsed += 10 * time.Minute {
		g.Clock.Advance(10 * time.Minute)
		if rec := b.get("/dashboard/payments"); rec.Code != http.StatusOK {
			t.Fatalf("an active session after %v: %d", elapsed, rec.Code)
		}
	}
	g.Clock.Advance(20 * time.Minute)
	if rec := b.get("/dashboard/payments"); rec.Code != http.StatusSeeOther {
		t.Errorf("an active session after 12 hours: %d, want a redirect", rec.Code)
	}
}

// A page opened after the session ended comes back after signing in
// again, with its filters; the way back never leaves the dashboard.
func TestSignInReturnsToThePageAskedFor(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Returning Shop")
	b := signIn(t, g, c)
	g.Clock.Advance(session.IdleTimeout + time.Second)
	const asked = "/dashboard/payments?status=approved&q=ORDER-1"
	rec := b.get(asked)
	loc := rec.Header().Get("Location")
	if rec.Code != http.StatusSeeOther || loc != "/dashboard/?next="+url.QueryEscape(asked) {
		t.Fatalf("an ended session's page: %d to %q", rec.Code, loc)
	}
	page := b.get(loc).Body.String()
	if next, _ := hiddenValue(page, "next"); html.UnescapeString(next) != asked {
		t.Fatalf("the sign-in form goes on to %q, want %q", next, asked)
	}
	// A page whose address holds a card number (a whole number pasted
	// into the search) is not carried to the sign-in page, nor is one
	// named in a link's next.
	for _, asked := range []string{"/dashboard/payments?q=4242424242424242", "/dashboard/payments?q=4242%204242%204242%204242"} {
		rec := b.get(asked)
		if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || loc != "/dashboard/" {
			t.Errorf("an ended session's page %s: %d to %q, want /dashboard/", asked, rec.Code, loc)
		}
		page := b.get("/dashboard/?next=" + url.QueryEscape(asked)).Body.String()
		if strings.Contains(page, "4242") {
			t.Errorf("the sign-in page repeats the card number of next=%s", asked)
		}
	}
	for _, tt := range []struct{ next, want string }{
		{asked, asked},
		{"/dashboard/ipn", "/dashboard/ipn"},
		{"", "/dashboard/"},
		{"https://evil.example/dashboard/", "/dashboard/"},
		{"//evil.example/dashboard/", "/dashboard/"},
		{"/dashboard/\\evil.example", "/dashboard/"},
		{"/dashboard/payments#x", "/dashboard/"},
		{"/evil", "/dashboard/"},
		{"/dashboard/sign-out", "/dashboard/"},
		{"javascript:alert(1)//dashboard/", "/dashboard/"},
		{"/dashboard/../metrics", "/dashboard/"},
		{"/dashboard/%2e%2e/metrics", "/dashboard/"},
		{"/dashboard/./sign-out", "/dashboard/"},
		{"/dashboard//evil", "/dashboard/"},
		{"/dashboard/payments/", "/dashboard/payments/"},
		// A card number in the way back is not repeated.
		{"/dashboard/payments?q=4242424242424242", "/dashboard/"},
		{"/dashboard/payments?q=4242%204242%204242%204242", "/dashboard/"},
		{"/dashboard/payments?q=4242+4242+4242+4242", "/dashboard/"},
		{"/dashboard/payments/5555-5555-5555-4444", "/dashboard/"},
		{"/dashboard/payments?q=4242", "/dashboard/payments?q=4242"},
	} {
		b := &browser{t: t, g: g}
		rec := b.do(http.MethodPost, "/dashboard/sign-in", url.Values{"username": {c.Username}, "password": {c.Password}, "next": {tt.next}}, nil)
		if got := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || got != tt.want {
			t.Errorf("sign-in with next=%q: %d to %q, want %q", tt.next, rec.Code, got, tt.want)
		}
	}
}

// With two-step verification on, the password alone is logged as such,
// and the sign-in as done only with the code; until then the page offers
// no navigation or mode switch; the code leads to the page asked for.
func TestSecondFactorSignInIsLoggedOnceDone(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Logged Shop")
	const secret = totpSecret
	enableTOTP(t, g, c)
	count := func(action string) int {
		return g.Count(`SELECT COUNT(*) FROM audit_events WHERE merchant_code = ? AND action = ?`, c.MerchantCode, action)
	}
	b := signIn(t, g, c)
	if count(audit.SignedIn) != 0 || count(audit.PasswordAccepted) != 1 {
		t.Errorf("after the password: %d signed_in, %d password_accepted; want 0 and 1", count(audit.SignedIn), count(audit.PasswordAccepted))
	}
	page := b.get("/dashboard/ipn?status=failed").Body.String()
	if !strings.Contains(page, `action="/dashboard/verify"`) {
		t.Fatalf("no verify page:\n%s", page)
	}
	for _, hidden := range []string{`href="/dashboard/payments"`, `action="/dashboard/mode"`, "TEST MODE"} {
		if strings.Contains(page, hidden) {
			t.Errorf("the verify page shows %s", hidden)
		}
	}
	if !strings.Contains(page, `action="/dashboard/sign-out"`) {
		t.Error("the verify page has no way to sign out")
	}
	rec := b.post("/dashboard/verify", url.Values{"code": {mustCode(t, secret, g.Clock.Now())}, "next": {"/dashboard/ipn?status=failed"}})
	if loc := rec.Header().Get("Location"); rec.Code != http.StatusSeeOther || loc != "/dashboard/ipn?status=failed" {
		t.Errorf("verified: %d to %q", rec.Code, loc)
	}
	if count(audit.SignedIn) != 1 {
		t.Errorf("%d signed_in after the code, want 1", count(audit.SignedIn))
	}
	if page := b.get("/dashboard/ipn").Body.String(); !strings.Contains(page, `href="/dashboard/payments"`) || !strings.Contains(page, "TEST MODE") {
		t.Error("no navigation after the code")
	}
}

// A card number typed as the username is neither shown back on the page
// nor kept in clear with the failures counted against it.
func TestSignInWithACardNumberAsUsername(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	for _, typed := range []string{visa, "4242 4242 4242 4242"} {
		req := httptest.NewRequest(http.MethodPost, "/dashboard/sign-in", strings.NewReader(url.Values{"username": {typed}, "password": {"wrong-password-1"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		rec := g.Serve(req)
		if rec.Code != http.StatusUnauthorized || strings.Contains(rec.Body.String(), typed) {
			t.Errorf("signing in as %q: %d, the page shows it again: %v", typed, rec.Code, strings.Contains(rec.Body.String(), typed))
		}
	}
	if n := g.Count(`SELECT COUNT(*) FROM auth_failures WHERE subject LIKE '%4242%'`); n != 0 {
		t.Errorf("%d auth_failures rows hold the card number", n)
	}
	if n := g.Count(`SELECT COUNT(*) FROM auth_failures WHERE subject = 'dashboard:not-a-merchant-code'`); n != 1 {
		t.Errorf("%d lock rows for usernames no merchant can have, want their one", n)
	}
}

// Sign-in failures lock the dashboard after 10, with a page saying when to
// come back, for the right password too; the answer never says whether the
// merchant exists; the API's tokens are not locked by them.
func TestSignInLockout(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Locked Shop")
	signedIn := signIn(t, g, c) // before the stranger starts
	try := func(user, pass string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/dashboard/sign-in", strings.NewReader(url.Values{"username": {user}, "password": {pass}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = "198.51.100.1:1234"
		return g.Serve(req)
	}
	unknown := try("1234567890", "wrong-password-1")
	wrong := try(c.Username, "wrong-password-1")
	if unknown.Code != http.StatusUnauthorized || wrong.Code != http.StatusUnauthorized ||
		!strings.Contains(unknown.Body.String(), "The username or password is not right.") || !strings.Contains(wrong.Body.String(), "The username or password is not right.") {
		t.Fatalf("unknown merchant %d, wrong password %d: the answers differ", unknown.Code, wrong.Code)
	}
	for i := 2; i <= 10; i++ {
		g.Clock.Advance(time.Minute) // past the address's throttle
		try(c.Username, "wrong-password-1")
	}
	g.Clock.Advance(time.Minute)
	rec := try(c.Username, c.Password)
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "Try again after") {
		t.Errorf("right password after 10 failures: %d\n%s", rec.Code, rec.Body)
	}
	g.Token(c, merchant.Test) // the API is not locked by dashboard failures

	// The merchant code is public: a stranger's failed sign-ins must not
	// keep the signed-in merchant from re-entering its password to rotate
	// a leaked key or change that password.
	if rec := signedIn.post("/dashboard/developers/regenerate", url.Values{"confirm": {"yes"}, "password": {c.Password}}); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Body.String(), `id="new-key"`) {
		t.Errorf("a signed-in merchant's key rotation while strangers lock the sign-in: %d", rec.Code)
	}
	// Its own wrong passwords are still counted, apart.
	for i := 1; i <= 10; i++ {
		g.Clock.Advance(time.Minute)
		signedIn.post("/dashboard/developers/regenerate", url.Values{"confirm": {"yes"}, "password": {"wrong-password-1"}})
	}
	g.Clock.Advance(time.Minute)
	if rec := signedIn.post("/dashboard/developers/regenerate", url.Values{"confirm": {"yes"}, "password": {c.Password}}); rec.Code != http.StatusTooManyRequests {
		t.Errorf("the right password after 10 wrong ones in a session: %d, want 429", rec.Code)
	}
}

// Password changes: the rules, and every other session ends.
func TestPasswordChange(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Password Shop")
	b, other := signIn(t, g, c), signIn(t, g, c)
	// It is the API's password too: the form says so before, and the note
	// after, as a change that stops the shop's token requests stops its
	// payments.
	if page := b.get("/dashboard/security").Body.String(); !strings.Contains(page, `id="password-is-the-apis"`) || !strings.Contains(page, "POST /identity/v2/token") {
		t.Error("the password form does not say it is the API's password too")
	}
	for name, form := range map[string]url.Values{
		"too short":       {"current": {c.Password}, "new": {"short1"}, "confirm": {"short1"}},
		"no digit":        {"current": {c.Password}, "new": {"longpasswordonly"}, "confirm": {"longpasswordonly"}},
		"no letter":       {"current": {c.Password}, "new": {"123456789012"}, "confirm": {"123456789012"}},
		"different twice": {"current": {c.Password}, "new": {"newpassword123"}, "confirm": {"newpassword124"}},
		"wrong current":   {"current": {"wrong-password-1"}, "new": {"newpassword123"}, "confirm": {"newpassword123"}},
		"same as current": {"current": {c.Password}, "new": {c.Password}, "confirm": {c.Password}},
		// Sign-in refuses these, so the merchant could never sign in again.
		"a tab":          {"current": {c.Password}, "new": {"correct horse 12\tbattery"}, "confirm": {"correct horse 12\tbattery"}},
		"over 200 bytes": {"current": {c.Password}, "new": {strings.Repeat("a1", 101)}, "confirm": {strings.Repeat("a1", 101)}},
	} {
		if rec := b.post("/dashboard/security/password", form); rec.Code < 400 {
			t.Errorf("%s: %d, want refused", name, rec.Code)
		}
	}
	if rec := b.post("/dashboard/security/password", url.Values{"current": {c.Password}, "new": {"newpassword123"}, "confirm": {"newpassword123"}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("valid change: %d %s", rec.Code, rec.Body)
	}
	if rec := other.get("/dashboard/payments"); rec.Code != http.StatusSeeOther {
		t.Errorf("another session after the password change: %d, want signed out", rec.Code)
	}
	if rec := b.get("/dashboard/payments"); rec.Code != http.StatusOK {
		t.Errorf("the session that changed it: %d", rec.Code)
	}
	if page := b.get("/dashboard/security").Body.String(); !strings.Contains(page, "must now send the new password for tokens") {
		t.Error("after the change the page does not say the shop's server must send the new password")
	}
	c.Password = "newpassword123"
	signIn(t, g, c)
}

// Replacing the notification secret takes the password and a ticked box:
// without the box nothing changes.
func TestReplaceNotificationSecret(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Secret Shop")
	b := signIn(t, g, c)
	secretOf := func() string {
		rec := b.post("/dashboard/developers/reveal-secret", url.Values{"password": {c.Password}})
		v, _, _ := strings.Cut(rec.Body.String()[strings.Index(rec.Body.String(), `id="secret">`)+len(`id="secret">`):], "<")
		return v
	}
	before := secretOf()
	if rec := b.post("/dashboard/developers/rotate-secret", url.Values{"password": {c.Password}}); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "Tick the box") || secretOf() != before {
		t.Errorf("a replace without the box: %d, and the secret changed: %t", rec.Code, secretOf() != before)
	}
	if rec := b.post("/dashboard/developers/rotate-secret", url.Values{"confirm": {"yes"}, "overlap": {"7d"}, "password": {c.Password}}); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "Choose how long") || secretOf() != before {
		t.Errorf("a replace with an overlap not offered: %d, and the secret changed: %t", rec.Code, secretOf() != before)
	}
	settings := func() merchant.Settings {
		st, err := g.Store.Settings(t.Context(), c.MerchantCode, merchant.Test)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	// Without a choice (a page from before it), and with each offered.
	for _, tc := range []struct {
		overlap []string
		for_    time.Duration
	}{{nil, 24 * time.Hour}, {[]string{"1h"}, time.Hour}, {[]string{"24h"}, 24 * time.Hour}, {[]string{"0"}, 0}} {
		sent := g.Clock.Now()
		rec := b.post("/dashboard/developers/rotate-secret", url.Values{"confirm": {"yes"}, "overlap": tc.overlap, "password": {c.Password}})
		answered := g.Clock.Now()
		after, st := secretOf(), settings()
		if rec.Code != http.StatusOK || after == before || !strings.Contains(rec.Body.String(), after) || st.NotificationSecret != html.UnescapeString(after) {
			t.Errorf("a confirmed replace (overlap %q): %d, secret %q then %q", tc.overlap, rec.Code, before, after)
		}
		signing := st.SigningSecrets(g.Clock.Now())
		page := b.get("/dashboard/developers").Body.String()
		if tc.for_ == 0 {
			if len(signing) != 1 || !strings.Contains(rec.Body.String(), "signed with this secret only") || strings.Contains(page, "also signs") {
				t.Errorf("a replace with no overlap: signing with %d secrets, the answer says:\n%s", len(signing), rec.Body.String())
			}
		} else if len(signing) != 2 || signing[1] != html.UnescapeString(before) ||
			st.PreviousUntil.Before(sent.Add(tc.for_).Truncate(time.Millisecond)) || st.PreviousUntil.After(answered.Add(tc.for_)) ||
			!strings.Contains(rec.Body.String(), "with the old one too") || !strings.Contains(page, "The secret it replaced also signs notifications until") {
			t.Errorf("a replace with an overlap of %s: previous %q until %s, signing with %d; the answer says:\n%s", tc.for_, st.PreviousSecret, st.PreviousUntil, len(signing), rec.Body.String())
		}
		before = after
	}
}

// A replaced secret that still signs can be stopped before its time,
// once the box says the receivers check the new one and the password is
// given; the page then no longer offers it.
func TestEndSecretOverlap(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Overlap Shop")
	b := signIn(t, g, c)
	const offer = `action="/dashboard/developers/end-overlap"`
	if page := b.get("/dashboard/developers").Body.String(); strings.Contains(page, offer) {
		t.Error("the page offers to end an overlap before any rotation")
	}
	if rec := b.post("/dashboard/developers/rotate-secret", url.Values{"confirm": {"yes"}, "overlap": {"24h"}, "password": {c.Password}}); rec.Code != http.StatusOK {
		t.Fatalf("rotate: %d", rec.Code)
	}
	signing := func() int {
		st, err := g.Store.Settings(t.Context(), c.MerchantCode, merchant.Test)
		if err != nil {
			t.Fatal(err)
		}
		return len(st.SigningSecrets(g.Clock.Now()))
	}
	if page := b.get("/dashboard/developers").Body.String(); !strings.Contains(page, offer) || signing() != 2 {
		t.Fatalf("after a rotation with an overlap, signing with %d; the page:\n%s", signing(), page)
	}
	for _, tc := range []struct {
		form url.Values
		code int
		says string
	}{
		{url.Values{"password": {c.Password}}, http.StatusBadRequest, "Tick the box"},
		{url.Values{"confirm": {"yes"}, "password": {"not-" + c.Password}}, http.StatusUnauthorized, "The password is not right."},
	} {
		if rec := b.post("/dashboard/developers/end-overlap", tc.form); rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.says) || signing() != 2 {
			t.Errorf("ending it with %v: %d, signing with %d; want %d saying %q", tc.form, rec.Code, signing(), tc.code, tc.says)
		}
	}
	// The page names the overlap it shows; a rotation since (another tab,
	// the CLI) began another, which the stale page must not end.
	page := b.get("/dashboard/developers").Body.String()
	shown := servertest.ParsePage(page)
	form, ok := shown.FormTo("/dashboard/developers/end-overlap")
	if !ok || form.Values()["until"] == "" {
		t.Fatalf("the end-overlap form names no overlap:\n%s", page)
	}
	until := form.Values()["until"]
	g.Clock.Advance(time.Second) // the next rotation's overlap ends later
	if rec := b.post("/dashboard/developers/rotate-secret", url.Values{"confirm": {"yes"}, "overlap": {"24h"}, "password": {c.Password}}); rec.Code != http.StatusOK {
		t.Fatalf("rotate again: %d", rec.Code)
	}
	if rec := b.post("/dashboard/developers/end-overlap", url.Values{"confirm": {"yes"}, "until": {until}, "password": {c.Password}}); rec.Code != http.StatusConflict ||
		!strings.Contains(rec.Body.String(), "replaced again since this page was shown") || signing() != 2 {
		t.Errorf("ending from a page shown before another rotation: %d, signing with %d\n%s", rec.Code, signing(), rec.Body.String())
	}
	form, _ = servertest.ParsePage(b.get("/dashboard/developers").Body.String()).FormTo("/dashboard/developers/end-overlap")
	rec := b.post("/dashboard/developers/end-overlap", url.Values{"confirm": {"yes"}, "until": {form.Values()["until"]}, "password": {c.Password}})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "The replaced secret no longer signs") || signing() != 1 {
		t.Errorf("ending it: %d, signing with %d; the answer:\n%s", rec.Code, signing(), rec.Body.String())
	}
	if page := b.get("/dashboard/developers").Body.String(); strings.Contains(page, offer) || strings.Contains(page, "also signs") {
		t.Errorf("the page after the overlap ended still offers it:\n%s", page)
	}
	if rec := b.post("/dashboard/developers/end-overlap", url.Values{"confirm": {"yes"}, "password": {c.Password}}); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Body.String(), "No replaced secret was signing") {
		t.Errorf("ending it again: %d\n%s", rec.Code, rec.Body.String())
	}

	// Over by the dashboard's clock when the form comes back: nothing is
	// ended, whatever the machine's clock says.
	if rec := b.post("/dashboard/developers/rotate-secret", url.Values{"confirm": {"yes"}, "overlap": {"1h"}, "password": {c.Password}}); rec.Code != http.StatusOK {
		t.Fatalf("rotate with an hour's overlap: %d", rec.Code)
	}
	form, _ = servertest.ParsePage(b.get("/dashboard/developers").Body.String()).FormTo("/dashboard/developers/end-overlap")
	for range 7 { // the session stays alive meanwhile
		g.Clock.Advance(10 * time.Minute)
		b.get("/dashboard/developers")
	}
	rec = b.post("/dashboard/developers/end-overlap", url.Values{"confirm": {"yes"}, "until": {form.Values()["until"]}, "password": {c.Password}})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "No replaced secret was signing") {
		t.Errorf("ending an overlap over by the dashboard's clock: %d\n%s", rec.Code, rec.Body.String())
	}
	if st, err := g.Store.Settings(t.Context(), c.MerchantCode, merchant.Test); err != nil || st.PreviousSecret == "" {
		t.Errorf("the replaced secret of an overlap over by the dashboard's clock was ended (%v)", err)
	}
}

// Live mode needs two-step verification, to read as much as to change
// (decisions.md §2): the switch leads to Security instead, and a session
// already in live mode without it sees no live page and changes nothing.
func TestLiveModeNeedsSecondFactor(t *testing.T) {
	g := servertest.Start(t, servertest.Options{LiveAcquirer: sim.New(secret.RandomBytes(32), nil)})
	c := g.Onboard("Live Shop")
	b := signIn(t, g, c)
	rec := b.do(http.MethodPost, "/dashboard/mode", url.Values{"mode": {"live"}, "csrf": {b.csrf}}, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/dashboard/security" {
		t.Fatalf("switching to live without a second factor: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	if page := b.get("/dashboard/security").Body.String(); !strings.Contains(page, `<p class="error" role="alert">Live mode needs two-step verification`) || strings.Contains(page, "LIVE MODE") {
		t.Errorf("the security page after the refused switch, the refusal as one:\n%s", page)
	}
	if page := b.get("/dashboard/").Body.String(); strings.Contains(page, "LIVE MODE") {
		t.Error("the refused switch took")
	}

	// A session switched to live mode under a release that did not ask.
	sess, err := g.Store.SessionByHash(t.Context(), session.Hash(b.cookie.Value), g.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	sess.Mode = merchant.Live
	if err := g.Store.TouchSession(t.Context(), sess); err != nil {
		t.Fatal(err)
	}
	liveBill := g.CreateBill(c, g.Token(c, merchant.Live), "LIVE1", "10")
	for _, path := range []string{"/dashboard/", "/dashboard/payments", "/dashboard/payments/" + liveBill.Reference, "/dashboard/payments.csv",
		"/dashboard/developers", "/dashboard/settings/ipn", "/dashboard/ipn", "/dashboard/audit"} {
		rec := b.get(path)
		if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/dashboard/security" || strings.Contains(rec.Body.String(), liveBill.Reference) {
			t.Errorf("GET %s in live mode without a second factor: %d to %q", path, rec.Code, rec.Header().Get("Location"))
		}
	}
	if rec := b.get("/dashboard/security"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "LIVE MODE") {
		t.Errorf("the security page in live mode: %d", rec.Code)
	}
	b.formMode = "live"
	for path, form := range modeChanges(c) {
		if rec := b.post(path, form); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "two-step") {
			t.Errorf("POST %s in live mode without a second factor: %d", path, rec.Code)
		}
	}
	g.Token(c, merchant.Live) // the live key still works
	if st, err := g.Store.Settings(t.Context(), c.MerchantCode, merchant.Live); err != nil || st.IPN.URL != "" || len(st.CallbackOrigins) != 0 {
		t.Errorf("live settings changed: %+v, %v", st, err)
	}
	// Back to test mode works without it.
	if rec := b.post("/dashboard/mode", url.Values{"mode": {"test"}}); rec.Code != http.StatusSeeOther {
		t.Errorf("back to test: %d", rec.Code)
	}
	if rec := b.get("/dashboard/payments"); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "LIVE MODE") {
		t.Errorf("test mode after switching back: %d", rec.Code)
	}
}

// With two-step verification on, a sign-in asks for a code before any
// page; a wrong code is refused; a recovery code works once; live-mode
// changes then go through.
func TestSecondFactor(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Two Step Shop")
	const secret = totpSecret
	recovery := "ABCDE-FGHJK"
	sum := sha256.Sum256([]byte("ABCDEFGHJK"))
	enableTOTP(t, g, c, hex.EncodeToString(sum[:]))
	b := signIn(t, g, c)
	if page := b.get("/dashboard/payments").Body.String(); !strings.Contains(page, `action="/dashboard/verify"`) {
		t.Fatalf("a page before the second factor:\n%s", page)
	}
	if rec := b.post("/dashboard/verify", url.Values{"code": {"000000"}}); rec.Code != http.StatusUnauthorized {
		t.Errorf("wrong code: %d", rec.Code)
	}
	code, err := totp.GenerateCode(secret, g.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rec := b.post("/dashboard/verify", url.Values{"code": {code}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("right code: %d", rec.Code)
	}
	// A code opens one sign-in: not a second session, even within its step.
	if rec := signIn(t, g, c).post("/dashboard/verify", url.Values{"code": {code}}); rec.Code != http.StatusUnauthorized {
		t.Errorf("the same code in another session: %d, want 401", rec.Code)
	}
	if rec := b.get("/dashboard/payments"); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `action="/dashboard/verify"`) {
		t.Errorf("after the code: %d", rec.Code)
	}
	b.post("/dashboard/mode", url.Values{"mode": {"live"}})
	if rec := b.post("/dashboard/developers/regenerate", url.Values{"confirm": {"yes"}, "password": {c.Password}}); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="new-key"`) {
		t.Errorf("live key regeneration with the second factor: %d", rec.Code)
	}

	// A recovery code stands in for the app once, and the log says one
	// was spent.
	for i, want := range []int{http.StatusSeeOther, http.StatusUnauthorized} {
		other := signIn(t, g, c)
		if rec := other.post("/dashboard/verify", url.Values{"code": {recovery}}); rec.Code != want {
			t.Errorf("recovery code, use %d: %d, want %d", i+1, rec.Code, want)
		}
	}
	if n := g.Count(`SELECT COUNT(*) FROM audit_events WHERE merchant_code = ? AND action = ? AND detail = ?`,
		c.MerchantCode, audit.SignedIn, "password and a recovery code"); n != 1 {
		t.Errorf("%d sign-ins logged as made with a recovery code, want 1", n)
	}
}

// The audit log covers both modes: the live settings it names are shown
// only to a session that passed two-step verification, as live mode is.
func TestAuditLogHidesLiveDetailsWithoutSecondFactor(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Audit Modes Shop")
	const liveURL = "https://93.184.215.14/live-ipn"
	if _, err := g.Store.SetIPN(t.Context(), c.MerchantCode, merchant.Live, merchant.IPNConfig{URL: liveURL, Username: "liveuser", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Store.SetIPN(t.Context(), c.MerchantCode, merchant.Test, merchant.IPNConfig{URL: "https://shop.example/test-ipn", Username: "u", Password: "p"}); err != nil {
		t.Fatal(err)
	}
	const liveOrigin = "https://live-shop.example"
	if err := g.Store.SetCallbackOrigins(t.Context(), c.MerchantCode, merchant.Live, []string{liveOrigin}); err != nil {
		t.Fatal(err)
	}
	if _, err := merchant.RotateKey(t.Context(), g.Store, c.MerchantCode, merchant.Live, g.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	liveKey, err := g.Store.ActiveAPIKey(t.Context(), c.MerchantCode, merchant.Live)
	if err != nil {
		t.Fatal(err)
	}
	page := signIn(t, g, c).get("/dashboard/audit").Body.String()
	for _, live := range []string{liveURL, "liveuser", liveOrigin, liveKey.ID} {
		if strings.Contains(page, live) {
			t.Errorf("the audit log without a second factor shows %q", live)
		}
	}
	if strings.Count(page, "(live mode: shown after two-step verification)") != 3 || !strings.Contains(page, "https://shop.example/test-ipn") {
		t.Errorf("the audit log without a second factor:\n%s", page)
	}
	if page := signInTwoStep(t, g, c).get("/dashboard/audit").Body.String(); !strings.Contains(page, liveURL) {
		t.Errorf("the audit log with the second factor does not show the live settings:\n%s", page)
	}
}

// A tab whose session ended, reloaded after signing in elsewhere, goes on
// to its page; a form posted before the code changes nothing and says so.
func TestSignedInTabFollowsNextAndPendingFormsAreRefused(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Next Shop")
	b := signIn(t, g, c)
	if rec := b.get("/dashboard/?next=" + url.QueryEscape("/dashboard/ipn?status=failed")); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/dashboard/ipn?status=failed" {
		t.Errorf("a signed-in session with next: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	if rec := b.get("/dashboard/?next=https://evil.example/"); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Overview") {
		t.Errorf("a signed-in session with a foreign next: %d to %q", rec.Code, rec.Header().Get("Location"))
	}
	enableTOTP(t, g, c)
	pending := signIn(t, g, c)
	rec := pending.post("/dashboard/developers/regenerate", url.Values{"confirm": {"yes"}, "password": {c.Password}})
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "nothing was changed") {
		t.Errorf("a form posted before the code: %d", rec.Code)
	}
	g.Token(c, merchant.Test) // the test key still works
}

// A form from a page shown in test mode, posted after another tab switched
// the session to live, changes nothing: "Regenerate the test key" must not
// revoke the live key that takes the merchant's real payments.
func TestStaleTabActsOnItsOwnModeOnly(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Two Tabs Shop")
	enableTOTP(t, g, c)
	tab := signIn(t, g, c)
	if rec := tab.post("/dashboard/verify", url.Values{"code": {mustCode(t, "JBSWY3DPEHPK3PXP", g.Clock.Now())}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("verify: %d", rec.Code)
	}
	liveToken := g.Token(c, merchant.Live)
	testPage := tab.get("/dashboard/developers")
	if !strings.Contains(testPage.Body.String(), `name="form_mode" value="test"`) {
		t.Fatalf("the developers page does not say which mode its forms are for")
	}
	stale := *tab // the test-mode tab
	tab.post("/dashboard/mode", url.Values{"mode": {"live"}})
	for path, form := range modeChanges(c) {
		if form == nil {
			form = url.Values{}
		}
		form.Set("form_mode", "test") // what the test-mode page's form carries
		if rec := stale.post(path, form); rec.Code != http.StatusConflict || !strings.Contains(rec.Body.String(), "live mode now") {
			t.Errorf("%s from the test-mode tab after the switch: %d, want 409", path, rec.Code)
		}
	}
	if rec := g.Serve(servertest.QueryRequest(liveToken, "NOSUCHBILL01")); rec.Code == http.StatusUnauthorized {
		t.Error("the live key's token stopped working: the stale tab regenerated the live key")
	}
	// The tab in the mode it shows acts.
	if rec := tab.post("/dashboard/developers/regenerate", url.Values{"confirm": {"yes"}, "password": {c.Password}}); rec.Code != http.StatusOK {
		t.Errorf("regenerate from the live page: %d", rec.Code)
	}
}

// A bill page's reference that is not one (bytes that are not UTF-8, a NUL,
// the wrong length) is a 404 like a missing bill, on both stores: never a
// 500 from PostgreSQL refusing the bytes.
func TestBillPageOfANonReference(t *testing.T) {
	stores := map[string]servertest.Options{"SQLite": {}}
	if base := os.Getenv("KADI_TEST_DATABASE_URL"); base != "" {
		stores["PostgreSQL"] = servertest.Options{DatabaseURL: storetest.FreshSchema(t, base)}
	}
	for name, opts := range stores {
		t.Run(name, func(t *testing.T) {
			g := servertest.Start(t, opts)
			b := signIn(t, g, g.Onboard("Odd Links Shop"))
			for _, ref := range []string{"%FF", "%00", "A%C3", "ABCDEFGHJK%FF", "ABCDEFGHJKMN%00"} {
				if rec := b.get("/dashboard/payments/" + ref); rec.Code != http.StatusNotFound {
					t.Errorf("bill page %s: %d, want 404", ref, rec.Code)
				}
				if rec := b.post("/dashboard/payments/"+ref+"/resend-ipn", nil); rec.Code != http.StatusNotFound {
					t.Errorf("resend of %s: %d, want 404", ref, rec.Code)
				}
			}
		})
	}
}

// Wrong two-step codes are counted: after ten, even the right code is
// refused until the lock ends, in every session (three codes of a million
// are good at any moment: uncounted, guesses find one in minutes).
func TestSecondFactorGuessesAreCounted(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Guessed Shop")
	const secret = totpSecret
	enableTOTP(t, g, c)
	b := signIn(t, g, c)
	right := func() string {
		code, err := totp.GenerateCode(secret, g.Clock.Now())
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	wrong := func() string { // a code of no step near now
		for n := 0; ; n++ {
			if code := fmt.Sprintf("%06d", n); code != right() && code != mustCode(t, secret, g.Clock.Now().Add(-30*time.Second)) &&
				code != mustCode(t, secret, g.Clock.Now().Add(30*time.Second)) {
				return code
			}
		}
	}
	for i := 1; i <= 10; i++ {
		if rec := b.post("/dashboard/verify", url.Values{"code": {wrong()}}); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong code %d: %d, want 401", i, rec.Code)
		}
	}
	rec := b.post("/dashboard/verify", url.Values{"code": {right()}})
	if rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "Too many wrong codes") {
		t.Fatalf("right code after ten wrong ones: %d, want 429\n%s", rec.Code, rec.Body)
	}
	if rec := signIn(t, g, c).post("/dashboard/verify", url.Values{"code": {right()}}); rec.Code != http.StatusTooManyRequests {
		t.Errorf("right code from a new session during the lock: %d, want 429", rec.Code)
	}
	g.Clock.Advance(31 * time.Minute)
	b = signIn(t, g, c)
	if rec := b.post("/dashboard/verify", url.Values{"code": {right()}}); rec.Code != http.StatusSeeOther {
		t.Errorf("right code after the lock: %d, want 303", rec.Code)
	}
}

// checkQRDrawn decodes the enrolment page's QR code image and checks it
// is drawn across the whole picture: the three finder patterns in their
// corners, not one pixel a module in the top-left (what rsc.io/qr's Image
// drew: no app could scan it).
func checkQRDrawn(t *testing.T, page string) {
	t.Helper()
	m := regexp.MustCompile(`src="data:image/png;base64,([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no QR code image on the enrolment page")
	}
	raw, err := base64.StdEncoding.DecodeString(html.UnescapeString(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	black := func(x0, y0, x1, y1 int) bool {
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				if r, _, _, _ := img.At(x, y).RGBA(); r < 0x8000 {
					return true
				}
			}
		}
		return false
	}
	w, h := b.Dx(), b.Dy()
	if w < 150 || !black(0, 0, w/2, h/2) || !black(w/2, 0, w, h/2) || !black(0, h/2, w/2, h) {
		t.Errorf("the QR code is not drawn across its %dx%d image: no app could scan it", w, h)
	}
}

func mustCode(t *testing.T, secret string, at time.Time) string {
	t.Helper()
	code, err := totp.GenerateCode(secret, at)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// Turning two-step verification on takes the password as well as a code
// (a session left open must not put the merchant behind someone else's
// app), ends every other session, spends the code, and cannot replace a
// factor already on.
func TestSecondFactorEnrolment(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Enrolling Shop")
	b, other := signIn(t, g, c), signIn(t, g, c)
	page := b.post("/dashboard/security/totp/start", nil).Body.String()
	m := regexp.MustCompile(`id="totp-secret">([A-Z2-7]+)<`).FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `src="data:image/png;base64,`) {
		t.Fatalf("enrolment page without a secret or its QR code:\n%s", page)
	}
	secret := m[1]
	checkQRDrawn(t, page)
	code := mustCode(t, secret, g.Clock.Now())
	for name, tt := range map[string]struct {
		form url.Values
		want int
	}{
		"no password":    {url.Values{"secret": {secret}, "code": {code}}, http.StatusUnauthorized},
		"wrong password": {url.Values{"secret": {secret}, "code": {code}, "password": {"wrong-password-1"}}, http.StatusUnauthorized},
		"wrong code":     {url.Values{"secret": {secret}, "code": {"12345"}, "password": {c.Password}}, http.StatusBadRequest},
	} {
		rec := b.post("/dashboard/security/totp/confirm", tt.form)
		if rec.Code != tt.want || !strings.Contains(rec.Body.String(), `src="data:image/png;base64,`) {
			t.Errorf("%s: %d, want %d with the QR code shown again", name, rec.Code, tt.want)
		}
		if _, on, err := g.Store.TOTP(t.Context(), c.MerchantCode); err != nil || !on.IsZero() {
			t.Fatalf("%s: two-step verification is on (%v)", name, err)
		}
	}
	rec := b.post("/dashboard/security/totp/confirm", url.Values{"secret": {secret}, "code": {code}, "password": {c.Password}})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `id="recovery-codes"`) {
		t.Fatalf("confirmed: %d\n%s", rec.Code, rec.Body)
	}
	// The page that shows the codes says the factor is on, not "Off" with
	// a button to set it up again.
	if body := rec.Body.String(); !strings.Contains(body, "<p>On. Live mode needs it.</p>") || strings.Contains(body, `id="start-totp"`) {
		t.Errorf("the page after turning it on contradicts itself:\n%s", body)
	}
	if rec := other.get("/dashboard/payments"); rec.Code != http.StatusSeeOther {
		t.Errorf("another session after enrolment: %d, want signed out", rec.Code)
	}
	if rec := b.get("/dashboard/payments"); rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), `action="/dashboard/verify"`) {
		t.Errorf("the enrolling session: %d", rec.Code)
	}
	if rec := signIn(t, g, c).post("/dashboard/verify", url.Values{"code": {code}}); rec.Code != http.StatusUnauthorized {
		t.Errorf("the enrolment code again at sign-in: %d, want 401", rec.Code)
	}
	for _, path := range []string{"/dashboard/security/totp/start", "/dashboard/security/totp/confirm"} {
		form := url.Values{"secret": {"KRSXG5CTMVRXEZLU"}, "code": {mustCode(t, "KRSXG5CTMVRXEZLU", g.Clock.Now())}, "password": {c.Password}}
		if rec := b.post(path, form); rec.Code != http.StatusConflict {
			t.Errorf("%s with two-step on: %d, want 409", path, rec.Code)
		}
	}
	if sec, _, _ := g.Store.TOTP(t.Context(), c.MerchantCode); sec != secret {
		t.Errorf("the secret was replaced")
	}
}

// Two sessions confirming their own new secrets at once (each spends the
// password check's time after reading the factor off): one wins, the other
// hears 409, and the secret and recovery codes kept are the winner's. And
// a secret of the browser's own choosing, shorter than the ones drawn, is
// refused.
func TestSecondFactorEnrolmentRace(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Racing Shop")
	secretOf := regexp.MustCompile(`id="totp-secret">([A-Z2-7]+)<`)
	var sessions [2]*browser
	var secrets, codes [2]string
	for i := range sessions {
		sessions[i] = signIn(t, g, c)
		m := secretOf.FindStringSubmatch(sessions[i].post("/dashboard/security/totp/start", nil).Body.String())
		if m == nil {
			t.Fatal("no secret on the enrolment page")
		}
		secrets[i], codes[i] = m[1], mustCode(t, m[1], g.Clock.Now())
	}
	weak := "AAAAAAAA"
	rec := sessions[0].post("/dashboard/security/totp/confirm", url.Values{"secret": {weak}, "code": {mustCode(t, weak, g.Clock.Now())}, "password": {c.Password}})
	if rec.Code != http.StatusBadRequest {
		t.Errorf("a 5-byte secret of the browser's choosing: %d, want 400", rec.Code)
	}
	var recs [2]*httptest.ResponseRecorder
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			recs[i] = sessions[i].post("/dashboard/security/totp/confirm",
				url.Values{"secret": {secrets[i]}, "code": {codes[i]}, "password": {c.Password}})
		})
	}
	wg.Wait()
	winner := -1
	for i, rec := range recs {
		switch rec.Code {
		case http.StatusOK:
			if winner >= 0 {
				t.Fatal("both sessions turned two-step verification on")
			}
			winner = i
		case http.StatusConflict:
		default:
			t.Fatalf("session %d: %d", i, rec.Code)
		}
	}
	if winner < 0 {
		t.Fatal("neither session turned two-step verification on")
	}
	if sec, _, _ := g.Store.TOTP(t.Context(), c.MerchantCode); sec != secrets[winner] {
		t.Errorf("the secret kept is not the one the winning session was shown")
	}
	recovery := regexp.MustCompile(`[A-Z0-9]{5}-[A-Z0-9]{5}`).FindAllString(recs[winner].Body.String(), -1)
	if len(recovery) == 0 {
		t.Fatal("no recovery codes shown")
	}
	if rec := signIn(t, g, c).post("/dashboard/verify", url.Values{"code": {recovery[0]}}); rec.Code != http.StatusSeeOther {
		t.Errorf("the winner's recovery code at sign-in: %d, want 303", rec.Code)
	}
}

// The payments list: filters, keyset pages that never repeat or skip a
// bill, and the CSV export of the same list.
func TestPaymentsListAndExport(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("List Shop")
	tok := g.Token(c, merchant.Test)
	var refs []string
	for i := range 120 {
		b := g.CreateBill(c, tok, fmt.Sprintf("LIST%d", i), "10")
		refs = append(refs, b.Reference)
		g.Clock.Advance(time.Second)
	}
	paid, callback := g.Pay(c, tok, "LISTPAID", "25.50", servertest.Card{Number: visa, CVV: "737"})
	nairobi, err := time.LoadLocation("Africa/Nairobi") // servertest's default zone
	if err != nil {
		t.Fatal(err)
	}
	paidAt := g.Clock.Now().In(nairobi)
	g.Clock.Advance(time.Second)
	declined, _ := g.Pay(c, tok, "LISTDECLINED", "9", servertest.Card{Number: "4000000000000002", CVV: "123"})
	refs = append(refs, declined.Reference)
	b := signIn(t, g, c)
	seen := map[string]bool{}
	next := "/dashboard/payments"
	for pages := 0; next != ""; pages++ {
		if pages > 5 {
			t.Fatal("the pages never end")
		}
		body := b.get(next).Body.String()
		for _, m := range billLink.FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Errorf("bill %s on two pages", m[1])
			}
			seen[m[1]] = true
		}
		next = ""
		if m := nextLink.FindStringSubmatch(body); m != nil {
			next = html.UnescapeString(m[1])
		}
	}
	if len(seen) != len(refs)+1 {
		t.Errorf("the pages showed %d bills, want %d", len(seen), len(refs)+1)
	}
	if body := b.get("/dashboard/payments?status=paid").Body.String(); !strings.Contains(body, paid.Reference) || strings.Contains(body, refs[0]) {
		t.Error("status filter")
	}
	// Each row says when the bill was paid and with which card; a
	// declined attempt shows its card, and no paid time.
	for q, want := range map[string]string{
		"LISTPAID":     `<td><time datetime="` + paidAt.Format(time.RFC3339) + `">` + paidAt.Format("2 Jan 2006 15:04") + " EAT</time></td><td>Visa&nbsp;····&nbsp;4242</td>",
		"LISTDECLINED": "<td>–</td><td>Visa&nbsp;····&nbsp;0002</td>",
		"LIST7":        "<td>–</td><td>–</td>",
	} {
		if body := b.get("/dashboard/payments?q=" + q).Body.String(); !strings.Contains(body, want) {
			t.Errorf("the row of %s lacks %q", q, want)
		}
	}
	if body := b.get("/dashboard/payments?q=4242").Body.String(); !strings.Contains(body, paid.Reference) || strings.Contains(body, refs[5]) {
		t.Error("search by the card's last four")
	}
	if body := b.get("/dashboard/payments?q=NOSUCHORDER").Body.String(); !strings.Contains(body, "No payments match this filter.") || strings.Contains(body, "No payments yet") {
		t.Error("a filter that matches nothing says there are no payments at all")
	}
	if body := b.get("/dashboard/payments?q=LIST7").Body.String(); !strings.Contains(body, refs[7]) || strings.Contains(body, refs[8]) {
		t.Error("search by order reference")
	}
	for _, bad := range []string{"status=lost", "from=yesterday", "q=%3Cscript%3E", "after=1_x"} {
		if rec := b.get("/dashboard/payments?" + bad); rec.Code != http.StatusBadRequest {
			t.Errorf("filter %s: %d, want 400", bad, rec.Code)
		}
	}
	rec := b.get("/dashboard/payments.csv?status=paid")
	// A byte order mark first, for Excel to read UTF-8 (names came out as
	// "ZoÃ«"), then the header.
	if !strings.HasPrefix(rec.Body.String(), "\ufeffcreated,") {
		t.Errorf("the CSV does not start with a byte order mark and its header: %.20q", rec.Body.String())
	}
	rows, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(rec.Body.String(), "\ufeff"))).ReadAll()
	if err != nil || rec.Header().Get("Content-Type") != "text/csv; charset=utf-8" {
		t.Fatalf("CSV: %v %q", err, rec.Header().Get("Content-Type"))
	}
	if len(rows) != 2 || rows[1][1] != paid.Reference || rows[1][3] != "paid" || rows[1][4] != "25.50" {
		t.Fatalf("CSV of paid bills: %v", rows)
	}
	// When it was paid, the acquirer's reference (the callback's
	// transactionRef, what a bank statement shows) and the card: what a
	// reconciliation matches on.
	wantPaid := []string{paidAt.Format(time.RFC3339), callback["transactionRef"], "Visa", "4242"}
	if got := rows[1][10:]; rows[0][10] != "paid" || callback["transactionRef"] == "" || !slices.Equal(got, wantPaid) {
		t.Errorf("CSV paid columns %v: %v, want %v", rows[0][10:], got, wantPaid)
	}
	all, _ := csv.NewReader(b.get("/dashboard/payments.csv").Body).ReadAll()
	if len(all) != len(refs)+2 {
		t.Errorf("CSV of everything: %d rows, want %d", len(all), len(refs)+2)
	}
	for _, row := range all[1:] {
		if row[1] == declined.Reference && !slices.Equal(row[10:], []string{"", "", "Visa", "0002"}) {
			t.Errorf("CSV row of a declined bill: %v", row[10:])
		}
	}
}

var (
	billLink = regexp.MustCompile(`href="/dashboard/payments/([A-Z0-9]{12})"`)
	nextLink = regexp.MustCompile(`<a href="([^"]+)" rel="next">`)
)

// Every dashboard page carries its length, so that it goes out whole:
// without one, net/http sends a page over 2 KB chunked.
func TestPagesCarryTheirLength(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Length Shop")
	tok := g.Token(c, merchant.Test)
	paid, _ := g.Pay(c, tok, "LENGTH1", "10", servertest.Card{Number: visa, CVV: "737"})
	b := signIn(t, g, c)
	for _, path := range []string{"/dashboard/", "/dashboard/payments", "/dashboard/payments/" + paid.Reference, "/dashboard/developers", "/dashboard/settings/ipn", "/dashboard/ipn", "/dashboard/audit"} {
		rec := b.get(path)
		if rec.Code != http.StatusOK {
			t.Errorf("%s: %d", path, rec.Code)
			continue
		}
		if got, want := rec.Header().Get("Content-Length"), fmt.Sprint(rec.Body.Len()); got != want {
			t.Errorf("%s: Content-Length %q for %s bytes", path, got, want)
		}
	}
}

// An operator lets a merchant who lost its phone and password back in
// (kadi merchant reset-access): the new password signs in without a code,
// the old password and the sessions of before are gone, a sign-in lock
// and the API's lock are lifted, and the reset is in the audit log.
func TestResetAccess(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Lost Phone Shop")
	enableTOTP(t, g, c, "00")
	before := signIn(t, g, c)
	if page := before.get("/dashboard/payments").Body.String(); !strings.Contains(page, `action="/dashboard/verify"`) {
		t.Fatal("two-step verification is not on")
	}
	for i := 0; i < 10; i++ { // a stranger locks the sign-in
		req := httptest.NewRequest(http.MethodPost, "/dashboard/sign-in", strings.NewReader(url.Values{"username": {c.Username}, "password": {"wrong-password-1"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = fmt.Sprintf("198.51.100.%d:1234", i+1)
		g.Serve(req)
	}

	// Its systems kept asking for tokens with a wrong password (the old
	// one, after a reset): its API is locked.
	for i := range 12 {
		req := servertest.TokenRequest(c.Test.APIKey, c.Username, "wrong-password-1")
		req.RemoteAddr = fmt.Sprintf("203.0.113.%d:1234", i+1)
		g.Serve(req)
	}
	if rec := g.Serve(servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password)); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("the API is not locked: %d %s", rec.Code, rec.Body)
	}

	if err := g.Store.ResetAccess(t.Context(), c.MerchantCode, secret.HashPassword("a-new-password-42"), true, g.Clock.Now()); err != nil {
		t.Fatal(err)
	}
	if rec := g.Serve(servertest.TokenRequest(c.Test.APIKey, c.Username, "a-new-password-42")); rec.Code != http.StatusOK {
		t.Errorf("a token with the new password after the reset: %d %s", rec.Code, rec.Body)
	}
	if rec := before.get("/dashboard/payments"); rec.Code != http.StatusSeeOther {
		t.Errorf("a session from before the reset: %d, want sent to sign in", rec.Code)
	}
	old := &browser{t: t, g: g}
	if rec := old.do(http.MethodPost, "/dashboard/sign-in", url.Values{"username": {c.Username}, "password": {c.Password}}, nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("the old password: %d", rec.Code)
	}
	c.Password = "a-new-password-42"
	after := signIn(t, g, c)
	if page := after.get("/dashboard/payments"); page.Code != http.StatusOK || strings.Contains(page.Body.String(), `action="/dashboard/verify"`) {
		t.Errorf("after the reset, the new password opens the dashboard without a code: %d", page.Code)
	}
	if n := g.Count(`SELECT COUNT(*) FROM audit_events WHERE action = 'merchant.access_reset' AND detail = 'password replaced, two-step verification off, sessions ended'`); n != 1 {
		t.Errorf("%d audit rows for the reset", n)
	}
	if err := g.Store.ResetAccess(t.Context(), "1234567890", "", true, g.Clock.Now()); !errors.Is(err, merchant.ErrNotFound) {
		t.Errorf("a reset of no such merchant: %v", err)
	}
}

// The IPN log pages: a full page links to the older ones, which start
// after its last, keep the status filter, and end.
func TestIPNLogPages(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Busy IPN Shop")
	tok := g.Token(c, merchant.Test)
	for i := range 52 {
		g.Pay(c, tok, fmt.Sprintf("PAGE%d", i), "10", servertest.Card{Number: visa, CVV: "123"})
	}
	b := signIn(t, g, c)
	ids := regexp.MustCompile(`<h2>(msg_[0-9a-f]{24}):`)
	next := regexp.MustCompile(`href="(/dashboard/ipn\?[^"]+)" rel="next"`)
	first := b.get("/dashboard/ipn?status=parked").Body.String() // no IPN URL
	more := next.FindStringSubmatch(first)
	if n := len(ids.FindAllStringSubmatch(first, -1)); n != 50 || more == nil || !strings.Contains(more[1], "status=parked") {
		t.Fatalf("first page: %d notifications, next link %v", n, more)
	}
	second := b.get(html.UnescapeString(more[1]))
	got := ids.FindAllStringSubmatch(second.Body.String(), -1)
	if second.Code != http.StatusOK || len(got) != 2 || strings.Contains(first, got[0][1]) || next.MatchString(second.Body.String()) {
		t.Errorf("second page: %d, %d notifications, a next link: %t", second.Code, len(got), next.MatchString(second.Body.String()))
	}
	if rec := b.get("/dashboard/payments/" + strings.ToLower(g.CreateBill(c, tok, "LOWER1", "10").Reference)); rec.Code != http.StatusOK {
		t.Errorf("a bill's page by its reference in lower case: %d", rec.Code)
	}
	if rec := b.get("/dashboard/ipn?before=msg_nope"); rec.Code != http.StatusBadRequest {
		t.Errorf("a malformed before: %d", rec.Code)
	}
}

// Callback origins from the dashboard: one a line, normalised, shown
// back; a bad one is refused with the field kept; an empty list allows
// any callbackUrl again. Live mode's list needs two-step verification.
func TestCallbackOriginsSettings(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Origins Shop")
	b := signIn(t, g, c)
	b.get("/dashboard/settings/ipn")
	if rec := b.post("/dashboard/settings/callbacks", url.Values{"origins": {"https://Shop.example:443\r\nhttp://127.0.0.1:8081, https://shop.example"}}); rec.Code != http.StatusSeeOther {
		t.Fatalf("saving origins: %d\n%s", rec.Code, rec.Body)
	}
	st, err := g.Store.Settings(t.Context(), c.MerchantCode, merchant.Test)
	if err != nil || strings.Join(st.CallbackOrigins, " ") != "https://shop.example http://127.0.0.1:8081" {
		t.Errorf("stored origins %v, %v", st.CallbackOrigins, err)
	}
	if page := b.get("/dashboard/settings/ipn").Body.String(); !strings.Contains(page, "https://shop.example\nhttp://127.0.0.1:8081</textarea>") {
		t.Error("the settings page does not show the saved origins")
	}
	rec := b.post("/dashboard/settings/callbacks", url.Values{"origins": {"https://shop.example/return"}})
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "without a path") || !strings.Contains(rec.Body.String(), "https://shop.example/return</textarea>") {
		t.Errorf("an origin with a path: %d", rec.Code)
	}
	if rec := b.post("/dashboard/settings/callbacks", url.Values{"origins": {""}}); rec.Code != http.StatusSeeOther {
		t.Errorf("clearing the origins: %d", rec.Code)
	}
	if st, _ := g.Store.Settings(t.Context(), c.MerchantCode, merchant.Test); len(st.CallbackOrigins) != 0 {
		t.Errorf("origins after clearing: %v", st.CallbackOrigins)
	}
}

// The audit log pages through every event, newest first, none twice or
// left out, events of one millisecond included.
func TestAuditLogPages(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Audited Shop")
	at := g.Clock.Now().Add(-time.Hour)
	for i := range 205 {
		e := audit.Event{At: at.Add(time.Duration(i/3) * time.Millisecond), MerchantCode: c.MerchantCode, Actor: "test", Action: "test.event", Detail: fmt.Sprint(i)}
		if err := g.Store.RecordAudit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	total := g.Count(`SELECT COUNT(*) FROM audit_events WHERE merchant_code = ?`, c.MerchantCode)
	b := signIn(t, g, c)
	row := regexp.MustCompile(`<tr><td><time [^>]*>[^<]*</time></td><td>([^<]*)</td><td>([^<]*)</td><td class="wrap">([^<]*)</td></tr>`)
	next := regexp.MustCompile(`href="(/dashboard/audit\?[^"]+)" rel="next"`)
	seen := map[string]bool{}
	rows, pages := 0, 0
	for path := "/dashboard/audit"; path != ""; pages++ {
		page := b.get(path).Body.String()
		for _, m := range row.FindAllStringSubmatch(page, -1) {
			if m[2] == "test.event" {
				if seen[m[3]] {
					t.Errorf("event %s shown twice", m[3])
				}
				seen[m[3]] = true
			}
			rows++
		}
		path = ""
		if m := next.FindStringSubmatch(page); m != nil {
			path = html.UnescapeString(m[1])
		}
		if pages > 10 {
			t.Fatal("the pages do not end")
		}
	}
	// Signing in adds events of its own after the count: at least total.
	if len(seen) != 205 || rows < total || pages != 3 {
		t.Errorf("%d test events of 205, %d rows of at least %d, on %d pages", len(seen), rows, total, pages)
	}
	if rec := b.get("/dashboard/audit?before=12_nope"); rec.Code != http.StatusBadRequest {
		t.Errorf("a malformed page: %d", rec.Code)
	}
}

// switchingStore is the real store, with another tab's mode switch landing
// between a request's read of its session and the end of that request.
type switchingStore struct {
	*store.DB
	switchTo merchant.Mode
}

func (s *switchingStore) SessionByHash(ctx context.Context, idHash string, now time.Time) (session.Session, error) {
	sess, err := s.DB.SessionByHash(ctx, idHash, now)
	if err == nil && s.switchTo != "" {
		other := sess
		other.Mode = s.switchTo
		if err := s.DB.TouchSession(ctx, other); err != nil {
			return sess, err
		}
	}
	return sess, err
}

// A page that loads while another tab switches the mode leaves the switch
// as it was made: a request that changes nothing writes back nothing but
// the time it was seen.
func TestPageLoadKeepsAConcurrentModeSwitch(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Two Tab Shop")
	b := signInTwoStep(t, g, c)
	st := &switchingStore{DB: g.Store}
	mux := http.NewServeMux()
	(&dashboard.Handler{Auth: g.Auth, Store: st, IPN: g.IPN, Location: time.UTC, Log: slog.New(slog.DiscardHandler), Now: g.Clock.Now,
		PublicURL: "http://kadi.test"}).Register(mux)
	req := httptest.NewRequest(http.MethodGet, "/dashboard/payments", nil)
	req.AddCookie(b.cookie)
	st.switchTo = merchant.Live
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("the page: %d", rec.Code)
	}
	st.switchTo = ""
	if page := b.get("/dashboard/").Body.String(); !strings.Contains(page, "LIVE MODE") {
		t.Error("the page load undid the other tab's switch to live mode")
	}
}

// Days on Home are the operator's days on either side of a change from
// summer time: a payment at 00:30 on 30 October in New York (still summer
// time then) counts on 30 October, seen in late November (winter time),
// not on the 29th as with today's offset applied to every day.
func TestHomeDaysFollowSummerTime(t *testing.T) {
	g := servertest.Start(t, servertest.Options{TimeZone: "America/New_York"})
	to := func(at time.Time) { g.Clock.Advance(at.Sub(g.Clock.Now())) }
	to(time.Date(2026, time.October, 30, 4, 30, 0, 0, time.UTC)) // 00:30 EDT
	c := g.Onboard("Summer Shop")
	g.Pay(c, g.Token(c, merchant.Test), "DST1", "10", servertest.Card{Number: visa, CVV: "737"})
	to(time.Date(2026, time.November, 25, 17, 0, 0, 0, time.UTC)) // noon EST
	page := signIn(t, g, c).get("/dashboard/").Body.String()
	if !strings.Contains(page, "<title>30 Oct: 1 approved of 1") || strings.Contains(page, "<title>29 Oct: 1 approved") {
		t.Errorf("the chart does not count the payment on 30 October:\n%s", page)
	}
	if !strings.Contains(page, "<title>25 Nov: 0 approved of 0") || strings.Contains(page, "<title>26 Oct:") {
		t.Error("the chart's 30 days do not end today, 25 November")
	}
	// The figures are there for keyboards, touch and screen readers too,
	// not only in the bars' hover titles, and the axis names its ends.
	if !strings.Contains(page, `<tr><td>30 Oct</td><td class="num">1</td><td class="num">1</td><td>KES 10.00</td></tr>`) ||
		!strings.Contains(page, `<p class="axis"><span>27 Oct</span><span>25 Nov</span></p>`) || !strings.Contains(page, `aria-hidden="true"`) {
		t.Errorf("the chart's days are not in a table beside it:\n%s", page)
	}
}

// The payments list (and its CSV) and the audit log read their next-page
// cursors alike: the last row's milliseconds, an underscore, its id. Any
// other cursor is a 400, never a 500 nor a page from somewhere else.
func TestPageCursors(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	b := signIn(t, g, g.Onboard("Cursor Shop"))
	aud := "aud_" + strings.Repeat("0a", 12)
	for _, tt := range []struct {
		path, id, otherCase string
	}{
		{"/dashboard/payments?after=", "ABCDEFGH2345", "abcdefgh2345"},
		{"/dashboard/payments.csv?after=", "ABCDEFGH2345", "abcdefgh2345"},
		{"/dashboard/audit?before=", aud, strings.ToUpper(aud)},
	} {
		for _, good := range []string{"0_" + tt.id, "1767225600000_" + tt.id, "999999999999999_" + tt.id, "007_" + tt.id} {
			if rec := b.get(tt.path + url.QueryEscape(good)); rec.Code != http.StatusOK {
				t.Errorf("%s%s: %d, want 200", tt.path, good, rec.Code)
			}
		}
		for _, bad := range []string{"x", "12", "12_", "_" + tt.id, "12" + tt.id, "-1_" + tt.id, "+1_" + tt.id, " 1_" + tt.id,
			"1.5_" + tt.id, "1e3_" + tt.id, "1000000000000000_" + tt.id, "99999999999999999999_" + tt.id,
			"1_" + tt.otherCase, "1_" + tt.id + "_", "1_" + tt.id + "0", "1_" + tt.id[:len(tt.id)-1], "1__" + tt.id,
			"1_msg_" + strings.Repeat("0a", 12), "1_nope", "1_\xff", "\xff_" + tt.id, "1_" + tt.id + "\x00"} {
			if rec := b.get(tt.path + url.QueryEscape(bad)); rec.Code != http.StatusBadRequest {
				t.Errorf("%s%q: %d, want 400", tt.path, bad, rec.Code)
			}
		}
	}
}
