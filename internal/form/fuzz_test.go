package form_test

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/form"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// FuzzCardPay posts arbitrary bodies to /cardPay through the real gateway:
// whatever arrives, the answer is a page of ours with a 2xx or 4xx status,
// never a 5xx or a panic, and a redirect only ever goes to a checked
// callbackUrl. Seeds include a valid form for a real bill, so mutations
// reach the checks past the token.
func FuzzCardPay(f *testing.F) {
	g := servertest.Start(f, servertest.Options{})
	c := g.Onboard("Fuzz Shop")
	token := g.Token(c, merchant.Test)
	b := g.CreateBill(c, token, "FUZZ1", "1500")
	valid := servertest.FormFields(c, token, b)
	f.Add(valid.Encode())
	withCard := servertest.Card{Number: "4242424242424242", CVV: "123"}.Apply(url.Values(cloneValues(valid)))
	f.Add(withCard.Encode())
	f.Add("token=x&merchantCode=1&billReference=%zz")
	f.Add(strings.Repeat("a=b&", 2000))
	f.Add("callbackUrl=javascript:alert(1)&" + valid.Encode())
	f.Fuzz(func(t *testing.T, body string) {
		rec := g.Serve(servertest.CardPayRequest(mustParse(body)))
		raw := g.Serve(rawCardPay(body))
		for _, r := range []int{rec.Code, raw.Code} {
			if r >= 500 {
				t.Fatalf("status %d for body %q", r, body)
			}
		}
		for _, page := range []string{rec.Body.String(), raw.Body.String()} {
			if i := strings.Index(page, `id="kadi-callback"`); i >= 0 {
				action := page[strings.LastIndex(page[:i], `action="`)+len(`action="`):]
				action = action[:strings.Index(action, `"`)]
				if _, err := form.CheckCallbackURL(strings.ReplaceAll(action, "&amp;", "&"), merchant.Test); err != nil {
					t.Fatalf("redirect to an unchecked URL %q: %v", action, err)
				}
			}
		}
	})
}

func cloneValues(v url.Values) map[string][]string {
	out := map[string][]string{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

func mustParse(body string) url.Values {
	v, err := url.ParseQuery(body)
	if err != nil {
		return url.Values{}
	}
	return v
}

func rawCardPay(body string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, "/cardPay", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// cspHost is CSP3's host-part without wildcards: 1*host-char *( "."
// 1*host-char ), host-char = ALPHA / DIGIT / "-".
var cspHost = regexp.MustCompile(`^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$`)

// FuzzCheckCallbackURL: an accepted callbackUrl is always absolute http(s)
// with a host and without query, fragment or credentials, https in live
// mode, and survives a round trip through url.Parse unchanged in meaning.
func FuzzCheckCallbackURL(f *testing.F) {
	for _, s := range []string{"https://shop.example/cb", "http://127.0.0.1:8080/x", "https://shop.example/cb?x=1",
		"https://shop.example/#f", "javascript:alert(1)", "//shop.example/cb", "https://user:pw@shop.example/",
		"https://shop.example/cb?", "HTTPS://SHOP.EXAMPLE/a%20b", "https://[::1]:443/x", "http://shop.example\t/x", "https://shop.example;sandbox/cb", "https://shop.example:0/cb", "https://shop.example:65535/cb", "https://shop.example:/cb", "http://[::ffff:127.0.0.1]:8000/cb", "https://shop.example./cb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		for _, mode := range []merchant.Mode{merchant.Test, merchant.Live} {
			u, err := form.CheckCallbackURL(raw, mode)
			if err != nil {
				continue
			}
			switch {
			case u.Scheme != "http" && u.Scheme != "https":
				t.Fatalf("%q accepted with scheme %q", raw, u.Scheme)
			case mode == merchant.Live && u.Scheme != "https":
				t.Fatalf("%q accepted in live mode", raw)
			case u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
				t.Fatalf("%q accepted: %#v", raw, u)
			case strings.ContainsAny(u.Host, ";,' \"*"):
				t.Fatalf("%q accepted with a host that could write CSP: %q", raw, u.Host)
			case !cspHost.MatchString(u.Hostname()):
				t.Fatalf("%q accepted with a host the result page's CSP cannot name: %q", raw, u.Hostname())
			case strings.ContainsAny(raw, "?#"):
				t.Fatalf("%q accepted with a query or fragment marker", raw)
			case u.Port() != "" && !validPortNumber(u.Port()):
				t.Fatalf("%q accepted with port %q", raw, u.Port())
			}
			again, err := url.Parse(u.String())
			if err != nil || again.Host != u.Host || again.Scheme != u.Scheme || again.Path != u.Path {
				t.Fatalf("%q does not round-trip: %v %v", raw, again, err)
			}
		}
	})
}

// FuzzParseSubmission: any body parses or is refused with (a wrapped)
// ErrBadEncoding,
// and a parsed submission's fields carry no surrounding whitespace.
func FuzzParseSubmission(f *testing.F) {
	f.Add("token=a&amount=1500.00&cardNumber=4242+4242+4242+4242&kadiEntry=1")
	f.Add("%zz=1")
	f.Add("amount=%20%201%20")
	f.Fuzz(func(t *testing.T, body string) {
		s, err := form.ParseSubmission(body)
		if err != nil {
			if !errors.Is(err, form.ErrBadEncoding) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		for _, v := range []string{s.Token, s.Amount, s.CardNumber, s.CallbackURL, s.BillReference} {
			if v != strings.TrimSpace(v) {
				t.Fatalf("untrimmed field %q", v)
			}
		}
	})
}

func validPortNumber(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// Hosts that are DNS names to a browser too are kept, digits and all.
func TestCallbackHostsKept(t *testing.T) {
	for _, raw := range []string{"https://shop.example/cb", "https://1shop.example/cb", "https://shop.123abc/cb",
		"https://0x.example/cb", "http://127.0.0.1:8443/cb", "https://xn--dka-kpa.example/cb"} {
		if _, err := form.CheckCallbackURL(raw, merchant.Test); err != nil {
			t.Errorf("%s: %v", raw, err)
		}
	}
}
