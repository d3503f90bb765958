package form

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"

	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/i18n"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
)

type pageHeader struct {
	Merchant    string
	Amount      string // with its currency, grouped: KES 1,500.00
	Description string // what the shop sold, as it described the bill
	OrderRef    string
	Reference   string
	Test        bool
}

func header(t trusted) pageHeader {
	return pageHeader{Merchant: t.merchant.Name, Amount: t.bill.Amount.Currency.Code + " " + t.bill.Amount.Grouped(),
		Description: t.bill.Description, OrderRef: t.bill.OrderReference, Reference: t.bill.Reference, Test: t.bill.Mode == merchant.Test}
}

// render executes a page with the shopper's language; data["Title"] is the
// page title's message id.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, formAction, name string, data map[string]any) {
	data["L"] = h.lang(r)
	data["Languages"] = i18n.All()
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.Log.ErrorContext(r.Context(), "render page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h.securityHeaders(w, formAction)
	w.Header().Set("Content-Language", h.lang(r).Tag)
	w.Header().Add("Vary", "Accept-Language, Cookie")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// languageCookie remembers the language a shopper chose on a page.
const languageCookie = "kadi_lang"

type langKey struct{}

// lang is the shopper's language: the one just chosen, the one the cookie
// remembers, else the browser's preference.
func (h *Handler) lang(r *http.Request) *i18n.Lang {
	if l, ok := r.Context().Value(langKey{}).(*i18n.Lang); ok {
		return l
	}
	if c, err := r.Cookie(languageCookie); err == nil {
		if l := i18n.ByTag(c.Value); l != nil {
			return l
		}
	}
	return i18n.Negotiate(r.Header.Get("Accept-Language"))
}

// renderCardEntry shows our own card form. The merchant's fields stay in
// the checkout session; the page carries only its id.
func (h *Handler) renderCardEntry(w http.ResponseWriter, r *http.Request, t trusted, sub Submission, problems []Problem) {
	errs := map[string]string{}
	for _, p := range problems {
		errs[p.Field] = p.Message
	}
	status := http.StatusOK
	if len(problems) > 0 {
		status = http.StatusUnprocessableEntity
	}
	h.renderCard(w, r, status, t, sub, errs, "", 0)
}

// renderRetry shows our card page again after a failed attempt, with why
// and how many attempts are left; the typed names and expiry stay, the
// card number and CVV never come back.
func (h *Handler) renderRetry(w http.ResponseWriter, r *http.Request, t trusted, why string, left int) {
	h.renderCard(w, r, http.StatusOK, t, t.typed, map[string]string{}, why, left)
}

func (h *Handler) renderCard(w http.ResponseWriter, r *http.Request, status int, t trusted, sub Submission, errs map[string]string, declined string, left int) {
	if sub.CardFirstName == "" && sub.CardLastName == "" && sub.CustomerFirstName == "" {
		sub = resumed(t.fields, sub)
	}
	first, last := sub.CardFirstName, sub.CardLastName
	if first == "" && last == "" {
		first, last = sub.CustomerFirstName, sub.CustomerLastName
	}
	h.render(w, r, status, "'self'", "card.html", map[string]any{
		"Title": "Pay by card", "Header": header(t), "CheckoutField": checkoutField, "Checkout": t.checkoutID, "Errors": errs,
		"FirstName": first, "LastName": last, "Expiry": typedExpiry(sub),
		"Declined": declined, "AttemptsLeft": left,
	})
}

// typedExpiry is the expiry the shopper typed, to show again as MM / YY.
func typedExpiry(sub Submission) string {
	if sub.CardExpiryMonth == "" && sub.CardExpiryYear == "" {
		return sub.CardExpiry
	}
	y := sub.CardExpiryYear
	if len(y) == 4 {
		y = y[2:]
	}
	return sub.CardExpiryMonth + " / " + y
}

func (h *Handler) renderChallenge(w http.ResponseWriter, r *http.Request, t trusted, p payment.Payment, problem string) {
	h.render(w, r, http.StatusOK, "'self'", "challenge.html", map[string]any{
		"Title": "Confirm your payment", "Header": header(t), "CheckoutField": checkoutField, "Checkout": t.checkoutID,
		"Brand": brandName(p.Card.Brand), "Last4": p.Card.Last4, "Problem": problem,
	})
}

// redirect sends the browser to the merchant's callback by POST: a form that
// a script submits at once, with a button for browsers without scripts.
func (h *Handler) redirect(w http.ResponseWriter, r *http.Request, to *url.URL, cb Callback) {
	origin := (&url.URL{Scheme: to.Scheme, Host: to.Host}).String()
	h.render(w, r, http.StatusOK, "'self' "+origin, "redirect.html", map[string]any{
		"Title": "Returning to the shop", "Action": to.String(), "Fields": cb.Fields(), "Success": cb.OrderStatus == StatusSuccessful,
		"Message": cb.Message, "Amount": cb.OrderAmount, "OrderRef": cb.OrderReference,
	})
}

func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, err error) {
	var pe *pageError
	if !errors.As(err, &pe) {
		h.Log.ErrorContext(r.Context(), "payment page failed", "err", err)
		pe = &pageError{Status: http.StatusInternalServerError, Title: "Something went wrong",
			Message: "We could not process this request. You have not been charged twice; please contact the shop and quote the reference below."}
	} else {
		h.Log.InfoContext(r.Context(), "payment page refused", "status", pe.Status, "title", pe.Title, "detail", pe.Message+" "+pe.Detail)
	}
	h.render(w, r, pe.Status, "'none'", "error.html", map[string]any{"Title": pe.Title, "Message": pe.Message, "Detail": pe.Detail,
		"RequestID": logging.RequestID(r.Context())})
}

// brandName is how customers know their card's scheme.
func brandName(b card.Brand) string {
	if n := b.Name(); n != "" {
		return n
	}
	return "payment"
}
