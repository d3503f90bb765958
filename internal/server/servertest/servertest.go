// Package servertest starts a real Kadi gateway for tests: server.New on a
// SQLite file in a temporary directory, a fixed master key, a clock the test
// can move forward and a captured log. Its helpers speak the spec's wire
// format through the gateway's own handler, so the api, form and payment
// tests all drive the same code a merchant does.
//
// Card numbers never appear here: they may live only in _test.go files,
// testdata and the simulator's table, so tests pass theirs in as a Card.
package servertest

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/api"
	"github.com/kadipay/kadi/internal/keyring"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server"
	"github.com/kadipay/kadi/internal/store"
)

// CallbackURL is where forms built here send the customer back to. It is
// never contacted: the redirect is a page the browser would post.
const CallbackURL = "https://shop.example/kadi/return"

// Options adjust the gateway Start builds. The zero value is the default
// configuration with test mode only.
type Options struct {
	TimeZone     string           // default Africa/Nairobi
	LiveAcquirer payment.Acquirer // nil: live charges refused, as by default
	TokenTTL     time.Duration    // default one hour
	PublicURL    string           // default http://kadi.test
	// FormAddr and FormPublicURL give the hosted form a listener and
	// address of its own (server.Config's): the form is then on
	// FormHandler only, not on Handler.
	FormAddr, FormPublicURL string
	// MetricsAllow replaces the peers /metrics answers (default loopback).
	MetricsAllow []netip.Prefix
	// DatabaseURL, when set, runs the gateway on that PostgreSQL instead
	// of SQLite in its data dir.
	DatabaseURL string
	// TrustedProxies are the peers whose forwarding headers are believed.
	TrustedProxies []netip.Prefix
	// Restart, when set, starts on that gateway's data dir and master key
	// with that gateway's clock: what a node restarted with new flags sees.
	Restart *Gateway
	// RequestTimeout replaces a request's time (server.Config's).
	RequestTimeout time.Duration
}

// Gateway is a running gateway and what a test needs to look inside it.
type Gateway struct {
	*server.Gateway
	TB    testing.TB
	Dir   string     // the data directory: SQLite file, WAL and SHM
	Logs  *LogBuffer // everything the gateway logged
	Clock *Clock     // the gateway's clock: tokens, bills, payments, checkout sessions

	masterKey []byte
	release   func() // the data dir's lock
	closeOnce sync.Once
	closeErr  error
}

// Start builds a gateway on a fresh temporary directory and closes it when
// the test ends.
func Start(tb testing.TB, opts Options) *Gateway {
	tb.Helper()
	cfg := server.Defaults()
	cfg.DataDir = tb.TempDir()
	cfg.MasterKey = secret.RandomBytes(32)
	clock := &Clock{}
	if r := opts.Restart; r != nil {
		cfg.DataDir, cfg.MasterKey, clock = r.Dir, r.masterKey, r.Clock
	}
	cfg.PublicURL = "http://kadi.test"
	if opts.PublicURL != "" {
		cfg.PublicURL = opts.PublicURL
	}
	cfg.FormAddr, cfg.FormPublicURL = opts.FormAddr, opts.FormPublicURL
	cfg.LiveAcquirer = opts.LiveAcquirer
	cfg.DatabaseURL = opts.DatabaseURL
	if opts.MetricsAllow != nil {
		cfg.MetricsAllow = opts.MetricsAllow
	}
	cfg.TrustedProxies = opts.TrustedProxies
	cfg.RequestTimeout = opts.RequestTimeout
	if opts.TimeZone != "" {
		cfg.TimeZone = opts.TimeZone
	}
	if opts.TokenTTL != 0 {
		cfg.TokenTTL = opts.TokenTTL
	}
	logs := &LogBuffer{}
	cfg.Now = clock.Now
	release := func() {}
	if cfg.DatabaseURL == "" {
		// As kadi serve does, so that the store counts on being the only
		// one adding bills, as it does there.
		var err error
		if release, err = store.LockDataDir(cfg.DataDir); err != nil {
			tb.Fatalf("lock the data dir: %v", err)
		}
		cfg.DataDirHeld = store.DataDirLocks
	}
	g, err := server.New(context.Background(), cfg, logging.New(logs, slog.LevelDebug))
	if err != nil {
		release()
		tb.Fatalf("server.New: %v", err)
	}
	gw := &Gateway{Gateway: g, TB: tb, Dir: cfg.DataDir, Logs: logs, Clock: clock, masterKey: cfg.MasterKey, release: release}
	tb.Cleanup(func() {
		if err := gw.Close(); err != nil {
			tb.Errorf("close gateway: %v", err)
		}
	})
	return gw
}

