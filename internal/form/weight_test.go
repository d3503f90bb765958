package form_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// pageBudget is what a shopper on a slow phone downloads for the card
// page: its HTML and every stylesheet and script it loads, uncompressed.
const pageBudget = 20 << 10

var assetRef = regexp.MustCompile(`(?:href|src)="(/static/[^"]+)"`)

// The card page, in each language, stays within the budget, and its
// stylesheet and scripts are kept by the browser.
func TestCardPageWeight(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Weight Shop")
	tok := g.Token(c, merchant.Test)
	for _, lang := range []string{"en", "sw"} {
		b := g.CreateBill(c, tok, "WEIGHT"+lang, "1500.00")
		req := servertest.CardPayRequest(servertest.FormFields(c, tok, b))
		req.Header.Set("Accept-Language", lang)
		rec := g.Serve(req)
		html := rec.Body.String()
		total, wire := len(html), len(html)
		assets := assetRef.FindAllStringSubmatch(html, -1)
		if len(assets) < 3 {
			t.Fatalf("%s: the card page loads %d assets; the scan is broken:\n%s", lang, len(assets), html)
		}
		for _, a := range assets {
			asset := get(g, a[1])
			if asset.Code != 200 || asset.Body.Len() == 0 {
				t.Fatalf("%s: %s answered %d", lang, a[1], asset.Code)
			}
			// Downloaded once: a shopper's next page, and next checkout,
			// takes it from the browser's cache.
			if cc := asset.Header().Get("Cache-Control"); !strings.Contains(cc, "immutable") {
				t.Errorf("%s: %s is cached %q; want a year, immutable", lang, a[1], cc)
			}
			total += asset.Body.Len()
			// What a browser, which takes gzip, downloads of it.
			req := httptest.NewRequest(http.MethodGet, a[1], nil)
			req.Header.Set("Accept-Encoding", "gzip, deflate, br, zstd")
			gz := g.Serve(req)
			if gz.Header().Get("Content-Encoding") != "gzip" || gz.Body.Len() >= asset.Body.Len() {
				t.Errorf("%s: %s goes to a browser that takes gzip as %q, %d bytes of %d", lang, a[1], gz.Header().Get("Content-Encoding"), gz.Body.Len(), asset.Body.Len())
			}
			wire += gz.Body.Len()
		}
		t.Logf("%s card page: %d bytes (HTML %d) of a %d budget; %d over the wire with gzip", lang, total, len(html), pageBudget, wire)
		if total > pageBudget {
			t.Errorf("%s card page weighs %d bytes, over the %d budget", lang, total, pageBudget)
		}
	}
}
