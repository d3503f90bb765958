package api

import (
	"errors"
	"github.com/kadipay/kadi/internal/logging"
	"net/http"
	"strings"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/payment"
)

// BillResponse is spec 2.3. Status is the string "1" on success and the
// JSON boolean false on failure: never the string "false", which PHP and
// JavaScript read as true.
type BillResponse struct {
	Reference  string            `json:"reference"`
	Amount     string            `json:"amount"`
	ServiceID  string            `json:"serviceId"`
	Status     any               `json:"status"`
	OrderRef   string            `json:"orderRef"`
	Channel    string            `json:"channel"`
	Remarks    string            `json:"remarks"`
	SystemCode string            `json:"systemCode"`
	Code       string            `json:"code,omitempty"`
	Message    string            `json:"message,omitempty"`
	Errors     []bill.FieldError `json:"errors,omitempty"`
}

func (h *Handler) createBill(w http.ResponseWriter, r *http.Request) {
	c := claimsOf(r)
	body, err := readBody(r)
	if err != nil {
		h.failBill(w, r, bill.Request{}, err)
		return
	}
	req, err := bill.DecodeRequest(body)
	if err != nil {
		h.failBill(w, r, req, err)
		return
	}
	if !h.Payments.CanCharge(c.Mode) {
		h.failBill(w, r, req, payment.ErrLiveDisabled)
		return
	}
	m, err := h.Merchants.MerchantByCode(r.Context(), c.MerchantCode)
	if err != nil {
		h.failBill(w, r, req, err)
		return
	}
	b, replay, err := h.Bills.Create(r.Context(), m, c.Mode, req)
	if err != nil {
		h.failBill(w, r, req, err)
		return
	}
	remarks := "Bill created successfully"
	state := b.DisplayState(h.Auth.Now())
	// What the bill can do now, for a program to read where remarks says
	// it in words: a retry's answer named a paid or blocked bill only in
	// remarks, and "status":"1" sent shoppers to pay it. A header, not a
	// field: the answer's fields are the spec's, and a client decoding
	// strictly (Jackson's default) fails on one more.
	w.Header().Set("Kadi-Bill-State", string(state))
	if replay {
		// Stripe's header, which client libraries already read.
		w.Header().Set("Idempotent-Replayed", "true")
		remarks = "Bill already created for this order reference; returning the original"
		// A retry after a timeout must not send a shopper to a bill that
		// can no longer take a payment without saying so.
		switch state {
		case bill.Paid:
			remarks += ", which is paid"
		case bill.Expired:
			remarks += ", which has expired: create a new bill under another order reference"
		case bill.Blocked:
			remarks += ", which is blocked after too many failed attempts: create a new bill under another order reference"
		}
	}
	writeJSON(w, http.StatusOK, BillResponse{
		Reference: b.Reference, Amount: b.Amount.String(), ServiceID: m.ServiceID, Status: "1",
		OrderRef: b.OrderReference, Channel: "CARD", Remarks: remarks, SystemCode: m.SystemCode,
	})
}

// failBill answers a refused bill in the bill's own shape, so integrations
// that only read status and remarks still see the failure.
func (h *Handler) failBill(w http.ResponseWriter, r *http.Request, req bill.Request, err error) {
	// A database that hung past the request's time is an outage, in the
	// bill's shape as any other: classified as it came, it was a 500 that
	// fail turned into a 503 without status false or remarks.
	status, code, message, err := classify(r.Context(), err)
	if status == http.StatusInternalServerError {
		h.fail(w, r, err)
		return
	}
	logging.Refused(r.Context(), h.Log, "bill refused", "code", code, "err", err)
	authHeaders(w, err, code)
	resp := BillResponse{Status: false, OrderRef: strings.Trim(req.Order.Reference.Value, " "), Channel: "CARD", Remarks: message, Code: code, Message: message}
	var validation *bill.ValidationError
	switch {
	case errors.As(err, &validation):
		resp.Errors = validation.Fields
		resp.Remarks = validation.Error()
	case errors.Is(err, bill.ErrReferenceReused):
		detail := "is already used by a bill with different details"
		if reused := (*bill.ReusedError)(nil); errors.As(err, &reused) {
			detail = reused.FieldMessage()
		}
		resp.Errors = []bill.FieldError{{Field: "order.reference", Code: "duplicate", Message: detail}}
	}
	writeJSON(w, status, resp)
}
