package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
)

// VerificationResponse is spec 2.6. Status is a JSON boolean: true only when
// a charge for the bill succeeded.
type VerificationResponse struct {
	OrderRef      string `json:"orderRef"`
	TransactionID string `json:"transactionId"`
	Amount        string `json:"amount"`
	Status        bool   `json:"status"`
	Date          string `json:"date"`
	Narration     string `json:"narration"`
}

var errMissingReference = errors.New("query parameter billReference is required: a bill or order reference (letters and digits)")

func notAlnum(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
}

func (h *Handler) query(w http.ResponseWriter, r *http.Request) {
	c := claimsOf(r)
	ref := strings.TrimSpace(r.URL.Query().Get("billReference"))
	// Bill and order references are ASCII letters and digits; anything
	// else names no bill and must not reach the database as it is.
	if ref == "" || len(ref) > 64 || strings.IndexFunc(ref, notAlnum) >= 0 {
		h.fail(w, r, errMissingReference)
		return
	}
	b, err := h.Bills.Find(r.Context(), c.MerchantCode, c.Mode, ref)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	nothingPaid := money.Amount{Currency: b.Amount.Currency}
	resp := VerificationResponse{OrderRef: b.OrderReference, Amount: nothingPaid.String(), Date: b.CreatedAt.In(h.Location).Format(isoOffset), Narration: "Awaiting payment"}
	paid, err := h.Payments.SuccessfulPayment(r.Context(), b.Reference)
	switch {
	case err == nil:
		resp.Status, resp.TransactionID, resp.Amount = true, paid.NetworkRef, paid.Amount.String()
		resp.Date, resp.Narration = paid.UpdatedAt.In(h.Location).Format(isoOffset), paid.Message
	case errors.Is(err, payment.ErrNotFound):
		if last, err := h.Payments.LatestPayment(r.Context(), b.Reference); err == nil {
			resp.Date, resp.Narration = last.UpdatedAt.In(h.Location).Format(isoOffset), last.Message
		}
	default:
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// isoOffset is ISO 8601 with a numeric offset, as the spec's date field asks.
const isoOffset = "2006-01-02T15:04:05-07:00"
