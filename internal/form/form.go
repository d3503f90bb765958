// Package form serves the hosted payment pages: POST /cardPay, our own
// card-entry page, the 3-D Secure challenge, the auto-posting redirect back
// to the merchant and the error page.
package form

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kadipay/kadi/internal/asset"
	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/formdata"
	"github.com/kadipay/kadi/internal/i18n"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/outage"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/phone"
	"github.com/kadipay/kadi/internal/secret"
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
	// RecentSettings is a mode's settings as read within the last second:
	// the callback origins each form is checked against.
	RecentSettings(ctx context.Context, code string, mode merchant.Mode) (merchant.Settings, error)
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
	// HTTPS: the public URL is https, and the page's cookie is Secure
	// (the server sends HSTS on every answer then).
	HTTPS bool
	// DefaultRegion reads mobile numbers in national form (0712345678).
	DefaultRegion string
	// Sealer seals the pages' URLs (page.go); derive its key from the
	// master key so every node reads every node's pages.
	Sealer *secret.Sealer

	templates *template.Template
}

// Register adds the pages' routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	assets, err := asset.New(staticFS, "static", "/static/")
	if err != nil {
		panic(err) // embedded at build time: a test sees it first
	}
	h.templates = template.Must(template.New("").Funcs(template.FuncMap{"static": assets.URL}).ParseFS(templateFS, "templates/*.html"))
	mux.HandleFunc("POST /cardPay", h.cardPay)
	mux.HandleFunc("POST /cardPay/{$}", h.cardPay) // as the API's paths answer with one trailing slash
	mux.HandleFunc("GET "+pagePrefix+"{id}", h.servePage)
	mux.HandleFunc("POST /cardPay/3ds", h.challenge)
	mux.HandleFunc("POST /cardPay/cancel", h.cancel)
	mux.HandleFunc("POST /cardPay/language", h.switchLanguage)
	mux.Handle("GET /static/", assets)
}

// NotPosted answers a shop's form sent by GET (a form without
// method="post"): our own page, not the API's JSON 405, and nothing of
// the query, which holds the token, is echoed. The server sends it the
// GETs of /cardPay its 405 would answer: a route of its own would make
// the endpoint's Allow list GET.
func (h *Handler) NotPosted(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", "POST")
	h.renderError(w, r, h.problem(r, nil, &pageError{Status: http.StatusMethodNotAllowed, Title: "Payment form not valid", Message: "The shop's payment form is not valid.",
		Detail: `the shop's form must have method="post": sent by GET, its fields (the token among them) went into the page's address`}))
}

// pageError is a problem shown on our own error page: the browser is never
// sent anywhere we have not checked.
// Title and Message are message ids (internal/i18n); Detail is technical
// text for the shop's developers, shown as it is. Shop and ShopURL, once
// the callback is trusted, are the way back to the shop.
type pageError struct {
	Status    int    `json:"s"`
	Title     string `json:"t"`
	Message   string `json:"m"`
	Detail    string `json:"d,omitempty"`
	RequestID string `json:"i,omitempty"`
	Shop      string `json:"n,omitempty"`
	ShopURL   string `json:"u,omitempty"`
	// Pending: a payment may have been charged and is being confirmed,
	// so the page must not say nothing was charged.
	Pending bool `json:"p,omitempty"`
	// Retry: the gateway cannot serve this right now (a database outage);
	// the answer says when to come back and a checkout's page asks again.
	Retry bool `json:"r,omitempty"`
	// Test: the page is about a test-mode bill, labelled as such.
	Test bool `json:"x,omitempty"`
	// MayBePaid: the page no longer knows its payment, which may have
	// been made (a checkout's page closed half an hour after it began,
	// and Back pressed after paying): it must not tell the shopper to
	// start the payment again, which paid a second time.
	MayBePaid bool `json:"b,omitempty"`
	// sealed: the page is a sealed copy that never changes, so it must
	// not claim to update itself (a paused page polled for half an hour).
	sealed bool
}

func (e *pageError) Error() string { return e.Title + ": " + e.Message + " " + e.Detail }

