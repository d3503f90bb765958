package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/kadipay/kadi/internal/bill"
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

var (
	errMissingReference = errors.New("query parameter billReference is required: a bill or order reference (letters and digits)")
	errBadReference     = errors.New("query parameter billReference must be a bill or order reference: ASCII letters and digits, at most 64")
	// Repeated, which one was meant cannot be known: the first was looked
	// up, and a 404 for it hid the mistake (the token endpoint, the form
	// and a bill's JSON refuse a repeated field too).
	errRepeatedReference = errors.New("query parameter billReference is given more than once: give one reference")
)

func notAlnum(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
}

func (h *Handler) query(w http.ResponseWriter, r *http.Request) {
	c := claimsOf(r)
	refs := r.URL.Query()["billReference"]
	ref := ""
	if len(refs) > 0 {
		ref = strings.TrimSpace(refs[0])
	}
	// Bill and order references are ASCII letters and digits; anything
	// else names no bill and must not reach the database as it is.
	switch {
	case len(refs) > 1:
		h.fail(w, r, errRepeatedReference)
		return
	case ref == "":
		h.fail(w, r, errMissingReference)
		return
	case len(ref) > 64 || strings.IndexFunc(ref, notAlnum) >= 0:
		h.fail(w, r, errBadReference)
		return
	}
	v, err := h.Verifications.Verification(r.Context(), c.MerchantCode, c.Mode, ref)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	nothingPaid := money.Amount{Currency: v.Amount.Currency}
	resp := VerificationResponse{OrderRef: v.OrderReference, Amount: nothingPaid.String(), Date: v.CreatedAt.In(h.Location).Format(isoOffset), Narration: "Awaiting payment"}
	p := v.Payment
	if p.ID != "" {
		resp.Date, resp.Narration = p.UpdatedAt.In(h.Location).Format(isoOffset), p.Message
		switch {
		case p.Message != "":
		case p.Status == payment.Challenge:
			resp.Narration = msgAwaitingChallenge
		case p.Status == payment.Processing:
			resp.Narration = payment.MsgInFlight
		}
	}
	switch {
	case p.Status == payment.Succeeded:
		resp.Status, resp.TransactionID, resp.Amount = true, p.NetworkRef, p.Amount.String()
	// An unpaid bill that can never be paid says so, whatever its last
	// attempt said: "Awaiting payment", or that attempt's decline, kept a
	// merchant polling a bill it should replace.
	case v.State == bill.Blocked:
		resp.Narration = payment.MsgBlocked
	case bill.Bill{State: v.State, ExpiresAt: v.ExpiresAt}.DisplayState(h.Auth.Now()) == bill.Expired:
		resp.Narration = payment.MsgExpired
	}
	writeJSON(w, http.StatusOK, resp)
}

// msgAwaitingChallenge narrates a bill whose attempt waits for the
// shopper's 3-D Secure code (an empty narration told the merchant nothing).
const msgAwaitingChallenge = "Awaiting the customer's 3-D Secure authentication"

// isoOffset is ISO 8601 with a numeric offset, as the spec's date field asks.
const isoOffset = "2006-01-02T15:04:05-07:00"
