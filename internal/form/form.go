// Package form serves the hosted payment pages: POST /cardPay, our own
// card-entry page, the 3-D Secure challenge, the auto-posting redirect back
// to the merchant and the error page.
package form

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/i18n"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/phone"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Callback statuses, spelled as the spec documents them.
const (
	StatusSuccessful = "Transaction Successfull"
	StatusFailed     = "Transaction Failed"
)

// Bills finds the bill a form names.
type Bills interface {
	BillByReference(ctx context.Context, merchantCode string, mode merchant.Mode, ref string) (bill.Bill, error)
	BillByID(ctx context.Context, ref string) (bill.Bill, error)
	MerchantByCode(ctx context.Context, code string) (merchant.Merchant, error)
}

// Handler serves the hosted pages.
type Handler struct {
	Auth      *auth.Service
	Bills     Bills
	Checkouts checkout.Repo
	Payments  *payment.Service
	Location  *time.Location
	Log       *slog.Logger
	Now       func() time.Time
	// HSTS is sent when the public URL is https.
	HSTS bool
	// DefaultRegion reads mobile numbers in national form (0712345678).
	DefaultRegion string

	pages *template.Template
}

// Register adds the pages' routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	h.pages = template.Must(template.New("").ParseFS(templateFS, "templates/*.html"))
	mux.HandleFunc("POST /cardPay", h.cardPay)
	mux.HandleFunc("POST /cardPay/3ds", h.challenge)
	mux.HandleFunc("POST /cardPay/cancel", h.cancel)
	mux.HandleFunc("POST /cardPay/language", h.switchLanguage)
	mux.Handle("GET /static/", http.FileServerFS(staticFS))
}

// pageError is a problem shown on our own error page: the browser is never
// sent anywhere we have not checked.
// Title and Message are message ids (internal/i18n); Detail is technical
// text for the shop's developers, shown as it is.
type pageError struct {
	Status  int
	Title   string
	Message string
	Detail  string
}

func (e *pageError) Error() string { return e.Title + ": " + e.Message + " " + e.Detail }

func (h *Handler) cardPay(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) {
		h.renderError(w, r, &pageError{Status: http.StatusRequestEntityTooLarge, Title: "Payment form too large", Message: "The payment form sent by the shop is larger than 64 KiB."})
		return
	} else if err != nil {
		h.renderError(w, r, &pageError{Status: http.StatusBadRequest, Title: "Payment form unreadable", Message: "The payment form could not be read."})
		return
	}
	sub, err := ParseSubmission(string(body))
	if err != nil {
		h.renderError(w, r, &pageError{Status: http.StatusBadRequest, Title: "Payment form unreadable", Message: "The payment form could not be read.", Detail: err.Error()})
		return
	}
	var t trusted
	if sub.Checkout != "" {
		sub, t, err = h.resume(r.Context(), sub)
	} else {
		t, err = h.trust(r.Context(), sub)
	}
	if err != nil {
		h.renderError(w, r, err)
		return
	}

	// The merchant's customer fields are judged before anyone types a card:
	// a customer cannot fix them, so there is no point asking for the card.
	if problems := h.checkCustomer(&sub); len(problems) > 0 {
		h.redirect(w, r, t.callback, callbackFor(t.bill, payment.Payment{Status: payment.Failed, Message: describe(problems), UpdatedAt: h.Now()}, h.Location))
		return
	}
	if !sub.HasCard() {
		if err := h.startCheckout(r.Context(), &t, ""); err != nil {
			h.renderError(w, r, err)
			return
		}
		h.renderCardEntry(w, r, t, sub, nil)
		return
	}
	attempt, problems := h.checkCard(sub)
	if len(problems) > 0 {
		if t.checkoutID != "" && onlyCardProblems(problems) {
			h.renderCardEntry(w, r, t, sub, problems)
			return
		}
		h.redirect(w, r, t.callback, callbackFor(t.bill, payment.Payment{Status: payment.Failed, Message: describe(problems), UpdatedAt: h.Now()}, h.Location))
		return
	}
	attempt.CallbackURL = t.callback.String()
	t.typed = sub
	p, err := h.Payments.Pay(r.Context(), t.bill, t.merchant, attempt)
	h.answer(w, r, t, p, err)
}

