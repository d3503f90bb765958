package e2e

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	_ "modernc.org/sqlite" // to count charge attempts in the gateway's own database

	"github.com/kadipay/kadi/client"
)

const chromiumPath = "/usr/bin/chromium"

// TestBrowserCheckout is a customer's checkout in a real browser: a small
// merchant shop built on the client package sends the browser to the
// gateway's own card-entry page (the shop never sees the card), the customer
// types the card, passes 3-D Secure when asked, and the auto-posting redirect
// brings the browser back to the shop, which verifies before it says "paid".
func TestBrowserCheckout(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	screenshots := os.Getenv("KADI_SCREENSHOTS") == "1"

	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Browser Test Shop") })
	proxy := newHoldingProxy(t, g.BaseURL)
	shop := newTestShop(t, g, m, proxy.URL)

	ctx, console := newBrowser(t)

	t.Run("console watch sees CSP violations", func(t *testing.T) {
		// Without this, a watch that hears nothing would pass every page.
		bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Security-Policy", "default-src 'self'")
			fmt.Fprint(w, `<!doctype html><title>x</title><p id="x">x</p><script>document.title = "inline ran";</script>`)
		}))
		defer bad.Close()
		mark := console.mark()
		run(t, ctx, chromedp.Navigate(bad.URL), chromedp.WaitVisible(chromedp.ID("x")))
		waitFor(t, "a CSP violation report", func() bool { return len(console.cspSince(mark)) > 0 })
	})

	cases := []struct {
		name        string
		card        string
		cvv         string
		threeDS     bool
		doubleClick bool
		wantPaid    bool
		wantFailed  string // the shop's text after FAILED
		// then, after a decline on the card page: another card to pay with,
		// or "" to cancel and return to the shop.
		then string
	}{
		{name: "approved visa", card: "4242424242424242", cvv: "123", wantPaid: true},
		{name: "3-D Secure", card: "4000000000003220", cvv: "123", threeDS: true, wantPaid: true},
		{name: "declined, then cancelled", card: "4000000000000002", cvv: "123", wantFailed: "Payment cancelled by the customer"},
		{name: "declined, then another card", card: "4000000000000002", cvv: "123", then: "5555555555554444", wantPaid: true},
		{name: "double click on pay", card: "5555555555554444", cvv: "123", doubleClick: true, wantPaid: true},
	}
	year := fmt.Sprint(time.Now().Year() + 2)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mark := console.mark()
			cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()

			start := shop.URL + "/"
			if tc.doubleClick {
				// This checkout reaches the gateway through the proxy.
				start += "?via=proxy"
			}
			run(t, cctx, chromedp.Navigate(start), chromedp.WaitVisible(chromedp.ID("checkout")))
			billRef := value(t, cctx, chromedp.Value(chromedp.CSS(`#checkout input[name="billReference"]`)))
			if n := value(t, cctx, chromedp.Evaluate[int](`document.querySelectorAll('#checkout input[name^="card"]').length`)); n != 0 {
				t.Fatalf("the shop's form carries %d card fields; the gateway must collect the card", n)
			}
			run(t, cctx, chromedp.Click(chromedp.CSS("#checkout button")), chromedp.WaitVisible(chromedp.ID("cardNumber")))
			if screenshots && tc.name == "approved visa" {
				saveScreenshot(t, cctx, "card-entry.png")
				run(t, cctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
				saveScreenshot(t, cctx, "card-entry-mobile.png")
				run(t, cctx, chromedp.ResetViewport())
			}
			if tc.name == "approved visa" {
				// What the shopper types reads as typed, not in its label's
				// bold; the language buttons are a thumb's height.
				if w := value(t, cctx, chromedp.Evaluate[string](`getComputedStyle(document.getElementById("cardNumber")).fontWeight`)); w != "400" {
					t.Errorf("the card number is typed in weight %s, want 400", w)
				}
				if h := value(t, cctx, chromedp.Evaluate[float64](`Math.min.apply(null, Array.from(document.querySelectorAll('button[name="language"]'), function (b) { return b.getBoundingClientRect().height; }))`)); h < 44 {
					t.Errorf("a language button is %v px high, want at least 44", h)
				}
				// The language switch: Kiswahili and back, remembered; the
				// names and expiry typed come along, the card number not.
				run(t, cctx,
					chromedp.Clear(chromedp.CSS(`input[name="cardFirstName"]`)),
					sendKeys(chromedp.CSS(`input[name="cardFirstName"]`), "Amina"),
					chromedp.Clear(chromedp.CSS(`input[name="cardLastName"]`)),
					sendKeys(chromedp.CSS(`input[name="cardLastName"]`), "Otieno"),
					sendKeys(chromedp.ID("cardExpiry"), "01"+year[2:]),
					sendKeys(chromedp.ID("cardNumber"), tc.card))
				run(t, cctx, chromedp.Click(chromedp.CSS(`button[name="language"][value="sw"]`)), chromedp.WaitVisible(chromedp.CSS(`html[lang="sw"] #cardNumber`)))
				if h1 := value(t, cctx, chromedp.Text(chromedp.CSS("h1"))); h1 != "Lipa kwa kadi" {
					t.Errorf("after switching to Kiswahili the page says %q", h1)
				}
				kept := value(t, cctx, chromedp.Evaluate[[]string](`["cardFirstName","cardLastName","cardExpiry","cardNumber"].map(function (n) { return document.getElementById(n).value; })`))
				if want := []string{"Amina", "Otieno", "01 / " + year[2:], ""}; !slices.Equal(kept, want) {
					t.Errorf("after switching the card page holds %q, want %q", kept, want)
				}
				run(t, cctx, chromedp.Clear(chromedp.ID("cardExpiry")))
				if screenshots {
					saveScreenshot(t, cctx, "card-entry-sw.png")
				}
				axeCheck(t, cctx, "card entry in Swahili")
				// On a 320 px phone the longest brand name stays on its
				// label's line: it dropped below it and pushed the field
				// down as the shopper typed.
				run(t, cctx, chromedp.EmulateViewport(320, 640, chromedp.EmulateMobile))
				fieldTop := `document.getElementById("cardNumber").getBoundingClientRect().top`
				before := value(t, cctx, chromedp.Evaluate[float64](fieldTop))
				run(t, cctx, sendKeys(chromedp.ID("cardNumber"), "378282246310005"))
				if brand, after := value(t, cctx, chromedp.Text(chromedp.ID("brand"))), value(t, cctx, chromedp.Evaluate[float64](fieldTop)); brand != "American Express" || after != before {
					t.Errorf("at 320 px the brand %q moved the card number field from %v to %v px", brand, before, after)
				}
				if whole := value(t, cctx, chromedp.Evaluate[bool](`(function(){var b=document.getElementById("brand");return b.scrollWidth<=b.clientWidth})()`)); !whole {
					t.Error("at 320 px the brand name is cut short")
				}
				if screenshots {
					saveScreenshot(t, cctx, "card-entry-sw-320-amex.png")
				}
				run(t, cctx, chromedp.Clear(chromedp.ID("cardNumber")), chromedp.ResetViewport())
				run(t, cctx, chromedp.Click(chromedp.CSS(`button[name="language"][value="en"]`)), chromedp.WaitVisible(chromedp.CSS(`html[lang="en"] #cardNumber`)))
				// A switch takes the page's place in the history: Back leaves
				// the card page for the shop's (it showed the card page again,
				// in the other language). Forward brings the card page back
				// with no card number or CVV (a page once typed them back).
				length := `history.length`
				entries := value(t, cctx, chromedp.Evaluate[int](length))
				run(t, cctx, sendKeys(chromedp.ID("cardNumber"), tc.card), sendKeys(chromedp.ID("cardSecurity"), "123"))
				run(t, cctx, chromedp.Click(chromedp.CSS(`button[name="language"][value="sw"]`)), chromedp.WaitVisible(chromedp.CSS(`html[lang="sw"] #cardNumber`)))
				if after := value(t, cctx, chromedp.Evaluate[int](length)); after != entries {
					t.Errorf("a language switch took the history from %d entries to %d", entries, after)
				}
				historyStep := func(js string, ready string) {
					t.Helper()
					value(t, cctx, chromedp.Evaluate[int](`window.kadiLeft = true, `+js+`, 1`))
					// Asked again and again: the navigation ends the page the
					// question runs in.
					for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
						there, err := chromedp.Run(cctx, chromedp.Evaluate[bool](`!window.kadiLeft && document.readyState === "complete" && !!document.querySelector("`+ready+`")`))
						if err == nil && there {
							return
						}
						if time.Now().After(deadline) {
							t.Fatalf("%s did not come to %s: %v", js, ready, err)
						}
					}
				}
				historyStep("history.back()", "#checkout")
				historyStep("history.forward()", "#cardNumber")
				if typed := value(t, cctx, chromedp.Evaluate[[]string](`[document.getElementById("cardNumber").value, document.getElementById("cardSecurity").value]`)); !slices.Equal(typed, []string{"", ""}) {
					t.Errorf("Forward to the card page shows a card number and CVV typed before: %q", typed)
				}
				run(t, cctx, chromedp.Click(chromedp.CSS(`button[name="language"][value="en"]`)), chromedp.WaitVisible(chromedp.CSS(`html[lang="en"] #cardNumber`)))
				axeCheck(t, cctx, "card entry")
			}
			run(t, cctx,
				chromedp.Clear(chromedp.CSS(`input[name="cardFirstName"]`)),
				sendKeys(chromedp.CSS(`input[name="cardFirstName"]`), "Wanjiku"),
				chromedp.Clear(chromedp.CSS(`input[name="cardLastName"]`)),
				sendKeys(chromedp.CSS(`input[name="cardLastName"]`), "Kamau"),
				sendKeys(chromedp.ID("cardNumber"), tc.card),
				sendKeys(chromedp.ID("cardExpiry"), "11"+year[2:]),
				sendKeys(chromedp.ID("cardSecurity"), tc.cvv),
			)
			// What the script did with the typing: the number grouped, the
			// brand named, the expiry as MM / YY.
			if got := value(t, cctx, chromedp.Value(chromedp.ID("cardNumber"))); got != group(tc.card) {
				t.Errorf("card number shows %q, want %q", got, group(tc.card))
			}
			if got := value(t, cctx, chromedp.Value(chromedp.ID("cardExpiry"))); got != "11 / "+year[2:] {
				t.Errorf("expiry shows %q", got)
			}
			if got := value(t, cctx, chromedp.Text(chromedp.ID("brand"))); got == "" {
				t.Error("no brand shown for the typed card")
			}
			// The brand is announced, not made part of the field's name
			// (a screen reader said "Card number Visa", the name changing
			// as the shopper typed).
			if label := value(t, cctx, chromedp.Evaluate[string](`(function(){var e=document.getElementById(document.getElementById("cardNumber").getAttribute("aria-labelledby"));return e?e.textContent:""})()`)); label != "Card number" {
				t.Errorf("the card number's accessible name is %q, want Card number", label)
			}
			if tc.doubleClick {
				doubleClickPay(t, cctx, proxy)
			} else {
				run(t, cctx, chromedp.Click(chromedp.ID("pay")))
			}
			if strings.HasPrefix(tc.name, "declined") {
				// The card page stays, says why, keeps the names, and
				// lets the shopper go on.
				run(t, cctx, chromedp.WaitVisible(chromedp.ID("declined")))
				if screenshots && tc.then == "" {
					saveScreenshot(t, cctx, "declined-retry.png")
				}
				if name := value(t, cctx, chromedp.Value(chromedp.CSS(`input[name="cardFirstName"]`))); name != "Wanjiku" {
					t.Errorf("first name after a decline: %q", name)
				}
				// The keyboard starts where the shopper must act: the card
				// number, which is never shown again (it started nowhere).
				if focused := value(t, cctx, chromedp.Evaluate[string](`document.activeElement.id`)); focused != "cardNumber" {
					t.Errorf("focus after a decline on %q, want cardNumber", focused)
				}
				if tc.then == "" {
					run(t, cctx, chromedp.Click(chromedp.ID("cancel")))
				} else {
					run(t, cctx, sendKeys(chromedp.ID("cardNumber"), tc.then),
						chromedp.Clear(chromedp.ID("cardExpiry")), sendKeys(chromedp.ID("cardExpiry"), "11"+year[2:]),
						sendKeys(chromedp.ID("cardSecurity"), tc.cvv), chromedp.Click(chromedp.ID("pay")))
				}
			}
			if tc.threeDS {
				run(t, cctx, chromedp.WaitVisible(chromedp.ID("code")))
				if screenshots {
					saveScreenshot(t, cctx, "challenge.png")
				}
				run(t, cctx, sendKeys(chromedp.ID("code"), "123456"), chromedp.Click(chromedp.ID("confirm")))
			}
			run(t, cctx, chromedp.WaitVisible(chromedp.ID("result")))
			got := value(t, cctx, chromedp.Text(chromedp.ID("result")))
			if loc := value(t, cctx, chromedp.Location()); loc != shop.URL+"/callback" {
				t.Errorf("the browser ended at %s, want the shop's callback %s/callback", loc, shop.URL)
			}

			v := shop.verify(t, billRef)
			if tc.wantPaid {
				if want := "PAID " + v.TransactionID; got != want || !v.Paid || v.TransactionID == "" {
					t.Errorf("shop says %q, Verify says paid=%v transactionId=%q", got, v.Paid, v.TransactionID)
				}
			} else if want := "FAILED " + tc.wantFailed; got != want || v.Paid {
				t.Errorf("shop says %q, want %q; Verify paid=%v", got, want, v.Paid)
			}
			if n := len(shop.callbacks(billRef)); n != 1 {
				t.Errorf("the shop got %d callbacks for bill %s, want 1", n, billRef)
			}
			if tc.doubleClick {
				// The result page is the answer to the last submission, so
				// every submission has reached the proxy by now.
				if n := proxy.submissions.Load(); n != 1 {
					t.Errorf("double click: %d card submissions left the browser, want 1", n)
				}
				if n := chargeAttempts(t, g, billRef); n != 1 {
					t.Errorf("double click: %d charge attempts for bill %s, want exactly 1", n, billRef)
				}
			}
			for _, msg := range console.cspSince(mark) {
				t.Errorf("browser console: %s", msg)
			}
			for _, msg := range console.exceptionsSince(mark) {
				t.Errorf("uncaught exception in a page: %s", msg)
			}
		})
	}
}

