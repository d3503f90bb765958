package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

func TestVerify(t *testing.T) {
	g := newFakeGateway()
	t.Cleanup(g.Close)
	c := newClient(t, g, nil)
	ctx := context.Background()
	bill, err := c.CreateBill(ctx, validBill("ORDER1"))
	if err != nil {
		t.Fatal(err)
	}

	v, err := c.Verify(ctx, bill.Reference)
	if err != nil {
		t.Fatal(err)
	}
	if v.Paid || v.TransactionID != "" {
		t.Errorf("before payment: %+v, want unpaid", v)
	}

	g.pay(bill.Reference)
	for _, ref := range []string{bill.Reference, "ORDER1"} {
		v, err := c.Verify(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		want := time.Date(2026, 11, 21, 11, 3, 0, 0, time.UTC)
		if !v.Paid || v.TransactionID == "" || v.Amount != "1500.00" || v.OrderRef != "ORDER1" || !v.Date.Equal(want) {
			t.Errorf("Verify(%s) = %+v, want paid 1500.00 at %s", ref, v, want)
		}
	}
}

func TestVerifyUnknownBill(t *testing.T) {
	g := newFakeGateway()
	t.Cleanup(g.Close)
	c := newClient(t, g, nil)

	// The reference is escaped into the query: no injected parameter can
	// turn an unknown reference into someone's bill.
	v, err := c.Verify(context.Background(), "NOPE&billReference=KD0000000001")
	if v != nil {
		t.Errorf("got %+v with the error", v)
	}
	if !errors.Is(err, client.ErrNotFound) {
		t.Errorf("err = %v, want ErrNotFound", err)
	}
	apiErr := asAPIError(t, err)
	if apiErr.Code != "not_found" || apiErr.RequestID == "" {
		t.Errorf("code %q, request id %q; want not_found and an id", apiErr.Code, apiErr.RequestID)
	}
}

func TestVerifyEmptyReference(t *testing.T) {
	c, calls := newStub(t, respond(200, "application/json", `{}`))
	if _, err := c.Verify(context.Background(), " "); err == nil {
		t.Error("Verify of a blank reference succeeded")
	}
	if n := calls.get(); n != 0 {
		t.Errorf("sent %d requests for a blank reference", n)
	}
}

func TestVerifyDecoding(t *testing.T) {
	tests := []struct {
		name      string
		body      string
		wantPaid  bool
		wantDate  time.Time
		malformed bool
	}{
		{name: "status true", body: `{"status":true}`, wantPaid: true},
		{name: "status false", body: `{"status":false}`},
		{name: `status "true"`, body: `{"status":"true"}`, wantPaid: true},
		{name: `status "false"`, body: `{"status":"false"}`},
		{name: `status "TRUE"`, body: `{"status":"TRUE"}`, wantPaid: true},
		{name: "status null", body: `{"status":null}`},
		{name: "status missing", body: `{}`},
		{name: "status object", body: `{"status":{"paid":true}}`, malformed: true},
		{
			name: "RFC 3339 date", body: `{"status":true,"date":"2026-11-21T14:03:00+03:00"}`, wantPaid: true,
			wantDate: time.Date(2026, 11, 21, 11, 3, 0, 0, time.UTC),
		},
		{
			name: "offset without colon", body: `{"status":true,"date":"2026-11-21T14:03:00.5+0300"}`, wantPaid: true,
			wantDate: time.Date(2026, 11, 21, 11, 3, 0, 5e8, time.UTC),
		},
		{name: "date without offset", body: `{"status":true,"date":"2026-11-21 14:03:00"}`, malformed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newStub(t, respond(http.StatusOK, "application/json", tt.body))
			v, err := c.Verify(context.Background(), "KD0000000001")
			if tt.malformed {
				if !errors.Is(err, client.ErrMalformedResponse) {
					t.Errorf("err = %v, want ErrMalformedResponse", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.Paid != tt.wantPaid || !v.Date.Equal(tt.wantDate) {
				t.Errorf("Paid %v, Date %s; want %v, %s", v.Paid, v.Date, tt.wantPaid, tt.wantDate)
			}
		})
	}
}
