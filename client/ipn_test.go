package client_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

// The Standard Webhooks specification's own test vector: a signature made
// by any conforming sender must verify.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

const ipnBody = `{"callbackType":"IPN","customer":{"name":"Wanjiku Kamau","mobileNumber":"+254 712345678","reference":null},` +
	`"transaction":{"date":"2026-11-21 14:03:07.5","reference":"SIMNETREF000001","paymentMode":"CARD","amount":1500.00,` +
	`"billNumber":"KD0000000001","orderAmount":1500.00,"serviceCharge":0,"servedBy":"OUTLET01","additionalInfo":"ORDER1001",` +
	`"status":"SUCCESS","remarks":"Payment approved"},"bank":{"reference":"pay_0001","transactionType":"C","account":"0123456789012"}}`

func sign(secret, id string, ts int64, body string) string {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "." + body))
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func ipnRequest(body string, edit func(h http.Header)) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/ipn", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.SetBasicAuth("shop", "ipn-pass")
	r.Header.Set("webhook-id", vectorID)
	r.Header.Set("webhook-timestamp", strconv.Itoa(vectorTimestamp))
	r.Header.Set("webhook-signature", sign(vectorSecret, vectorID, vectorTimestamp, body))
	if edit != nil {
		edit(r.Header)
	}
	return r
}

func newIPNHandler(t *testing.T, now time.Time, got *[]client.Notification, fail error) *client.IPNHandler {
	t.Helper()
	h, err := client.NewIPNHandler(client.IPNConfig{
		Secret: vectorSecret, Username: "shop", Password: "ipn-pass",
		Now: func() time.Time { return now },
	}, func(_ context.Context, n client.Notification) error {
		*got = append(*got, n)
		return fail
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestIPNSignatureVector(t *testing.T) {
	if got := sign(vectorSecret, vectorID, vectorTimestamp, vectorBody); got != vectorSignature {
		t.Fatalf("test signer gives %s, the specification %s", got, vectorSignature)
	}
	var got []client.Notification
	h := newIPNHandler(t, time.Unix(vectorTimestamp, 0), &got, nil)
	hdr := http.Header{}
	hdr.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("shop:ipn-pass")))
	hdr.Set("webhook-id", vectorID)
	hdr.Set("webhook-timestamp", strconv.Itoa(vectorTimestamp))
	hdr.Set("webhook-signature", vectorSignature)
	n, err := h.Verify(hdr, []byte(vectorBody))
	if err != nil {
		t.Fatalf("specification's vector refused: %v", err)
	}
	if n.ID != vectorID || !n.SentAt.Equal(time.Unix(vectorTimestamp, 0)) {
		t.Errorf("ID %q SentAt %v", n.ID, n.SentAt)
	}
}

func TestIPNHandlerAccepts(t *testing.T) {
	var got []client.Notification
	h := newIPNHandler(t, time.Unix(vectorTimestamp, 0), &got, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, ipnRequest(ipnBody, nil))
	if rec.Code < 200 || rec.Code > 299 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	if len(got) != 1 {
		t.Fatalf("handler called %d times", len(got))
	}
	n := got[0]
	tx := n.Transaction
	// Amounts keep the exact decimal text: "1500.00", not 1500 or 1.5e3.
	if tx.Amount != "1500.00" || tx.OrderAmount != "1500.00" || tx.ServiceCharge != "0" {
		t.Errorf("amounts %q %q %q", tx.Amount, tx.OrderAmount, tx.ServiceCharge)
	}
	if n.CallbackType != "IPN" || !n.Successful() || tx.BillNumber != "KD0000000001" || tx.ServedBy != "OUTLET01" ||
		tx.Date != "2026-11-21 14:03:07.5" || n.Customer.Name != "Wanjiku Kamau" || n.Customer.Reference != nil ||
		n.Bank.TransactionType != "C" || n.Bank.Account != "0123456789012" || n.ID != vectorID {
		t.Errorf("notification decoded wrongly: %+v", n)
	}
}

func TestIPNHandlerRefuses(t *testing.T) {
	now := time.Unix(vectorTimestamp, 0)
	tampered := strings.Replace(ipnBody, `"amount":1500.00`, `"amount":15000.00`, 1)
	tests := []struct {
		name   string
		method string
		body   string
		edit   func(h http.Header)
		want   int
	}{
		{"no credentials", "", ipnBody, func(h http.Header) { h.Del("Authorization") }, 401},
		{"wrong password", "", ipnBody, func(h http.Header) { setBasic(h, "shop", "ipn-pasS") }, 401},
		{"wrong username", "", ipnBody, func(h http.Header) { setBasic(h, "shoq", "ipn-pass") }, 401},
		{"bearer instead of basic", "", ipnBody, func(h http.Header) { h.Set("Authorization", "Bearer x") }, 401},
		{"body changed after signing", "", tampered, func(h http.Header) {
			h.Set("webhook-signature", sign(vectorSecret, vectorID, vectorTimestamp, ipnBody))
		}, 400},
		{"signed with another secret", "", ipnBody, func(h http.Header) {
			h.Set("webhook-signature", sign("whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret")), vectorID, vectorTimestamp, ipnBody))
		}, 400},
		{"id changed after signing", "", ipnBody, func(h http.Header) { h.Set("webhook-id", "msg_other") }, 400},
		{"timestamp changed after signing", "", ipnBody, func(h http.Header) { h.Set("webhook-timestamp", strconv.Itoa(vectorTimestamp+1)) }, 400},
		{"too old", "", ipnBody, func(h http.Header) { resign(h, vectorTimestamp-301, ipnBody) }, 400},
		{"too far ahead", "", ipnBody, func(h http.Header) { resign(h, vectorTimestamp+301, ipnBody) }, 400},
		{"unknown signature version", "", ipnBody, func(h http.Header) {
			h.Set("webhook-signature", "v2,"+strings.TrimPrefix(h.Get("webhook-signature"), "v1,"))
		}, 400},
		{"missing signature", "", ipnBody, func(h http.Header) { h.Del("webhook-signature") }, 400},
		{"missing id", "", ipnBody, func(h http.Header) { h.Del("webhook-id") }, 400},
		{"timestamp not a number", "", ipnBody, func(h http.Header) { h.Set("webhook-timestamp", "yesterday") }, 400},
		{"not JSON", "", "not json", func(h http.Header) { resign(h, vectorTimestamp, "not json") }, 400},
		{"GET", http.MethodGet, ipnBody, nil, 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []client.Notification
			h := newIPNHandler(t, now, &got, nil)
			r := ipnRequest(tt.body, tt.edit)
			if tt.method != "" {
				r.Method = tt.method
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tt.want {
				t.Errorf("status %d, want %d (%s)", rec.Code, tt.want, rec.Body)
			}
			if len(got) != 0 {
				t.Errorf("merchant's function was called for a refused notification")
			}
		})
	}
}

