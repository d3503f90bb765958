package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

func validBill(orderRef string) client.BillRequest {
	return client.BillRequest{
		Customer: client.Customer{Name: "Wanjiku Kamau"},
		Order: client.Order{
			BillerCode:  "BILLER01",
			Reference:   orderRef,
			Amount:      "1500",
			Currency:    "KES",
			Description: "Two tickets",
			Outlet:      "OUTLET01",
		},
	}
}

func TestCreateBill(t *testing.T) {
	nairobi := time.FixedZone("EAT", 3*3600)
	withExpiry := validBill("ORDER2")
	withExpiry.Order.Expiry = time.Date(2026, 11, 22, 14, 0, 0, 0, nairobi)

	tests := []struct {
		name     string
		req      client.BillRequest
		wantBody string
	}{
		{
			name: "expiry left to the gateway",
			req:  validBill("ORDER1"),
			wantBody: `{"customer":{"name":"Wanjiku Kamau"},"order":{"billerCode":"BILLER01","reference":"ORDER1",` +
				`"amount":"1500","currency":"KES","description":"Two tickets","channel":"CARD","outlet":"OUTLET01"}}`,
		},
		{
			name: "expiry set",
			req:  withExpiry,
			wantBody: `{"customer":{"name":"Wanjiku Kamau"},"order":{"billerCode":"BILLER01","reference":"ORDER2",` +
				`"amount":"1500","currency":"KES","description":"Two tickets","channel":"CARD","outlet":"OUTLET01",` +
				`"expiry":"2026-11-22T14:00:00+03:00"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway()
			t.Cleanup(g.Close)
			c := newClient(t, g, nil)

			bill, err := c.CreateBill(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			want := &client.Bill{
				Reference: "KD0000000001", Amount: "1500.00", ServiceID: "600100", OrderRef: tt.req.Order.Reference,
				Channel: "CARD", Remarks: "bill created", SystemCode: "700200", State: "open",
			}
			if !reflect.DeepEqual(bill, want) {
				t.Errorf("bill = %+v\nwant %+v", bill, want)
			}
			g.mu.Lock()
			body := string(g.lastBillBody)
			g.mu.Unlock()
			if body != tt.wantBody {
				t.Errorf("request body\n got %s\nwant %s", body, tt.wantBody)
			}
		})
	}
}

// The gateway answers an identical request with the original bill, which is
// what makes calling CreateBill again after a timeout safe.
func TestCreateBillRetryReturnsSameBill(t *testing.T) {
	g := newFakeGateway()
	t.Cleanup(g.Close)
	c := newClient(t, g, nil)
	ctx := context.Background()

	first, err := c.CreateBill(ctx, validBill("ORDER1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateBill(ctx, validBill("ORDER1"))
	if err != nil {
		t.Fatal(err)
	}
	if again.Reference != first.Reference {
		t.Errorf("retry got bill %s, want the original %s", again.Reference, first.Reference)
	}
	// Read from the answer's headers: a replay, and what the bill can do.
	if first.Replayed || !again.Replayed || first.State != "open" || again.State != "open" {
		t.Errorf("first: replayed %v, state %q; retry: replayed %v, state %q", first.Replayed, first.State, again.Replayed, again.State)
	}
}

func TestCreateBillRefused(t *testing.T) {
	badFields := validBill("ORDER1")
	badFields.Customer.Name = ""
	badFields.Order.Amount = "-5"
	reused := validBill("ORDER1")
	reused.Order.Amount = "99"

	tests := []struct {
		name       string
		req        client.BillRequest
		wantStatus int
		wantMsg    string
		wantFields []client.FieldError
	}{
		{
			name:       "every broken rule at once",
			req:        badFields,
			wantStatus: http.StatusBadRequest,
			wantMsg:    "the bill has invalid fields",
			wantFields: []client.FieldError{
				{Field: "customer.name", Code: "required", Message: "is required"},
				{Field: "order.amount", Code: "not_positive", Message: "must be greater than zero"},
			},
		},
		{
			name:       "order reference reused with a different body",
			req:        reused,
			wantStatus: http.StatusConflict,
			wantMsg:    "order reference already used with a different bill",
			wantFields: []client.FieldError{
				{Field: "order.reference", Code: "duplicate", Message: "order.reference was already used"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway()
			t.Cleanup(g.Close)
			c := newClient(t, g, nil)
			ctx := context.Background()
			if _, err := c.CreateBill(ctx, validBill("ORDER1")); err != nil {
				t.Fatal(err)
			}

			bill, err := c.CreateBill(ctx, tt.req)
			if bill != nil {
				t.Errorf("got bill %+v with the error", bill)
			}
			apiErr := asAPIError(t, err)
			if apiErr.StatusCode != tt.wantStatus || apiErr.Message != tt.wantMsg {
				t.Errorf("got HTTP %d %q, want HTTP %d %q", apiErr.StatusCode, apiErr.Message, tt.wantStatus, tt.wantMsg)
			}
			if !reflect.DeepEqual(apiErr.Fields, tt.wantFields) {
				t.Errorf("fields = %+v\nwant %+v", apiErr.Fields, tt.wantFields)
			}
			if apiErr.RequestID == "" {
				t.Error("no request id")
			}
		})
	}
}

// Answers the fake gateway never gives, but a proxy or an older gateway
// might.
func TestCreateBillDecoding(t *testing.T) {
	tests := []struct {
		name       string
		status     int
		body       string
		wantAmount string // for a bill
		wantStatus int    // for an APIError
		wantMsg    string
		malformed  bool
	}{
		{name: `status "1"`, status: 200, body: `{"reference":"KD1","amount":"1500.00","status":"1"}`, wantAmount: "1500.00"},
		{name: "status 1 as number", status: 200, body: `{"reference":"KD1","amount":"1500.00","status":1}`, wantAmount: "1500.00"},
		{name: "amount as number", status: 200, body: `{"reference":"KD1","amount":1500.5,"status":"1"}`, wantAmount: "1500.5"},
		{name: "status false on 200", status: 200, body: `{"status":false,"remarks":"biller suspended"}`, wantStatus: 200, wantMsg: "biller suspended"},
		{name: `status "false" on 200`, status: 200, body: `{"status":"false"}`, wantStatus: 200, wantMsg: "request refused"},
		{name: "no status on 200", status: 200, body: `{"reference":"KD1"}`, wantStatus: 200, wantMsg: "request refused"},
		{name: "proxy page on 200", status: 200, body: `<html>hello</html>`, malformed: true},
		{name: "status 1 without reference", status: 200, body: `{"status":"1"}`, malformed: true},
		{name: "proxy page on 502", status: 502, body: `<html>bad gateway</html>`, wantStatus: 502, wantMsg: "Bad Gateway"},
		{name: "code and message", status: 403, body: `{"code":"forbidden","message":"outlet is not yours"}`, wantStatus: 403, wantMsg: "outlet is not yours"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := newStub(t, respond(tt.status, "application/json", tt.body))
			bill, err := c.CreateBill(context.Background(), validBill("ORDER1"))
			switch {
			case tt.malformed:
				if !errors.Is(err, client.ErrMalformedResponse) {
					t.Errorf("err = %v, want ErrMalformedResponse", err)
				}
			case tt.wantStatus != 0:
				apiErr := asAPIError(t, err)
				if apiErr.StatusCode != tt.wantStatus || apiErr.Message != tt.wantMsg {
					t.Errorf("got HTTP %d %q, want HTTP %d %q", apiErr.StatusCode, apiErr.Message, tt.wantStatus, tt.wantMsg)
				}
				if apiErr.RequestID != "stub-req" {
					t.Errorf("request id = %q, want stub-req", apiErr.RequestID)
				}
			default:
				if err != nil || bill.Amount != tt.wantAmount {
					t.Errorf("CreateBill = %+v, %v; want amount %s", bill, err, tt.wantAmount)
				}
			}
		})
	}
}

// An amount reaches the wire as the exact text given: through a float64 this
// one would lose its last digits.
func TestCreateBillSendsAmountAsText(t *testing.T) {
	var got map[string]map[string]any
	c, _ := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		writeJSON(w, 200, map[string]string{"reference": "KD1", "status": "1"})
	})
	req := validBill("ORDER1")
	req.Order.Amount = "12345678901234567.89"
	if _, err := c.CreateBill(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if amount := got["order"]["amount"]; amount != req.Order.Amount {
		t.Errorf("amount sent as %#v, want the text %q", amount, req.Order.Amount)
	}
}
