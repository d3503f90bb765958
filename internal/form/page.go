package form

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/outage"
	"github.com/kadipay/kadi/internal/payment"
)

// Every POST of the hosted pages answers 303 See Other to a page read by
// GET (POST-redirect-GET), so back and reload never ask the shopper to
// resubmit a form (docs/hosted-form.md). A page's URL carries what it shows
// sealed with a key of its own derived from the master key (AES-256-GCM):
// unguessable, unforgeable, short-lived, readable on every node, and
// nothing is stored for it, so an error page costs an unauthenticated
// caller no write. It holds no card data and no token. A card or 3-D
// Secure page holds only its checkout session's id: what it shows comes
// from the session, the bill and the payment at the time of the GET, so
// going back to it after paying shows the result.

// pagePrefix is where the pages live; pageBinding ties a sealed page to
// this use of the key.
const (
	pagePrefix  = "/cardPay/page/"
	pageBinding = "kadi hosted page v1"
)

// Kinds of page.
const (
	kindCheckout = "checkout" // the card page or 3-D Secure page of a checkout session, live
	kindResult   = "result"   // the auto-posting redirect to the merchant's callback
	kindError    = "error"
)

type page struct {
	Kind    string `json:"k"`
	Expires int64  `json:"x"` // unix seconds
	// Checkout is the checkout session's id (kindCheckout); Paused says
	// the shopper came from a card post the store could not take, so the
	// card form says why it is back.
	Checkout string `json:"c,omitempty"`
	Paused   bool   `json:"p,omitempty"`
	// Action and Callback are where and what the result posts, Merchant
	// the shop's name, Amount the bill's amount as the card page showed it
	// and Test its mode, for the page's own header, and Blocked that the
	// attempt was the bill's last (kindResult).
	Action   string     `json:"a,omitempty"`
	Callback *Callback  `json:"r,omitempty"`
	Merchant string     `json:"n,omitempty"`
	Amount   string     `json:"m,omitempty"`
	Test     bool       `json:"t,omitempty"`
	Blocked  bool       `json:"b,omitempty"`
	Error    *pageError `json:"e,omitempty"`
	// Shop is the shop's home page, with Merchant and Test (kindCheckout):
	// once its session has closed, the page still knows whose it was.
	Shop string `json:"s,omitempty"`
	// ShopsForm: the result is the shop's form refused for its own fields
	// (kindResult), which the page tells the shopper; it told it by the
	// message's first words, which a card network's answer could share.
	ShopsForm bool `json:"f,omitempty"`
}

// shopHome is where a page sends the shopper back to the shop whose
// callback is cb: its home page, not the callback, which expects a post.
func shopHome(cb *url.URL) string {
	if cb == nil || cb.Host == "" {
		return ""
	}
	return (&url.URL{Scheme: cb.Scheme, Host: cb.Host, Path: "/"}).String()
}

// lead gives error page pe, which has no shop of its own, the shop and
// mode page p was for. A shopper who came back to a closed or expired
// checkout page (Back after cancelling, a tab left open past its half
// hour) read that it was closed, and had no way back to the shop, nor a
// word that it had been a test.
func (p page) lead(pe *pageError) {
	shop, home, test := p.Merchant, p.Shop, p.Test
	switch {
	case p.Error != nil:
		shop, home, test = p.Error.Shop, p.Error.ShopURL, p.Error.Test
	case p.Kind == kindResult:
		if u, err := url.Parse(p.Action); err == nil {
			home = shopHome(u)
		}
	}
	if pe.ShopURL == "" && home != "" && shop != "" {
		pe.Shop, pe.ShopURL = shop, home
	}
	pe.Test = pe.Test || test
}

// pausedShown is how long after a post the store could not take its card
// page says payments are paused.
const pausedShown = time.Minute

// pause is what a checkout page knows of a post the store could not take:
// that one was met (its names were not kept, and none is put in their
// place, however late the page is shown again), and whether to say so.
type pause struct{ met, say bool }

