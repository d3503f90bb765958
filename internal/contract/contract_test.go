package contract

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
)

var load = sync.OnceValues(Load)

func validator(t *testing.T) *Validator {
	t.Helper()
	v, err := load()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func headers(kv ...string) http.Header {
	h := http.Header{"X-Request-Id": {"req_0123456789abcdef"}, "Cache-Control": {"no-store"}, "Content-Type": {"application/json"}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			h.Del(kv[i])
		} else {
			h.Set(kv[i], kv[i+1])
		}
	}
	return h
}

const (
	goodToken = `{"token_type":"bearer","issued_at":"1795259614481","expires_in":3600,"access_token":"` +
		`aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`
	goodVerification = `{"orderRef":"ORD1","transactionId":"","amount":"0.00","status":false,"date":"2026-11-21T14:13:34+03:00","narration":"Awaiting payment"}`
	billFailure      = `{"reference":"","amount":"","serviceId":"","status":false,"orderRef":"","channel":"CARD","remarks":"x","systemCode":"","code":"invalid_json","message":"x"}`
	invalidToken     = `{"code":"invalid_token","message":"the access token is missing, malformed, expired or revoked"}`
)

func TestResponse(t *testing.T) {
	v := validator(t)
	cases := []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		ok                 bool
	}{
		{"access token", "POST", "/identity/v2/token", 200, headers(), goodToken, true},
		{"with a trailing slash", "POST", "/identity/v2/token/", 200, headers(), goodToken, true},
		{"a field the document lacks", "POST", "/identity/v2/token", 200, headers(),
			strings.Replace(goodToken, `{`, `{"scope":"api",`, 1), false},
		{"a field missing", "POST", "/identity/v2/token", 200, headers(), strings.Replace(goodToken, `"token_type":"bearer",`, "", 1), false},
		{"a field of the wrong type", "POST", "/identity/v2/token", 200, headers(), strings.Replace(goodToken, `3600`, `"3600"`, 1), false},
		{"no request id", "POST", "/identity/v2/token", 200, headers("X-Request-Id", ""), goodToken, false},
		{"cacheable", "POST", "/identity/v2/token", 200, headers("Cache-Control", "max-age=60"), goodToken, false},
		{"an undocumented status", "POST", "/identity/v2/token", 418, headers(), `{"code":"invalid_request","message":"x"}`, false},
		{"another content type", "POST", "/identity/v2/token", 200, headers("Content-Type", "text/plain"), goodToken, false},
		{"unpaid bill", "GET", "/payment/v2/query", 200, headers(), goodVerification, true},
		{"status as a string", "GET", "/payment/v2/query", 200, headers(), strings.Replace(goodVerification, `false`, `"false"`, 1), false},
		{"refused bill", "POST", "/payment/v2/bills", 400, headers(), billFailure, true},
		{"refused bill with status \"false\"", "POST", "/payment/v2/bills", 400, headers(), strings.Replace(billFailure, `false`, `"false"`, 1), false},
		{"refused bill in the error shape", "POST", "/payment/v2/bills", 400, headers(), `{"code":"invalid_json","message":"x"}`, false},
		{"401 with its challenge", "GET", "/payment/v2/query", 401, headers("WWW-Authenticate", `Bearer realm="kadi", error="invalid_token"`), invalidToken, true},
		{"401 without its challenge", "GET", "/payment/v2/query", 401, headers(), invalidToken, false},
		{"an unknown error code", "GET", "/payment/v2/query", 404, headers(), `{"code":"missing","message":"x"}`, false},
		{"the form's redirect", "POST", "/cardPay", 303, headers("Location", "/cardPay/page/abc_DEF-1", "Content-Type", ""), "", true},
		{"the form's redirect elsewhere", "POST", "/cardPay", 303, headers("Location", "https://evil.example/", "Content-Type", ""), "", false},
		{"a hosted page", "GET", "/cardPay/page/abc", 401, headers("Content-Type", "text/html; charset=utf-8",
			"Content-Security-Policy", "default-src 'self'; form-action 'self'"), "<!doctype html>", true},
		{"a hosted page without CSP", "GET", "/cardPay/page/abc", 200, headers("Content-Type", "text/html; charset=utf-8"), "<!doctype html>", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "http://127.0.0.1:8080"+tc.path, nil)
			err := v.Response(req, tc.status, tc.header, []byte(tc.body))
			if (err == nil) != tc.ok {
				t.Errorf("ok %v, want %v: %v", err == nil, tc.ok, err)
			}
		})
	}
}

func TestCovers(t *testing.T) {
	v := validator(t)
	for _, tc := range []struct {
		method, target string
		want           bool
	}{
		{"POST", "http://127.0.0.1:1/token", true},
		{"POST", "/v1/token/", true},
		{"GET", "http://shop.example/payment/v2/notifications/msg_0123456789abcdef01234567", true},
		{"POST", "/payment/v2/notifications/msg_0123456789abcdef01234567/replay", true},
		{"GET", "/payment/v2/bills", false}, // the path is documented, the method is not
		{"GET", "/healthz", false},
		{"POST", "/callback", false},
	} {
		req := httptest.NewRequest(tc.method, tc.target, nil)
		if got := v.Covers(req); got != tc.want {
			t.Errorf("Covers(%s %s) = %v, want %v", tc.method, tc.target, got, tc.want)
		}
	}
	err := v.Response(httptest.NewRequest("GET", "/healthz", nil), 200, headers(), []byte(`{}`))
	if !errors.Is(err, ErrNoOperation) {
		t.Errorf("an undocumented path: %v, want ErrNoOperation", err)
	}
}

