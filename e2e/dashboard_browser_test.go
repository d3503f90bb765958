package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pquerna/otp/totp"
)

// TestBrowserDashboard walks the merchant dashboard in a real browser, as a
// merchant would: sign in → turn on two-step verification (the test
// computes the codes) → find a payment made through the API → open it →
// resend its IPN to a local receiver → regenerate the test key and prove
// the old key and its tokens fail → save IPN settings and send a test
// notification → read the audit log → sign out. No page may violate its
// Content-Security-Policy. KADI_SCREENSHOTS=1 saves each page.
func TestBrowserDashboard(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	screenshots := os.Getenv("KADI_SCREENSHOTS") == "1"

	// A receiver that counts notifications.
	var mu sync.Mutex
	received := 0
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		received++
		mu.Unlock()
		fmt.Fprint(w, "ok, got it")
	}))
	defer receiver.Close()
	count := func() int { mu.Lock(); defer mu.Unlock(); return received }

	var m merchantCreds
	g := startGateway(t, func(dir string) {
		m = createMerchant(t, dir, "Duka la Browser")
		setTestIPN(t, []string{"--data-dir", dir}, m.MerchantCode, receiver.URL+"/ipn", "shop", "ipn-secret-1")
	}, "--allow-private-ipn", "--ipn-poll", "100ms")
	s := newShopper(t, g, m)
	b := s.createBill(t, "DASH1", "1500.00")
	page := s.submit(t, s.paymentForm(t, b, testCard("4242424242424242")))
	if !strings.Contains(page.Body, "Transaction Successfull") {
		t.Fatalf("payment: %s", page.Body)
	}
	waitFor(t, "the first IPN", func() bool { return count() >= 1 })

	ctx, console := newBrowser(t)
	mark := console.mark()
	// Each page is looked at: a screenshot for a person (with
	// KADI_SCREENSHOTS=1) and axe-core for what a person may miss.
	shot := func(name string) {
		if screenshots {
			saveScreenshot(t, ctx, "dashboard-"+name+".png")
		}
		axeCheck(t, ctx, "dashboard "+name)
	}
	base := g.BaseURL + "/dashboard/"

	// Sign in.
	run(t, ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.ID("username")))
	shot("signin")
	run(t, ctx, sendKeys(chromedp.ID("username"), m.Username), sendKeys(chromedp.ID("password"), m.Password),
		chromedp.Click(chromedp.ID("sign-in")), chromedp.WaitVisible(chromedp.CSS(".periods")))
	if txt := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(txt, b.Reference) || !strings.Contains(txt, "KES 1,500.00") {
		t.Errorf("home does not show the payment:\n%s", txt)
	}
	if banner := value(t, ctx, chromedp.Text(chromedp.CSS(".banner"))); !strings.Contains(banner, "TEST MODE") {
		t.Errorf("no test-mode banner: %q", banner)
	}
	shot("home")

	// Live mode asks for two-step verification first: a refusal.
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[name="mode"][value="live"]`)), chromedp.WaitVisible(chromedp.CSS(`.error[role="alert"]`)))
	if txt := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(txt, "Live mode needs two-step verification") {
		t.Errorf("the Live switch without a second factor:\n%s", txt)
	}
	shot("live-needs-two-step")

	// Two-step verification.
	run(t, ctx, chromedp.Navigate(base+"security"), chromedp.Click(chromedp.ID("start-totp")), chromedp.WaitVisible(chromedp.ID("totp-secret")))
	if qrWidth := value(t, ctx, chromedp.Evaluate[int](`(() => { const i = document.querySelector('img[alt^="QR code"]'); return i && i.complete ? i.naturalWidth : -1 })()`)); qrWidth <= 0 {
		t.Errorf("the enrolment QR code did not load (natural width %d)", qrWidth)
	}
	shot("totp-enrol")
	secret := value(t, ctx, chromedp.Text(chromedp.ID("totp-secret")))
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, sendKeys(chromedp.ID("totp-code"), code), sendKeys(chromedp.ID("totp-password"), m.Password),
		chromedp.Click(chromedp.ID("confirm-totp")), chromedp.WaitVisible(chromedp.ID("recovery-codes")))
	shot("totp-on")
	recovery := value(t, ctx, chromedp.Text(chromedp.CSS("#recovery-codes li code")))

	// Signing in again takes the second factor (a recovery code here: the
	// app's code of this time step is spent); the page before it offers
	// nothing else; then live mode opens.
	run(t, ctx, chromedp.Click(chromedp.CSS(`form[action="/dashboard/sign-out"] button`)), chromedp.WaitVisible(chromedp.ID("username")),
		sendKeys(chromedp.ID("username"), m.Username), sendKeys(chromedp.ID("password"), m.Password),
		chromedp.Click(chromedp.ID("sign-in")), chromedp.WaitVisible(chromedp.ID("code")))
	if n := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('nav a, form[action="/dashboard/mode"]').length`)); n != 0 {
		t.Errorf("the verify page shows %d links or mode switches", n)
	}
	shot("verify")
	run(t, ctx, sendKeys(chromedp.ID("code"), recovery), chromedp.Click(chromedp.ID("verify")), chromedp.WaitVisible(chromedp.CSS(".periods")),
		chromedp.Click(chromedp.CSS(`button[name="mode"][value="live"]`)), chromedp.WaitVisible(chromedp.CSS(".live-banner")))
	shot("live-home")
	run(t, ctx, chromedp.Click(chromedp.CSS(`button[name="mode"][value="test"]`)), chromedp.WaitVisible(chromedp.CSS(".test-banner")))

	// The payment, its page, and its IPN resent.
	run(t, ctx, chromedp.Navigate(base+"payments?q="+b.Reference), chromedp.WaitVisible(chromedp.CSS("table")))
	shot("payments")
	run(t, ctx, chromedp.Click(chromedp.CSS(`a[href="/dashboard/payments/`+b.Reference+`"]`)), chromedp.WaitVisible(chromedp.ID("resend-ipn")))
	if txt := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(txt, "4242") || !strings.Contains(txt, "delivered") {
		t.Errorf("bill page lacks the card or the IPN:\n%s", txt)
	}
	shot("bill")
	before := count()
	run(t, ctx, chromedp.Click(chromedp.ID("resend-ipn")), chromedp.WaitVisible(chromedp.CSS(".note")))
	waitFor(t, "the resent IPN", func() bool { return count() > before })

	// A new test key: the old key and its token stop working.
	oldToken, err := s.c.Token(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.Navigate(base+"developers"), chromedp.WaitVisible(chromedp.ID("regenerate")))
	if txt := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); strings.Contains(txt, m.Test.APIKey) || !strings.Contains(txt, m.Test.APIKey[:14]) {
		t.Errorf("developers page shows the whole key, or not its prefix")
	}
	shot("developers")
	run(t, ctx, chromedp.Click(chromedp.CSS(`input[name="confirm"]`)), sendKeys(chromedp.ID("regen-password"), m.Password),
		chromedp.Click(chromedp.ID("regenerate")), chromedp.WaitVisible(chromedp.ID("new-key")))
	newKey := value(t, ctx, chromedp.Text(chromedp.ID("new-key")))
	if !strings.HasPrefix(newKey, "kadi_test_") || newKey == m.Test.APIKey {
		t.Fatalf("new key %q", newKey)
	}
	shot("new-key")
	waitFor(t, "the old key's token to be refused", func() bool {
		return apiStatus(t, g, "GET", "/payment/v2/query?billReference="+b.Reference, "Bearer "+oldToken, "") == http.StatusUnauthorized
	})
	tokenForm := url.Values{"username": {m.Username}, "password": {m.Password}}.Encode()
	if st := apiStatus(t, g, "POST", "/identity/v2/token", "Basic "+m.Test.APIKey, tokenForm); st != http.StatusUnauthorized {
		t.Errorf("old key gets a token: %d", st)
	}
	if st := apiStatus(t, g, "POST", "/identity/v2/token", "Basic "+newKey, tokenForm); st != http.StatusOK {
		t.Errorf("new key gets no token: %d", st)
	}

	// The notification secret replaced, the current one signing beside it
	// for the default 24 hours: the answer says until when, and so does
	// the page afterwards.
	rotate := `form[action="/dashboard/developers/rotate-secret"] `
	run(t, ctx, chromedp.Navigate(base+"developers"), chromedp.WaitVisible(chromedp.ID("rotate-secret")),
		chromedp.Click(chromedp.CSS(rotate+`input[name="confirm"]`)), sendKeys(chromedp.ID("rotate-password"), m.Password),
		chromedp.Click(chromedp.ID("rotate-secret")), chromedp.WaitVisible(chromedp.ID("secret")))
	if txt := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(txt, "with the old one too") {
		t.Errorf("the rotation's answer does not say the old secret still signs:\n%s", txt)
	}
	shot("secret-rotated")
	run(t, ctx, chromedp.Navigate(base+"developers"), chromedp.WaitVisible(chromedp.ID("rotate-secret")))
	if txt := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(txt, "also signs notifications until") {
		t.Errorf("the developers page does not say the replaced secret still signs:\n%s", txt)
	}
	shot("secret-overlap")
	// The receiver updated: the replaced secret stops signing now.
	end := `form[action="/dashboard/developers/end-overlap"] `
	run(t, ctx, chromedp.Click(chromedp.CSS(end+`input[name="confirm"]`)), sendKeys(chromedp.ID("end-password"), m.Password),
		chromedp.Click(chromedp.ID("end-overlap")), chromedp.WaitVisible(chromedp.CSS(".note")))
	if txt := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(txt, "The replaced secret no longer signs") || strings.Contains(txt, "also signs") {
		t.Errorf("the page after ending the overlap:\n%s", txt)
	}
	shot("secret-overlap-ended")

	// IPN settings and a test notification.
	run(t, ctx, chromedp.Navigate(base+"settings/ipn"), chromedp.WaitVisible(chromedp.ID("save-ipn")),
		chromedp.SetValue(chromedp.ID("url"), receiver.URL+"/ipn2"), chromedp.SetValue(chromedp.ID("ipn-username"), "shop2"),
		chromedp.Click(chromedp.ID("save-ipn")), chromedp.WaitVisible(chromedp.CSS(".note")))
	before = count()
	run(t, ctx, chromedp.Click(chromedp.ID("test-ipn")), chromedp.WaitVisible(chromedp.ID("test-result")))
	if txt := value(t, ctx, chromedp.Text(chromedp.ID("test-result"))); !strings.Contains(txt, "HTTP 200") || !strings.Contains(txt, "ok, got it") {
		t.Errorf("test notification result:\n%s", txt)
	}
	if count() <= before {
		t.Error("the receiver got no test notification")
	}
	shot("ipn-settings")

	run(t, ctx, chromedp.Navigate(base+"ipn"), chromedp.WaitVisible(chromedp.CSS("main h1")))
	shot("ipn-log")

	// The audit log tells the story.
	run(t, ctx, chromedp.Navigate(base+"audit"), chromedp.WaitVisible(chromedp.CSS("table")))
	audit := value(t, ctx, chromedp.Text(chromedp.CSS("table")))
	for _, want := range []string{"dashboard.signed_in", "totp.enabled", "ipn.replayed", "api_key.rotated", "ipn.configured", "ipn.test_sent", "notification_secret.overlap_ended", "dashboard 127.0.0.1"} {
		if !strings.Contains(audit, want) {
			t.Errorf("audit log lacks %s:\n%s", want, audit)
		}
	}
	shot("audit")

	// On a phone (390 px), no page scrolls sideways: wide tables scroll
	// inside their own region.
	run(t, ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	for _, path := range []string{"", "payments", "payments/" + b.Reference, "developers", "settings/ipn", "ipn", "audit", "security"} {
		run(t, ctx, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if w := value(t, ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - 390`)); w > 0 {
			t.Errorf("/dashboard/%s at 390 px scrolls sideways by %d px", path, w)
			shot("phone-wide-" + strings.ReplaceAll(path, "/", "-"))
		}
		// A table's rows stay rows: long URLs broke a character at a time
		// and an IPN attempt's row stood 1,145 px tall.
		if h := value(t, ctx, chromedp.Evaluate[float64](`Math.max(0, ...[...document.querySelectorAll('tbody tr')].map(r => r.getBoundingClientRect().height))`)); h > 320 {
			t.Errorf("/dashboard/%s at 390 px has a table row %.0f px tall", path, h)
			shot("phone-tall-" + strings.ReplaceAll(path, "/", "-"))
		}
		switch path {
		case "":
			shot("phone-home")
		case "payments":
			// What a merchant looks for first, amount and status, is in
			// view without scrolling the table.
			right := value(t, ctx, chromedp.Evaluate[float64](`(() => { const th = [...document.querySelectorAll('th')].find(h => h.textContent === 'Status'); return th ? th.getBoundingClientRect().right : 1e9 })()`))
			if right > 390 {
				t.Errorf("the payments table's Status column ends at %.0f px of 390", right)
			}
			shot("phone-payments")
		}
	}
	run(t, ctx, chromedp.EmulateViewport(1280, 900))

	// The keyboard's focus ring stands out from the page (WCAG 1.4.11's
	// 3:1; it was about 2:1).
	ring := value(t, ctx, chromedp.Evaluate[float64](`(() => {
		const lum = c => { const v = c.match(/\d+/g).slice(0, 3).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4) });
			return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2] };
		const a = document.querySelector("nav a"); a.focus({focusVisible: true});
		const o = lum(getComputedStyle(a).outlineColor), bg = lum(getComputedStyle(document.body).backgroundColor);
		return (Math.max(o, bg) + 0.05) / (Math.min(o, bg) + 0.05) })()`))
	if ring < 3 {
		t.Errorf("the focus ring's contrast with the page is %.2f:1, want 3:1", ring)
	}

	// Sign out: the dashboard is closed again.
	run(t, ctx, chromedp.Click(chromedp.CSS(`form[action="/dashboard/sign-out"] button`)), chromedp.WaitVisible(chromedp.ID("username")))
	run(t, ctx, chromedp.Navigate(base+"payments"), chromedp.WaitVisible(chromedp.ID("username")))

	if v := console.cspSince(mark); len(v) > 0 {
		t.Errorf("Content-Security-Policy violations: %v", v)
	}
	if e := console.exceptionsSince(mark); len(e) > 0 {
		t.Errorf("script exceptions: %v", e)
	}
}

// apiStatus makes one API request and returns its status.
func apiStatus(t *testing.T, g *gateway, method, path, auth, form string) int {
	t.Helper()
	req, err := http.NewRequest(method, g.BaseURL+path, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var discard json.RawMessage
	_ = json.NewDecoder(resp.Body).Decode(&discard)
	return resp.StatusCode
}
