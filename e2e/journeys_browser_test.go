package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestBrowserShopperJourneys walks the hosted checkout as shoppers do
// beyond the straight path: back after paying, a failed 3-D Secure code
// and another try, cancelling on the challenge, a Swahili browser, narrow
// phones and 200 % zoom, and an error page; axe-core checks each state.
func TestBrowserShopperJourneys(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	screenshots := os.Getenv("KADI_SCREENSHOTS") == "1"
	shot := func(t *testing.T, ctx context.Context, name string) {
		if screenshots {
			saveScreenshot(t, ctx, name)
		}
	}
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Journeys Shop") })
	shop := newTestShop(t, g, m, g.BaseURL)
	ctx, console := newBrowser(t)
	browser := ctx
	// scripts turns JavaScript off or back on, on the browser's own
	// context: a step's may have run out, and the next steps need their
	// scripts back.
	scripts := func(t *testing.T, off bool) {
		if _, err := chromedp.Call(browser, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: off}); err != nil {
			t.Fatal(err)
		}
	}
	expiry := fmt.Sprintf("11%02d", (time.Now().Year()+2)%100)

	// toCardPage starts a checkout at the shop and returns its bill.
	toCardPage := func(t *testing.T, ctx context.Context) string {
		t.Helper()
		run(t, ctx, chromedp.Navigate(shop.URL+"/"), chromedp.WaitVisible(chromedp.ID("checkout")))
		billRef := value(t, ctx, chromedp.Value(chromedp.CSS(`#checkout input[name="billReference"]`)))
		run(t, ctx, chromedp.Click(chromedp.CSS("#checkout button")), chromedp.WaitVisible(chromedp.ID("cardNumber")))
		return billRef
	}
	typeCard := func(t *testing.T, ctx context.Context, number string) {
		t.Helper()
		run(t, ctx, chromedp.Clear(chromedp.ID("cardNumber")), sendKeys(chromedp.ID("cardNumber"), number),
			chromedp.Clear(chromedp.ID("cardExpiry")), sendKeys(chromedp.ID("cardExpiry"), expiry),
			sendKeys(chromedp.ID("cardSecurity"), "123"), chromedp.Click(chromedp.ID("pay")))
	}
	shopSays := func(t *testing.T, ctx context.Context) string {
		t.Helper()
		run(t, ctx, chromedp.WaitVisible(chromedp.ID("result")))
		return value(t, ctx, chromedp.Text(chromedp.ID("result")))
	}
	onOurPage := func(t *testing.T, ctx context.Context) string {
		t.Helper()
		loc := value(t, ctx, chromedp.Location())
		if !strings.HasPrefix(loc, g.BaseURL+"/cardPay/page/") {
			t.Fatalf("the browser is at %s, want one of Kadi's pages (a resubmission prompt is chrome-error://)", loc)
		}
		return loc
	}
	step := func(name string, f func(t *testing.T, ctx context.Context)) {
		t.Run(name, func(t *testing.T) {
			mark := console.mark()
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			f(t, cctx)
			for _, msg := range console.cspSince(mark) {
				t.Errorf("browser console: %s", msg)
			}
			for _, msg := range console.exceptionsSince(mark) {
				t.Errorf("uncaught exception in a page: %s", msg)
			}
		})
	}

	step("back after paying shows the result", func(t *testing.T, ctx context.Context) {
		billRef := toCardPage(t, ctx)
		typeCard(t, ctx, "4242424242424242")
		if got := shopSays(t, ctx); !strings.HasPrefix(got, "PAID ") {
			t.Fatalf("the shop says %q", got)
		}
		// Back from the shop: whichever of Kadi's pages it lands on, from
		// the network or the back/forward cache, it shows the result.
		// (NavigateBack waits for a navigation a cache restore may not send.)
		value(t, ctx, chromedp.Evaluate[int](`history.back(), 1`))
		run(t, ctx, chromedp.WaitVisible(chromedp.ID("kadi-callback")))
		onOurPage(t, ctx)
		if h1 := value(t, ctx, chromedp.Text(chromedp.CSS("h1"))); h1 != "Payment successful" {
			t.Errorf("back after paying shows %q", h1)
		}
		// Back does not post the result again: the page waits for its button.
		time.Sleep(time.Second)
		onOurPage(t, ctx)
		if n := len(shop.callbacks(billRef)); n != 1 {
			t.Errorf("the shop got %d callbacks, want 1", n)
		}
		shot(t, ctx, "back-after-paying.png")
		axeCheck(t, ctx, "the result page")
		// Its button still takes the shopper to the shop, with the result.
		run(t, ctx, chromedp.Click(chromedp.CSS("#kadi-callback button")))
		if got := shopSays(t, ctx); !strings.HasPrefix(got, "PAID ") {
			t.Errorf("the result's button: the shop says %q", got)
		}
		if n := chargeAttempts(t, g, billRef); n != 1 {
			t.Errorf("%d charge attempts, want 1", n)
		}
	})

	step("3-D Secure code wrong, then another try", func(t *testing.T, ctx context.Context) {
		billRef := toCardPage(t, ctx)
		typeCard(t, ctx, "4000000000003220")
		run(t, ctx, chromedp.WaitVisible(chromedp.ID("code")))
		onOurPage(t, ctx)
		shot(t, ctx, "challenge.png")
		axeCheck(t, ctx, "the 3-D Secure page")
		run(t, ctx, sendKeys(chromedp.ID("code"), "000000"), chromedp.Click(chromedp.ID("confirm")),
			chromedp.WaitVisible(chromedp.ID("declined")))
		if got := value(t, ctx, chromedp.Text(chromedp.ID("declined"))); !strings.Contains(got, "The verification code was not accepted") {
			t.Errorf("after a wrong code the card page says %q", got)
		}
		shot(t, ctx, "challenge-failed-retry.png")
		axeCheck(t, ctx, "the card page after a failed code")
		typeCard(t, ctx, "5555555555554444")
		if got := shopSays(t, ctx); !strings.HasPrefix(got, "PAID ") {
			t.Errorf("the shop says %q", got)
		}
		if n := chargeAttempts(t, g, billRef); n != 2 {
			t.Errorf("%d charge attempts, want 2 (the failed challenge and the payment)", n)
		}
	})

	step("cancel on the 3-D Secure page", func(t *testing.T, ctx context.Context) {
		toCardPage(t, ctx)
		typeCard(t, ctx, "4000000000003220")
		run(t, ctx, chromedp.WaitVisible(chromedp.ID("code")), chromedp.Click(chromedp.ID("cancel")))
		if got := shopSays(t, ctx); got != "FAILED Payment cancelled by the customer" {
			t.Errorf("the shop says %q", got)
		}
		// Back, past the cancelled result, to the 3-D Secure page: it has
		// closed, says it was a test, and leads back to the shop.
		value(t, ctx, chromedp.Evaluate[int](`history.go(-2), 1`))
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS("main a.button")))
		onOurPage(t, ctx)
		if h1, badge := value(t, ctx, chromedp.Text(chromedp.CSS("h1"))), value(t, ctx, chromedp.Text(chromedp.CSS(".badge"))); h1 != "Payment page closed" || badge != "Test mode" {
			t.Errorf("Back to the cancelled 3-D Secure page shows %q, labelled %q", h1, badge)
		}
		shot(t, ctx, "closed-after-cancel.png")
		axeCheck(t, ctx, "the closed page")
		run(t, ctx, chromedp.Click(chromedp.CSS("main a.button")), chromedp.WaitVisible(chromedp.ID("checkout")))
		if loc := value(t, ctx, chromedp.Location()); loc != shop.URL+"/" {
			t.Errorf("the closed page's way back went to %s, want the shop's home %s/", loc, shop.URL)
		}
	})

	// Without JavaScript the result page waits for its button, so what it
	// says can be read: after the fifth decline, that the bill takes no
	// other card (the decline's own words may say "try again").
	step("five declines, without JavaScript", func(t *testing.T, ctx context.Context) {
		scripts(t, true)
		defer scripts(t, false)
		billRef := toCardPage(t, ctx)
		for i := 1; i <= 5; i++ {
			typeCard(t, ctx, "4000000000000119") // the network's error: "please try again"
			waitFor(t, "the attempt", func() bool { return chargeAttempts(t, g, billRef) == i })
			if i < 5 {
				run(t, ctx, chromedp.WaitVisible(chromedp.ID("declined")), chromedp.WaitVisible(chromedp.ID("cardNumber")))
			}
		}
		run(t, ctx, chromedp.WaitVisible(chromedp.ID("kadi-callback")))
		if txt := value(t, ctx, chromedp.Text(chromedp.CSS("main"))); !strings.Contains(txt, "cannot take another card") {
			t.Errorf("the fifth failure's page:\n%s", txt)
		}
		shot(t, ctx, "blocked-result.png")
		scripts(t, false)
		axeCheck(t, ctx, "the result page of a blocked bill")
		if n := chargeAttempts(t, g, billRef); n != 5 {
			t.Errorf("%d charge attempts, want 5", n)
		}
	})

	// A customer field the shop's form got wrong goes back to the shop as
	// Transaction Failed; the page that takes it there (read here without
	// JavaScript, which posts it at once) says it was the shop's form, not
	// the shopper's card, and gives the detail as the shop developers'.
	step("the shop's customer field refused, without JavaScript", func(t *testing.T, ctx context.Context) {
		run(t, ctx, chromedp.Navigate(shop.URL+"/"), chromedp.WaitVisible(chromedp.ID("checkout")))
		_ = value(t, ctx, chromedp.Evaluate[bool](`(document.querySelector('#checkout input[name=emailAddress]').value = 'not an address', true)`))
		scripts(t, true)
		defer scripts(t, false)
		run(t, ctx, chromedp.Click(chromedp.CSS("#checkout button")), chromedp.WaitVisible(chromedp.ID("kadi-callback")))
		want := "The shop's payment form could not be accepted, so no payment was made. For the shop's developers: Invalid payment details: emailAddress"
		if alert := value(t, ctx, chromedp.Text(chromedp.CSS(".alert"))); !strings.HasPrefix(alert, want) {
			t.Errorf("the result page's alert: %q", alert)
		}
		shot(t, ctx, "result-shop-form.png")
		scripts(t, false)
		axeCheck(t, ctx, "the result page of the shop's refused form")
	})

	// Without JavaScript (which empties them on leaving), the browser
	// keeps a page's typed fields in its history and types them back on
	// Back: never the card number or the security code.
	step("without JavaScript, Back brings no card number back", func(t *testing.T, ctx context.Context) {
		scripts(t, true)
		defer scripts(t, false)
		toCardPage(t, ctx)
		run(t, ctx, sendKeys(chromedp.ID("cardFirstName"), "Amina"), sendKeys(chromedp.ID("cardNumber"), "4242424242424242"),
			sendKeys(chromedp.ID("cardExpiry"), expiry), sendKeys(chromedp.ID("cardSecurity"), "123"),
			chromedp.Click(chromedp.CSS(`form.languages button[lang=sw]`)))
		waitFor(t, "the Swahili page", func() bool {
			return value(t, ctx, chromedp.Evaluate[string](`document.documentElement ? document.documentElement.lang : ""`)) == "sw"
		})
		run(t, ctx, chromedp.NavigateBack(), chromedp.WaitVisible(chromedp.ID("cardNumber")))
		got := value(t, ctx, chromedp.Evaluate[[]string](`["cardFirstName", "cardNumber", "cardExpiry", "cardSecurity"].map(id => document.getElementById(id).value)`))
		if got[1] != "" || got[3] != "" {
			t.Errorf("Back typed the card number or security code back: %q", got)
		}
		// With JavaScript, which empties them on leaving, the browser's
		// card autofill has its hints.
		scripts(t, false)
		toCardPage(t, ctx)
		if hints := value(t, ctx, chromedp.Evaluate[[]string](`["cardNumber", "cardSecurity"].map(id => document.getElementById(id).autocomplete)`)); !slices.Equal(hints, []string{"cc-number", "cc-csc"}) {
			t.Errorf("with JavaScript, the card number's and CVV's autocomplete are %q", hints)
		}
		// The next steps' pages follow the browser's language, not the
		// one chosen here.
		if _, err := chromedp.Call(ctx, network.DeleteCookies, network.DeleteCookiesParams{Name: "kadi_lang", URL: g.BaseURL}); err != nil {
			t.Fatal(err)
		}
	})

	// lang.js posts a language switch in the background and reloads the
	// page in place; when that post fails (a flaky mobile network), the
	// form posts as it does without the script, and the switch still
	// happens, as one more history entry.
	var failFetches atomic.Bool
	var failed atomic.Int32
	if err := chromedp.Listen(browser, func(ev any) {
		paused, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		go func() {
			if failFetches.Load() {
				failed.Add(1)
				_, _ = chromedp.Call(browser, fetch.FailRequest, fetch.FailRequestParams{RequestID: paused.RequestID, ErrorReason: network.ErrorReasonConnectionFailed})
				return
			}
			_, _ = chromedp.Call(browser, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: paused.RequestID})
		}()
	}); err != nil {
		t.Fatal(err)
	}
	step("a language switch whose background post fails posts the form", func(t *testing.T, ctx context.Context) {
		toCardPage(t, ctx)
		entries := value(t, ctx, chromedp.Evaluate[int](`history.length`))
		failFetches.Store(true)
		if _, err := chromedp.Call(ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{ResourceType: network.ResourceTypeFetch}}}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			failFetches.Store(false)
			if _, err := chromedp.Call(browser, fetch.Disable, cdp.Empty{}); err != nil {
				t.Error(err)
			}
		}()
		run(t, ctx, chromedp.Click(chromedp.CSS(`form.languages button[lang=sw]`)))
		waitFor(t, "the Swahili page", func() bool {
			return value(t, ctx, chromedp.Evaluate[string](`document.documentElement && document.querySelector("#cardNumber") ? document.documentElement.lang : ""`)) == "sw"
		})
		if n := failed.Load(); n != 1 {
			t.Errorf("%d background posts failed, want the switch's one", n)
		}
		if after := value(t, ctx, chromedp.Evaluate[int](`history.length`)); after != entries+1 {
			t.Errorf("history went from %d entries to %d, want one more: the form's post", entries, after)
		}
		if h1 := value(t, ctx, chromedp.Text(chromedp.CSS("h1"))); h1 != "Lipa kwa kadi" {
			t.Errorf("after the switch the card page says %q", h1)
		}
		if _, err := chromedp.Call(ctx, network.DeleteCookies, network.DeleteCookiesParams{Name: "kadi_lang", URL: g.BaseURL}); err != nil {
			t.Fatal(err)
		}
	})

	step("a Swahili browser", func(t *testing.T, ctx context.Context) {
		headers := func(h network.Headers) {
			if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: h}); err != nil {
				t.Fatal(err)
			}
		}
		headers(network.Headers{"Accept-Language": "sw-KE,sw;q=0.9,en;q=0.5"})
		defer headers(network.Headers{})
		toCardPage(t, ctx)
		if lang := value(t, ctx, chromedp.Evaluate[string](`document.documentElement.lang`)); lang != "sw" {
			t.Errorf("<html lang=%q>, want sw", lang)
		}
		if h1 := value(t, ctx, chromedp.Text(chromedp.CSS("h1"))); h1 != "Lipa kwa kadi" {
			t.Errorf("the card page says %q", h1)
		}
		if amount := value(t, ctx, chromedp.Text(chromedp.CSS(".amount"))); amount != "KES\u00a0250.00" {
			t.Errorf("amount %q", amount)
		}

		// The shop's form at fault: Swahili, with the English detail for
		// the shop's developers introduced and marked as English.
		run(t, ctx, chromedp.Navigate(shop.URL+"/"), chromedp.WaitVisible(chromedp.ID("checkout")))
		_ = value(t, ctx, chromedp.Evaluate[bool](`(document.querySelector('#checkout input[name=billReference]').value = 'B'.repeat(21), true)`))
		run(t, ctx, chromedp.Click(chromedp.CSS("#checkout button")), chromedp.WaitVisible(chromedp.CSS(".alert span[lang=en]")))
		if alert := value(t, ctx, chromedp.Text(chromedp.CSS(".alert"))); !strings.Contains(alert, "Kwa wasanidi programu wa duka: Invalid payment details: billReference") {
			t.Errorf("the error page's alert: %q", alert)
		}
		shot(t, ctx, "error-shop-form-sw.png")
		axeCheck(t, ctx, "the Swahili error page with a detail")
	})

	// Narrow phones, and a desktop window at 200 % zoom (CSS pixels halve):
	// no horizontal scrolling on any page.
	step("narrow screens and zoom", func(t *testing.T, ctx context.Context) {
		for _, v := range []struct {
			name          string
			width, height int64
			scale         float64
			mobile        bool
		}{
			{"320 wide", 320, 640, 2, true},
			{"390x844", 390, 844, 3, true},
			{"200 % zoom", 640, 450, 2, false},
		} {
			opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(v.scale)}
			if v.mobile {
				opts = append(opts, chromedp.EmulateMobile)
			}
			run(t, ctx, chromedp.EmulateViewport(v.width, v.height, opts...))
			toCardPage(t, ctx)
			noSideScroll(t, ctx, v.name+" card page")
			shot(t, ctx, "card-"+strings.NewReplacer(" ", "-", "%", "pct").Replace(v.name)+".png")
			// The script's messages for a bad expiry and CVV go below
			// their row, in the row's order, and leave the fields their
			// width (inside the row they squeezed the expiry to "13 /").
			width := `document.getElementById('cardExpiry').getBoundingClientRect().width`
			before := value(t, ctx, chromedp.Evaluate[float64](width))
			run(t, ctx, sendKeys(chromedp.ID("cardNumber"), "4242424242424242"), sendKeys(chromedp.ID("cardExpiry"), "1320"),
				sendKeys(chromedp.ID("cardSecurity"), "1"), chromedp.Click(chromedp.ID("pay")), chromedp.WaitVisible(chromedp.ID("cardSecurity-error")))
			after := value(t, ctx, chromedp.Evaluate[float64](width))
			order := value(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#card-form > .error')].map(e => e.id)`))
			if inRow := value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll('.row .error').length`)); inRow != 0 || after < before*0.95 ||
				strings.Join(order, " ") != "cardExpiry-error cardSecurity-error" {
				t.Errorf("%s: %d messages inside a row, the expiry %.0f px wide (%.0f before), messages %v", v.name, inRow, after, before, order)
			}
			shot(t, ctx, "card-typos-"+strings.NewReplacer(" ", "-", "%", "pct").Replace(v.name)+".png")
			toCardPage(t, ctx)
			typeCard(t, ctx, "4000000000003220")
			run(t, ctx, chromedp.WaitVisible(chromedp.ID("code")))
			noSideScroll(t, ctx, v.name+" 3-D Secure page")
			run(t, ctx, chromedp.Navigate(g.BaseURL+"/cardPay/page/not-a-page"), chromedp.WaitVisible(chromedp.CSS("h1")))
			noSideScroll(t, ctx, v.name+" error page")
		}
		run(t, ctx, chromedp.ResetViewport())
	})

	step("an error page", func(t *testing.T, ctx context.Context) {
		run(t, ctx, chromedp.Navigate(g.BaseURL+"/cardPay/page/not-a-page"), chromedp.WaitVisible(chromedp.CSS("h1")))
		if h1 := value(t, ctx, chromedp.Text(chromedp.CSS("h1"))); h1 != "Payment page expired" {
			t.Errorf("error page says %q", h1)
		}
		shot(t, ctx, "error.png")
		axeCheck(t, ctx, "the error page")
	})
}

// noSideScroll fails when the page is wider than the viewport.
func noSideScroll(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	widths := value(t, ctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, document.documentElement.clientWidth]`))
	if widths[0] > widths[1] {
		t.Errorf("%s scrolls sideways: %d px of content in %d px", what, widths[0], widths[1])
	}
}
