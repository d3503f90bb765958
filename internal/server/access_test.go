package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/api"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// Who may call what (docs/security.md), walked as a matrix: every
// credential a merchant or a shopper can hold against every route that
// takes one. A bearer token sits in every shopper's browser, so it must
// never reach the notification log; the payment-token pays and nothing
// else; the API key never rides in a form.
func TestAccessMatrix(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Matrix Shop")
	access := g.Token(c, merchant.Test)
	key := servertest.Key(c, merchant.Test)
	paymentToken := func() string {
		rec := g.Serve(servertest.PaymentTokenRequest(key, c.MerchantCode, c.Password, "password"))
		var pt api.PaymentTokenResponse
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &pt) != nil {
			t.Fatalf("/token: %d %s", rec.Code, rec.Body)
		}
		return pt.PaymentToken
	}()
	paid, _ := g.Pay(c, access, "MATRIX0", "10", servertest.Card{Number: "4242424242424242", CVV: "737"})
	evs, err := g.Store.IPNEvents(t.Context(), ipn.Filter{MerchantCode: c.MerchantCode, Limit: 1})
	if err != nil || len(evs) != 1 {
		t.Fatalf("IPN events: %v, %v", evs, err)
	}
	event := evs[0].ID
	open := g.CreateBill(c, access, "MATRIX1", "10")
	session := g.OpenCheckout(servertest.FormFields(c, access, open))

	// A credential is how the caller presents it: a header for the API,
	// the form's token field for /cardPay.
	type credential struct {
		name   string
		header string // Authorization
		token  string // the form's token field
	}
	creds := []credential{
		{"nothing", "", ""},
		{"access token", "Bearer " + access, access},
		{"payment-token", "Bearer " + paymentToken, paymentToken},
		{"API key as Basic", "Basic " + key, key},
		{"API key as Bearer", "Bearer " + key, key},
		{"access token as Basic", "Basic " + access, access},
		{"checkout session id", "Bearer " + session, session},
	}
	orders := 0
	routes := []struct {
		name    string
		allowed []string
		request func(cr credential) *http.Request
	}{
		{"POST /payment/v2/bills", []string{"access token"}, func(cr credential) *http.Request {
			orders++
			return servertest.BillRequest("", servertest.BillBody(c, fmt.Sprintf("MATRIXB%d", orders), "10"))
		}},
		{"GET /payment/v2/query", []string{"access token"}, func(credential) *http.Request {
			return httptest.NewRequest(http.MethodGet, "/payment/v2/query?billReference="+paid.Reference, nil)
		}},
		{"GET /payment/v2/notifications", []string{"API key as Basic"}, func(credential) *http.Request {
			return httptest.NewRequest(http.MethodGet, "/payment/v2/notifications?limit=500", nil)
		}},
		{"GET /payment/v2/notifications/{id}", []string{"API key as Basic"}, func(credential) *http.Request {
			return httptest.NewRequest(http.MethodGet, "/payment/v2/notifications/"+event, nil)
		}},
		{"POST /payment/v2/notifications/{id}/replay", []string{"API key as Basic"}, func(credential) *http.Request {
			return httptest.NewRequest(http.MethodPost, "/payment/v2/notifications/"+event+"/replay", nil)
		}},
		// The form takes its credential from the token field, so how the
		// header would spell it does not matter there: an access token is
		// an access token.
		{"POST /cardPay", []string{"access token", "payment-token", "access token as Basic"}, func(cr credential) *http.Request {
			v := servertest.FormFields(c, cr.token, open)
			if cr.token == "" {
				v.Del("token")
			}
			return servertest.CardPayRequest(v)
		}},
	}
	for _, rt := range routes {
		for _, cr := range creds {
			t.Run(rt.name+"/"+cr.name, func(t *testing.T) {
				req := rt.request(cr)
				req.Header.Del("Authorization")
				if cr.header != "" && !strings.HasSuffix(rt.name, "/cardPay") {
					req.Header.Set("Authorization", cr.header)
				}
				rec := g.Serve(req)
				want := false
				for _, a := range rt.allowed {
					want = want || a == cr.name
				}
				switch got := rec.Code; {
				case want && (got < 200 || got > 299):
					t.Errorf("allowed credential refused: %d %s", got, rec.Body)
				case !want && got != http.StatusUnauthorized && got != http.StatusForbidden:
					t.Errorf("refused credential answered %d, want 401 or 403: %s", got, rec.Body)
				}
			})
		}
	}
}

// A key rotation revokes the key's tokens for good: not only until the next
// restart with a shorter --token-ttl (revocations used to be kept for the
// current TTL only, and a token's own expiry was trusted).
func TestRevocationSurvivesRestartWithShorterTTL(t *testing.T) {
	g := servertest.Start(t, servertest.Options{TokenTTL: 24 * time.Hour})
	c := g.Onboard("Rotating Shop")
	tok := g.Token(c, merchant.Test)
	g.Clock.Advance(time.Minute)
	newKey, err := merchant.RotateKey(t.Context(), g.Store, c.MerchantCode, merchant.Test, g.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	c.Test.APIKey = newKey
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}

	query := func(g *servertest.Gateway) int {
		return g.Serve(servertest.QueryRequest(tok, "NOSUCHBILL")).Code
	}
	// Two hours on, a node starts with a one-minute TTL: the rotation is
	// older than that TTL, and the token itself claims 22 more hours.
	g.Clock.Advance(2 * time.Hour)
	short := servertest.Start(t, servertest.Options{TokenTTL: time.Minute, Restart: g})
	if code := query(short); code != http.StatusUnauthorized {
		t.Errorf("revoked token after a restart with a 1 min TTL: %d, want 401", code)
	}
	short.Close()
	// With the long TTL again, the token is still within every lifetime:
	// only the revocation refuses it.
	long := servertest.Start(t, servertest.Options{TokenTTL: 24 * time.Hour, Restart: g})
	if code := query(long); code != http.StatusUnauthorized {
		t.Errorf("revoked token after a restart with a 24 h TTL: %d, want 401", code)
	}
	fresh := long.Token(c, merchant.Test)
	if code := long.Serve(servertest.QueryRequest(fresh, "NOSUCHBILL")).Code; code != http.StatusNotFound {
		t.Errorf("a token of the new key: %d, want 404 for the unknown bill", code)
	}
}
