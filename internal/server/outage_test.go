package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/api"
	"github.com/kadipay/kadi/internal/keyring"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/server/servertest"
	"github.com/kadipay/kadi/internal/store/storetest"
)

// TestDatabaseOutage cuts the connection between a gateway and its
// PostgreSQL (connections reset, new ones refused), as a restart or a
// failover does, and checks every kind of answer during the outage: a 503
// within seconds, saying when to come back, in the shape each endpoint's
// clients read; no ERROR in the log, as nothing in the gateway is broken;
// and the gateway serving again as soon as the database is back.
func TestDatabaseOutage(t *testing.T) {
	fwd, dsn := forwardedPostgres(t, "the outage is a PostgreSQL one")
	// The live acquirer approves, then the database goes away before the
	// gateway can record it: the interleaving a shopper must not be told
	// "nothing was charged" about.
	live := &cutAfterCharge{Acquirer: sim.New(secret.RandomBytes(32), nil), cut: fwd.Cut}
	g := servertest.Start(t, servertest.Options{DatabaseURL: dsn, LiveAcquirer: live})
	c := g.Onboard("Outage Shop")
	tok := g.Token(c, merchant.Test)
	liveTok := g.Token(c, merchant.Live)
	paid := g.CreateBill(c, tok, "OUTPAID", "10")
	open := g.CreateBill(c, tok, "OUTOPEN", "10")
	liveBill := g.CreateBill(c, liveTok, "OUTLIVE", "10")
	entry := g.ServeOnce(servertest.CardPayRequest(servertest.FormFields(c, tok, open)))
	checkoutPage := entry.Header().Get("Location")
	if entry.Code != http.StatusSeeOther || checkoutPage == "" {
		t.Fatalf("want a 303 to the checkout's card page: %d %s", entry.Code, entry.Body)
	}
	g.Callback(g.CardPay(servertest.Card{Number: "4242424242424242", CVV: "123"}.Apply(servertest.FormFields(c, tok, paid))))
	checkoutID, ok := servertest.ParsePage(g.Serve(httpGet(checkoutPage)).Body.String()).FormTo("/cardPay")
	if !ok {
		t.Fatal("no card form on the checkout's page")
	}
	logged := len(g.Logs.String())

	fwd.Cut()
	// The card posted from the card page: the page it is sent to says
	// payments are paused, and becomes the card form again once the
	// database is back (checked below).
	posted := g.ServeOnce(servertest.CardPayRequest(servertest.CheckoutPost(checkoutID.Values()["checkout"], servertest.Card{Number: "4242424242424242", CVV: "123"})))
	pausedPage := posted.Header().Get("Location")
	if posted.Code != http.StatusSeeOther || pausedPage == "" {
		t.Fatalf("card posted during the outage: want a 303, got %d %s", posted.Code, posted.Body)
	}
	// The page of that post says it charged nothing (true: the post met
	// the outage before any charge); a checkout's page asked otherwise
	// (below) cannot tell, and says not to pay again.
	rec := g.Serve(httpGet(pausedPage))
	pageSays(http.StatusServiceUnavailable, "not charged", `http-equiv="refresh"`)(t, rec.Code, rec.Body.String())
	for _, tt := range []struct {
		name  string
		req   *http.Request
		check func(t *testing.T, status int, body string)
	}{
		{"access token", servertest.TokenRequest(servertest.Key(c, merchant.Test), c.Username, c.Password), oauthUnavailable},
		{"payment token", servertest.PaymentTokenRequest(servertest.Key(c, merchant.Test), c.MerchantCode, c.Password, "password"), oauthUnavailable},
		{"bill", servertest.BillRequest(tok, servertest.BillBody(c, "OUTNEW", "10")), billUnavailable},
		{"query", servertest.QueryRequest(tok, paid.Reference), apiUnavailable},
		{"card payment", servertest.CardPayRequest(servertest.Card{Number: "4242424242424242", CVV: "123"}.Apply(servertest.FormFields(c, tok, open))),
			pageSays(http.StatusServiceUnavailable, "your card was not charged", "try again")},
		{"card page", httpGet(checkoutPage), func(t *testing.T, status int, body string) {
			pageSays(http.StatusServiceUnavailable, "do not pay again", `http-equiv="refresh"`)(t, status, body)
			if strings.Contains(body, "not charged") {
				t.Error("a checkout's page asked again during the outage says the card was not charged")
			}
		}},
		{"health", httpGet("/healthz"), func(t *testing.T, status int, body string) {
			if status != http.StatusServiceUnavailable {
				t.Errorf("/healthz: %d %s", status, body)
			}
		}},
		// Liveness: nothing a restart would mend, so no restart.
		{"liveness", httpGet("/livez"), func(t *testing.T, status int, body string) {
			if status != http.StatusOK || body != `{"status":"alive"}` {
				t.Errorf("/livez: %d %s", status, body)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			rec := g.Serve(tt.req)
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("answered after %s", took)
			}
			tt.check(t, rec.Code, rec.Body.String())
			if rec.Code == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") == "" {
				t.Errorf("a 503 without Retry-After")
			}
		})
	}

	// Mended, but cut again by the live acquirer's answer.
	fwd.Mend()
	rec = g.Serve(servertest.CardPayRequest(servertest.Card{Number: "4242424242424242", CVV: "123"}.Apply(servertest.FormFields(c, liveTok, liveBill))))
	pageSays(http.StatusAccepted, "being confirmed", "will not be charged twice")(t, rec.Code, rec.Body.String())
	if strings.Contains(strings.ToLower(rec.Body.String()), "not charged") {
		t.Errorf("a charge the acquirer approved is shown as not charged:\n%s", rec.Body)
	}

	for _, line := range strings.Split(g.Logs.String()[logged:], "\n") {
		if strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("an outage logged as an error: %s", line)
		}
	}

	// Back: every answer as before, and the stranded live payment settled
	// to the acquirer's record.
	fwd.Mend()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rec := g.Serve(servertest.BillRequest(tok, servertest.BillBody(c, "OUTAFTER", "10")))
		if rec.Code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not serving 10 s after the database came back: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if q := g.Query(tok, paid.Reference); !q.Status {
		t.Errorf("the bill paid before the outage: %+v", q)
	}
	if _, ok := servertest.ParsePage(g.Serve(httpGet(pausedPage)).Body.String()).FormTo("/cardPay"); !ok {
		t.Errorf("the page a card post was sent to during the outage is not the card form once the database is back")
	}
	if err := g.Payments.Reconcile(context.Background(), 0); err != nil {
		t.Fatal(err)
	}
	if q := g.Query(liveTok, liveBill.Reference); !q.Status {
		t.Errorf("the live payment approved during the outage is not settled as paid: %+v", q)
	}
}