// noCharge reports whether the error is the shop's form or the shopper's
// request refused before any card could be charged: the page says the card
// was not charged, not "nothing more" (which read as if it had been once).
func (e *pageError) noCharge() bool {
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusMethodNotAllowed,
		http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType:
		return true
	}
	return false
}

func (h *Handler) cardPay(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var maxBytes *http.MaxBytesError
	if errors.As(err, &maxBytes) {
		h.fail(w, r, nil, &pageError{Status: http.StatusRequestEntityTooLarge, Title: "Payment form too large", Message: "The payment form sent by the shop is larger than 64 KiB."})
		return
	} else if err != nil {
		h.fail(w, r, nil, &pageError{Status: http.StatusBadRequest, Title: "Payment form unreadable", Message: "The payment form could not be read."})
		return
	}
	// A byte order mark before the fields (.NET's default UTF-8 encoder
	// writes one) became part of the first field's name, and the page
	// blamed a token that was fine; the API's endpoints drop it too.
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	// The media type, not the whole header: a multipart boundary is
	// random text and may spell "json".
	mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if strings.HasSuffix(mediaType, "json") || bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		// Read as form encoding, a JSON body named no field, and the
		// page blamed the shop's token.
		h.fail(w, r, nil, &pageError{Status: http.StatusUnsupportedMediaType, Title: "Payment form unreadable", Message: "The payment form could not be read.",
			Detail: "the shop's form must be posted form-encoded (application/x-www-form-urlencoded or multipart/form-data), as a browser posts an HTML form; this was JSON"})
		return
	}
	var sub Submission
	if boundary, ok := formdata.Boundary(r.Header.Get("Content-Type")); ok {
		// A shop form with enctype="multipart/form-data": the same fields,
		// in parts. It was refused as "not valid form encoding".
		var v url.Values
		if v, err = formdata.Read(body, boundary); err == nil {
			sub, err = submissionOf(v)
		}
	} else {
		sub, err = ParseSubmission(string(body))
	}
	if err != nil {
		h.fail(w, r, nil, &pageError{Status: http.StatusBadRequest, Title: "Payment form unreadable", Message: "The payment form could not be read.", Detail: err.Error()})
		return
	}
	var t trusted
	if sub.Checkout != "" {
		sub, t, err = h.resume(r.Context(), sub)
	} else {
		t, err = h.trust(r.Context(), sub)
	}
	if err != nil {
		if sub.Checkout != "" {
			r = withPostedPage(r, string(body))
		}
		// Only the session's id is known: enough for an outage to send
		// the shopper to that session's page, which follows it.
		h.fail(w, r, &trusted{checkoutID: sub.Checkout}, err)
		return
	}

	if t.bill.State == bill.Paid {
		// A replay of a paid bill's form hears the first result, whatever
		// it carries: a typo or a bad field must not tell the shop "failed"
		// of a bill that is paid (decisions.md §5).
		p, err := h.Payments.Repo.SuccessfulPayment(r.Context(), t.bill.Reference)
		h.answer(w, r, t, p, err)
		return
	}
	// The merchant's customer fields are judged before anyone types a card:
	// a customer cannot fix them, so there is no point asking for the card.
	if problems := h.checkCustomer(&sub); len(problems) > 0 {
		h.refuseForm(w, r, t, problems)
		return
	}
	if !sub.HasCard() && t.checkoutID == "" {
		if err := h.startCheckout(r.Context(), &t, ""); err != nil {
			h.fail(w, r, &t, err)
			return
		}
		h.toCheckout(w, r, t)
		return
	}
	attempt, problems := h.checkCard(sub)
	if len(problems) > 0 {
		if t.checkoutID != "" && onlyCardProblems(problems) {
			h.again(w, r, t, sub, problems, payment.Payment{})
			return
		}
		h.refuseForm(w, r, t, problems)
		return
	}
	attempt.CallbackURL = t.callback.String()
	t.typed = sub
	p, err := h.Payments.Pay(r.Context(), t.bill, t.merchant, attempt)
	// A wait for another attempt, say, may have outlasted the request.
	kind, err := outage.Of(r.Context(), err)
	if kind == outage.ClientLeft {
		// The shopper left before a charge began (one that began keeps
		// its own time, and Pay answers it): judged on the answer's own
		// clock below, this was an ERROR "payment page failed".
		h.fail(w, r, &t, err)
		return
	}
	// The charge and its record keep time of their own (Pay); telling the
	// shopper must not fail because they took the request's.
	actx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), answerTime)
	defer cancel()
	h.answer(w, r.WithContext(actx), t, p, err)
}