func TestBody(t *testing.T) {
	v := validator(t)
	for _, tc := range []struct {
		schema, body string
		ok           bool
	}{
		{"Error", `{"code":"not_found","message":"no such endpoint"}`, true},
		{"Error", `{"code":"not_found"}`, false},
		{"Error", `{"code":"not_found","message":"x","trace":"…"}`, false},
		{"Error", `not json`, false},
		{"NoSuchSchema", `{}`, false},
	} {
		if err := v.Body(tc.schema, []byte(tc.body)); (err == nil) != tc.ok {
			t.Errorf("Body(%s, %s): %v, want ok %v", tc.schema, tc.body, err, tc.ok)
		}
	}
}

// The transport hands good answers through untouched, turns a bad one into
// an error of the request (and reports it), and leaves undocumented paths
// alone.
func TestTransport(t *testing.T) {
	v := validator(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_0123456789abcdef")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("billReference") {
		case "GOOD":
			_, _ = io.WriteString(w, goodVerification)
		default:
			_, _ = io.WriteString(w, `{"status":"maybe"}`)
		}
	}))
	defer srv.Close()
	var reported []error
	c := &http.Client{Transport: v.Transport(nil, func(err error) { reported = append(reported, err) })}

	resp, err := c.Get(srv.URL + "/payment/v2/query?billReference=GOOD")
	if err != nil {
		t.Fatalf("a good answer: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != goodVerification {
		t.Errorf("body after the check: %q", body)
	}
	if _, err := c.Get(srv.URL + "/payment/v2/query?billReference=BAD"); err == nil || !strings.Contains(err.Error(), "contract:") {
		t.Errorf("a bad answer: %v, want a contract error", err)
	}
	if len(reported) != 1 {
		t.Errorf("%d reports, want 1", len(reported))
	}
	resp, err = c.Get(srv.URL + "/healthz")
	if err != nil {
		t.Fatalf("an undocumented path: %v", err)
	}
	resp.Body.Close()
}

func TestDrift(t *testing.T) {
	v := validator(t)
	type field struct {
		Field   string `json:"field"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	type errorBody struct {
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Errors  []field `json:"errors,omitempty"`
	}
	type extra struct {
		errorBody
		Trace string `json:"trace"`
	}
	type missing struct {
		Code string `json:"code"`
	}
	type nestedDrift struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Errors  []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	type hidden struct {
		errorBody
		Skipped string `json:"-"`
	}
	cases := []struct {
		value  any
		schema []string
		drift  []string // substrings of the error; none: no drift
	}{
		{errorBody{}, []string{"Error"}, nil},
		{hidden{}, []string{"Error"}, nil},
		{extra{}, []string{"Error"}, []string{`field "trace" is in the code`}},
		{missing{}, []string{"Error"}, []string{`property "errors" is in the document`, `property "message" is in the document`}},
		{nestedDrift{}, []string{"Error"}, []string{`errors: property "code" is in the document`}},
		{errorBody{}, []string{"Nope"}, []string{"no schema Nope"}},
	}
	for _, tc := range cases {
		err := v.Drift(reflect.TypeOf(tc.value), tc.schema...)
		if len(tc.drift) == 0 {
			if err != nil {
				t.Errorf("%T: %v", tc.value, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%T: no drift found, want %v", tc.value, tc.drift)
			continue
		}
		for _, want := range tc.drift {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%T: %v\nwant it to say %s", tc.value, err, want)
			}
		}
	}
}

func TestWebhook(t *testing.T) {
	v := validator(t)
	const payload = `{"callbackType":"IPN","customer":{"name":"Wanjiru Kamau","mobileNumber":"+254 712345678","reference":null},` +
		`"transaction":{"date":"2026-11-21 14:13:34.0","reference":"SIMX","paymentMode":"CARD","amount":1500.00,"billNumber":"A9NMA2JOYJND",` +
		`"orderAmount":1500.00,"serviceCharge":0,"servedBy":"73251053","additionalInfo":"ORD1001","status":"SUCCESS","remarks":"Payment approved"},` +
		`"bank":{"reference":"pay_1","transactionType":"C","account":"7581494909317"}}`
	request := func(change func(r *http.Request)) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "http://shop.example/ipn", nil)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("webhook-id", "msg_0123456789abcdef01234567")
		r.Header.Set("webhook-timestamp", "1795259615")
		r.Header.Set("webhook-signature", "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=")
		r.SetBasicAuth("shop", "secret")
		if change != nil {
			change(r)
		}
		return r
	}
	cases := []struct {
		name string
		req  *http.Request
		body string
		ok   bool
	}{
		{"as sent", request(nil), payload, true},
		{"no webhook-id", request(func(r *http.Request) { r.Header.Del("webhook-id") }), payload, false},
		{"a signature of another scheme", request(func(r *http.Request) { r.Header.Set("webhook-signature", "v1a,abc") }), payload, false},
		{"no Basic credentials", request(func(r *http.Request) { r.Header.Del("Authorization") }), payload, false},
		{"an extra field", request(nil), strings.Replace(payload, `"callbackType":"IPN",`, `"callbackType":"IPN","v":2,`, 1), false},
		{"the amount as text", request(nil), strings.Replace(payload, `"amount":1500.00`, `"amount":"1500.00"`, 1), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := v.Webhook("ipn", tc.req, []byte(tc.body)); (err == nil) != tc.ok {
				t.Errorf("ok %v, want %v: %v", err == nil, tc.ok, err)
			}
		})
	}
	if err := v.Webhook("nope", request(nil), []byte(payload)); err == nil {
		t.Error("an undocumented webhook passed")
	}
}
