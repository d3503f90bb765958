// Package dashboard is the merchant's own place: sign in, see every payment,
// manage API keys, the notification secret and IPN, read the audit log
// (docs/dashboard.md). Server-rendered pages, one small file per page or
// action; the same store and services the API uses.
package dashboard

import (
	"bytes"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kadipay/kadi/internal/asset"
	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/clientaddr"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/outage"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/session"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the dashboard reads and changes.
type Store interface {
	session.Repo
	merchant.Registry
	Settings(ctx context.Context, code string, mode merchant.Mode) (merchant.Settings, error)
	SetCallbackOrigins(ctx context.Context, code string, mode merchant.Mode, origins []string) error
	ActiveAPIKey(ctx context.Context, code string, mode merchant.Mode) (merchant.APIKey, error)
	SetNotificationSecret(ctx context.Context, code string, mode merchant.Mode, secret string, previousUntil time.Time) error
	EndSecretOverlap(ctx context.Context, code string, mode merchant.Mode, until, at time.Time) (ended bool, err error)
	SetPassword(ctx context.Context, code, hash string) error
	TOTP(ctx context.Context, code string) (string, time.Time, error)
	EnableTOTP(ctx context.Context, code, secret string, recoveryHashes []string, at time.Time) error
	UseRecoveryCode(ctx context.Context, code, hash string, at time.Time) (bool, error)
	UseTOTPStep(ctx context.Context, code string, step int64) (bool, error)
	BillsPage(ctx context.Context, f bill.ListFilter) ([]bill.Bill, error)
	BillByReference(ctx context.Context, merchantCode string, mode merchant.Mode, ref string) (bill.Bill, error)
	PaymentsOfBill(ctx context.Context, billRef string) ([]payment.Payment, error)
	ShownPayments(ctx context.Context, billRefs []string) (map[string]payment.Payment, error)
	PaymentTotals(ctx context.Context, merchantCode, mode string, since time.Time) ([]payment.QuarterTotal, error)
	IPNEvents(ctx context.Context, f ipn.Filter) ([]ipn.Event, error)
	IPNEvent(ctx context.Context, id string) (ipn.Event, error)
	IPNAttempts(ctx context.Context, id string) ([]ipn.Attempt, error)
	ReplayIPN(ctx context.Context, id string, now time.Time, actor string) (ipn.Event, error)
	AuditEvents(ctx context.Context, merchantCode string, limit int) ([]audit.Event, error)
	AuditEventsBefore(ctx context.Context, merchantCode string, at time.Time, id string, limit int) ([]audit.Event, error)
	RecordAudit(ctx context.Context, e audit.Event) error
}

// Tester sends a signed sample notification to a merchant's configured IPN
// URL and reports the receiver's answer.
type Tester interface {
	Test(ctx context.Context, merchantCode string, mode merchant.Mode) (ipn.Attempt, error)
}

// Handler serves the dashboard under /dashboard/.
type Handler struct {
	Auth     *auth.Service
	Store    Store
	IPN      Tester
	Location *time.Location
	Log      *slog.Logger
	Now      func() time.Time
	// PublicURL is where merchants reach the API and the hosted form
	// (--public-url), shown on the Developers page. When it is https the
	// dashboard's cookies are Secure and take the __Host- prefix.
	PublicURL string
	// FormURL is where shops' checkout forms post (/cardPay): PublicURL,
	// unless the hosted form has a listener and address of its own.
	FormURL string
	// AllowPrivateIPN mirrors --allow-private-ipn for the settings' checks,
	// and NAT64Prefixes --nat64-prefixes.
	AllowPrivateIPN bool
	NAT64Prefixes   []netip.Prefix

	pages  *template.Template
	assets *asset.Files
}

// Register adds the dashboard's routes to mux. Every state-changing request
// must be same-origin (net/http's CrossOriginProtection) and, once signed
// in, carry the session's CSRF token.
func (h *Handler) Register(mux *http.ServeMux) {
	assets, err := asset.New(staticFS, "static", "/dashboard/static/")
	if err != nil {
		panic(err) // embedded at build time: a test sees it first
	}
	h.assets = assets
	h.pages = template.Must(template.New("").Funcs(funcs(h)).ParseFS(templateFS, "templates/*.html"))
	m := http.NewServeMux()
	m.HandleFunc("GET /dashboard/{$}", h.home)
	m.HandleFunc("POST /dashboard/sign-in", h.signIn)
	m.HandleFunc("POST /dashboard/verify", h.signedIn(h.verify, pending))
	m.HandleFunc("POST /dashboard/sign-out", h.signedIn(h.signOut, pending))
	m.HandleFunc("POST /dashboard/sign-out-everywhere", h.signedIn(h.signOutEverywhere, account))
	m.HandleFunc("POST /dashboard/mode", h.signedIn(h.switchMode, account))
	m.HandleFunc("GET /dashboard/payments", h.signedIn(h.payments, modeData))
	m.HandleFunc("GET /dashboard/payments.csv", h.signedIn(h.paymentsCSV, modeData))
	m.HandleFunc("GET /dashboard/payments/{ref}", h.signedIn(h.billPage, modeData))
	m.HandleFunc("POST /dashboard/payments/{ref}/resend-ipn", h.signedIn(h.inMode(h.resendIPN), modeData))
	m.HandleFunc("GET /dashboard/developers", h.signedIn(h.developers, modeData))
	m.HandleFunc("POST /dashboard/developers/regenerate", h.signedIn(h.inMode(h.regenerateKey), modeData))
	m.HandleFunc("POST /dashboard/developers/reveal-secret", h.signedIn(h.inMode(h.revealSecret), modeData))
	m.HandleFunc("POST /dashboard/developers/rotate-secret", h.signedIn(h.inMode(h.rotateSecret), modeData))
	m.HandleFunc("POST /dashboard/developers/end-overlap", h.signedIn(h.inMode(h.endOverlap), modeData))
	m.HandleFunc("GET /dashboard/settings/ipn", h.signedIn(h.ipnSettings, modeData))
	m.HandleFunc("POST /dashboard/settings/ipn", h.signedIn(h.inMode(h.saveIPNSettings), modeData))
	m.HandleFunc("POST /dashboard/settings/ipn/test", h.signedIn(h.inMode(h.testIPN), modeData))
	m.HandleFunc("POST /dashboard/settings/callbacks", h.signedIn(h.inMode(h.saveCallbackOrigins), modeData))
	m.HandleFunc("GET /dashboard/ipn", h.signedIn(h.ipnLog, modeData))
	m.HandleFunc("POST /dashboard/ipn/{id}/replay", h.signedIn(h.inMode(h.replayIPN), modeData))
	m.HandleFunc("GET /dashboard/audit", h.signedIn(h.auditLog, modeData))
	m.HandleFunc("GET /dashboard/security", h.signedIn(h.security, account))
	m.HandleFunc("POST /dashboard/security/password", h.signedIn(h.changePassword, account))
	m.HandleFunc("POST /dashboard/security/totp/start", h.signedIn(h.startTOTP, account))
	m.HandleFunc("POST /dashboard/security/totp/confirm", h.signedIn(h.confirmTOTP, account))
	m.Handle("GET /dashboard/static/", h.assets)
	m.HandleFunc("/dashboard/", h.notFound)

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusForbidden, "Request refused", "This form did not come from the dashboard itself. Reload the page and try again.")
	}))
	mux.Handle("/dashboard/", cop.Handler(m))
	mux.Handle("GET /dashboard", http.RedirectHandler("/dashboard/", http.StatusMovedPermanently))
}