// maxPageID bounds the page ids echoed back into an expired page's
// language switch: a sealed page is far shorter.
const maxPageID = 2048

// errPageGone is a page URL that is damaged, forged or past its life.
var errPageGone = &pageError{Status: http.StatusGone, Title: "Payment page expired", MayBePaid: true,
	Message: "This page is no longer valid."}

// show answers a POST with a redirect to p.
func (h *Handler) show(w http.ResponseWriter, r *http.Request, p page) {
	p.Expires = h.Now().Add(checkout.TTL).Unix()
	raw, err := json.Marshal(p)
	if err != nil {
		h.Log.ErrorContext(r.Context(), "encode page", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, pagePrefix+h.Sealer.SealURL(raw, pageBinding), http.StatusSeeOther)
}

// openPage reads a page URL's id; anything but a live page of ours is
// errPageGone.
func (h *Handler) openPage(id string) (page, error) {
	p, ok := h.readPage(id)
	if !ok || h.Now().Unix() >= p.Expires {
		return page{}, errPageGone
	}
	return p, nil
}

// readPage reads a page URL's id, live or expired: ok says it is one of
// ours.
func (h *Handler) readPage(id string) (p page, ok bool) {
	if id == "" || len(id) > maxPageID {
		return page{}, false
	}
	raw, err := h.Sealer.OpenURL(id, pageBinding)
	return p, err == nil && json.Unmarshal(raw, &p) == nil
}

// toCheckout shows checkout session t's page: the card form, or the 3-D
// Secure challenge it owes.
func (h *Handler) toCheckout(w http.ResponseWriter, r *http.Request, t trusted) {
	h.show(w, r, checkoutPage(t, false))
}

// checkoutPage is checkout session t's page; paused says why the shopper
// is back on it (page.Paused).
func checkoutPage(t trusted, paused bool) page {
	return page{Kind: kindCheckout, Checkout: t.checkoutID, Paused: paused,
		Merchant: t.merchant.Name, Test: t.bill.Mode == merchant.Test, Shop: shopHome(t.callback)}
}

// finish shows the page that posts cb to the merchant's callback, for
// checkout t; blocked says the failure spent the bill's last attempt, so
// the page can say no other card will be taken.
func (h *Handler) finish(w http.ResponseWriter, r *http.Request, t trusted, to *url.URL, cb Callback, blocked bool) {
	h.show(w, r, resultPage(t, to, cb, blocked))
}

// refuseForm sends the shop's form, refused for its own fields (problems),
// back to the shop as Transaction Failed, on a page that says it was the
// shop's form: a shopper read the fields' message bare, as if the bank
// had answered.
func (h *Handler) refuseForm(w http.ResponseWriter, r *http.Request, t trusted, problems []Problem) {
	p := resultPage(t, t.callback, callbackFor(t.bill, payment.Payment{Status: payment.Failed, Message: describe(problems), UpdatedAt: h.Now()}, h.Location), false)
	p.ShopsForm = true
	h.show(w, r, p)
}

func resultPage(t trusted, to *url.URL, cb Callback, blocked bool) page {
	hd := header(t)
	return page{Kind: kindResult, Action: to.String(), Callback: &cb, Merchant: hd.Merchant, Amount: hd.Amount, Test: hd.Test, Blocked: blocked}
}

// fail shows err on our error page; t, when the callback is trusted,
// gives the page a way back to the shop. A payment still being confirmed,
// or the store out of reach, in a checkout session goes to that session's
// own page instead: it shows the same notice, reloads itself, and becomes
// the result (or the card form again) once there is one. A sealed error
// page would say "being confirmed" at every reload, for ever.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, t *trusted, err error) {
	kind, err := outage.Of(r.Context(), err)
	if t != nil && t.checkoutID != "" && (errors.Is(err, errInProgress) || kind == outage.Unavailable) {
		logging.Refused(r.Context(), h.Log, "payment page pending; sent to the checkout page, which follows it", "err", err)
		// The store out of reach for writes but not reads showed the card
		// form again with no word of why (a shopper could not tell
		// whether the card was charged): the page says so.
		h.show(w, r, checkoutPage(*t, !errors.Is(err, errInProgress)))
		return
	}
	pe := h.problem(r, t, err)
	if pe.Status == statusClientGone {
		// Nobody reads it: the access line says 499, as the API's does,
		// not the 303 to a page nobody will ask for.
		w.WriteHeader(statusClientGone)
		return
	}
	h.show(w, r, page{Kind: kindError, Error: pe})
}

