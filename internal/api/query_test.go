package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/api"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/server/servertest"
)

const (
	approvingCard = "4242424242424242"
	challengeCard = "4000000000003220"
	decliningCard = "4000000000000002"
)

func TestQueryResponses(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Query Shop")
	other := g.Onboard("Other Shop")
	token, otherToken := g.Token(c, merchant.Test), g.Token(other, merchant.Test)

	paid, cb := g.Pay(c, token, "PAID1", "1500.00", servertest.Card{Number: approvingCard, CVV: "737"})
	if cb["orderStatus"] != "Transaction Successfull" {
		t.Fatalf("payment did not succeed: %v", cb)
	}
	declined, cb2 := g.Pay(c, token, "DECLINED1", "80", servertest.Card{Number: decliningCard, CVV: "737"})
	if cb2["orderStatus"] != "Transaction Failed" {
		t.Fatalf("declining card succeeded: %v", cb2)
	}
	unpaid := g.CreateBill(c, token, "UNPAID1", "99.99")
	othersBill := g.CreateBill(other, otherToken, "THEIRS1", "10")

	cases := []struct {
		name, golden string
		req          *http.Request
	}{
		{"paid, by bill reference", "query_200_paid", servertest.QueryRequest(token, paid.Reference)},
		{"paid, by order reference", "query_200_paid", servertest.QueryRequest(token, paid.OrderRef)},
		{"unpaid", "query_200_unpaid", servertest.QueryRequest(token, unpaid.Reference)},
		{"declined", "query_200_declined", servertest.QueryRequest(token, declined.Reference)},
		{"no such bill", "query_404", servertest.QueryRequest(token, "NOSUCHBILL01")},
		{"other merchant's bill reference", "query_404", servertest.QueryRequest(token, othersBill.Reference)},
		{"other merchant's order reference", "query_404", servertest.QueryRequest(token, othersBill.OrderRef)},
		{"no parameter", "query_400_missing", httptestRequest(http.MethodGet, "/payment/v2/query", token)},
		{"empty parameter", "query_400_missing", httptestRequest(http.MethodGet, "/payment/v2/query?billReference=", token)},
	}
	bodies := map[string]string{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := g.Serve(tc.req)
			checkGolden(t, tc.golden, tc.req, rec, known(c, other))
			// Goldens are scrubbed; another merchant's bill must look like
			// a missing one byte for byte.
			if prev, ok := bodies[tc.golden]; ok && prev != rec.Body.String() && tc.golden == "query_404" {
				t.Errorf("404 bodies differ:\n%s\n%s", prev, rec.Body)
			}
			bodies[tc.golden] = rec.Body.String()
		})
	}

	// A reference sent but malformed is named as such, not as missing.
	if rec := g.Serve(httptestRequest(http.MethodGet, "/payment/v2/query?billReference=ORD-1001", token)); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "must be a bill or order reference") {
		t.Errorf("billReference=ORD-1001: %d %s", rec.Code, rec.Body)
	}

	// Given twice, which was meant is not guessed.
	if rec := g.Serve(httptestRequest(http.MethodGet, "/payment/v2/query?billReference="+paid.Reference+"&billReference=NOSUCHBILL", token)); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "given more than once") {
		t.Errorf("billReference twice: %d %s", rec.Code, rec.Body)
	}

	got := g.Query(token, paid.Reference)
	if !got.Status || got.TransactionID == "" || got.TransactionID != cb["transactionRef"] || got.Amount != "1500.00" {
		t.Errorf("verification %+v does not match the callback %v", got, cb)
	}
	if g.Query(token, declined.Reference).Status {
		t.Error("a declined bill verifies as paid")
	}
}

func TestBearerRefusals(t *testing.T) {
	type setup func(t *testing.T, g *servertest.Gateway, c merchant.Credentials) string
	// A genuine token past its life or of a regenerated key is told why
	// (goldens of their own); anything else gets the one answer.
	cases := []struct {
		name   string
		header func(token string) string
		setup  setup
		// goldens of the bill and query answers; empty: bill_401 and
		// bearer_401
		goldens [2]string
	}{
		{"missing", func(string) string { return "" }, nil, [2]string{}},
		{"malformed", func(string) string { return "Bearer not-a-token" }, nil, [2]string{}},
		{"not bearer", func(tok string) string { return "Token " + tok }, nil, [2]string{}},
		// The API key where a token is taken: told so, as the notifications
		// API says the opposite.
		{"the API key", func(string) string { return "Basic kadi_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" }, nil, [2]string{"bill_401_api_key", "bearer_401_api_key"}},
		{"tampered", func(tok string) string { return "Bearer " + tok[:len(tok)-2] + flip(tok[len(tok)-2:]) }, nil, [2]string{}},
		{"expired", nil, func(t *testing.T, g *servertest.Gateway, c merchant.Credentials) string {
			tok := g.Token(c, merchant.Test)
			g.Clock.Advance(time.Hour + time.Second)
			return tok
		}, [2]string{"bill_401_expired", "bearer_401_expired"}},
		{"revoked", nil, func(t *testing.T, g *servertest.Gateway, c merchant.Credentials) string {
			tok := g.Token(c, merchant.Test)
			ctx := context.Background()
			if _, err := merchant.RotateKey(ctx, g.Store, c.MerchantCode, merchant.Test, g.Clock.Now()); err != nil {
				t.Fatal(err)
			}
			if err := g.Auth.Revocations.Refresh(ctx, g.Store, g.Clock.Now().Add(-2*time.Hour)); err != nil {
				t.Fatal(err)
			}
			return tok
		}, [2]string{"bill_401_revoked", "bearer_401_revoked"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := servertest.Start(t, servertest.Options{})
			c := g.Onboard("Bearer Shop")
			good := g.Token(c, merchant.Test)
			bill := g.CreateBill(c, good, "BEARER1", "10") // the token worked before
			if tc.goldens == [2]string{} {
				tc.goldens = [2]string{"bill_401", "bearer_401"}
			}
			var header string
			if tc.header != nil {
				header = tc.header(good)
			} else {
				header = "Bearer " + tc.setup(t, g, c)
			}
			// The bill endpoint keeps the bill's failure shape (status
			// false, remarks); the query answers docs/api.md's shape.
			for _, r := range []struct {
				req    *http.Request
				golden string
			}{
				{servertest.BillRequest("", servertest.BillBody(c, "BEARER2", "10")), tc.goldens[0]},
				{servertest.QueryRequest("", bill.Reference), tc.goldens[1]},
			} {
				req := r.req
				if header != "" {
					req.Header.Set("Authorization", header)
				}
				rec := g.Serve(req)
				checkGolden(t, r.golden, req, rec, known(c))
				if h := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(h, "Bearer ") || !strings.Contains(h, `error="invalid_token"`) {
					t.Errorf("%s %s: WWW-Authenticate %q", req.Method, req.URL.Path, h)
				}
			}
		})
	}
}

