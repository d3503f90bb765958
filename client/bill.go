package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

const billsPath = "/payment/v2/bills"

// Customer is who pays. Name: at most 50 characters of letters, digits,
// spaces and . ' -
type Customer struct {
	Name string
}

// Order describes what the bill is for. The gateway checks every rule and
// reports all violations at once in [APIError.Fields]; this client checks
// none of them, so the rules live in one place.
type Order struct {
	BillerCode string
	// Reference is the merchant's order number: 1–20 ASCII letters and
	// digits, unique per merchant and mode.
	Reference string
	// Amount is decimal text with at most the currency's minor digits,
	// such as "1500.00" for KES. Text, not float64, so no amount is ever
	// rounded on its way to the gateway.
	Amount string
	// Currency is the ISO 4217 code, such as "KES".
	Currency string
	// Description: 1–70 characters of letters, digits, spaces and . , - ( ) / : #
	Description string
	Outlet      string
	// Expiry is when an unpaid bill stops being payable; zero leaves it to
	// the gateway's default (24 hours unless the operator changed it).
	Expiry time.Time
}

// BillRequest is the body of [Client.CreateBill]. The channel is always CARD
// and is filled in by the client.
type BillRequest struct {
	Customer Customer
	Order    Order
}

// Bill is a created bill. Reference and Amount go into the [PaymentForm].
type Bill struct {
	// Reference is the gateway's bill reference: 12 upper-case letters and
	// digits.
	Reference string
	// Amount is echoed with exactly the currency's minor digits ("1500.00").
	Amount     string
	ServiceID  string // paybill number
	OrderRef   string // the order reference as submitted
	Channel    string // always CARD
	Remarks    string
	SystemCode string // till number
	// State is what the bill can do now: "open" takes a payment,
	// "processing" has one in flight, "paid"; "blocked" and "expired" take
	// none (create a new bill under another order reference). "" from a
	// gateway too old to say.
	State string
	// Replayed: the answer to a retry of an earlier identical request,
	// so this is that request's bill, not a new one; State says whether it
	// can still be paid.
	Replayed bool
}

type billBody struct {
	Customer struct {
		Name string `json:"name"`
	} `json:"customer"`
	Order struct {
		BillerCode  string `json:"billerCode"`
		Reference   string `json:"reference"`
		Amount      string `json:"amount"`
		Currency    string `json:"currency"`
		Description string `json:"description"`
		Channel     string `json:"channel"`
		Outlet      string `json:"outlet"`
		Expiry      string `json:"expiry,omitempty"`
	} `json:"order"`
}

type billResponse struct {
	Reference  string      `json:"reference"`
	Amount     looseString `json:"amount"`
	ServiceID  string      `json:"serviceId"`
	Status     looseString `json:"status"`
	OrderRef   string      `json:"orderRef"`
	Channel    string      `json:"channel"`
	Remarks    string      `json:"remarks"`
	SystemCode string      `json:"systemCode"`
}

// CreateBill registers an order with the gateway. A refused bill is an
// [*APIError] whose Fields name every broken rule (HTTP 400), or whose status
// is 409 when the order reference was already used with a different body.
//
// Sending the identical request again within 24 hours returns the original
// bill, so after a network error or timeout simply call CreateBill again
// with the same req. Build req once: an Expiry computed anew for the retry
// (time.Now().Add(…)) is another instant, so another request, and 409; the
// same instant in another time zone is the same request.
func (c *Client) CreateBill(ctx context.Context, req BillRequest) (*Bill, error) {
	var body billBody
	body.Customer.Name = req.Customer.Name
	o := &body.Order
	o.BillerCode = req.Order.BillerCode
	o.Reference = req.Order.Reference
	o.Amount = req.Order.Amount
	o.Currency = req.Order.Currency
	o.Description = req.Order.Description
	o.Channel = "CARD"
	o.Outlet = req.Order.Outlet
	if !req.Order.Expiry.IsZero() {
		o.Expiry = req.Order.Expiry.Format(time.RFC3339)
	}

	resp, err := c.doBearer(ctx, http.MethodPost, billsPath, nil, body)
	if err != nil {
		return nil, err
	}
	if resp.status/100 != 2 {
		return nil, c.apiError(resp)
	}
	var b billResponse
	if err := json.Unmarshal(resp.body, &b); err != nil {
		return nil, malformed(resp, "bill response: "+err.Error())
	}
	// Failure is status false, success "1"; anything else, even on HTTP
	// 200, is not a bill the merchant may send a customer to pay.
	if !b.Status.is("1") {
		return nil, c.apiError(resp)
	}
	if b.Reference == "" {
		return nil, malformed(resp, "bill response without reference")
	}
	return &Bill{
		Reference:  b.Reference,
		Amount:     string(b.Amount),
		ServiceID:  b.ServiceID,
		OrderRef:   b.OrderRef,
		Channel:    b.Channel,
		Remarks:    b.Remarks,
		SystemCode: b.SystemCode,
		State:      resp.header.Get("Kadi-Bill-State"),
		Replayed:   resp.header.Get("Idempotent-Replayed") == "true",
	}, nil
}