// cutAfterCharge is an acquirer after whose answer the database goes away.
type cutAfterCharge struct {
	*sim.Acquirer
	cut func()
}

func (a *cutAfterCharge) Charge(ctx context.Context, req payment.ChargeRequest) (payment.Result, error) {
	res, err := a.Acquirer.Charge(ctx, req)
	a.cut()
	return res, err
}

func oauthUnavailable(t *testing.T, status int, body string) {
	t.Helper()
	var e struct{ Error, Code, Message string }
	if status != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || e.Error != "temporarily_unavailable" || e.Code != e.Error || e.Message == "" {
		t.Errorf("want 503 temporarily_unavailable in the OAuth shape: %d %s", status, body)
	}
}

func apiUnavailable(t *testing.T, status int, body string) {
	t.Helper()
	var e struct{ Code, Message string }
	if status != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || e.Code != "temporarily_unavailable" || e.Message == "" {
		t.Errorf("want 503 temporarily_unavailable: %d %s", status, body)
	}
}

// billUnavailable: a bill refused for an outage keeps the bill's shape,
// status false and remarks, whether the database refused or hung past the
// request's time (decisions.md §4).
func billUnavailable(t *testing.T, status int, body string) {
	t.Helper()
	var b struct {
		Status   bool   `json:"status"`
		Code     string `json:"code"`
		Remarks  string `json:"remarks"`
		OrderRef string `json:"orderRef"`
	}
	if status != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &b) != nil || b.Status || b.Code != "temporarily_unavailable" || b.Remarks == "" || b.OrderRef == "" {
		t.Errorf("want 503 in the bill's shape with status false: %d %s", status, body)
	}
}

func pageSays(status int, parts ...string) func(t *testing.T, got int, body string) {
	return func(t *testing.T, got int, body string) {
		t.Helper()
		if got != status {
			t.Errorf("status %d, want %d:\n%s", got, status, body)
		}
		for _, p := range parts {
			if !strings.Contains(body, p) {
				t.Errorf("the page does not say %q:\n%s", p, body)
			}
		}
	}
}

func httpGet(path string) *http.Request { return httptest.NewRequest(http.MethodGet, path, nil) }