// trusted is what a submission proved before we send the browser anywhere.
type trusted struct {
	merchant merchant.Merchant
	bill     bill.Bill
	callback *url.URL
	// fields are the merchant's form fields, kept by a checkout session.
	fields map[string]string
	// checkoutID names the checkout session our next page posts back, once
	// there is one; entry says it is a session of our card-entry page,
	// where a decline may be retried.
	checkoutID string
	entry      bool
	// typed is what the shopper typed, to show again (never the PAN or CVV).
	typed Submission
}

// trust checks everything that must hold before the bill and callbackUrl
// of a merchant's form can be believed. Any failure here is shown on our
// own page.
func (h *Handler) trust(ctx context.Context, sub Submission) (trusted, error) {
	// Lengths, UTF-8 and control characters first: nothing unchecked
	// reaches the database.
	if problems := sub.checkLengths(false); len(problems) > 0 {
		return trusted{}, &pageError{Status: http.StatusBadRequest, Title: "Payment form not valid", Message: "The shop's payment form is not valid.", Detail: describe(problems)}
	}
	// Both kinds of token pay: the access token the spec puts in the form,
	// and the pay-only payment-token of POST /token.
	c, err := h.Auth.Verify(sub.Token)
	if err != nil {
		return trusted{}, &pageError{Status: http.StatusUnauthorized, Title: "Payment session not valid", Message: "The shop's payment session is missing, has expired or was revoked. Please go back to the shop and start the payment again."}
	}
	if sub.MerchantCode != c.MerchantCode {
		return trusted{}, &pageError{Status: http.StatusForbidden, Title: "Payment form not valid", Message: "The merchant code does not match the payment session."}
	}
	t, err := h.load(ctx, c.MerchantCode, c.Mode, sub.BillReference, sub.CallbackURL)
	if err != nil {
		return t, err
	}
	var mismatch []string
	if sub.OutletCode != t.bill.Outlet {
		mismatch = append(mismatch, "outletCode")
	}
	if sub.OrderReference != t.bill.OrderReference {
		mismatch = append(mismatch, "orderReference")
	}
	if !t.bill.Amount.EqualText(sub.Amount) {
		mismatch = append(mismatch, "amount")
	}
	if len(mismatch) > 0 {
		return t, &pageError{Status: http.StatusBadRequest, Title: "Payment form does not match the bill", Message: "The payment form differs from the bill the shop created.", Detail: "These fields differ from the bill the shop created: " + strings.Join(mismatch, ", ") + "."}
	}
	t.fields = sub.sessionFields()
	return t, nil
}

// errCheckoutGone is a checkout session that is unknown or has expired.
var errCheckoutGone = &pageError{Status: http.StatusGone, Title: "Payment page expired", Message: "This payment page is no longer valid. Nothing more was charged. Please go back to the shop and start the payment again."}

// resume continues a checkout from our own page: the session, not the
// browser, says which bill, mode and merchant fields it is about.
func (h *Handler) resume(ctx context.Context, posted Submission) (Submission, trusted, error) {
	if !checkout.ValidID(posted.Checkout) {
		return posted, trusted{}, errCheckoutGone
	}
	sess, err := h.Checkouts.CheckoutByHash(ctx, checkout.Hash(posted.Checkout), h.Now())
	if errors.Is(err, checkout.ErrNotFound) || (err == nil && !sess.EntryPage) {
		return posted, trusted{}, errCheckoutGone
	} else if err != nil {
		return posted, trusted{}, fmt.Errorf("load checkout session: %w", err)
	}
	sub := resumed(sess.Fields, posted)
	t, err := h.load(ctx, sess.MerchantCode, sess.Mode, sess.BillReference, sub.CallbackURL)
	t.fields, t.checkoutID, t.entry = sess.Fields, posted.Checkout, true
	return sub, t, err
}

