package api_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/api"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

func TestTokenResponses(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Token Shop")
	other := g.Onboard("Other Token Shop")
	jsonBody := func(body string) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/identity/v2/token", strings.NewReader(body))
		req.Header.Set("Authorization", "Basic "+c.Test.APIKey)
		return req
	}
	multipartBody := func(path string, fields [][2]string, file bool) *http.Request {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for _, f := range fields {
			_ = mw.WriteField(f[0], f[1])
		}
		if file {
			fw, _ := mw.CreateFormFile("password", "password.txt")
			_, _ = fw.Write([]byte(c.Password))
		}
		_ = mw.Close()
		req := httptest.NewRequest(http.MethodPost, path, &body)
		req.Header.Set("Authorization", "Basic "+c.Test.APIKey)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		return req
	}
	// Several requests share a golden on purpose: they must answer alike.
	cases := []struct {
		name, golden string
		req          *http.Request
	}{
		{"access token", "token_200", servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password)},
		{"access token, key as base64 of key:", "token_200",
			servertest.TokenRequest(base64.StdEncoding.EncodeToString([]byte(c.Test.APIKey+":")), c.Username, c.Password)},
		// Basic auth as libraries build it from a username and password.
		{"access token, key as base64 of merchant code:key", "token_200",
			servertest.TokenRequest(base64.StdEncoding.EncodeToString([]byte(c.MerchantCode+":"+c.Test.APIKey)), c.Username, c.Password)},
		{"access token, JSON body without content type", "token_200",
			jsonBody(`{"username":"` + c.Username + `","password":"` + c.Password + `"}`)},
		// PHP's json_encode writes a merchant code held as an integer as
		// a JSON number: the same digits.
		{"access token, JSON body after a byte order mark", "token_200",
			jsonBody("\xef\xbb\xbf" + `{"username":"` + c.Username + `","password":"` + c.Password + `"}`)},
		{"access token, username with spaces around it", "token_200", servertest.TokenRequest(c.Test.APIKey, " "+c.Username+"\t", c.Password)},
		{"access token, a JSON field of the client's own that is not text", "token_200",
			jsonBody(`{"username":"` + c.Username + `","password":"` + c.Password + `","remember":true,"scopes":["a"]}`)},
		{"payment token, merchant code with spaces around it", "payment_token_200",
			servertest.PaymentTokenRequest(c.Test.APIKey, " "+c.MerchantCode+" ", c.Password, "password")},
		{"access token, JSON number as username", "token_200",
			jsonBody(`{"username":` + c.Username + `,"password":"` + c.Password + `"}`)},
		// What PHP's cURL sends for an array body, and fetch for FormData.
		{"access token, multipart body", "token_200",
			multipartBody("/identity/v2/token", [][2]string{{"username", c.Username}, {"password", c.Password}}, false)},
		{"payment token, multipart body", "payment_token_200",
			multipartBody("/token", [][2]string{{"merchantCode", c.MerchantCode}, {"password", c.Password}, {"grant_type", "password"}}, false)},
		{"multipart body with a file", "token_invalid_request_multipart_file",
			multipartBody("/identity/v2/token", [][2]string{{"username", c.Username}}, true)},
		{"multipart body repeating a field", "token_invalid_request_repeated_field",
			multipartBody("/identity/v2/token", [][2]string{{"username", c.Username}, {"password", "wrong-one-1"}, {"password", c.Password}}, false)},
		{"payment token", "payment_token_200", servertest.PaymentTokenRequest(c.Test.APIKey, c.MerchantCode, c.Password, "password")},
		{"payment token, API key as password", "payment_token_200", servertest.PaymentTokenRequest(c.Test.APIKey, c.MerchantCode, c.Test.APIKey, "password")},
		// The spec's text calls the merchant code the username too.
		{"payment token, merchant code as username", "payment_token_200",
			multipartBody("/token", [][2]string{{"username", c.MerchantCode}, {"password", c.Password}, {"grant_type", "password"}}, false)},
		{"payment token without the merchant code", "payment_token_invalid_request_fields",
			multipartBody("/token", [][2]string{{"password", c.Password}, {"grant_type", "password"}}, false)},
		{"payment token without the password", "payment_token_invalid_request_fields",
			servertest.PaymentTokenRequest(c.Test.APIKey, c.MerchantCode, "", "password")},
		// The missing field is named as the request named the merchant code.
		{"payment token, username without the password", "payment_token_invalid_request_username",
			multipartBody("/token", [][2]string{{"username", c.MerchantCode}, {"grant_type", "password"}}, false)},
		// The key is judged first: without one, the answer is about the key.
		{"payment token without the key or the merchant code", "payment_token_invalid_client_no_key",
			servertest.PaymentTokenRequest("", "", c.Password, "password")},

		{"wrong API key", "token_invalid_client", servertest.TokenRequest("kadi_test_nope", c.Username, c.Password)},
		{"no Authorization header", "token_invalid_client_no_key", servertest.TokenRequest("", c.Username, c.Password)},
		{"wrong API key on /token", "payment_token_invalid_client", servertest.PaymentTokenRequest("kadi_test_nope", c.MerchantCode, c.Password, "password")},
		{"wrong password", "token_invalid_grant", servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password+"x")},
		// Answers never reveal whether a merchant exists.
		// A key beside another code is told so, whether that code exists
		// or not.
		{"unknown username", "token_invalid_grant_key_elsewhere", servertest.TokenRequest(c.Test.APIKey, "1234567890", c.Password)},
		{"another merchant's code", "token_invalid_grant_key_elsewhere", servertest.TokenRequest(c.Test.APIKey, other.Username, c.Password)},
		{"missing password", "token_invalid_request", servertest.TokenRequest(c.Test.APIKey, c.Username, "")},
		{"missing username", "token_invalid_request", servertest.TokenRequest(c.Test.APIKey, "", c.Password)},
		{"unreadable JSON body", "token_invalid_request_body", jsonBody(`{"username":`)},
		// Read as form encoding it named no field: "username and password
		// are required" sent the developer looking at the wrong thing.
		{"JSON array body", "token_invalid_request_json_array", jsonBody(`["` + c.Username + `","` + c.Password + `"]`)},
		{"repeated form field", "token_invalid_request_repeated_field", func() *http.Request {
			req := httptest.NewRequest(http.MethodPost, "/identity/v2/token", strings.NewReader("username="+c.Username+"&password=wrong-one-1&password="+url.QueryEscape(c.Password)))
			req.Header.Set("Authorization", "Basic "+c.Test.APIKey)
			return req
		}()},
		// Not text: refused, and not counted towards the lock.
		{"JSON boolean as password", "token_invalid_request_not_text", jsonBody(`{"username":"` + c.Username + `","password":true}`)},
		{"repeated JSON member", "token_invalid_request_duplicate",
			jsonBody(`{"username":"1234567890","username":"` + c.Username + `","password":"` + c.Password + `"}`)},
		{"missing grant_type", "payment_token_invalid_request", servertest.PaymentTokenRequest(c.Test.APIKey, c.MerchantCode, c.Password, "")},
		{"other grant_type", "payment_token_unsupported_grant_type", servertest.PaymentTokenRequest(c.Test.APIKey, c.MerchantCode, c.Password, "client_credentials")},
		{"body over 64 KiB", "token_body_too_large", jsonBody(`{"username":"` + strings.Repeat("1", 70<<10) + `"}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := g.Serve(tc.req)
			checkGolden(t, tc.golden, tc.req, rec, known(c))
			if rec.Code == http.StatusUnauthorized && !strings.HasPrefix(rec.Header().Get("WWW-Authenticate"), "Basic") {
				t.Errorf("401 without WWW-Authenticate: Basic: %q", rec.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// The tokens a merchant gets must work where they are meant to: the
// access token on the spec's endpoints, the payment-token (made for the
// shopper's browser) on the hosted form only; each carries its mode.
func TestTokensAreBearerTokens(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Token Shop")

	rec := g.Serve(servertest.PaymentTokenRequest(c.Test.APIKey, c.MerchantCode, c.Password, "password"))
	var pt api.PaymentTokenResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &pt); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("/token: %d %s", rec.Code, rec.Body)
	}
	if pt.NotificationSecret != c.Test.NotificationSecret {
		t.Errorf("notification-secret is not the test mode secret given at onboarding")
	}
	if rec := g.Serve(servertest.BillRequest(pt.PaymentToken, servertest.BillBody(c, "MODE0", "10"))); rec.Code != http.StatusForbidden ||
		!strings.Contains(rec.Header().Get("WWW-Authenticate"), "insufficient_scope") || !strings.Contains(rec.Body.String(), `"status":false`) {
		t.Errorf("bill with a payment-token: %d %q %s, want 403 insufficient_scope in the bill shape", rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body)
	}
	test := g.CreateBill(c, g.Token(c, merchant.Test), "MODE1", "10")
	if cb := g.Callback(g.CardPay(servertest.Card{Number: approvingCard, CVV: "737"}.Apply(servertest.FormFields(c, pt.PaymentToken, test)))); cb["orderStatus"] != "Transaction Successfull" {
		t.Errorf("hosted form with the payment-token: %v", cb)
	}

	rec = g.Serve(servertest.TokenRequest(c.Live.APIKey, c.Username, c.Password))
	var live api.TokenResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &live); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("live token: %d %s", rec.Code, rec.Body)
	}
	if live.ExpiresIn != 3600 || live.TokenType != "bearer" {
		t.Errorf("live token: type %q, expires_in %d", live.TokenType, live.ExpiresIn)
	}
	if rec := g.Serve(servertest.QueryRequest(live.AccessToken, test.Reference)); rec.Code != http.StatusNotFound {
		t.Errorf("a live token sees a test bill: %d %s", rec.Code, rec.Body)
	}
}

// docs/security.md: after 10 failures the credential is refused for 30 minutes
// with 429 and Retry-After, even with the right password.
func TestTokenLockout(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Locked Shop")
	for i := 1; i <= 10; i++ {
		rec := g.Serve(servertest.TokenRequest(c.Test.APIKey, c.Username, "wrong-password-1"))
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	req := servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password)
	rec := g.Serve(req)
	checkGolden(t, "token_429", req, rec, known(c))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("11th request: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}

	// The lock is on the merchant: another address does not lift it.
	req = servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password)
	req.RemoteAddr = "203.0.113.9:4000"
	if rec := g.Serve(req); rec.Code != http.StatusTooManyRequests {
		t.Errorf("locked merchant from another address: %d", rec.Code)
	}
	// The address is only throttled: another merchant from it gets in,
	// once the address's short wait (if any) is over.
	other := g.Onboard("Bystander Shop")
	if rec := g.Serve(servertest.TokenRequest(other.Test.APIKey, other.Username, other.Password)); rec.Code != http.StatusOK {
		t.Errorf("another merchant from the address its neighbour's failures came from: %d %s", rec.Code, rec.Body)
	}

	g.Clock.Advance(31 * time.Minute)
	if rec := g.Serve(servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password)); rec.Code != http.StatusOK {
		t.Errorf("after 31 minutes: %d %s", rec.Code, rec.Body)
	}
}

// Real integrations' request shapes: /v1/token (the previous base URL
// older integrations hard-code) is /token, and every API path answers with
// a trailing slash too (one PHP sample posts to /token/).
func TestPathVariants(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Path Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "PATHS0", "10")
	retarget := func(req *http.Request, path string) *http.Request {
		req.URL.Path, req.RequestURI = path, ""
		return req
	}
	for i, path := range []string{"/token", "/token/", "/v1/token", "/v1/token/"} {
		rec := g.Serve(retarget(servertest.PaymentTokenRequest(c.Test.APIKey, c.MerchantCode, c.Password, "password"), path))
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"payment-token"`) {
			t.Errorf("%d %s: %d %s", i, path, rec.Code, rec.Body)
		}
	}
	for _, path := range []string{"/identity/v2/token", "/identity/v2/token/"} {
		if rec := g.Serve(retarget(servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password), path)); rec.Code != http.StatusOK {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
	for i, path := range []string{"/payment/v2/bills", "/payment/v2/bills/"} {
		req := retarget(servertest.BillRequest(tok, servertest.BillBody(c, fmt.Sprintf("PATHS%d", i+1), "10")), path)
		if rec := g.Serve(req); rec.Code != http.StatusOK {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
	for _, path := range []string{"/payment/v2/query", "/payment/v2/query/"} {
		req := retarget(servertest.QueryRequest(tok, b.Reference), path)
		if rec := g.Serve(req); rec.Code != http.StatusOK {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
	// A base URL ending in a slash, and other unclean paths: served as
	// their clean path (Go's mux answered 307 with an empty body).
	for _, path := range []string{"//identity/v2/token", "/identity//v2/token/", "/identity/v2/./token", "/payment/../identity/v2/token"} {
		if rec := g.Serve(retarget(servertest.TokenRequest(c.Test.APIKey, c.Username, c.Password), path)); rec.Code != http.StatusOK {
			t.Errorf("%s: %d %s", path, rec.Code, rec.Body)
		}
	}
	if rec := g.Serve(retarget(servertest.BillRequest(tok, servertest.BillBody(c, "PATHS9", "10")), "//payment/v2/bills")); rec.Code != http.StatusOK {
		t.Errorf("//payment/v2/bills: %d %s", rec.Code, rec.Body)
	}
	if rec := g.Serve(retarget(servertest.QueryRequest(tok, b.Reference), "/payment//v2/query")); rec.Code != http.StatusOK {
		t.Errorf("/payment//v2/query: %d %s", rec.Code, rec.Body)
	}
	// A trailing slash, and nothing below it.
	for _, path := range []string{"/token/x", "/v1/token/x", "/payment/v2/bills/x"} {
		if rec := g.Serve(retarget(servertest.PaymentTokenRequest(c.Test.APIKey, c.MerchantCode, c.Password, "password"), path)); rec.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, rec.Code)
		}
	}
}