// After RotateKey the old key cannot get a token and the new one can.
// An unpaid bill that can never be paid says so: "Awaiting payment" kept
// a merchant polling a bill it should replace.
func TestQueryNarratesADeadBill(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Dead Bills Shop")
	token := g.Token(c, merchant.Test)
	var blocked api.BillResponse
	for range 5 {
		blocked, _ = g.Pay(c, token, "BLOCKED1", "80", servertest.Card{Number: decliningCard, CVV: "737"})
	}
	if got := g.Query(token, blocked.Reference); got.Status || got.Narration != payment.MsgBlocked {
		t.Errorf("blocked bill: %+v", got)
	}
	expiring := g.CreateBill(c, token, "LATE1", "10")
	if got := g.Query(token, expiring.Reference); got.Narration != "Awaiting payment" {
		t.Errorf("open bill: %+v", got)
	}
	g.Clock.Advance(48 * time.Hour)
	token = g.Token(c, merchant.Test)
	if got := g.Query(token, expiring.Reference); got.Status || got.Narration != payment.MsgExpired {
		t.Errorf("expired bill: %+v", got)
	}
}

func TestRotatedKey(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Rotating Shop")
	newKey, err := merchant.RotateKey(context.Background(), g.Store, c.MerchantCode, merchant.Test, g.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if rec := g.Serve(servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password)); rec.Code != http.StatusUnauthorized {
		t.Errorf("old key: %d %s", rec.Code, rec.Body)
	}
	c.Test.APIKey = newKey
	g.CreateBill(c, g.Token(c, merchant.Test), "NEWKEY1", "5")
	// The live key was not touched.
	g.Token(c, merchant.Live)
}

func TestUnknownPaths(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	for _, tc := range []struct{ method, path, golden string }{
		{http.MethodGet, "/nope", "not_found"},
		{http.MethodGet, "/payment/v3/query", "not_found"},
		// A known path with another method is 405 with Allow: "no such
		// endpoint" sent integrators looking for another path.
		{http.MethodGet, "/payment/v2/bills", "method_not_allowed_post"},
		{http.MethodGet, "/payment/v2/bills/", "method_not_allowed_post"},
		{http.MethodGet, "/identity/v2/token", "method_not_allowed_post"},
		{http.MethodPut, "/cardPay", "method_not_allowed_post"},
		{http.MethodPost, "/payment/v2/query", "method_not_allowed_get"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			req := httptestRequest(tc.method, tc.path, "")
			checkGolden(t, tc.golden, req, g.Serve(req), nil)
		})
	}
}

func httptestRequest(method, path, token string) *http.Request {
	req := httptest.NewRequest(method, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// flip changes two base64url characters so a signature no longer matches.
func flip(s string) string {
	out := []byte(s)
	for i, b := range out {
		if b == 'A' {
			out[i] = 'B'
		} else {
			out[i] = 'A'
		}
	}
	return string(out)
}

// A bill whose attempt is with the network, or waits for the shopper's
// 3-D Secure code, says so: its narration was empty.
func TestQueryNarratesAnAttemptUnderWay(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Pending Shop")
	token := g.Token(c, merchant.Test)
	challenged := g.CreateBill(c, token, "3DS1", "80")
	if rec := g.CardPay(servertest.Card{Number: challengeCard, CVV: "737"}.Apply(servertest.FormFields(c, token, challenged))); !strings.Contains(rec.Body.String(), "/cardPay/3ds") {
		t.Fatalf("no challenge page:\n%s", rec.Body)
	}
	if got := g.Query(token, challenged.Reference); got.Status || got.Narration != "Awaiting the customer's 3-D Secure authentication" {
		t.Errorf("a bill waiting for its 3-D Secure code: %+v", got)
	}
	inFlight := g.CreateBill(c, token, "FLIGHT1", "10")
	g.PaymentInFlight(inFlight.Reference, "pay_inflight")
	if got := g.Query(token, inFlight.Reference); got.Status || got.Narration != payment.MsgInFlight {
		t.Errorf("a bill whose attempt is with the network: %+v", got)
	}
}