// load finds the bill and merchant a payment is for and checks the
// callback it will go back to.
func (h *Handler) load(ctx context.Context, code string, mode merchant.Mode, billRef, callbackURL string) (trusted, error) {
	b, err := h.Bills.BillByReference(ctx, code, mode, billRef)
	if errors.Is(err, bill.ErrNotFound) {
		return trusted{}, &pageError{Status: http.StatusNotFound, Title: "Bill not found", Message: "The shop sent a bill reference we do not know. Please go back to the shop."}
	} else if err != nil {
		return trusted{}, err
	}
	m, err := h.Bills.MerchantByCode(ctx, code)
	if err != nil {
		return trusted{}, err
	}
	cb, err := CheckCallbackURL(callbackURL, mode)
	if err != nil {
		return trusted{}, &pageError{Status: http.StatusBadRequest, Title: "Payment form not valid", Message: "The shop's payment form is not valid.", Detail: "The shop's " + err.Error() + "."}
	}
	if h.Payments.Acquirers[mode] == nil {
		return trusted{}, &pageError{Status: http.StatusServiceUnavailable, Title: "Card payments unavailable", Message: "Card payments are not available here yet. Nothing was charged.", Detail: payment.ErrLiveDisabled.Error() + "."}
	}
	return trusted{merchant: m, bill: b, callback: cb}, nil
}

// startCheckout gives t a checkout session, bound to paymentID when a 3-D
// Secure code is owed, unless it has one already.
func (h *Handler) startCheckout(ctx context.Context, t *trusted, paymentID string) error {
	if t.checkoutID != "" {
		if paymentID == "" {
			return nil
		}
		return h.Checkouts.BindCheckoutPayment(ctx, checkout.Hash(t.checkoutID), paymentID)
	}
	id, sess := checkout.New(t.bill.MerchantCode, t.bill.Mode, t.bill.Reference, t.fields, h.Now())
	sess.PaymentID = paymentID
	// A session made for our card page; one made for a challenge only
	// carries a merchant-posted form's code.
	sess.EntryPage = paymentID == ""
	t.entry = sess.EntryPage
	if err := h.Checkouts.CreateCheckout(ctx, sess); err != nil {
		return err
	}
	t.checkoutID = id
	return nil
}

// checkCustomer validates the merchant-supplied customer fields and writes
// the mobile number in the one form the IPN carries.
func (h *Handler) checkCustomer(sub *Submission) []Problem {
	var problems []Problem
	if sub.MobileNumber != "" {
		if m, err := phone.Mobile(sub.MobileNumber, h.DefaultRegion); err != nil {
			problems = append(problems, Problem{"mobileNumber", err.Error()})
		} else {
			sub.MobileNumber = m
		}
	}
	if err := CheckEmail(sub.EmailAddress); err != nil {
		problems = append(problems, Problem{"emailAddress", err.Error()})
	}
	return problems
}

// checkCard validates the card fields of a trusted form.
func (h *Handler) checkCard(sub Submission) (payment.Attempt, []Problem) {
	problems := sub.checkLengths(true)
	pan, err := card.ParsePAN(sub.CardNumber)
	if err != nil {
		problems = append(problems, Problem{"cardNumber", cardMessage(err)})
	}
	exp, err := card.ParseExpiry(sub.CardExpiryMonth, sub.CardExpiryYear, h.Now().In(h.Location))
	if err != nil {
		problems = append(problems, Problem{"cardExpiry", cardMessage(err)})
	}
	if pan.Last4() != "" {
		if err := card.CheckCVV(sub.CardSecurity, pan.Brand()); err != nil {
			problems = append(problems, Problem{"cardSecurity", cardMessage(err)})
		}
	}
	return payment.Attempt{
		PAN: pan, Expiry: exp, CVV: sub.CardSecurity,
		Holder:       strings.TrimSpace(sub.CardFirstName + " " + sub.CardLastName),
		MobileNumber: sub.MobileNumber, EmailAddress: sub.EmailAddress,
	}, problems
}

func onlyCardProblems(ps []Problem) bool {
	for _, p := range ps {
		if !strings.HasPrefix(p.Field, "card") {
			return false
		}
	}
	return true
}

func describe(ps []Problem) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Field + " " + p.Message
	}
	return "Invalid payment details: " + strings.Join(parts, "; ")
}

