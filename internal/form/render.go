package form

import (
	"bytes"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/i18n"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/outage"
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
	// A no-break space: a narrow phone broke "KES" from "1,500.00" on
	// the result page's line and the Pay button.
	return pageHeader{Merchant: t.merchant.Name, Amount: t.bill.Amount.Currency.Code + "\u00a0" + t.bill.Amount.Grouped(),
		Description: t.bill.Description, OrderRef: t.bill.OrderReference, Reference: t.bill.Reference, Test: t.bill.Mode == merchant.Test}
}

// render executes a page with the shopper's language; data["Title"] is the
// page title's message id.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, formAction, name string, data map[string]any) {
	data["L"] = h.lang(r)
	data["Languages"] = i18n.All()
	data["Page"], data["PageField"] = pageID(r), pageField
	var buf bytes.Buffer
	if err := h.templates.ExecuteTemplate(&buf, name, data); err != nil {
		h.Log.ErrorContext(r.Context(), "render page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h.securityHeaders(w, formAction)
	w.Header().Set("Content-Language", h.lang(r).Tag)
	w.Header().Add("Vary", "Accept-Language, Cookie")
	// With its length the page goes out in one piece: without it net/http
	// sends a page over 2 KB chunked, in more writes to the socket.
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// languageCookie remembers the language a shopper chose on a page.
const languageCookie = "kadi_lang"

// lang is the shopper's language: the one the cookie remembers, else the
// browser's preference.
func (h *Handler) lang(r *http.Request) *i18n.Lang {
	if c, err := r.Cookie(languageCookie); err == nil {
		if l := i18n.ByTag(c.Value); l != nil {
			return l
		}
	}
	return i18n.Negotiate(r.Header.Get("Accept-Language"))
}

// renderCard shows our own card form. The merchant's fields stay in the
// checkout session; the page carries only its id. After a refused attempt
// the notice says why, with the typed names and expiry; the card number
// and CVV never come back.
func (h *Handler) renderCard(w http.ResponseWriter, r *http.Request, t trusted, n checkout.Notice, left int, paused pause) {
	// What the shopper typed last; before any attempt, the cardholder the
	// shop named, else its customer. Not after one: names refused (a card
	// number typed there) or cleared came back as the shop's customer,
	// which a second press of Pay would have sent as the cardholder.
	first, last := n.FirstName, n.LastName
	// Nor after a pause: the attempt's names could not be kept, and the
	// shop's in their place would be sent as the cardholder.
	if !paused.met && n.Declined == "" && len(n.Errors) == 0 && n.FirstName == "" && n.LastName == "" && n.Expiry == "" {
		first, last = t.fields["cardFirstName"], t.fields["cardLastName"]
		if first == "" && last == "" {
			first, last = t.fields["customerFirstName"], t.fields["customerLastName"]
		}
	}
	errs := n.Errors
	if errs == nil {
		errs = map[string]string{}
	}
	status := http.StatusOK
	if len(errs) > 0 {
		status = http.StatusUnprocessableEntity
	}
	h.render(w, r, status, "'self'", "card.html", map[string]any{
		"Title": "Pay by card", "Header": header(t), "CheckoutField": checkoutField, "Checkout": t.checkoutID, "Errors": errs,
		"FirstName": first, "LastName": last, "Expiry": n.Expiry,
		"Declined": n.Declined, "AttemptsLeft": left, "Paused": paused.say,
		// An acquirer's message that says so itself is not told twice
		// that nothing was charged.
		"DeclinedSaysUncharged": strings.Contains(strings.ToLower(n.Declined), "nothing was charged"),
		// An expired card will not pay however often it is tried.
		"DeclinedCardUnusable": n.DeclineCode == payment.DeclineExpiredCard,
	})
}

// typedExpiry is the expiry the shopper typed, to show again as MM / YY.
func typedExpiry(sub Submission) string {
	if sub.CardExpiryMonth == "" && sub.CardExpiryYear == "" {
		return shownExpiry(card.SplitExpiry(sub.CardExpiry))
	}
	return shownExpiry(sub.CardExpiryMonth, sub.CardExpiryYear)
}

// shownExpiry is month and year as the page shows them again (MM / YY),
// and keeps in the checkout's session meanwhile: a month of one or two
// digits and a year of two or four, right or wrong (13 / 27 is shown back
// to be corrected), and "" for anything else. A card number or security
// code typed into the expiry box was shown back and kept in the session.
func shownExpiry(month, year string) string {
	digits := func(s string, lengths ...int) bool {
		return slices.Contains(lengths, len(s)) && strings.Trim(s, "0123456789") == ""
	}
	if !digits(month, 1, 2) || !digits(year, 2, 4) {
		return ""
	}
	if len(year) == 4 {
		year = year[2:]
	}
	return month + " / " + year
}

func (h *Handler) renderChallenge(w http.ResponseWriter, r *http.Request, t trusted, p payment.Payment) {
	h.render(w, r, http.StatusOK, "'self'", "challenge.html", map[string]any{
		"Title": "Confirm your payment", "Header": header(t), "CheckoutField": checkoutField, "Checkout": t.checkoutID,
		"Brand": brandName(p.Card.Brand), "Last4": p.Card.Last4,
	})
}

// renderResult sends the browser to the merchant's callback by POST: a
// form that a script submits at once (autoPost), with a button for
// browsers without scripts and for a shopper who comes back to the page.
// A card page revisited after its checkout ended shows the result without
// posting it: the shopper came back on purpose, and bouncing them to the
// shop again would trap the back button.
func (h *Handler) renderResult(w http.ResponseWriter, r *http.Request, to *url.URL, cb Callback, hd resultHeader, autoPost bool) {
	origin := (&url.URL{Scheme: to.Scheme, Host: to.Host}).String()
	amount := hd.Amount
	if amount == "" {
		amount = cb.OrderAmount // a page sealed before the header was kept in it
	}
	success := cb.OrderStatus == StatusSuccessful
	// Come back to, the page waits for its button: titled by its result,
	// not "Returning to the shop" (a tab list or a screen reader read it).
	title := "Returning to the shop"
	switch {
	case !autoPost && success:
		title = "Payment successful"
	case !autoPost:
		title = "Payment not completed"
	}
	h.render(w, r, http.StatusOK, "'self' "+origin, "redirect.html", map[string]any{
		"Title": title, "Action": to.String(), "Fields": cb.Fields(), "Success": success,
		"Message": cb.Message, "Merchant": hd.Merchant, "Amount": amount, "Test": hd.Test, "OrderRef": cb.OrderReference, "AutoPost": autoPost,
		"Blocked": hd.Blocked,
		// The shop's form, refused for its own fields, is the shop
		// developers' to fix: a shopper read that message bare, as if it
		// were the bank's answer to them.
		"ShopsForm": hd.ShopsForm,
	})
}

// resultHeader is what the result page shows of the bill besides the
// callback: the shop it was paid to (a shopper who left several tabs open
// can tell them apart), its amount as the card page showed it (currency,
// grouping) and whether it is a test, labelled on every page
// (hosted-form.md).
type resultHeader struct {
	Merchant  string
	Amount    string
	Test      bool
	Blocked   bool // the attempt was the bill's last: no other card can be tried
	ShopsForm bool // the shop's form was refused for its own fields (page.ShopsForm)
}

// renderError shows pe; problem made it and logged it.
func (h *Handler) renderError(w http.ResponseWriter, r *http.Request, pe *pageError) {
	if pe.Retry {
		w.Header().Set("Retry-After", strconv.Itoa(int(outage.RetryAfter.Seconds())))
	}
	h.render(w, r, pe.Status, "'self'", "error.html", map[string]any{"Title": pe.Title, "Message": pe.Message, "Detail": pe.Detail, "Status": pe.Status, "Test": pe.Test,
		"RequestID": pe.RequestID, "Shop": pe.Shop, "ShopURL": pe.ShopURL, "Pending": pe.Pending, "Retry": pe.Retry, "NoCharge": pe.noCharge(), "MayBePaid": pe.MayBePaid,
		// A live page (a checkout's, reached by GET) asks again until the
		// payment is settled; a shopper need not press anything. With
		// scripts, follow.js asks in the background and reloads only when
		// the answer changes; a timed refresh (kept for pages without
		// scripts) would move a keyboard's focus and a screen reader back
		// to the top every time (WCAG 2.2.1).
		"Refresh": (pe.Pending || pe.Retry) && !pe.sealed && r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, pagePrefix)})
}

// brandName is how customers know their card's scheme.
func brandName(b card.Brand) string {
	if n := b.Name(); n != "" {
		return n
	}
	return "payment"
}