// visit is one request of a signed-in merchant.
type visit struct {
	Sess     session.Session
	Merchant merchant.Merchant
	TOTPOn   bool // the merchant has turned on two-step verification
}

// verified says the session has passed two-step verification.
func (v visit) verified() bool { return v.TOTPOn && !v.Sess.SecondFactor.IsZero() }

// pending says the session still owes the second factor the merchant
// turned on.
func (v visit) pending() bool { return v.TOTPOn && !v.verified() }

// access is what a route asks of a session beyond a password sign-in.
type access int

const (
	// pending routes serve a session still owing its second factor:
	// entering the code, signing out.
	pending access = iota
	// account routes (security, the mode switch) ask for the second factor
	// when the merchant has turned it on.
	account
	// modeData routes show or change one mode's payments, keys and
	// settings. Live mode asks for the second factor in every case
	// (decisions.md §2: "required in live mode"): live payments carry
	// shoppers' names, e-mails and phones, and live keys move real money.
	modeData
)

type visitKey struct{}

func visitOf(r *http.Request) visit { v, _ := r.Context().Value(visitKey{}).(visit); return v }

// signedIn admits requests of a live session, and, for state changes, only
// with the session's CSRF token; need says what else the route asks.
func (h *Handler) signedIn(next http.HandlerFunc, need access) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		now := h.Now()
		// HEAD reaches GET routes too (net/http's mux): a read, with no
		// form to carry a CSRF token.
		reading := r.Method == http.MethodGet || r.Method == http.MethodHead
		sess, err := h.session(r, now)
		if err != nil {
			if reading {
				// Back to this page after signing in again.
				back := "/dashboard/?next=" + url.QueryEscape(r.URL.RequestURI())
				if holdsCardNumber(r.URL.RequestURI()) {
					back = "/dashboard/"
				}
				http.Redirect(w, r, back, http.StatusSeeOther)
				return
			}
			h.fail(w, r, http.StatusUnauthorized, "Signed out", "Your session has ended. Sign in again.")
			return
		}
		if !reading {
			if err := r.ParseForm(); err != nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(sess.CSRF)) != 1 {
				h.fail(w, r, http.StatusForbidden, "Request refused", "This form has expired or did not come from this session. Reload the page and try again.")
				return
			}
		}
		m, err := h.Store.MerchantByCode(r.Context(), sess.MerchantCode)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		_, enabled, err := h.Store.TOTP(r.Context(), m.Code)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		v := visit{Sess: sess, Merchant: m, TOTPOn: !enabled.IsZero()}
		if err := h.Store.SeenSession(r.Context(), sess.IDHash, now); err != nil {
			h.internal(w, r, err)
			return
		}
		ctx := context.WithValue(r.Context(), visitKey{}, v)
		ctx = audit.WithActor(ctx, "dashboard "+clientIP(r))
		r = r.WithContext(ctx)
		switch {
		case need >= account && v.pending():
			if !reading {
				// A form posted before the code: said, not shown a 200.
				h.render(w, r, http.StatusForbidden, "verify.html", map[string]any{"Next": "/dashboard/",
					"Error": "Enter the code from your app first: nothing was changed."})
				return
			}
			h.render(w, r, http.StatusOK, "verify.html", map[string]any{"Next": dashboardPath(r.URL.RequestURI())})
			return
		case need == modeData && v.Sess.Mode == merchant.Live && !v.verified():
			// A session switched to live mode before live mode asked for
			// two-step verification (a release before this one).
			if reading {
				h.refuse(w, r, "/dashboard/security", liveNeedsTwoStep)
				return
			}
			h.fail(w, r, http.StatusForbidden, "Two-step verification needed",
				"Live mode needs two-step verification. Nothing was changed. Set it up under Security, then try again.")
			return
		}
		next(w, r)
	}
}