// cardMessage words card errors for customers; it never echoes the input.
func cardMessage(err error) string {
	switch {
	case errors.Is(err, card.ErrExpired):
		return "is in the past: the card has expired"
	case errors.Is(err, card.ErrExpiryFormat):
		return "is not a valid month and year"
	case errors.Is(err, card.ErrCVV):
		return "must be 3 digits (4 for American Express)"
	case errors.Is(err, card.ErrBrand):
		return "is not a card brand we accept"
	}
	return "is not a valid card number"
}

func (h *Handler) challenge(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, &pageError{Status: http.StatusBadRequest, Title: "Authentication form unreadable", Message: "The authentication form could not be read."})
		return
	}
	// The challenge is answered through the checkout session that owes it:
	// a payment id alone, which the browser never sees, answers nothing.
	id, code := r.PostForm.Get(checkoutField), r.PostForm.Get("code")
	var sess checkout.Session
	err := checkout.ErrNotFound
	if checkout.ValidID(id) && len(code) <= 12 && utf8.ValidString(code) {
		sess, err = h.Checkouts.CheckoutByHash(r.Context(), checkout.Hash(id), h.Now())
	}
	if err == nil && sess.PaymentID == "" {
		err = checkout.ErrNotFound
	}
	if errors.Is(err, checkout.ErrNotFound) {
		h.renderError(w, r, &pageError{Status: http.StatusNotFound, Title: "Authentication not found", Message: "This authentication page is not valid or has expired. Nothing more was charged. Please go back to the shop."})
		return
	} else if err != nil {
		h.renderError(w, r, err)
		return
	}
	p, err := h.Payments.CompleteChallenge(r.Context(), sess.PaymentID, code)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	b, err := h.Bills.BillByID(r.Context(), p.BillReference)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	cb, err := url.Parse(p.CallbackURL)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	m, err := h.Bills.MerchantByCode(r.Context(), b.MerchantCode)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.answer(w, r, trusted{merchant: m, bill: b, callback: cb, fields: sess.Fields, checkoutID: id, entry: sess.EntryPage}, p, nil)
}

// cancel is the card page's "Cancel and return to the shop": the shop
// hears Transaction Failed, unless the bill was paid meanwhile, when it
// hears that instead.
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, errCheckoutGone)
		return
	}
	posted := Submission{Checkout: r.PostForm.Get(checkoutField)}
	_, t, err := h.resume(r.Context(), posted)
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	if t.bill.State == bill.Paid {
		p, err := h.Payments.Repo.SuccessfulPayment(r.Context(), t.bill.Reference)
		h.answer(w, r, t, p, err)
		return
	}
	h.redirect(w, r, t.callback, callbackFor(t.bill, payment.Payment{Status: payment.Failed, Message: MsgCancelled, UpdatedAt: h.Now()}, h.Location))
}

// switchLanguage is the pages' language switch: it remembers the choice
// in a cookie and shows the checkout's page again in that language.
func (h *Handler) switchLanguage(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.renderError(w, r, errCheckoutGone)
		return
	}
	if l := i18n.ByTag(r.PostForm.Get("language")); l != nil {
		http.SetCookie(w, &http.Cookie{Name: languageCookie, Value: l.Tag, Path: "/", MaxAge: 365 * 24 * 3600,
			HttpOnly: true, Secure: h.HSTS, SameSite: http.SameSiteLaxMode})
		r = r.WithContext(context.WithValue(r.Context(), langKey{}, l))
	}
	id := r.PostForm.Get(checkoutField)
	if checkout.ValidID(id) {
		if sess, err := h.Checkouts.CheckoutByHash(r.Context(), checkout.Hash(id), h.Now()); err == nil && sess.PaymentID != "" {
			if p, err := h.Payments.Repo.PaymentByID(r.Context(), sess.PaymentID); err == nil && p.Status == payment.Challenge {
				t, err := h.load(r.Context(), sess.MerchantCode, sess.Mode, sess.BillReference, sess.Fields["callbackUrl"])
				if err != nil {
					h.renderError(w, r, err)
					return
				}
				t.checkoutID, t.entry, t.fields = id, sess.EntryPage, sess.Fields
				h.renderChallenge(w, r, t, p, "")
				return
			}
		}
	}
	sub, t, err := h.resume(r.Context(), Submission{Checkout: id})
	if err != nil {
		h.renderError(w, r, err)
		return
	}
	h.renderCardEntry(w, r, t, sub, nil)
}