// statusClientGone is nginx's 499: the client closed the connection.
const statusClientGone = 499

// problem is err as the error page shows it, logged once here with the
// request id the page quotes.
func (h *Handler) problem(r *http.Request, t *trusted, err error) *pageError {
	kind, err := outage.Of(r.Context(), err)
	var pe *pageError
	if errors.As(err, &pe) {
		logging.Refused(r.Context(), h.Log, "payment page refused", "page_status", pe.Status, "title", pe.Title, "detail", pe.Message+" "+pe.Detail)
		copied := *pe
		pe = &copied
	} else if kind == outage.ClientLeft {
		// Nobody reads this page; the access line says 499, as nginx does.
		logging.Refused(r.Context(), h.Log, "shopper left", "err", err)
		pe = &pageError{Status: statusClientGone, Title: "Something went wrong", Message: "The request was cancelled."}
	} else if kind == outage.Unavailable {
		logging.Refused(r.Context(), h.Log, "payment page unavailable", "err", err)
		copied := *errUnavailable
		if r.Method == http.MethodGet {
			copied = *errRecordsUnreachable
		}
		pe = &copied
	} else {
		h.Log.ErrorContext(r.Context(), "payment page failed", "err", err)
		pe = &pageError{Status: http.StatusInternalServerError, Title: "Something went wrong",
			Message: "We could not process this request. If your card was charged, it was charged only once; please contact the shop and quote the reference below."}
	}
	pe.RequestID = logging.RequestID(r.Context())
	if t != nil && t.bill.Reference != "" {
		pe.Test = t.bill.Mode == merchant.Test
	}
	if t != nil && t.callback != nil {
		pe.Shop, pe.ShopURL = t.merchant.Name, shopHome(t.callback)
	}
	// The page the shopper came from (the one shown, or the one a form
	// was posted from) knows the shop when the request no longer does.
	if p, ok := h.readPage(pageID(r)); ok {
		p.lead(pe)
	}
	return pe
}

type pageIDKey struct{}

// servePage is GET /cardPay/page/{id}.
func (h *Handler) servePage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := h.openPage(id)
	if err != nil {
		// The expired page has the language switch too: switching finds
		// the page gone again and shows that, in the language chosen.
		// Not an id that holds a card number: the page would repeat it.
		if len(id) <= maxPageID && strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.") == "" && card.RedactPath(id) == id {
			r = withPageID(r, id)
		}
		h.renderError(w, r, h.problem(r, nil, err))
		return
	}
	r = withPageID(r, id)
	switch p.Kind {
	case kindCheckout:
		// The pause is said for a minute after the post that met it: the
		// page's address lives half an hour, and a reload later said
		// "paused" of a store long back.
		made := p.Expires - int64(checkout.TTL/time.Second)
		h.serveCheckout(w, r, p.Checkout, pause{met: p.Paused, say: p.Paused && h.Now().Unix() < made+int64(pausedShown/time.Second)})
	case kindResult:
		to, err := url.Parse(p.Action)
		if err != nil || p.Callback == nil {
			h.renderError(w, r, h.problem(r, nil, errPageGone))
			return
		}
		h.renderResult(w, r, to, *p.Callback, resultHeader{Merchant: p.Merchant, Amount: p.Amount, Test: p.Test, Blocked: p.Blocked, ShopsForm: p.ShopsForm}, true)
	case kindError:
		p.Error.sealed = true
		h.renderError(w, r, p.Error)
	default:
		h.renderError(w, r, h.problem(r, nil, errPageGone))
	}
}

