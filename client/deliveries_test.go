package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

// The delivery log takes the API key, never a token, and the filter's
// values travel escaped: none can add a parameter of its own.
func TestDeliveriesRequest(t *testing.T) {
	var got *http.Request
	c, _ := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		got = r
		respond(http.StatusOK, "application/json", `{"notifications":[]}`)(w, r)
	})
	ds, err := c.Deliveries(context.Background(), client.DeliveryFilter{Status: "failed", Limit: 7, Before: "msg_1", PaymentID: "pay_1&status=delivered"})
	if err != nil || len(ds) != 0 {
		t.Fatalf("Deliveries = %v, %v", ds, err)
	}
	if a := got.Header.Get("Authorization"); a != "Basic "+testAPIKey {
		t.Errorf("Authorization %q, want the API key as Basic", a)
	}
	q := got.URL.Query()
	if got.URL.Path != "/payment/v2/notifications" || q.Get("status") != "failed" || q.Get("limit") != "7" ||
		q.Get("before") != "msg_1" || q.Get("paymentId") != "pay_1&status=delivered" || len(q["status"]) != 1 {
		t.Errorf("request %s", got.URL)
	}

	if _, err := c.Delivery(context.Background(), "msg_1/replay"); err == nil {
		t.Error("an id with a slash reached a success")
	}
	if got.URL.EscapedPath() != "/payment/v2/notifications/msg_1%2Freplay" || got.Method != http.MethodGet {
		t.Errorf("Delivery sent %s %s: the id must stay one path segment", got.Method, got.URL.EscapedPath())
	}

	// A replay posts nothing: the id in the path says it all.
	if _, err := c.Redeliver(context.Background(), "msg_1"); err == nil {
		t.Error("a replay answered without a delivery reached a success")
	}
	if got.Method != http.MethodPost || got.URL.Path != "/payment/v2/notifications/msg_1/replay" || got.URL.RawQuery != "" ||
		got.ContentLength != 0 || got.Header.Get("Content-Type") != "" || got.Header.Get("Authorization") != "Basic "+testAPIKey {
		t.Errorf("Redeliver sent %s %s, %d bytes of %q, Authorization %q", got.Method, got.URL, got.ContentLength,
			got.Header.Get("Content-Type"), got.Header.Get("Authorization"))
	}
}

func TestDeliveryDecoding(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		malformed bool
		notFound  bool
	}{
		{name: "one with its history", status: 200, body: `{"id":"msg_1","paymentId":"pay_1","status":"delivered","attempts":2,"replays":1,
			"createdAt":"2026-11-21T14:00:00+03:00","nextAttemptAt":null,"deliveredAt":"2026-11-21T14:00:01+03:00","lastError":"",
			"payload":{"callbackType":"IPN"},"history":[{"seq":1,"at":"2026-11-21T14:00:00+03:00","url":"https://shop.example/ipn",
			"statusCode":503,"latencyMs":1500,"error":"HTTP 503","response":"busy"},{"seq":2,"at":"2026-11-21T14:00:01+03:00",
			"url":"https://shop.example/ipn","statusCode":200,"latencyMs":12,"error":"","response":"ok"}]}`},
		{name: "no id", status: 200, body: `{"status":"delivered"}`, malformed: true},
		{name: "a proxy's page", status: 200, body: `<html>`, malformed: true},
		{name: "a date in no known form", status: 200, body: `{"id":"msg_1","createdAt":"yesterday"}`, malformed: true},
		{name: "an attempt's date in no known form", status: 200, body: `{"id":"msg_1","createdAt":"2026-11-21T14:00:00+03:00","history":[{"seq":1,"at":"soon"}]}`, malformed: true},
		{name: "not found", status: 404, body: `{"code":"not_found","message":"no notification with that id"}`, notFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newStub(t, respond(tt.status, "application/json", tt.body))
			d, err := c.Delivery(context.Background(), "msg_1")
			switch {
			case tt.malformed:
				if !errors.Is(err, client.ErrMalformedResponse) {
					t.Errorf("err = %v, want ErrMalformedResponse", err)
				}
				return
			case tt.notFound:
				if !errors.Is(err, client.ErrNotFound) {
					t.Errorf("err = %v, want ErrNotFound", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			at := time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)
			if d.ID != "msg_1" || d.PaymentID != "pay_1" || d.Status != client.DeliveryDelivered || d.Attempts != 2 || d.Replays != 1 ||
				!d.CreatedAt.Equal(at) || !d.DeliveredAt.Equal(at.Add(time.Second)) || !d.NextAttemptAt.IsZero() ||
				string(d.Payload) != `{"callbackType":"IPN"}` || len(d.History) != 2 {
				t.Fatalf("Delivery = %+v", d)
			}
			if h := d.History[0]; h.Seq != 1 || !h.At.Equal(at) || h.StatusCode != 503 || h.Latency != 1500*time.Millisecond ||
				h.Error != "HTTP 503" || h.Response != "busy" || h.URL != "https://shop.example/ipn" {
				t.Errorf("first attempt %+v", h)
			}
		})
	}
}

func TestDeliveriesDecoding(t *testing.T) {
	for name, body := range map[string]string{
		"no list":             `{}`,
		"a list of strings":   `{"notifications":["msg_1"]}`,
		"an undated delivery": `{"notifications":[{"id":"msg_1","createdAt":"2026-11-21 14:00"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			c, _ := newStub(t, respond(http.StatusOK, "application/json", body))
			if _, err := c.Deliveries(context.Background(), client.DeliveryFilter{}); !errors.Is(err, client.ErrMalformedResponse) {
				t.Errorf("err = %v, want ErrMalformedResponse", err)
			}
		})
	}
	c, calls := newStub(t, respond(http.StatusOK, "application/json", `{}`))
	if _, err := c.Redeliver(context.Background(), ""); err == nil || calls.get() != 0 {
		t.Errorf("Redeliver of no id: %v after %d requests", err, calls.get())
	}
}