// answerTime bounds what answering a payment reads and writes once it is
// made, on a clock of its own.
const answerTime = 10 * time.Second

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
	// Lengths, UTF-8 and control characters of what is looked up first:
	// nothing unchecked reaches the database. The customer's fields are
	// checkCustomer's, once the callback is trusted.
	if problems := sub.checkLengths(trustPart); len(problems) > 0 {
		return trusted{}, &pageError{Status: http.StatusBadRequest, Title: "Payment form not valid", Message: "The shop's payment form is not valid.", Detail: describe(problems)}
	}
	// Both kinds of token pay: the access token the spec puts in the form,
	// and the pay-only payment-token of POST /token.
	c, err := h.Auth.Verify(sub.Token)
	if outage.Is(err) {
		return trusted{}, err
	}
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
	// Checked on the shop's post only: a checkout session's callback was
	// checked when it started, and a merchant changing its origins meanwhile
	// must not stop a shopper who already paid from seeing the result.
	settings, err := h.Bills.RecentSettings(ctx, c.MerchantCode, c.Mode)
	if err != nil {
		return t, err
	}
	if origin := CallbackOrigin(t.callback); len(settings.CallbackOrigins) > 0 && !slices.Contains(settings.CallbackOrigins, origin) {
		// Anyone who reads a shop's page holds a token that pays its
		// bills: without this, a genuine payment page would send its
		// result, and the shopper, to a site of their choosing.
		return trusted{}, &pageError{Status: http.StatusBadRequest, Title: "Payment form not valid", Message: "The shop's payment form is not valid.",
			Detail: "The shop's callbackUrl is on " + origin + ", which is not one of the callback origins the merchant registered for " + string(c.Mode) + " mode."}
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

// errCheckoutGone is a checkout session that is unknown or has ended: its
// payment finished or cancelled, or its time up. It said "expired" to a
// shopper who pressed Back after cancelling, who then read that the page
// had run out and not why, or what to do.
var errCheckoutGone = &pageError{Status: http.StatusGone, Title: "Payment page closed", MayBePaid: true,
	Message: "This payment page is closed: its payment was finished or cancelled, or the page was left open too long."}

// resume continues a checkout from our own card page: the session, not
// the browser, says which bill, mode and merchant fields it is about.
func (h *Handler) resume(ctx context.Context, posted Submission) (Submission, trusted, error) {
	sess, t, err := h.session(ctx, posted.Checkout)
	if err == nil && !sess.EntryPage {
		err = errCheckoutGone
	}
	if err != nil {
		return posted, t, err
	}
	return resumed(sess.Fields, posted), t, nil
}

// load finds the bill and merchant a payment is for and checks the
// callback URL it will go back to (its origin is trust's to check).
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
	if !h.Payments.CanCharge(mode) {
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

// shopperText are the shop's fields a shopper types into, where a card
// number typed in the wrong box would land.
var shopperText = map[string]bool{"productType": true, "productDescription": true, "serviceDate": true,
	"customerFirstName": true, "customerLastName": true, "country": true, "postalcodeZip": true,
	"address": true, "city": true, "emailAddress": true, "ipAddress": true}

// checkCustomer validates the merchant-supplied customer fields and writes
// the mobile number in the one form the IPN carries.
func (h *Handler) checkCustomer(sub *Submission) []Problem {
	problems := sub.checkLengths(customerPart)
	// A checkout session keeps these fields: a card number a shopper typed
	// into the shop's address box would be on disk in clear. Only the text
	// a shopper types: an order reference (matched to the bill, which lets
	// a long number that passes Luhn through), a callback URL that carries
	// one, and a checked mobile number are the shop's.
	for _, f := range fields {
		if shopperText[f.name] && card.HoldsPAN(*f.ptr(sub)) {
			problems = append(problems, Problem{f.name, "must not hold a card number: card details go only into the card fields"})
		}
	}
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
	problems := sub.checkLengths(cardPart)
	pan, err := card.ParsePAN(sub.CardNumber)
	if err != nil {
		problems = append(problems, Problem{"cardNumber", cardMessage(err)})
	}
	exp, err := card.ParseExpiry(sub.CardExpiryMonth, sub.CardExpiryYear, h.Now().In(h.Location))
	if err != nil {
		problems = append(problems, Problem{"cardExpiry", cardMessage(err)})
	}
	// Without a number to read the brand from, a code that is no brand's
	// (not 3 or 4 digits) is said at once: a page without scripts showed
	// it only once the number was right, a round trip later.
	if err := card.CheckCVV(sub.CardSecurity, pan.Brand()); err != nil && (pan.Last4() != "" || card.CheckCVV(sub.CardSecurity, card.Amex) != nil) {
		problems = append(problems, Problem{"cardSecurity", cardMessage(err)})
	}
	for _, f := range []struct{ field, name string }{{"cardFirstName", sub.CardFirstName}, {"cardLastName", sub.CardLastName}} {
		if numberLike(f.name) {
			problems = append(problems, Problem{f.field, msgNameNotNumber})
		}
	}
	return payment.Attempt{
		PAN: pan, Expiry: exp, CVV: sub.CardSecurity,
		Holder:       strings.TrimSpace(sub.CardFirstName + " " + sub.CardLastName),
		MobileNumber: sub.MobileNumber, EmailAddress: sub.EmailAddress,
	}, problems
}

// msgNameNotNumber: a holder name with the card number typed into it
// would be stored as the cardholder and shown on the merchant's dashboard.
const msgNameNotNumber = "must be the name on the card, not its number"

// shownName is a holder name as a page may show it again, trimmed: not at
// all when it is number-like (a card number in the wrong box) or not a
// name the card page takes (too long, a control character, not UTF-8). A
// refused name was shown back as typed, and a merchant's post without the
// card prefilled one unchecked.
func shownName(name string) string {
	if name = typedText(name, maxHolderName); numberLike(name) {
		return ""
	}
	return name
}

// numberLike reports whether a name field holds six digits or more: no
// name printed on a card does, and a card number split across the two
// name fields leaves at least that many in one of them.
func numberLike(name string) bool {
	digits := 0
	for _, r := range name {
		// Any script's digits: an Arabic or Japanese keyboard types a
		// card number as ٤٢٤٢… or ４２４２…, which ASCII alone let through
		// to be kept as the cardholder.
		if unicode.IsDigit(r) {
			digits++
		}
	}
	return digits >= 6
}

func onlyCardProblems(ps []Problem) bool {
	for _, p := range ps {
		if !strings.HasPrefix(p.Field, "card") {
			return false
		}
	}
	return true
}

// invalidDetails begins the message of a form refused for its fields: the
// shop hears it as the reason.
const invalidDetails = "Invalid payment details: "

func describe(ps []Problem) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Field + " " + p.Message
	}
	return invalidDetails + strings.Join(parts, "; ")
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
		h.fail(w, r, nil, &pageError{Status: http.StatusBadRequest, Title: "Authentication form unreadable", Message: "The authentication form could not be read."})
		return
	}
	r = withPageID(r, r.PostForm.Get(pageField))
	// The challenge is answered through the checkout session that owes it:
	// a payment id alone, which the browser never sees, answers nothing.
	id, code := r.PostForm.Get(checkoutField), r.PostForm.Get("code")
	if len(code) > 12 || !utf8.ValidString(code) {
		id = ""
	}
	sess, t, err := h.session(r.Context(), id)
	if err == nil && sess.PaymentID == "" {
		err = errChallengeGone
	}
	if errors.Is(err, errCheckoutGone) {
		err = errChallengeGone
	}
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	// What the shopper typed before the challenge, for the card page
	// should the code fail.
	t.typed = Submission{CardFirstName: sess.Notice.FirstName, CardLastName: sess.Notice.LastName, CardExpiry: sess.Notice.Expiry}
	p, err := h.Payments.CompleteChallenge(r.Context(), sess.PaymentID, code)
	if err == nil {
		// The bill as the answer left it, for the callback and a retry.
		t.bill, err = h.Bills.BillByID(r.Context(), p.BillReference)
	}
	h.answer(w, r, t, p, err)
}

