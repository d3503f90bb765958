package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kadipay/kadi/client"
)

func callbackBody(edit func(url.Values)) string {
	v := url.Values{
		"orderAmount":    {"1500.00"},
		"orderReference": {"ORDER1001"},
		"orderStatus":    {client.StatusSuccessful},
		"message":        {"Payment received"},
		"dateTime":       {"2026-11-21+0300"},
		"billReference":  {"KD0000000001"},
		"transactionRef": {"TX00000001"},
	}
	if edit != nil {
		edit(v)
	}
	return v.Encode()
}

func TestParseCallback(t *testing.T) {
	const form = "application/x-www-form-urlencoded"
	tests := []struct {
		name        string
		method      string
		target      string
		contentType string
		body        string
		preparsed   bool // middleware called ParseForm first
		want        client.Callback
		wantErr     string
	}{
		{
			name: "successful payment", body: callbackBody(nil),
			want: client.Callback{
				OrderAmount: "1500.00", OrderReference: "ORDER1001", OrderStatus: client.StatusSuccessful,
				Message: "Payment received", DateTime: "2026-11-21+0300", BillReference: "KD0000000001",
				TransactionRef: "TX00000001",
			},
		},
		{
			name: "failed payment",
			body: callbackBody(func(v url.Values) {
				v.Set("orderStatus", client.StatusFailed)
				v.Set("message", "Card declined: insufficient funds")
				v.Set("transactionRef", "")
			}),
			want: client.Callback{
				OrderAmount: "1500.00", OrderReference: "ORDER1001", OrderStatus: client.StatusFailed,
				Message: "Card declined: insufficient funds", DateTime: "2026-11-21+0300", BillReference: "KD0000000001",
			},
		},
		{
			name: "content type with charset", contentType: form + "; charset=UTF-8", body: callbackBody(nil),
			want: client.Callback{
				OrderAmount: "1500.00", OrderReference: "ORDER1001", OrderStatus: client.StatusSuccessful,
				Message: "Payment received", DateTime: "2026-11-21+0300", BillReference: "KD0000000001",
				TransactionRef: "TX00000001",
			},
		},
		{
			name: "body already parsed by middleware", body: callbackBody(nil), preparsed: true,
			want: client.Callback{
				OrderAmount: "1500.00", OrderReference: "ORDER1001", OrderStatus: client.StatusSuccessful,
				Message: "Payment received", DateTime: "2026-11-21+0300", BillReference: "KD0000000001",
				TransactionRef: "TX00000001",
			},
		},
		{name: "GET", method: http.MethodGet, target: "/cb?" + callbackBody(nil), wantErr: "method GET"},
		{name: "JSON", contentType: "application/json", body: `{"orderStatus":"x"}`, wantErr: "Content-Type"},
		{name: "no content type", contentType: "-", body: callbackBody(nil), wantErr: "Content-Type"},
		{
			name:    "oversized body",
			body:    callbackBody(func(v url.Values) { v.Set("message", strings.Repeat("a", 64<<10)) }),
			wantErr: "larger than 65536 bytes",
		},
		{name: "orderStatus missing", body: callbackBody(func(v url.Values) { v.Del("orderStatus") }), wantErr: "orderStatus is missing"},
		{name: "billReference missing", body: callbackBody(func(v url.Values) { v.Del("billReference") }), wantErr: "billReference is missing"},
		{name: "billReference empty", body: callbackBody(func(v url.Values) { v.Set("billReference", "") }), wantErr: "billReference is missing"},
		{
			// Only the body counts: the callback URL has no query, so one
			// there was added by someone else.
			name:   "fields in the query only",
			target: "/cb?" + callbackBody(nil), body: "message=hi",
			wantErr: "orderStatus is missing",
		},
		{name: "bad escape", body: "orderStatus=%zz&billReference=KD1", wantErr: "invalid URL escape"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, target, ct := tt.method, tt.target, tt.contentType
			if method == "" {
				method = http.MethodPost
			}
			if target == "" {
				target = "/cb"
			}
			if ct == "" {
				ct = form
			}
			r := httptest.NewRequest(method, target, strings.NewReader(tt.body))
			if ct != "-" {
				r.Header.Set("Content-Type", ct)
			}
			if tt.preparsed {
				if err := r.ParseForm(); err != nil {
					t.Fatal(err)
				}
			}

			got, err := client.ParseCallback(r)
			if tt.wantErr != "" {
				if !errors.Is(err, client.ErrInvalidCallback) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v, want ErrInvalidCallback mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("callback = %+v\nwant %+v", got, tt.want)
			}
			if got.Successful() != (tt.want.OrderStatus == client.StatusSuccessful) {
				t.Errorf("Successful() = %v for status %q", got.Successful(), got.OrderStatus)
			}
		})
	}
}

func TestCallbackSuccessful(t *testing.T) {
	tests := []struct {
		status string
		want   bool
	}{
		{client.StatusSuccessful, true},
		{"Transaction Successfull", true},
		{client.StatusFailed, false},
		// The correct spelling is not what the gateway sends; accepting it
		// would only widen what a forger can try.
		{"Transaction Successful", false},
		{"transaction successfull", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := (client.Callback{OrderStatus: tt.status}).Successful(); got != tt.want {
			t.Errorf("Successful() for %q = %v, want %v", tt.status, got, tt.want)
		}
	}
}

func FuzzParseCallback(f *testing.F) {
	f.Add("POST", "application/x-www-form-urlencoded", callbackBody(nil))
	f.Add("POST", "application/x-www-form-urlencoded", "orderStatus=%zz&billReference=;;&&==")
	f.Add("POST", "application/x-www-form-urlencoded; charset=utf-8", "")
	f.Add("POST", "multipart/form-data; boundary=x", "--x\r\n")
	f.Add("PUT", "text/plain", "orderStatus=a&billReference=b")
	f.Fuzz(func(t *testing.T, method, contentType, body string) {
		r, err := http.NewRequest(method, "https://shop.example/cb", strings.NewReader(body))
		if err != nil {
			t.Skip()
		}
		r.Header.Set("Content-Type", contentType)
		cb, err := client.ParseCallback(r)
		if err != nil {
			if !errors.Is(err, client.ErrInvalidCallback) {
				t.Errorf("error %v does not wrap ErrInvalidCallback", err)
			}
			return
		}
		if cb.OrderStatus == "" || cb.BillReference == "" {
			t.Errorf("accepted a callback without orderStatus or billReference: %+v", cb)
		}
	})
}