// TestHungDatabase freezes the connection between a gateway and its
// PostgreSQL (bytes held both ways, connections left open), as a
// partitioned or stopped database host does: requests answered 503 only
// when the database came back, after the server's write timeout had cut
// them, and a card was charged a minute after a click whose page had given
// up. Each request now ends within its time, in the shape its clients
// read, and a card posted then is not charged when the database returns.
func TestHungDatabase(t *testing.T) {
	fwd, dsn := forwardedPostgres(t, "the hang is a PostgreSQL host's")
	const budget = 2 * time.Second
	g := servertest.Start(t, servertest.Options{DatabaseURL: dsn, RequestTimeout: budget})
	c := g.Onboard("Hung Shop")
	tok := g.Token(c, merchant.Test)
	open := g.CreateBill(c, tok, "HUNGOPEN", "10")
	paid := g.CreateBill(c, tok, "HUNGPAID", "10")

	fwd.Freeze()
	for _, tt := range []struct {
		name  string
		req   *http.Request
		check func(t *testing.T, status int, body string)
	}{
		{"query", servertest.QueryRequest(tok, paid.Reference), apiUnavailable},
		{"bill", servertest.BillRequest(tok, servertest.BillBody(c, "HUNGNEW", "10")), billUnavailable},
		{"card payment", servertest.CardPayRequest(servertest.Card{Number: "4242424242424242", CVV: "123"}.Apply(servertest.FormFields(c, tok, open))),
			pageSays(http.StatusServiceUnavailable, "not charged")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			rec := g.ServeOnce(tt.req)
			if loc := rec.Header().Get("Location"); rec.Code == http.StatusSeeOther && strings.HasPrefix(loc, "/cardPay/page/") {
				rec = g.ServeOnce(httpGet(loc)) // the checkout's page, which says so
			}
			if took := time.Since(start); took > 2*budget+5*time.Second {
				t.Errorf("answered after %v, with a request's time of %v", took.Round(time.Millisecond), budget)
			}
			tt.check(t, rec.Code, rec.Body.String())
		})
	}
	fwd.Thaw()
	time.Sleep(2 * time.Second) // what was held reaches the database
	ps, err := g.Store.PaymentsOfBill(t.Context(), open.Reference)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ps {
		if p.Status == payment.Succeeded {
			t.Errorf("the card posted while the database hung was charged once it came back: %s", p.ID)
		}
	}
	rec := g.Serve(servertest.BillRequest(tok, servertest.BillBody(c, "HUNGAFTER", "10")))
	if rec.Code != http.StatusOK {
		t.Errorf("a bill once the database is back: %d %s", rec.Code, rec.Body)
	}
}

// A table locked past a request's time (a migration or an operator's
// LOCK TABLE): PostgreSQL cancels the statement at pgx's request, with the
// SQLSTATE of a client gone, but the client is still there and is owed
// the 503 of a database that did not answer; it was a 499, no 5xx reached
// the alerts, and the card page said "the request was cancelled".
func TestLockedTableIsAnOutage(t *testing.T) {
	_, dsn := forwardedPostgres(t, "the lock is PostgreSQL's")
	const budget = time.Second
	g := servertest.Start(t, servertest.Options{DatabaseURL: dsn, RequestTimeout: budget})
	c := g.Onboard("Locked Shop")
	tok := g.Token(c, merchant.Test)
	open := g.CreateBill(c, tok, "LOCKOPEN", "10")

	_, unlock := lockTable(t, dsn, "bills")
	defer unlock()
	rec := g.ServeOnce(servertest.BillRequest(tok, servertest.BillBody(c, "LOCKNEW", "10")))
	billUnavailable(t, rec.Code, rec.Body.String())
	if rec.Header().Get("Retry-After") == "" {
		t.Error("no Retry-After on the 503")
	}
	rec = g.ServeOnce(servertest.CardPayRequest(servertest.Card{Number: "4242424242424242", CVV: "123"}.Apply(servertest.FormFields(c, tok, open))))
	if loc := rec.Header().Get("Location"); rec.Code == http.StatusSeeOther && strings.HasPrefix(loc, "/cardPay/page/") {
		rec = g.ServeOnce(httpGet(loc))
	}
	pageSays(http.StatusServiceUnavailable, "not charged")(t, rec.Code, rec.Body.String())
	if strings.Contains(g.Logs.String(), `"status":499`) {
		t.Errorf("a request whose time ran out logged as a client gone:\n%s", g.Logs.String())
	}
}