var errChallengeGone = &pageError{Status: http.StatusNotFound, Title: "Authentication not found", MayBePaid: true, Message: "This authentication page is not valid or has expired."}

// session loads checkout session id, of either kind, and what it trusts.
func (h *Handler) session(ctx context.Context, id string) (checkout.Session, trusted, error) {
	if !checkout.ValidID(id) {
		return checkout.Session{}, trusted{}, errCheckoutGone
	}
	sess, err := h.Checkouts.CheckoutByHash(ctx, checkout.Hash(id), h.Now())
	if errors.Is(err, checkout.ErrNotFound) {
		return sess, trusted{}, errCheckoutGone
	} else if err != nil {
		return sess, trusted{}, fmt.Errorf("load checkout session: %w", err)
	}
	t, err := h.load(ctx, sess.MerchantCode, sess.Mode, sess.BillReference, sess.Fields["callbackUrl"])
	t.fields, t.checkoutID, t.entry = sess.Fields, id, sess.EntryPage
	return sess, t, err
}

// cancel is "Cancel and return to the shop" on the card page and the 3-D
// Secure page: a challenge still owed fails, the session ends, and the
// shop hears Transaction Failed, unless the bill was paid meanwhile, when
// it hears that instead. A cancel while a charge is with the network (the
// Pay click still waiting, in another tab or this one) waits for it: the
// shop must not hear "cancelled" of a card that is being charged.
func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, nil, errCheckoutGone)
		return
	}
	r = withPageID(r, r.PostForm.Get(pageField))
	ctx := r.Context()
	sess, t, err := h.session(ctx, r.PostForm.Get(checkoutField))
	if err != nil {
		h.fail(w, r, nil, err)
		return
	}
	if sess.PaymentID != "" {
		p, err := h.Payments.AbandonChallenge(ctx, sess.PaymentID, MsgCancelled)
		if err != nil || p.Status == payment.Succeeded || p.Status.Pending() {
			h.answer(w, r, t, p, err)
			return
		}
	}
	switch t.bill.State {
	case bill.Paid:
		p, err := h.Payments.Repo.SuccessfulPayment(ctx, t.bill.Reference)
		h.answer(w, r, t, p, err)
		return
	case bill.Processing:
		if p, err := h.Payments.AwaitSettled(ctx, t.bill.Reference); err != nil || p.Status != payment.Failed {
			h.answer(w, r, t, p, err)
			return
		}
	}
	if err := h.Checkouts.EndCheckout(ctx, checkout.Hash(t.checkoutID), h.Now()); err != nil && !errors.Is(err, checkout.ErrNotFound) {
		h.fail(w, r, &t, err)
		return
	}
	h.finish(w, r, t, t.callback, callbackFor(t.bill, payment.Payment{Status: payment.Failed, Message: MsgCancelled, UpdatedAt: h.Now()}, h.Location), false)
}