// needBrowser skips a browser test where Debian's chromium is missing,
// unless KADI_REQUIRE_BROWSER=1 (CI) makes that a failure.
func needBrowser(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if os.Getenv("KADI_REQUIRE_BROWSER") == "1" {
			t.Fatalf("KADI_REQUIRE_BROWSER=1 but %s is missing: %v", chromiumPath, err)
		}
		t.Skipf("no browser at %s (install Debian's chromium, or set KADI_REQUIRE_BROWSER=1 to make this a failure)", chromiumPath)
	}
}

// newBrowser starts a headless Chromium for the test and a watch on its
// console.
func newBrowser(t *testing.T) (context.Context, *consoleWatch) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)

	// The first Run binds the browser's life to its context, so it gets ctx
	// itself, without a deadline; the timer only stops a hung start.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("start %s: %v", chromiumPath, err)
		}
	case <-time.After(60 * time.Second):
		cancel()
		t.Fatalf("%s did not start within a minute", chromiumPath)
	}

	w := &consoleWatch{}
	if err := chromedp.Listen(ctx, w.record); err != nil {
		t.Fatal(err)
	}
	// CDP-injected scripts are exempt from the page's CSP; this one turns
	// every securitypolicyviolation event into a console error, in case a
	// browser version stops logging the violation itself.
	_, err := chromedp.Call(ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{
		Source: `document.addEventListener("securitypolicyviolation", function (e) {
  console.error("Content Security Policy violation: " + e.violatedDirective + " blocked " + e.blockedURI + " on " + document.location.href);
});`,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, w
}

// consoleWatch keeps what the browser reported on its console.
type consoleWatch struct {
	mu         sync.Mutex
	messages   []string
	exceptions []string
}

// record runs in the tab's event loop: it must return fast.
func (w *consoleWatch) record(ev any) {
	var msg, exc string
	switch ev := ev.(type) {
	case *cdplog.EventEntryAdded:
		if ev.Entry != nil {
			msg = fmt.Sprintf("[%s %s] %s (%s)", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text, ev.Entry.URL)
		}
	case *runtime.EventConsoleAPICalled:
		var parts []string
		for _, a := range ev.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				var s string
				if json.Unmarshal(a.Value, &s) == nil {
					parts = append(parts, s)
				} else {
					parts = append(parts, string(a.Value))
				}
			}
		}
		msg = fmt.Sprintf("[console.%s] %s", ev.Type, strings.Join(parts, " "))
	case *runtime.EventExceptionThrown:
		if d := ev.ExceptionDetails; d != nil {
			exc = d.Text
			if d.Exception != nil {
				exc += " " + d.Exception.Description
			}
			exc += " at " + d.URL
		}
	}
	if msg == "" && exc == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if msg != "" {
		w.messages = append(w.messages, msg)
	}
	if exc != "" {
		w.exceptions = append(w.exceptions, exc)
	}
}