// serveCheckout shows what a checkout session is at now: the card form
// while the bill can be paid, the challenge while one is owed, and once
// the bill is paid or can no longer be, the result.
func (h *Handler) serveCheckout(w http.ResponseWriter, r *http.Request, id string, paused pause) {
	ctx := r.Context()
	sess, t, err := h.session(ctx, id)
	if err != nil {
		pe := h.problem(r, nil, err)
		if paused.say && pe.Retry {
			// The page of a card post the outage met, asked within the
			// minute: that post charged nothing, and saying so is true.
			pe.Message = errUnavailable.Message
		}
		h.renderError(w, r, pe)
		return
	}
	if sess.PaymentID != "" {
		p, err := h.Payments.Repo.PaymentByID(ctx, sess.PaymentID)
		switch {
		case err != nil:
			h.renderError(w, r, h.problem(r, &t, err))
			return
		case p.Status == payment.Challenge:
			h.renderChallenge(w, r, t, p)
			return
		case p.Status.Pending():
			h.renderError(w, r, h.problem(r, &t, errInProgress))
			return
		case !sess.EntryPage:
			// A merchant-posted form's challenge was answered: its result.
			h.renderOutcome(w, r, t, p)
			return
		}
	}
	now := h.Now()
	switch {
	case !sess.EntryPage:
		h.renderError(w, r, h.problem(r, nil, errCheckoutGone))
	case t.bill.State == bill.Paid:
		p, err := h.Payments.Repo.SuccessfulPayment(ctx, t.bill.Reference)
		if err != nil {
			h.renderError(w, r, h.problem(r, &t, err))
			return
		}
		h.renderOutcome(w, r, t, p)
	case t.bill.State == bill.Processing:
		h.renderError(w, r, h.problem(r, &t, errInProgress))
	case t.bill.State == bill.Blocked:
		h.renderOutcome(w, r, t, payment.Payment{Status: payment.Failed, Message: payment.MsgBlocked, UpdatedAt: now})
	case t.bill.Expired(now):
		h.renderOutcome(w, r, t, payment.Payment{Status: payment.Failed, Message: payment.MsgExpired, UpdatedAt: now})
	default:
		h.renderCard(w, r, t, sess.Notice, h.Payments.MaxFailures-t.bill.FailedAttempts, paused)
	}
}

// renderOutcome shows the result of p for checkout t. To a shopper who
// came back to the checkout's page it waits for the button; to one whose
// "being confirmed" page saw the payment settle (follow.js asks again
// with ?settled) it posts itself to the shop, as the page of a payment
// that answered at once does: otherwise the shop heard of it only by IPN.
func (h *Handler) renderOutcome(w http.ResponseWriter, r *http.Request, t trusted, p payment.Payment) {
	cb := t.callback
	if p.CallbackURL != "" {
		if u, err := url.Parse(p.CallbackURL); err == nil {
			cb = u // the result goes where the first result went
		}
	}
	hd := header(t)
	blocked := p.Status == payment.Failed && p.ID != "" && t.bill.State == bill.Blocked
	h.renderResult(w, r, cb, callbackFor(t.bill, p, h.Location), resultHeader{Merchant: hd.Merchant, Amount: hd.Amount, Test: hd.Test, Blocked: blocked}, r.URL.Query().Has("settled"))
}

func withPageID(r *http.Request, id string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), pageIDKey{}, id))
}

// withPostedPage is r with the page a form of ours was posted from (its
// page field), read from the form's body: the card form's post is read
// by hand (cardPay), and this is needed only when the post has failed.
func withPostedPage(r *http.Request, body string) *http.Request {
	v, _ := url.ParseQuery(body)
	return withPageID(r, v.Get(pageField))
}

// pageID is the id of the page being shown, or posted from: for its
// language switch, and for the way back to the shop once it has closed.
func pageID(r *http.Request) string {
	id, _ := r.Context().Value(pageIDKey{}).(string)
	return id
}