// Sealer is the gateway's sealer for purpose ("hosted-pages" seals page
// URLs), for a test that reads what a sealed value holds.
func (g *Gateway) Sealer(purpose string) *secret.Sealer {
	keys := keyring.New(keyring.Ring{Keys: []keyring.Key{{ID: secret.LegacyKeyID, Secret: g.masterKey}}})
	s, err := secret.NewRingSealer(keys.Purpose(purpose))
	if err != nil {
		g.TB.Fatalf("sealer %s: %v", purpose, err)
	}
	return s
}

// Close closes the store once; later calls return the first result.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		g.closeErr = g.Gateway.Close()
		g.release()
	})
	return g.closeErr
}

// Clock is the real time plus an offset a test can grow.
type Clock struct{ offset atomic.Int64 }

// Now is the clock's current time.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// LogBuffer collects log output from many goroutines.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Serve runs req through the gateway's handler and, as a browser does,
// follows a 303 to a hosted page (POST-redirect-GET), sending the
// request's Accept-Language and cookies with any the 303 set. ServeOnce
// does not follow.
func (g *Gateway) Serve(req *http.Request) *httptest.ResponseRecorder {
	rec := g.ServeOnce(req)
	loc := rec.Header().Get("Location")
	if rec.Code != http.StatusSeeOther || !strings.HasPrefix(loc, "/cardPay/page/") {
		return rec
	}
	next := httptest.NewRequest(http.MethodGet, loc, nil)
	next.Header.Set("Accept-Language", req.Header.Get("Accept-Language"))
	cookies := map[string]*http.Cookie{}
	for _, c := range req.Cookies() {
		cookies[c.Name] = c
	}
	for _, c := range rec.Result().Cookies() {
		cookies[c.Name] = c
	}
	for _, c := range cookies {
		next.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	return g.ServeOnce(next)
}

// ServeOnce runs req through the gateway's handler.
func (g *Gateway) ServeOnce(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	g.Handler.ServeHTTP(rec, req)
	return rec
}

// Onboard creates a merchant and returns its one-time credentials.
func (g *Gateway) Onboard(name string) merchant.Credentials {
	g.TB.Helper()
	c, err := merchant.Onboard(context.Background(), g.Store, name, g.Clock.Now())
	if err != nil {
		g.TB.Fatalf("onboard %q: %v", name, err)
	}
	return c
}

// Key returns the API key of c for mode.
func Key(c merchant.Credentials, mode merchant.Mode) string {
	if mode == merchant.Live {
		return c.Live.APIKey
	}
	return c.Test.APIKey
}

// TokenRequest is POST /identity/v2/token with the raw API key in the
// Basic header, as docs/api.md describes.
func TokenRequest(apiKey, username, password string) *http.Request {
	form := url.Values{}
	if username != "" {
		form.Set("username", username)
	}
	if password != "" {
		form.Set("password", password)
	}
	req := httptest.NewRequest(http.MethodPost, "/identity/v2/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if apiKey != "" {
		req.Header.Set("Authorization", "Basic "+apiKey)
	}
	return req
}

// PaymentTokenRequest is the alternative POST /token.
func PaymentTokenRequest(apiKey, merchantCode, password, grantType string) *http.Request {
	form := url.Values{}
	for k, v := range map[string]string{"merchantCode": merchantCode, "password": password, "grant_type": grantType} {
		if v != "" {
			form.Set(k, v)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if apiKey != "" {
		req.Header.Set("Authorization", "Basic "+apiKey)
	}
	return req
}

// Token issues an access token for c in mode, failing the test otherwise.
func (g *Gateway) Token(c merchant.Credentials, mode merchant.Mode) string {
	g.TB.Helper()
	rec := g.Serve(TokenRequest(Key(c, mode), c.Username, c.Password))
	var tr api.TokenResponse
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &tr) != nil || tr.AccessToken == "" {
		g.TB.Fatalf("token for %s (%s): %d %s", c.MerchantCode, mode, rec.Code, rec.Body)
	}
	return tr.AccessToken
}

// BillBody is a valid create-bill request of spec 2.2 for c. It is a map so
// tests can break, retype or add any field.
func BillBody(c merchant.Credentials, orderRef, amount string) map[string]any {
	return map[string]any{
		"customer": map[string]any{"name": "Jane Wanjiru"},
		"order": map[string]any{
			"billerCode":  c.BillerCode,
			"reference":   orderRef,
			"amount":      amount,
			"currency":    "KES",
			"description": "Order " + orderRef,
			"channel":     "CARD",
			"outlet":      c.OutletCode,
		},
	}
}

// Order returns body's order object, for tests that change a field.
func Order(body map[string]any) map[string]any { return body["order"].(map[string]any) }

// BillRequest is POST /payment/v2/bills. body is sent as is when it is a
// string or []byte and JSON-encoded otherwise; token "" sends no
// Authorization header.
func BillRequest(token string, body any) *http.Request {
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			panic(err)
		}
	}
	req := httptest.NewRequest(http.MethodPost, "/payment/v2/bills", bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// CreateBill creates a bill for c and returns the 200 response.
func (g *Gateway) CreateBill(c merchant.Credentials, token, orderRef, amount string) api.BillResponse {
	g.TB.Helper()
	return g.MustBill(token, BillBody(c, orderRef, amount))
}

// MustBill posts body and returns the 200 response, failing the test
// otherwise.
func (g *Gateway) MustBill(token string, body any) api.BillResponse {
	g.TB.Helper()
	rec := g.Serve(BillRequest(token, body))
	var br api.BillResponse
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &br) != nil || br.Status != "1" {
		g.TB.Fatalf("create bill: %d %s", rec.Code, rec.Body)
	}
	return br
}

// QueryRequest is GET /payment/v2/query?billReference=ref.
func QueryRequest(token, ref string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, "/payment/v2/query?billReference="+url.QueryEscape(ref), nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// Query verifies ref and returns the 200 response.
func (g *Gateway) Query(token, ref string) api.VerificationResponse {
	g.TB.Helper()
	rec := g.Serve(QueryRequest(token, ref))
	var vr api.VerificationResponse
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &vr) != nil {
		g.TB.Fatalf("query %s: %d %s", ref, rec.Code, rec.Body)
	}
	return vr
}

// Card is what a customer types. Tests supply the numbers.
type Card struct {
	Number, CVV, Month, Year string
	FirstName, LastName      string
}

// Apply puts the card into a form, filling an expiry next year and a
// cardholder name when the card leaves them empty.
func (c Card) Apply(v url.Values) url.Values {
	month, year := c.Month, c.Year
	if month == "" {
		month = "12"
	}
	if year == "" {
		year = time.Now().AddDate(1, 0, 0).Format("2006")
	}
	first, last := c.FirstName, c.LastName
	if first == "" && last == "" {
		first, last = "Jane", "Wanjiru"
	}
	v.Set("cardNumber", c.Number)
	v.Set("cardSecurity", c.CVV)
	v.Set("cardExpiryMonth", month)
	v.Set("cardExpiryYear", year)
	v.Set("cardFirstName", first)
	v.Set("cardLastName", last)
	return v
}

// FormFields are spec 2.4's non-card fields for paying b, as a merchant's
// page would post them.
func FormFields(c merchant.Credentials, token string, b api.BillResponse) url.Values {
	return url.Values{
		"token":              {token},
		"outletCode":         {c.OutletCode},
		"merchantCode":       {c.MerchantCode},
		"amount":             {b.Amount},
		"orderReference":     {b.OrderRef},
		"billReference":      {b.Reference},
		"productType":        {"goods"},
		"productDescription": {"Two tickets"},
		"serviceDate":        {"2026-11-21"},
		"customerFirstName":  {"Jane"},
		"customerLastName":   {"Wanjiru"},
		"country":            {"Kenya"},
		"mobileNumber":       {"+254 712345678"},
		"emailAddress":       {"jane@example.com"},
		"postalcodeZip":      {"00100"},
		"address":            {"1 Moi Avenue"},
		"city":               {"Nairobi"},
		"ipAddress":          {"198.51.100.7"},
		"callbackUrl":        {CallbackURL},
	}
}

// CardPayRequest is POST /cardPay with v form-encoded.
func CardPayRequest(v url.Values) *http.Request {
	req := httptest.NewRequest(http.MethodPost, "/cardPay", strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// CardPay posts v to /cardPay.
func (g *Gateway) CardPay(v url.Values) *httptest.ResponseRecorder {
	return g.Serve(CardPayRequest(v))
}

// OpenCheckout posts a merchant's form without card fields, as a shop that
// lets Kadi collect the card does, and returns the checkout session id of
// the card-entry page it gets.
func (g *Gateway) OpenCheckout(v url.Values) string {
	g.TB.Helper()
	rec := g.CardPay(v)
	page := ParsePage(rec.Body.String())
	f, ok := page.FormTo("/cardPay")
	if rec.Code != http.StatusOK || !ok || f.Values()["checkout"] == "" {
		g.TB.Fatalf("want the card-entry page with a checkout session, got %d:\n%s", rec.Code, rec.Body)
	}
	return f.Values()["checkout"]
}

// CheckoutPost is what the card-entry page of checkout session id posts
// when the customer types card.
func CheckoutPost(id string, card Card) url.Values {
	return card.Apply(url.Values{"checkout": {id}})
}

// ChallengeRequest is POST /cardPay/3ds answering the challenge the
// checkout session owes.
func ChallengeRequest(checkoutID, code string) *http.Request {
	v := url.Values{"checkout": {checkoutID}, "code": {code}}
	req := httptest.NewRequest(http.MethodPost, "/cardPay/3ds", strings.NewReader(v.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// Callback returns the fields of the redirect page in rec, failing the test
// unless rec is one.
func (g *Gateway) Callback(rec *httptest.ResponseRecorder) map[string]string {
	g.TB.Helper()
	f, ok := ParsePage(rec.Body.String()).Redirect()
	if rec.Code != http.StatusOK || !ok {
		g.TB.Fatalf("want a redirect page, got %d:\n%s", rec.Code, rec.Body)
	}
	return f.Values()
}

// Pay creates a bill for amount and pays it with card through /cardPay,
// returning the bill and the callback fields.
func (g *Gateway) Pay(c merchant.Credentials, token, orderRef, amount string, card Card) (api.BillResponse, map[string]string) {
	g.TB.Helper()
	b := g.CreateBill(c, token, orderRef, amount)
	return b, g.Callback(g.CardPay(card.Apply(FormFields(c, token, b))))
}

// PaymentInFlight records a payment on billRef that is still with the
// card network (as a node that crashed mid-charge leaves one), so the bill
// is processing; FinishPayment on the returned payment settles it.
func (g *Gateway) PaymentInFlight(billRef, id string) payment.Payment {
	g.TB.Helper()
	b, err := g.Store.BillByID(context.Background(), billRef)
	if err != nil {
		g.TB.Fatal(err)
	}
	now := g.Clock.Now()
	p := payment.Payment{ID: id, BillReference: b.Reference, MerchantCode: b.MerchantCode, Mode: b.Mode,
		Status: payment.Processing, Amount: b.Amount, CreatedAt: now, UpdatedAt: now}
	if err := g.Store.StartPayment(context.Background(), p); err != nil {
		g.TB.Fatal(err)
	}
	return p
}

// CountPayments counts the payment rows of billRef with status ("" for
// any). The store offers no count, and a second charge must show up here.
func (g *Gateway) CountPayments(billRef string, status payment.Status) int {
	g.TB.Helper()
	q, args := `SELECT COUNT(*) FROM payments WHERE bill_ref = ?`, []any{billRef}
	if status != "" {
		q, args = q+` AND status = ?`, append(args, string(status))
	}
	return g.Count(q, args...)
}

// Count runs a SELECT COUNT(*) query on the SQLite file through a separate
// read-only connection, so a test can see rows no store method exposes.
func (g *Gateway) Count(query string, args ...any) int {
	g.TB.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(g.Dir, "kadi.db")+"?mode=ro&_pragma=busy_timeout(10000)")
	if err != nil {
		g.TB.Fatalf("open database read-only: %v", err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		g.TB.Fatalf("count %q: %v", query, err)
	}
	return n
}

// ReadAll drains r, for tests reading responses of a real HTTP server.
func ReadAll(tb testing.TB, r io.Reader) string {
	tb.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		tb.Fatalf("read body: %v", err)
	}
	return string(b)
}