type consoleMark struct{ messages, exceptions int }

func (w *consoleWatch) mark() consoleMark {
	w.mu.Lock()
	defer w.mu.Unlock()
	return consoleMark{len(w.messages), len(w.exceptions)}
}

func (w *consoleWatch) cspSince(m consoleMark) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, msg := range w.messages[m.messages:] {
		if strings.Contains(strings.ToLower(msg), "content security policy") {
			out = append(out, msg)
		}
	}
	return out
}

func (w *consoleWatch) exceptionsSince(m consoleMark) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.exceptions[m.exceptions:]...)
}

// stepTimeout bounds one browser step: a wait for an element a page no
// longer has failed only when the whole suite timed out, 30 minutes on,
// naming no step.
const stepTimeout = 90 * time.Second

// sendKeys types v into the field sel selects, as chromedp.SendKeys does,
// without SendKeys's read of the node's attributes outside the node's
// lock (chromedp v0.22.1, query.go), which the race detector caught while
// the page's script changed an attribute of the field being typed into.
// None of the fields typed into is a file input, the one case that read
// is for.
func sendKeys[S chromedp.Selectable](sel S, v string) chromedp.Action[chromedp.Void] {
	return chromedp.QueryAfter(sel, func(ctx context.Context, t *chromedp.Target, nodes []*chromedp.Node) (chromedp.Void, error) {
		if len(nodes) == 0 {
			return chromedp.Void{}, fmt.Errorf("no field %v to type into", sel)
		}
		return chromedp.KeyEventNode(nodes[0], v)(ctx, t)
	}, chromedp.NodeVisible)
}