// formAuth is what every form posts back besides its fields: the
// session's CSRF token and the mode the page was shown in.
type formAuth struct{ Token, Mode string }

// inMode refuses a form shown in the other mode than the session's now: a
// tab left on the test keys must not regenerate the live key after
// another tab switched the session to live (nor save, rotate, reveal,
// resend or replay there).
func (h *Handler) inMode(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v := visitOf(r)
		if shown := r.PostForm.Get("form_mode"); shown != string(v.Sess.Mode) {
			h.fail(w, r, http.StatusConflict, "Nothing was changed: this page was for another mode",
				"The dashboard is in "+string(v.Sess.Mode)+" mode now (switched in another tab?). Reload the page, check the mode, and try again.")
			return
		}
		next(w, r)
	}
}

// session reads the cookie's session, if it is alive.
func (h *Handler) session(r *http.Request, now time.Time) (session.Session, error) {
	c, err := r.Cookie(h.cookieName())
	if err != nil || len(c.Value) != 43 {
		return session.Session{}, session.ErrNotFound
	}
	return h.Store.SessionByHash(r.Context(), session.Hash(c.Value), now)
}

func (h *Handler) cookieName() string { return h.cookie("kadi_session") }

// noteCookie carries back's note to the next page.
func (h *Handler) noteCookie() string { return h.cookie("kadi_note") }