// A shopper who hangs up while the card's payment waits for a locked
// table is a 499 on the access line: PostgreSQL cancels the statement at
// pgx's request, and judged on the answer's own clock the cancellation was
// an ERROR "payment page failed" and a 303, for every impatient shopper.
// (On SQLite a queued write is waited for to its end, whoever left.)
func TestShopperWhoHangsUpMidPaymentIs499(t *testing.T) {
	for _, tc := range []struct {
		name string
		form func(g *servertest.Gateway, c merchant.Credentials, tok string, b api.BillResponse) url.Values
	}{
		{"the shop's form with the card", func(g *servertest.Gateway, c merchant.Credentials, tok string, b api.BillResponse) url.Values {
			return servertest.Card{Number: "4242424242424242", CVV: "123"}.Apply(servertest.FormFields(c, tok, b))
		}},
		{"our card page", func(g *servertest.Gateway, c merchant.Credentials, tok string, b api.BillResponse) url.Values {
			return servertest.CheckoutPost(g.OpenCheckout(servertest.FormFields(c, tok, b)), servertest.Card{Number: "4242424242424242", CVV: "123"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, dsn := forwardedPostgres(t, "the lock is PostgreSQL's")
			g := servertest.Start(t, servertest.Options{DatabaseURL: dsn, RequestTimeout: 10 * time.Second})
			c := g.Onboard("Hang Up Shop")
			tok := g.Token(c, merchant.Test)
			b := g.CreateBill(c, tok, "HANGUP1", "10")
			form := tc.form(g, c, tok, b)

			db, unlock := lockTable(t, dsn, "payments")
			ctx, cancel := context.WithCancel(t.Context())
			time.AfterFunc(500*time.Millisecond, cancel)
			rec := g.ServeOnce(servertest.CardPayRequest(form).WithContext(ctx))
			unlock()
			if rec.Code != 499 {
				t.Errorf("a shopper gone mid-payment: %d, want 499\n%s", rec.Code, rec.Body)
			}
			if logs := g.Logs.String(); strings.Contains(logs, `"level":"ERROR"`) {
				t.Errorf("a shopper gone mid-payment logged an error:\n%s", logs)
			}
			var n int
			if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM payments WHERE bill_ref = $1`, b.Reference).Scan(&n); err != nil || n != 0 {
				t.Errorf("%d payments after a hang-up before the charge (%v), want none", n, err)
			}
		})
	}
}

// lockTable locks table of the database at dsn, as a migration or an
// operator's LOCK TABLE does, until unlock (or the test's end); db stays
// open for the test's own reads.
func lockTable(t *testing.T, dsn, table string) (db *sql.DB, unlock func()) {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	lock, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Rollback() })
	if _, err := lock.ExecContext(t.Context(), `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return db, func() { lock.Rollback() }
}

// forwardedPostgres is a fresh schema on KADI_TEST_DATABASE_URL's server,
// reached through a forwarder the test can cut or freeze, and the URL the
// gateway is given; without the variable the test is skipped, saying why.
func forwardedPostgres(t *testing.T, why string) (*servertest.Forwarder, string) {
	t.Helper()
	base := os.Getenv("KADI_TEST_DATABASE_URL")
	if base == "" {
		t.Skip("KADI_TEST_DATABASE_URL is not set: " + why)
	}
	u, err := url.Parse(storetest.FreshSchema(t, base))
	if err != nil {
		t.Fatal(err)
	}
	fwd := servertest.Forward(t, u.Host)
	u.Host = fwd.Addr()
	return fwd, u.String()
}

// A node stopped cleanly says so: the other nodes stop counting its key
// at once, not 30 s later (a node whose ring was behind the stopped
// node's reported ready meanwhile).
func TestStoppedNodeRetiresItsKey(t *testing.T) {
	_, dsn := forwardedPostgres(t, "node keys are shared on PostgreSQL")
	g := servertest.Start(t, servertest.Options{DatabaseURL: dsn})
	s := serve(t, g.Gateway)
	probe := keyring.NodeKey{Node: "probe", ID: "k0", Check: "0000000000000000"}
	peers := func() int {
		got, _, err := g.Store.PublishNodeKey(t.Context(), probe, "run-probe", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for peers() != 2 {
		if time.Now().After(deadline) {
			t.Fatal("the serving node's key never counted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if n := peers(); n != 1 {
		t.Errorf("%d live nodes right after a clean stop, want the probe alone", n)
	}
}

// Through an outage, the node-key check is said once and once again when
// it works: its error names the connection's own port, and compared by
// text every turn (one a second) was a new failure, logged.
func TestNodeKeyCheckSaidOnceThroughAnOutage(t *testing.T) {
	fwd, dsn := forwardedPostgres(t, "node keys are shared on PostgreSQL")
	g := servertest.Start(t, servertest.Options{DatabaseURL: dsn})
	serve(t, g.Gateway)
	said := func(msg string) int { return strings.Count(g.Logs.String(), msg) }
	waitUntil(t, "the node to be ready", func() bool { return g.ServeOnce(httpGet("/readyz")).Code == http.StatusOK })
	fwd.Cut()
	waitUntil(t, "the check to fail", func() bool { return said(`"msg":"check the nodes' master keys"`) > 0 })
	time.Sleep(3500 * time.Millisecond) // three more turns of the check
	fwd.Mend()
	waitUntil(t, "the check to work again", func() bool { return said("check the nodes' master keys: working again") > 0 })
	if n := said(`"msg":"check the nodes' master keys"`); n != 1 {
		t.Errorf("the failing node-key check said %d times through a 4 s outage, want once", n)
	}
}