// switchLanguage is the pages' language switch: it remembers the choice
// in a cookie and shows the page it came from again.
func (h *Handler) switchLanguage(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, nil, errPageGone)
		return
	}
	if l := i18n.ByTag(r.PostForm.Get("language")); l != nil {
		http.SetCookie(w, &http.Cookie{Name: languageCookie, Value: l.Tag, Path: "/", MaxAge: 365 * 24 * 3600,
			HttpOnly: true, Secure: h.HTTPS, SameSite: http.SameSiteLaxMode})
	}
	id := r.PostForm.Get(pageField)
	p, err := h.openPage(id)
	if err != nil {
		h.fail(w, withPageID(r, id), nil, err)
		return
	}
	if p.Kind == kindCheckout {
		h.keepTyped(r, p.Checkout)
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, pagePrefix+id, http.StatusSeeOther)
}

// keepTyped keeps the names and expiry the shopper typed on the card page
// across a language switch (card.js sends them along): the page came back
// in the new language with everything typed gone. The card number and CVV
// are never sent back to a page, so those are typed again. Best effort: a
// switch that cannot keep them still switches.
func (h *Handler) keepTyped(r *http.Request, checkoutID string) {
	form := r.PostForm
	if !form.Has("cardFirstName") && !form.Has("cardLastName") && !form.Has("cardExpiry") {
		return
	}
	sess, _, err := h.session(r.Context(), checkoutID)
	if err != nil || !sess.EntryPage {
		return
	}
	n := sess.Notice
	n.FirstName, n.LastName = shownName(form.Get("cardFirstName")), shownName(form.Get("cardLastName"))
	n.Expiry = shownExpiry(card.SplitExpiry(typedText(form.Get("cardExpiry"), 9)))
	n.Errors = forgetCorrected(sess.Notice, n)
	if err := h.Checkouts.SetCheckoutNotice(r.Context(), checkout.Hash(checkoutID), n); err != nil {
		h.Log.WarnContext(r.Context(), "keep the card page's typed names across a language switch", "err", err)
	}
}