// secure says the dashboard is served over https (--public-url is
// normalised to a lower-case scheme).
func (h *Handler) secure() bool { return strings.HasPrefix(h.PublicURL, "https://") }

// cookie names one of the dashboard's cookies: __Host- when served over
// https, so no subdomain can set or read it.
func (h *Handler) cookie(name string) string {
	if h.secure() {
		return "__Host-" + name
	}
	return name
}

// setCookie sets one of the dashboard's cookies (maxAge < 0 clears it):
// never readable by script, sent only to this site.
func (h *Handler) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: h.secure(), SameSite: http.SameSiteStrictMode})
}

// liveNeedsTwoStep is the refusal the Security page shows a merchant sent
// there from live mode or its switch.
const liveNeedsTwoStep = "Live mode needs two-step verification: set it up below first."

// audit records an action of the signed-in merchant.
func (h *Handler) audit(r *http.Request, action, detail string) {
	v := visitOf(r)
	code := v.Merchant.Code
	if code == "" {
		code = v.Sess.MerchantCode
	}
	err := h.Store.RecordAudit(r.Context(), audit.Event{At: h.Now(), MerchantCode: code, Actor: "dashboard " + clientIP(r), Action: action, Detail: detail})
	if err != nil {
		h.Log.ErrorContext(r.Context(), "audit", "action", action, "err", err)
	}
}

func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name string, data map[string]any) {
	v := visitOf(r)
	data["Visit"] = v
	data["Mode"] = string(v.Sess.Mode)
	data["Live"] = v.Sess.Mode == merchant.Live
	data["CSRF"] = formAuth{Token: v.Sess.CSRF, Mode: string(v.Sess.Mode)}
	data["Path"] = r.URL.Path
	// Before its second factor a session is shown no navigation or mode
	// switch: nothing there would open for it.
	data["Pending"] = v.pending()
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.Log.ErrorContext(r.Context(), "render dashboard page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	headers(w)
	w.Header().Set("Content-Length", strconv.Itoa(buf.Len())) // whole, not chunked
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// headers are every dashboard page's: no caching of merchant data, no
// framing, no inline script, nothing from elsewhere.
func headers(w http.ResponseWriter) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
}

// fail shows a plain page saying what went wrong, with the way back.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, title, message string) {
	logging.Refused(r.Context(), h.Log, "dashboard refused", "status", status, "title", title)
	h.render(w, r, status, "message.html", map[string]any{"Title": title, "Message": message})
}

func (h *Handler) internal(w http.ResponseWriter, r *http.Request, err error) {
	kind, err := outage.Of(r.Context(), err)
	switch kind {
	case outage.ClientLeft:
		// Nobody reads this page; the access line says 499, as the API's
		// and the hosted form's do, not a 503 an alert counts.
		logging.Refused(r.Context(), h.Log, "merchant left", "err", err)
		w.WriteHeader(499)
		return
	case outage.Unavailable:
		w.Header().Set("Retry-After", strconv.Itoa(int(outage.RetryAfter.Seconds())))
		logging.Refused(r.Context(), h.Log, "dashboard unavailable", "err", err)
		h.render(w, r, http.StatusServiceUnavailable, "message.html", map[string]any{"Title": "Temporarily unavailable",
			"Message": "The dashboard cannot reach its database right now; try again in a minute."})
		return
	}
	h.Log.ErrorContext(r.Context(), "dashboard failed", "err", err)
	h.render(w, r, http.StatusInternalServerError, "message.html", map[string]any{"Title": "Something went wrong",
		"Message": "The dashboard could not do this. Quote reference " + logging.RequestID(r.Context()) + " to support."})
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, http.StatusNotFound, "Not found", "There is nothing here.")
}