func setBasic(h http.Header, user, pass string) {
	h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
}

func resign(h http.Header, ts int64, body string) {
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sign(vectorSecret, vectorID, ts, body))
}

func TestIPNHandlerTolerance(t *testing.T) {
	now := time.Unix(vectorTimestamp, 0)
	for _, skew := range []int64{-299, 0, 299} {
		var got []client.Notification
		h := newIPNHandler(t, now, &got, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, ipnRequest(ipnBody, func(hd http.Header) { resign(hd, vectorTimestamp+skew, ipnBody) }))
		if rec.Code/100 != 2 || len(got) != 1 {
			t.Errorf("skew %ds: status %d, %d calls; within 5 minutes must be accepted", skew, rec.Code, len(got))
		}
	}
}

// During a secret rotation a sender may send several signatures; one valid
// is enough.
func TestIPNHandlerAnyOfSeveralSignatures(t *testing.T) {
	var got []client.Notification
	h := newIPNHandler(t, time.Unix(vectorTimestamp, 0), &got, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, ipnRequest(ipnBody, func(hd http.Header) {
		hd.Set("webhook-signature", "v1,AAAA v1a,xyz "+hd.Get("webhook-signature"))
	}))
	if rec.Code/100 != 2 || len(got) != 1 {
		t.Errorf("status %d, %d calls", rec.Code, len(got))
	}
}

