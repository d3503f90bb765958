package form

import (
	"bytes"
	"errors"
	"github.com/kadipay/kadi/internal/card"
	"net/http"
	"net/url"

	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
)

type pageHeader struct {
	Merchant  string
	Amount    string
	Currency  string
	OrderRef  string
	Reference string
	Test      bool
}

func header(t trusted) pageHeader {
	return pageHeader{Merchant: t.merchant.Name, Amount: t.bill.Amount.Grouped(), Currency: t.bill.Amount.Currency.Code,
		OrderRef: t.bill.OrderReference, Reference: t.bill.Reference, Test: t.bill.Mode == merchant.Test}
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, formAction, name string, data any) {
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.Log.ErrorContext(r.Context(), "render page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h.securityHeaders(w, formAction)
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// renderCardEntry shows our own card form. The rest of the merchant's form
// rides along in hidden inputs and is checked again on submit.
func (h *Handler) renderCardEntry(w http.ResponseWriter, r *http.Request, t trusted, sub Submission, problems []Problem) {
	errs := map[string]string{}
	for _, p := range problems {
		errs[p.Field] = p.Message
	}
	first, last := sub.CardFirstName, sub.CardLastName
	if first == "" && last == "" {
		first, last = sub.CustomerFirstName, sub.CustomerLastName
	}
	status := http.StatusOK
	if len(problems) > 0 {
		status = http.StatusUnprocessableEntity
	}
	h.render(w, r, status, "'self'", "card.html", map[string]any{
		"Header": header(t), "CheckoutField": checkoutField, "Checkout": t.checkoutID, "Errors": errs,
		"FirstName": first, "LastName": last, "Month": sub.CardExpiryMonth, "Year": sub.CardExpiryYear,
	})
}

// renderRetry shows our card page again after a failed attempt, with why
// and how many attempts are left; the typed names and expiry stay, the
// card number and CVV never come back.
func (h *Handler) renderRetry(w http.ResponseWriter, r *http.Request, t trusted, why string, left int) {
	sub := t.typed
	if sub.CardFirstName == "" && sub.CardLastName == "" {
		sub = resumed(t.fields, Submission{})
	}
	first, last := sub.CardFirstName, sub.CardLastName
	if first == "" && last == "" {
		first, last = sub.CustomerFirstName, sub.CustomerLastName
	}
	h.render(w, r, http.StatusOK, "'self'", "card.html", map[string]any{
		"Header": header(t), "CheckoutField": checkoutField, "Checkout": t.checkoutID, "Errors": map[string]string{},
		"FirstName": first, "LastName": last, "Month": sub.CardExpiryMonth, "Year": sub.CardExpiryYear,
		"Declined": why, "AttemptsLeft": left,
	})
}

func (h *Handler) renderChallenge(w http.ResponseWriter, r *http.Request, t trusted, p payment.Payment, problem string) {
	h.render(w, r, http.StatusOK, "'self'", "challenge.html", map[string]any{
		"Header": header(t), "CheckoutField": checkoutField, "Checkout": t.checkoutID, "Brand": brandName(p.Card.Brand), "Last4": p.Card.Last4, "Problem": problem,
	})
}

// redirect sends the browser to the merchant's callback by POST: a form that
// a script submits at once, with a button for browsers without scripts.
func (h *Handler) redirect(w http.ResponseWriter, r *http.Request, to *url.URL, cb Callback) {
	origin := (&url.URL{Scheme: to.Scheme, Host: to.Host}).String()
	h.render(w, r, http.StatusOK, "'self' "+origin, "redirect.html", map[string]any{
		"Action": to.String(), "Fields": cb.Fields(), "Success": cb.OrderStatus == StatusSuccessful, "Message": cb.Message,
		"Amount": cb.OrderAmount, "OrderRef": cb.OrderReference,
	})
}

func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, err error) {
	var pe *pageError
	if !errors.As(err, &pe) {
		h.Log.ErrorContext(r.Context(), "payment page failed", "err", err)
		pe = &pageError{http.StatusInternalServerError, "Something went wrong",
			"We could not process this request. You have not been charged twice; please contact the shop and quote reference " + logging.RequestID(r.Context()) + "."}
	} else {
		h.Log.InfoContext(r.Context(), "payment page refused", "status", pe.Status, "title", pe.Title, "detail", pe.Message)
	}
	h.render(w, r, pe.Status, "'none'", "error.html", map[string]any{"Title": pe.Title, "Message": pe.Message, "RequestID": logging.RequestID(r.Context())})
}

// brandName is how customers know their card's scheme.
func brandName(b card.Brand) string {
	if n := b.Name(); n != "" {
		return n
	}
	return "payment"
}