// back redirects after a POST to the page the form came from (POST-redirect-
// GET), with a note to show there. The note travels in a cookie of a
// minute, not the URL: a ?note= in the address was shown as the
// dashboard's own words to whoever followed a link someone else wrote
// ("Your account is suspended: call …").
func (h *Handler) back(w http.ResponseWriter, r *http.Request, to, note string) {
	if note != "" {
		h.setCookie(w, h.noteCookie(), base64.RawURLEncoding.EncodeToString([]byte(note)), 60)
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// refusalMark starts a note cookie that is a refusal; base64's URL
// alphabet has no '.', so no plain note starts so.
const refusalMark = "e."

// refuse is back with a refusal, shown as one there rather than in the
// green of a success.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, to, msg string) {
	h.setCookie(w, h.noteCookie(), refusalMark+base64.RawURLEncoding.EncodeToString([]byte(msg)), 60)
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// takeNote puts the note back or refuse left for this page into data, as
// its "Note" or its "Error", once: it clears it.
func (h *Handler) takeNote(w http.ResponseWriter, r *http.Request, data map[string]any) map[string]any {
	c, err := r.Cookie(h.noteCookie())
	if err != nil {
		return data
	}
	h.setCookie(w, c.Name, "", -1)
	value, refusal := strings.CutPrefix(c.Value, refusalMark)
	note, err := base64.RawURLEncoding.DecodeString(value)
	switch {
	case err != nil || len(note) > 1000 || !utf8.Valid(note):
	case refusal:
		data["Error"] = string(note)
	default:
		data["Note"] = string(note)
	}
	return data
}

// clientIP is the address throttles, lockouts and audit lines count: the
// one the request middleware decided (behind a trusted proxy, the client it
// names).
func clientIP(r *http.Request) string { return clientaddr.From(r) }

var errBadInput = errors.New("bad input")

// formValue reads a trimmed form field of at most max bytes.
func formValue(r *http.Request, name string, max int) (string, error) {
	v := strings.TrimSpace(r.PostForm.Get(name))
	if len(v) > max || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", errBadInput
	}
	return v, nil
}

// funcs are the templates' formatting: times in the operator's zone,
// amounts with digit grouping, bills' display states, card brands.
func funcs(h *Handler) template.FuncMap {
	return template.FuncMap{
		"static": func(name string) (string, error) { return h.assets.URL(name) },
		// A time names its zone (the operator's, --timezone): staff in
		// another zone, or reading beside the UTC of an export's
		// reader, cannot tell otherwise.
		"when": func(t time.Time) template.HTML {
			if t.IsZero() {
				return "–"
			}
			t = t.In(h.Location)
			return template.HTML(`<time datetime="` + t.Format(time.RFC3339) + `">` + template.HTMLEscapeString(t.Format("2 Jan 2006 15:04 MST")) + `</time>`)
		},
		"money": func(a money.Amount) string { return a.Grouped() },
		"state": func(b bill.Bill) string { return string(b.DisplayState(h.Now())) },
		"brand": brandName,
	}
}

// cursor is where a keyset page's next link starts: the last row's time
// in milliseconds, an underscore, its id.
func cursor(at time.Time, id string) string { return strconv.FormatInt(at.UnixMilli(), 10) + "_" + id }

// parseCursor reads a cursor as cursor wrote it, for rows whose ids have
// the shape idOK asks; anything else is errBadInput. At most 15 digits of
// milliseconds (the year 33658): no sign, no overflow.
func parseCursor(s string, idOK func(string) bool) (time.Time, string, error) {
	msText, id, _ := strings.Cut(s, "_")
	if msText == "" || len(msText) > 15 || strings.ContainsFunc(msText, func(r rune) bool { return r < '0' || r > '9' }) || !idOK(id) {
		return time.Time{}, "", errBadInput
	}
	n, _ := strconv.ParseInt(msText, 10, 64) // 15 digits always fit
	return time.UnixMilli(n), id, nil
}

// cloneQuery copies q, so a link can change one parameter.
func cloneQuery(q url.Values) url.Values {
	out := url.Values{}
	for k, v := range q {
		out[k] = append([]string(nil), v...)
	}
	return out
}

// brandName is how a page or an export names a card's brand.
func brandName(b card.Brand) string {
	if n := b.Name(); n != "" {
		return n
	}
	return string(b)
}