func run(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for i, step := range steps {
		// Right after a page replaces another (every hosted-form POST
		// answers 303), chromedp can hold a node id of the old document
		// and fail with "Could not find node with given id". The step
		// then did nothing (the node was never reached), so it is safe
		// to run it again once the new document is in place.
		for attempt := 1; ; attempt++ {
			sctx, cancel := context.WithTimeout(ctx, stepTimeout)
			err := chromedp.Do(sctx, step)
			cancel()
			if err == nil {
				break
			}
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				t.Fatalf("browser: step %d of %d (%T) did not finish in %s", i+1, len(steps), step, stepTimeout)
			}
			if attempt == 3 || !strings.Contains(err.Error(), "Could not find node with given id") {
				t.Fatalf("browser: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func value[T any](t testing.TB, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// doubleClickPay clicks the card page's pay button twice, the second time
// while the first submission is certainly in flight: the proxy holds it
// until both clicks are done. (Chrome answers no DevTools evaluation while a
// navigation is pending, so the button's state cannot be read meanwhile; the
// proxy's count of submissions tells instead.)
func doubleClickPay(t testing.TB, ctx context.Context, p *holdingProxy) {
	t.Helper()
	xy := value(t, ctx, chromedp.Evaluate[[]float64](`(function () {
  var el = document.getElementById("pay");
  el.scrollIntoView({block: "center"});
  var r = el.getBoundingClientRect();
  return [r.left + r.width / 2, r.top + r.height / 2];
})()`))
	run(t, ctx, chromedp.MouseClickXY(xy[0], xy[1]))
	select {
	case <-p.arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("the first click on pay sent nothing")
	}
	run(t, ctx, chromedp.MouseClickXY(xy[0], xy[1], chromedp.ClickCount(2)))
	p.Release()
}

// holdingProxy is a transparent proxy in front of the gateway that holds
// every card submission (a POST to /cardPay with a cardNumber) until
// Release, and counts them.
type holdingProxy struct {
	*httptest.Server
	arrived     chan struct{}
	release     chan struct{}
	releaseOnce sync.Once
	submissions atomic.Int32
}

func newHoldingProxy(t testing.TB, gatewayURL string) *holdingProxy {
	t.Helper()
	u, err := url.Parse(gatewayURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	p := &holdingProxy{arrived: make(chan struct{}, 16), release: make(chan struct{})}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/cardPay" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if v, _ := url.ParseQuery(string(body)); v.Get("cardNumber") != "" {
				p.submissions.Add(1)
				select {
				case p.arrived <- struct{}{}:
				default:
				}
				<-p.release
				// A request that reached a server is processed even if the
				// browser moved on to a newer one.
				r = r.WithContext(context.WithoutCancel(r.Context()))
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		p.Release()
		p.Server.Close()
	})
	return p
}

// Release lets every held submission, and every later one, through.
func (p *holdingProxy) Release() { p.releaseOnce.Do(func() { close(p.release) }) }

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// saveScreenshot writes the viewport to testdata/screenshots for a person to
// look at; only with KADI_SCREENSHOTS=1.
func saveScreenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	png := value(t, ctx, chromedp.FullScreenshot(100)) // 100: PNG
	dir := filepath.Join("testdata", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", filepath.Join(dir, name))
}

// chargeAttempts counts the payment attempts the gateway recorded for a
// bill: each one is one charge sent to the acquirer.
func chargeAttempts(t testing.TB, g *gateway, billRef string) int {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(g.DataDir, "kadi.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM payments WHERE bill_ref = ?`, billRef).Scan(&n); err != nil {
		t.Fatalf("count payments of %s: %v", billRef, err)
	}
	return n
}

// testShop is the merchant's web shop: GET / creates a bill and shows the
// payment form without card fields; POST /callback reads the result,
// verifies it from the backend and shows the outcome.
type testShop struct {
	*httptest.Server
	*shopper

	// viaProxy renders the payment form with the proxy as the hosted
	// form's URL, for GET /?via=proxy.
	viaProxy *client.Client

	mu       sync.Mutex
	orders   int
	received map[string][]client.Callback // by bill reference
}

var shopPage = template.Must(template.New("shop").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Test shop</title></head>
<body><h1>Test shop</h1>
{{if .Form}}<p>Order {{.Order}}: two tickets, KES {{.Amount}}</p>
{{.Form}}{{else}}<p id="result">{{.Result}}</p>{{end}}
</body></html>
`))

func newTestShop(t testing.TB, g *gateway, m merchantCreds, proxyURL string) *testShop {
	t.Helper()
	viaProxy, err := client.New(client.Config{BaseURL: g.BaseURL, PaymentFormURL: proxyURL,
		APIKey: m.Test.APIKey, Username: m.MerchantCode, Password: m.Password})
	if err != nil {
		t.Fatal(err)
	}
	s := &testShop{shopper: &shopper{g: g, m: m, c: g.Client(t, m)}, viaProxy: viaProxy, received: map[string][]client.Callback{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.handleCheckout)
	mux.HandleFunc("POST /callback", s.handleCallback)
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Server.Close)
	return s
}

func (s *testShop) handleCheckout(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.orders++
	order := fmt.Sprintf("WEB%d", s.orders)
	s.mu.Unlock()
	ctx := r.Context()
	b, err := s.c.CreateBill(ctx, s.billRequest(order, "250.00"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	token, err := s.c.Token(ctx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	render := s.c
	if r.URL.Query().Get("via") == "proxy" {
		render = s.viaProxy
	}
	var form strings.Builder
	err = render.RenderPaymentForm(&form, client.PaymentForm{
		Token: token, OutletCode: s.m.OutletCode, MerchantCode: s.m.MerchantCode,
		Amount: b.Amount, OrderReference: order, BillReference: b.Reference,
		ProductType: "tickets", ProductDescription: "Two tickets", ServiceDate: "2026-11-21",
		CustomerFirstName: "Wanjiku", CustomerLastName: "Kamau", Country: "KE",
		MobileNumber: "+254 712345678", EmailAddress: "wanjiku@example.com", City: "Nairobi",
		CallbackURL: s.URL + "/callback",
	}, client.FormOptions{ID: "checkout", SubmitLabel: "Pay KES " + b.Amount})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	_ = shopPage.Execute(w, map[string]any{"Order": order, "Amount": b.Amount, "Form": template.HTML(form.String())})
}

func (s *testShop) handleCallback(w http.ResponseWriter, r *http.Request) {
	cb, err := client.ParseCallback(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.received[cb.BillReference] = append(s.received[cb.BillReference], cb)
	s.mu.Unlock()

	// The callback came through the browser: only Verify says "paid".
	var result string
	v, err := s.c.Verify(r.Context(), cb.BillReference)
	switch {
	case err != nil:
		result = "ERROR " + err.Error()
	case cb.Successful() && v.Paid && v.TransactionID == cb.TransactionRef:
		result = "PAID " + cb.TransactionRef
	case !cb.Successful() && !v.Paid:
		result = "FAILED " + cb.Message
	default:
		result = fmt.Sprintf("MISMATCH callback %+v, verification %+v", cb, v)
	}
	_ = shopPage.Execute(w, map[string]any{"Result": result})
}

func (s *testShop) callbacks(billRef string) []client.Callback {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]client.Callback(nil), s.received[billRef]...)
}

// group is how the card page shows a number as it is typed.
func group(n string) string {
	sizes := []int{4, 4, 4, 4, 3}
	if strings.HasPrefix(n, "34") || strings.HasPrefix(n, "37") {
		sizes = []int{4, 6, 5}
	}
	var parts []string
	for _, size := range sizes {
		if n == "" {
			break
		}
		size = min(size, len(n))
		parts, n = append(parts, n[:size]), n[size:]
	}
	return strings.Join(parts, " ")
}

// TestBrowserCardChecks is the card page's script at work, and the page
// without it: a number that fails Luhn, a past expiry and a short CVV are
// refused in the page, beside their fields, before anything is sent; with
// JavaScript off the same checkout still pays, checked by the server.
func TestBrowserCardChecks(t *testing.T) {
	t.Parallel()
	needBrowser(t)
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Checks Shop") })
	shop := newTestShop(t, g, m, g.BaseURL)
	ctx, console := newBrowser(t)
	mark := console.mark()

	run(t, ctx, chromedp.Navigate(shop.URL+"/"), chromedp.WaitVisible(chromedp.ID("checkout")))
	billRef := value(t, ctx, chromedp.Value(chromedp.CSS(`#checkout input[name="billReference"]`)))
	run(t, ctx, chromedp.Click(chromedp.CSS("#checkout button")), chromedp.WaitVisible(chromedp.ID("cardNumber")),
		sendKeys(chromedp.ID("cardNumber"), "4242424242424241"), sendKeys(chromedp.ID("cardExpiry"), "0120"),
		sendKeys(chromedp.ID("cardSecurity"), "12"), chromedp.Click(chromedp.ID("pay")),
		chromedp.WaitVisible(chromedp.ID("cardNumber-error")))
	for _, id := range []string{"cardNumber", "cardExpiry", "cardSecurity"} {
		if v := value(t, ctx, chromedp.Evaluate[string](`document.getElementById("`+id+`").getAttribute("aria-invalid") + " " + document.getElementById("`+id+`").getAttribute("aria-describedby")`)); v != "true "+id+"-error" {
			t.Errorf("%s: aria-invalid and aria-describedby %q", id, v)
		}
	}
	if focused := value(t, ctx, chromedp.Evaluate[string](`document.activeElement.id`)); focused != "cardNumber" {
		t.Errorf("focus on %q, want the first field in error", focused)
	}
	if os.Getenv("KADI_SCREENSHOTS") == "1" {
		saveScreenshot(t, ctx, "card-errors.png")
	}
	axeCheck(t, ctx, "card entry with errors")
	if n := chargeAttempts(t, g, billRef); n != 0 {
		t.Errorf("the page sent %d charge attempts with errors it could see", n)
	}

	empty := func(ids ...string) {
		for _, id := range ids {
			_ = value(t, ctx, chromedp.Evaluate[string](`document.getElementById("`+id+`").value = ""`))
		}
	}
	// The expiry as shoppers type or paste it: a four-digit year and a
	// one-digit month are read, not cut to a false "expired".
	for _, tt := range []struct{ typed, want string }{
		{"12/" + fmt.Sprint(time.Now().Year()+2), "12 / " + fmt.Sprint(time.Now().Year()+2)},
		{"1/" + fmt.Sprint(time.Now().Year()%100+2), "01 / " + fmt.Sprint(time.Now().Year()%100+2)},
	} {
		empty("cardExpiry")
		run(t, ctx, sendKeys(chromedp.ID("cardExpiry"), tt.typed))
		if got := value(t, ctx, chromedp.Value(chromedp.ID("cardExpiry"))); got != tt.want {
			t.Errorf("expiry typed %q shows %q, want %q", tt.typed, got, tt.want)
		}
	}
	// A backspace in the middle of the number leaves the caret there, not
	// at the end: after "4242 4" once the 2 before it is gone.
	empty("cardNumber")
	run(t, ctx, sendKeys(chromedp.ID("cardNumber"), "4242424242424242"))
	caret := value(t, ctx, chromedp.Evaluate[int](`(() => { const n = document.getElementById("cardNumber");
		n.focus(); n.setSelectionRange(7, 7); document.execCommand("delete", false); return n.selectionStart })()`))
	if got := value(t, ctx, chromedp.Value(chromedp.ID("cardNumber"))); got != "4242 4424 2424 242" || caret != 6 {
		t.Errorf("backspace at 7 of the grouped number: %q, caret %d; want \"4242 4424 2424 242\" and 6", got, caret)
	}
	// The fields' borders stand out from the page (WCAG 1.4.11 asks 3:1;
	// they were 1.23:1), and the fields and button use the page's font.
	look := value(t, ctx, chromedp.Evaluate[[]string](`(() => {
		const lum = c => { const v = c.match(/\d+/g).slice(0, 3).map(x => { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4) });
			return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2] };
		const n = document.getElementById("cardFirstName"), bg = lum(getComputedStyle(n).backgroundColor), line = lum(getComputedStyle(n).borderTopColor);
		const font = el => getComputedStyle(el).fontFamily;
		return [((Math.max(bg, line) + 0.05) / (Math.min(bg, line) + 0.05)) >= 3 ? "contrast ok" : "contrast " + ((Math.max(bg, line) + 0.05) / (Math.min(bg, line) + 0.05)).toFixed(2),
			font(n) === font(document.body) && font(document.getElementById("pay")) === font(document.body) ? "font ok" : font(n) + " / " + font(document.getElementById("pay"))] })()`))
	if !slices.Equal(look, []string{"contrast ok", "font ok"}) {
		t.Errorf("the card fields: %q", look)
	}
	// A four-digit year pays. While the payment is on its way the button
	// keeps its name (a screen reader heard "…") and the form says it is
	// busy: a submit event the page handles, then undone, then the click.
	empty("cardNumber", "cardSecurity", "cardExpiry")
	run(t, ctx, sendKeys(chromedp.ID("cardNumber"), "4242424242424242"), sendKeys(chromedp.ID("cardSecurity"), "123"),
		sendKeys(chromedp.ID("cardExpiry"), "12/"+fmt.Sprint(time.Now().Year()+2)))
	busy := value(t, ctx, chromedp.Evaluate[[]string](`(() => { const f = document.getElementById("card-form"), b = document.getElementById("pay");
		f.dispatchEvent(new Event("submit", {cancelable: true}));
		const seen = [b.textContent, String(b.disabled), f.getAttribute("aria-busy")];
		b.disabled = false; f.classList.remove("busy"); f.removeAttribute("aria-busy");
		return seen })()`))
	if len(busy) != 3 || !strings.HasPrefix(busy[0], "Pay ") || busy[1] != "true" || busy[2] != "true" {
		t.Errorf("the pay button while paying: label, disabled, form busy = %q", busy)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("pay")),
		chromedp.WaitVisible(chromedp.ID("result")))
	if n := chargeAttempts(t, g, billRef); n != 1 {
		t.Errorf("a four-digit year: %d charge attempts, want the payment made", n)
	}

	// JavaScript off: a new checkout pays all the same.
	scripts := func(off bool) {
		if _, err := chromedp.Call(ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: off}); err != nil {
			t.Fatal(err)
		}
	}
	scripts(true)
	run(t, ctx, chromedp.Navigate(shop.URL+"/"), chromedp.WaitVisible(chromedp.ID("checkout")))
	run(t, ctx, chromedp.Click(chromedp.CSS("#checkout button")), chromedp.WaitVisible(chromedp.ID("cardNumber")),
		sendKeys(chromedp.ID("cardNumber"), "4242 4242 4242 4242"), sendKeys(chromedp.ID("cardExpiry"), "12/"+fmt.Sprint(time.Now().Year()%100+2)),
		sendKeys(chromedp.ID("cardSecurity"), "123"), chromedp.Click(chromedp.ID("pay")))
	// Without scripts the redirect page waits for its button.
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#kadi-callback button")), chromedp.Click(chromedp.CSS("#kadi-callback button")),
		chromedp.WaitVisible(chromedp.ID("result")))
	if got := value(t, ctx, chromedp.Text(chromedp.ID("result"))); !strings.HasPrefix(got, "PAID ") {
		t.Errorf("JavaScript off: the shop says %q", got)
	}
	scripts(false)
	for _, msg := range console.cspSince(mark) {
		t.Errorf("browser console: %s", msg)
	}
}