// The gateway must see a 2xx only once the merchant has processed the
// notification; an error makes it deliver again.
func TestIPNHandlerAnswersAfterMerchant(t *testing.T) {
	var got []client.Notification
	h := newIPNHandler(t, time.Unix(vectorTimestamp, 0), &got, errors.New("database down"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, ipnRequest(ipnBody, nil))
	if rec.Code/100 == 2 {
		t.Errorf("status %d after the merchant's function failed; the gateway would not retry", rec.Code)
	}
	if len(got) != 1 {
		t.Errorf("merchant's function called %d times", len(got))
	}
}

func TestIPNAmountForms(t *testing.T) {
	tests := []struct{ json, want string }{
		{`1500.00`, "1500.00"},
		{`"1500.00"`, "1500.00"},
		{`0.1`, "0.1"},
		{`12345678901234567890.12`, "12345678901234567890.12"},
		{`null`, ""},
		{`""`, ""},
	}
	for _, tt := range tests {
		body := strings.Replace(ipnBody, `"amount":1500.00`, `"amount":`+tt.json, 1)
		var got []client.Notification
		h := newIPNHandler(t, time.Unix(vectorTimestamp, 0), &got, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, ipnRequest(body, nil))
		if len(got) != 1 {
			t.Errorf("%s: status %d", tt.json, rec.Code)
			continue
		}
		if got[0].Transaction.Amount != tt.want {
			t.Errorf("%s: amount %q, want %q", tt.json, got[0].Transaction.Amount, tt.want)
		}
	}
}

func TestNewIPNHandlerConfig(t *testing.T) {
	ok := func(context.Context, client.Notification) error { return nil }
	tests := []struct {
		name string
		cfg  client.IPNConfig
		fn   func(context.Context, client.Notification) error
	}{
		{"no secret", client.IPNConfig{}, ok},
		{"secret without prefix", client.IPNConfig{Secret: "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, ok},
		{"secret not base64", client.IPNConfig{Secret: "whsec_%%%"}, ok},
		{"username without password", client.IPNConfig{Secret: vectorSecret, Username: "shop"}, ok},
		{"username with a colon", client.IPNConfig{Secret: vectorSecret, Username: "shop:1", Password: "pw"}, ok},
		{"no function", client.IPNConfig{Secret: vectorSecret}, nil},
	}
	for _, tt := range tests {
		if _, err := client.NewIPNHandler(tt.cfg, tt.fn); !errors.Is(err, client.ErrInvalidConfig) {
			t.Errorf("%s: err %v, want ErrInvalidConfig", tt.name, err)
		}
	}
	if _, err := client.NewIPNHandler(client.IPNConfig{Secret: vectorSecret}, ok); err != nil {
		t.Errorf("signature-only configuration refused: %v", err)
	}
}

// FuzzIPNVerify: headers and body of an IPN are outside input to the
// merchant. Verification never panics, and only a correctly signed body
// with the right credentials is accepted.
func FuzzIPNVerify(f *testing.F) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	h, err := client.NewIPNHandler(client.IPNConfig{Secret: secret, Username: "u", Password: "p", Now: func() time.Time { return now }},
		func(context.Context, client.Notification) error { return nil })
	if err != nil {
		f.Fatal(err)
	}
	body := `{"callbackType":"IPN","transaction":{"amount":1500.00,"billNumber":"B1","status":"SUCCESS"}}`
	ts := strconv.FormatInt(now.Unix(), 10)
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("msg_1." + ts + "." + body))
	sig := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("u:p"))
	f.Add("msg_1", ts, sig, auth, body)
	f.Add("msg_1", ts, "v1,AAAA v1,"+sig[3:], auth, body)
	f.Add("", "", "", "", "")
	f.Fuzz(func(t *testing.T, id, ts, sig, authz, body string) {
		hd := http.Header{}
		hd.Set("webhook-id", id)
		hd.Set("webhook-timestamp", ts)
		hd.Set("webhook-signature", sig)
		hd.Set("Authorization", authz)
		_, err := h.Verify(hd, []byte(body))
		if err != nil {
			return
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + ts + "." + body))
		want := base64.StdEncoding.EncodeToString(m.Sum(nil))
		// The scheme is case-insensitive (RFC 9110); the credentials are not.
		scheme, cred, _ := strings.Cut(authz, " ")
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		if !strings.Contains(sig, want) || !strings.EqualFold(scheme, "Basic") || string(raw) != "u:p" {
			t.Fatalf("accepted without a valid signature or credentials: id=%q ts=%q sig=%q auth=%q", id, ts, sig, authz)
		}
	})
}