// MsgCancelled is the callback's message when the shopper cancels on our
// page. Messages to the merchant stay English: integrations parse them.
const MsgCancelled = "Payment cancelled by the customer"

// answer shows the outcome of a charge attempt.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, t trusted, p payment.Payment, err error) {
	switch {
	case errors.Is(err, payment.ErrLiveDisabled):
		h.renderError(w, r, &pageError{Status: http.StatusServiceUnavailable, Title: "Card payments unavailable", Message: "Card payments are not available here yet. Nothing was charged.", Detail: err.Error() + "."})
	case err != nil:
		h.renderError(w, r, err)
	case p.Status == payment.Challenge:
		if err := h.startCheckout(r.Context(), &t, p.ID); err != nil {
			h.renderError(w, r, err)
			return
		}
		h.renderChallenge(w, r, t, p, "")
	case p.Status == payment.Processing:
		h.renderError(w, r, &pageError{Status: http.StatusConflict, Title: "Payment in progress", Message: "A payment for this bill is still being processed. Please wait a moment and check with the shop; do not pay again."})
	case p.Status == payment.Failed && t.entry && h.retry(w, r, t, p):
		// Shown again on our page, with attempts left.
	default:
		if p.UpdatedAt.IsZero() {
			p.UpdatedAt = h.Now() // refused before any attempt was stored
		}
		cb := t.callback
		if p.CallbackURL != "" {
			// A replay goes where the first result went.
			if u, err := url.Parse(p.CallbackURL); err == nil {
				cb = u
			}
		}
		h.redirect(w, r, cb, callbackFor(t.bill, p, h.Location))
	}
}

// retry keeps the shopper on our card page after a failed attempt while
// the bill can still be paid: a decline, insufficient funds, a failed 3-D
// Secure code or an acquirer error need not end the checkout, as hosted
// checkouts do. It reports false when the bill is blocked, paid or expired:
// then the shop hears the result.
func (h *Handler) retry(w http.ResponseWriter, r *http.Request, t trusted, p payment.Payment) bool {
	b, err := h.Bills.BillByID(r.Context(), t.bill.Reference)
	if err != nil || b.State != bill.Open || b.Expired(h.Now()) {
		return false
	}
	t.bill = b
	left := h.Payments.MaxFailures - b.FailedAttempts
	h.renderRetry(w, r, t, p.Message, left)
	return true
}

// Callback is spec 2.5.
type Callback struct {
	OrderAmount    string
	OrderReference string
	OrderStatus    string
	Message        string
	DateTime       string
	BillReference  string
	TransactionRef string
}

// Fields lists the callback in the spec's order, for the redirect form.
func (c Callback) Fields() []nameValue {
	return []nameValue{
		{"orderAmount", c.OrderAmount}, {"orderReference", c.OrderReference}, {"orderStatus", c.OrderStatus},
		{"message", c.Message}, {"dateTime", c.DateTime}, {"billReference", c.BillReference}, {"transactionRef", c.TransactionRef},
	}
}

// JavaDateZone formats t as the spec's "yyyy-MM-ddZ": 2026-11-21+0300.
func JavaDateZone(t time.Time) string { return t.Format("2006-01-02-0700") }

func callbackFor(b bill.Bill, p payment.Payment, loc *time.Location) Callback {
	cb := Callback{
		OrderAmount: b.Amount.String(), OrderReference: b.OrderReference, OrderStatus: StatusFailed,
		Message: p.Message, DateTime: JavaDateZone(p.UpdatedAt.In(loc)), BillReference: b.Reference,
	}
	if p.Status == payment.Succeeded {
		cb.OrderStatus, cb.TransactionRef = StatusSuccessful, p.NetworkRef
	}
	if cb.Message == "" {
		cb.Message = "The payment did not go through"
	}
	return cb
}

// securityHeaders are docs/hosted-form.md's headers for pages that carry card data.
// formAction names where forms on the page may post: form-action does not
// fall back to default-src.
func (h *Handler) securityHeaders(w http.ResponseWriter, formAction string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Pragma", "no-cache")
	hd.Set("Content-Security-Policy", fmt.Sprintf("default-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action %s", formAction))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if h.HSTS {
		hd.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
	}
}