// forgetCorrected is before's field errors less those of the fields kept
// across a language switch that the shopper has changed since (after): a
// name corrected, then the language switched, came back still marked
// wrong, its old message beside it. The server checks them again at Pay.
func forgetCorrected(before, after checkout.Notice) map[string]string {
	errs := maps.Clone(before.Errors)
	for field, changed := range map[string]bool{
		"cardFirstName": before.FirstName != after.FirstName,
		"cardLastName":  before.LastName != after.LastName,
		"cardExpiry":    before.Expiry != after.Expiry,
	} {
		if changed {
			delete(errs, field)
		}
	}
	return errs
}

// typedText is v trimmed, or "" when a field of max characters would
// refuse it (textProblem).
func typedText(v string, max int) string {
	if v = strings.TrimSpace(v); textProblem(v, max) != "" {
		return ""
	}
	return v
}

// pageField names the page id in the language switch's form.
const pageField = "page"

// MsgCancelled is the callback's message when the shopper cancels on our
// page. Messages to the merchant stay English: integrations parse them.
const MsgCancelled = "Payment cancelled by the customer"

// answer shows the outcome of a charge attempt.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request, t trusted, p payment.Payment, err error) {
	switch {
	case errors.Is(err, payment.ErrLiveDisabled):
		h.fail(w, r, &t, &pageError{Status: http.StatusServiceUnavailable, Title: "Card payments unavailable", Message: "Card payments are not available here yet. Nothing was charged.", Detail: err.Error() + "."})
	case errors.Is(err, payment.ErrUnrecorded):
		// Charged or not, the acquirer knows: reconciliation will ask it.
		h.Log.WarnContext(r.Context(), "payment outcome not recorded; left for reconciliation", "err", err)
		h.inProgress(w, r, t)
	case err != nil:
		h.fail(w, r, &t, err)
	case p.Status == payment.Challenge:
		if err := h.startCheckout(r.Context(), &t, p.ID); err != nil {
			h.fail(w, r, &t, err)
			return
		}
		if t.entry {
			// Kept for the card page, should the code fail.
			h.again(w, r, t, t.typed, nil, payment.Payment{})
			return
		}
		h.toCheckout(w, r, t)
	case p.Status.Pending():
		// Unknown too: the shop must not hear "failed" of a card the
		// reconciler may yet find charged; the page follows the payment
		// and posts its result once known.
		h.inProgress(w, r, t)
	case p.Status == payment.Failed:
		// The bill as the attempt left it, read once: a decline,
		// insufficient funds, a failed 3-D Secure code or an acquirer error
		// need not end a checkout on our card page while the bill is open
		// (as hosted checkouts do); otherwise the shop hears the result,
		// and the page says when a stored attempt was the bill's last (a
		// refusal of a bill already blocked says so in its own message).
		b, err := h.Bills.BillByID(r.Context(), t.bill.Reference)
		if t.entry && err == nil && b.State == bill.Open && !b.Expired(h.Now()) {
			h.again(w, r, t, t.typed, nil, p)
			return
		}
		h.result(w, r, t, p, p.ID != "" && err == nil && b.State == bill.Blocked)
	default:
		h.result(w, r, t, p, false)
	}
}

// inProgress tells the shopper that the bill's attempt is still with the
// card network. A merchant-posted form has no checkout session, and a
// "being confirmed" page sealed as it is would say so for its whole life
// and never post the result to the shop: a session bound to the payment
// in flight gives it a page that follows the payment instead. The payment
// is looked up: an attempt whose outcome was not recorded, or that another
// submit has in flight past the wait, comes back without its id.
func (h *Handler) inProgress(w http.ResponseWriter, r *http.Request, t trusted) {
	if t.checkoutID == "" {
		if p, err := h.Payments.Repo.LatestPayment(r.Context(), t.bill.Reference); err == nil && p.Status.Pending() {
			if err := h.startCheckout(r.Context(), &t, p.ID); err != nil {
				h.Log.WarnContext(r.Context(), "checkout session for a payment in flight", "err", err)
			}
		}
	}
	h.fail(w, r, &t, errInProgress)
}

// result shows the page that posts p's outcome to the shop; blocked says
// the attempt was the bill's last.
func (h *Handler) result(w http.ResponseWriter, r *http.Request, t trusted, p payment.Payment, blocked bool) {
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
	h.finish(w, r, t, cb, callbackFor(t.bill, p, h.Location), blocked)
}

// errInProgress is what a shopper sees while another attempt on the bill
// is still with the card network (a double submit that waited a few
// seconds, or a payment a crash left in flight until it is reconciled). It
// is not an error: 202, and a checkout's page refreshes itself until the
// result is known.
var errInProgress = &pageError{Status: http.StatusAccepted, Title: "Payment being confirmed", Pending: true,
	Message: "Your payment is being confirmed with the card network. Do not pay again: you will not be charged twice, and the shop will be told the result."}

// errUnavailable is what a shopper sees when the gateway cannot reach its
// database: no card went to the network (a charge whose answer could not
// be stored shows errInProgress instead).
var errUnavailable = &pageError{Status: http.StatusServiceUnavailable, Title: "Payments paused for a moment", Retry: true,
	Message: "We could not reach our payment records, so your card was not charged. Please try again in a minute."}

// errRecordsUnreachable is errUnavailable for a page asked again (a GET: a
// checkout's page reloading itself): its payment may be with the card
// network or done, which the records out of reach cannot tell. It said
// "your card was not charged" of a card approved a moment before.
var errRecordsUnreachable = &pageError{Status: http.StatusServiceUnavailable, Title: "Payments paused for a moment", Retry: true,
	Message: "We could not reach our payment records just now. If you already entered your card, do not pay again: this page shows the result once it can."}

// again shows checkout t's card page once more, with the field problems
// or the decline, and what the shopper typed that may be shown again:
// the names and expiry, never the card number or CVV.
func (h *Handler) again(w http.ResponseWriter, r *http.Request, t trusted, typed Submission, problems []Problem, declined payment.Payment) {
	n := checkout.Notice{Declined: declined.Message, DeclineCode: declined.DeclineCode, FirstName: shownName(typed.CardFirstName), LastName: shownName(typed.CardLastName), Expiry: typedExpiry(typed)}
	if len(problems) > 0 {
		n.Errors = map[string]string{}
		for _, p := range problems {
			n.Errors[p.Field] = p.Message
		}
	}
	if err := h.Checkouts.SetCheckoutNotice(r.Context(), checkout.Hash(t.checkoutID), n); err != nil {
		h.fail(w, r, &t, err)
		return
	}
	h.toCheckout(w, r, t)
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
}
