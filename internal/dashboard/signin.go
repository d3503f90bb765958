package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/session"
)

// home is the sign-in page without a session, the overview with one.
func (h *Handler) home(w http.ResponseWriter, r *http.Request) {
	next := dashboardPath(r.URL.Query().Get("next"))
	if _, err := h.session(r, h.Now()); err != nil {
		h.render(w, r, http.StatusOK, "signin.html", map[string]any{"Next": next})
		return
	}
	if next != "/dashboard/" {
		// An ended session's tab reloaded after signing in elsewhere: on
		// to the page it was on.
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	h.signedIn(h.overview, modeData)(w, r)
}

// signIn checks the username (merchant code) and password, counted with
// the lockout, and starts a new session: never one the browser brought
// along (session fixation).
func (h *Handler) signIn(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, http.StatusBadRequest, "Sign-in form unreadable", "Reload the page and try again.")
		return
	}
	username := strings.TrimSpace(r.PostForm.Get("username"))
	// What the page shows back: not a card number typed into the wrong
	// box, which no merchant code is.
	shown := username
	if card.RedactPath(username) != username {
		shown = ""
	}
	next := dashboardPath(r.PostForm.Get("next"))
	m, err := h.Auth.SignIn(r.Context(), username, r.PostForm.Get("password"), clientIP(r))
	var locked *auth.LockedError
	switch {
	case errors.As(err, &locked):
		h.render(w, r, http.StatusTooManyRequests, "signin.html", map[string]any{"Username": shown, "Next": next,
			"Error": "Too many failed attempts. Try again after " + h.Now().Add(locked.RetryAfter).In(h.Location).Format("15:04 MST, 2 Jan") + "."})
		return
	case errors.Is(err, auth.ErrBusy):
		w.Header().Set("Retry-After", "1")
		h.render(w, r, http.StatusServiceUnavailable, "signin.html", map[string]any{"Username": shown, "Next": next, "Error": "The gateway is busy. Try again in a moment."})
		return
	case errors.Is(err, auth.ErrInvalidGrant):
		if m.Code != "" {
			h.Store.RecordAudit(r.Context(), audit.Event{At: h.Now(), MerchantCode: m.Code, Actor: "dashboard " + clientIP(r), Action: audit.SignInFailed})
		}
		h.render(w, r, http.StatusUnauthorized, "signin.html", map[string]any{"Username": shown, "Next": next, "Error": "The username or password is not right."})
		return
	case err != nil:
		h.internal(w, r, err)
		return
	}
	if old, err := r.Cookie(h.cookieName()); err == nil {
		_ = h.Store.DeleteSession(r.Context(), session.Hash(old.Value))
	}
	// With two-step verification on, the sign-in is not done until the
	// code: the log says the password was right, and signed_in comes with
	// the code.
	action, detail := audit.SignedIn, "password"
	if _, enabled, err := h.Store.TOTP(r.Context(), m.Code); err != nil {
		h.internal(w, r, err)
		return
	} else if !enabled.IsZero() {
		action, detail = audit.PasswordAccepted, "two-step code still to come"
	}
	id, sess := session.New(m.Code, h.Now())
	if err := h.Store.CreateSession(r.Context(), sess, m.PasswordHash); errors.Is(err, session.ErrPasswordChanged) {
		h.Store.RecordAudit(r.Context(), audit.Event{At: h.Now(), MerchantCode: m.Code, Actor: "dashboard " + clientIP(r), Action: audit.SignInFailed,
			Detail: "the password was changed during the sign-in"})
		h.render(w, r, http.StatusUnauthorized, "signin.html", map[string]any{"Username": shown, "Next": next, "Error": "The username or password is not right."})
		return
	} else if err != nil {
		h.internal(w, r, err)
		return
	}
	h.setCookie(w, h.cookieName(), id, int(session.MaxAge.Seconds()))
	h.Store.RecordAudit(r.Context(), audit.Event{At: h.Now(), MerchantCode: m.Code, Actor: "dashboard " + clientIP(r), Action: action, Detail: detail})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// dashboardPath is where to go after signing in: a page of the dashboard
// the merchant asked for before it, or Home. Anything else (another
// site, a scheme, a path outside the dashboard) is Home: the parameter
// comes from a link anyone can write.
func dashboardPath(next string) string {
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Fragment != "" || strings.ContainsAny(next, "\\\x00\r\n\t") {
		return "/dashboard/"
	}
	// The path as a browser resolves it: no "..", ".", "//" or their
	// escapes may walk it out of the dashboard or onto sign-out.
	clean := path.Clean(u.Path)
	if strings.HasSuffix(u.Path, "/") && clean != "/" {
		clean += "/"
	}
	if clean != u.Path || !strings.HasPrefix(clean, "/dashboard/") || strings.HasPrefix(clean, "/dashboard/sign") || holdsCardNumber(next) {
		return "/dashboard/"
	}
	return next
}

// holdsCardNumber reports whether a page's address, escaped or not, holds
// something written like a card number: the way back to it after signing
// in is not kept, so that the sign-in page and its redirects do not repeat
// one (a search pasted with a whole card number, a crafted link).
func holdsCardNumber(uri string) bool {
	if u, err := url.QueryUnescape(uri); err == nil {
		uri = u
	}
	return card.RedactPath(uri) != uri
}

// verify checks the second factor: a TOTP code, or one unused recovery
// code. Wrong codes are counted like wrong passwords (auth.SecondFactor).
func (h *Handler) verify(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	code, err := formValue(r, "code", 32)
	how := "password and two-step code"
	if err == nil {
		err = h.Auth.SecondFactor(r.Context(), v.Merchant.Code, clientIP(r), func() (bool, error) {
			ok, recovery, err := h.checkSecondFactor(r, v.Merchant, code)
			if recovery {
				how = "password and a recovery code" // spent: the merchant should know
			}
			return ok, err
		})
	}
	var locked *auth.LockedError
	switch {
	case err == nil:
		v.Sess.SecondFactor = h.Now()
		if err := h.Store.TouchSession(r.Context(), v.Sess); err != nil {
			h.internal(w, r, err)
			return
		}
		h.audit(r, audit.SignedIn, how)
		http.Redirect(w, r, dashboardPath(r.PostForm.Get("next")), http.StatusSeeOther)
		return
	case errors.As(err, &locked):
		h.render(w, r, http.StatusTooManyRequests, "verify.html", map[string]any{"Next": dashboardPath(r.PostForm.Get("next")),
			"Error": "Too many wrong codes. Try again after " + h.Now().Add(locked.RetryAfter).In(h.Location).Format("15:04 MST on 2 Jan") + " (signing in again then if this session has ended)."})
		return
	case errors.Is(err, auth.ErrBusy):
		w.Header().Set("Retry-After", "1")
		h.render(w, r, http.StatusServiceUnavailable, "verify.html", map[string]any{"Next": dashboardPath(r.PostForm.Get("next")), "Error": "The gateway is busy. Try again in a moment."})
		return
	case err != nil && !errors.Is(err, auth.ErrInvalidGrant) && !errors.Is(err, errBadInput):
		h.internal(w, r, err)
		return
	}
	h.audit(r, audit.SignInFailed, "wrong two-step code")
	h.render(w, r, http.StatusUnauthorized, "verify.html", map[string]any{"Next": dashboardPath(r.PostForm.Get("next")), "Error": "That code is not right. Enter the current code from your app, or a recovery code."})
}

// checkSecondFactor accepts the TOTP code of the current time step or the
// one either side, once (a code already used, here or in another session,
// is refused), or an unused recovery code, which it spends.
// recovery says the code was a recovery code, now spent.
func (h *Handler) checkSecondFactor(r *http.Request, m merchant.Merchant, code string) (ok, recovery bool, err error) {
	secret, enabled, err := h.Store.TOTP(r.Context(), m.Code)
	if err != nil || secret == "" || enabled.IsZero() {
		return false, false, err
	}
	code = strings.ReplaceAll(code, " ", "")
	if step, found := totpStep(secret, code, h.Now()); found {
		ok, err := h.Store.UseTOTPStep(r.Context(), m.Code, step)
		return ok, false, err
	}
	ok, err = h.Store.UseRecoveryCode(r.Context(), m.Code, recoveryHash(code), h.Now())
	return ok, ok, err
}

// totpStep finds the time step, within totpOpts' skew of now, whose code
// is code.
func totpStep(secret, code string, now time.Time) (int64, bool) {
	if len(code) != totpOpts.Digits.Length() {
		return 0, false
	}
	period := int64(totpOpts.Period)
	current := now.Unix() / period
	for step := current - int64(totpOpts.Skew); step <= current+int64(totpOpts.Skew); step++ {
		want, err := totp.GenerateCodeCustom(secret, time.Unix(step*period, 0), totpOpts)
		if err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return step, true
		}
	}
	return 0, false
}

func recoveryHash(code string) string {
	sum := sha256.Sum256([]byte(strings.ToUpper(strings.ReplaceAll(code, "-", ""))))
	return hex.EncodeToString(sum[:])
}

func (h *Handler) signOut(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	if err := h.Store.DeleteSession(r.Context(), v.Sess.IDHash); err != nil {
		h.internal(w, r, err)
		return
	}
	h.setCookie(w, h.cookieName(), "", -1)
	h.audit(r, audit.SignedOut, "")
	http.Redirect(w, r, "/dashboard/", http.StatusSeeOther)
}

// signOutEverywhere ends every other session of the merchant, on every
// node (sessions live in the database).
func (h *Handler) signOutEverywhere(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	if err := h.Store.DeleteSessions(r.Context(), v.Merchant.Code, v.Sess.IDHash); err != nil {
		h.internal(w, r, err)
		return
	}
	h.audit(r, audit.SignedOutAll, "")
	h.back(w, r, "/dashboard/security", "Every other session is signed out.")
}

// switchMode moves the session between the test and the live world.
func (h *Handler) switchMode(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	mode, err := merchant.ParseMode(r.PostForm.Get("mode"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Unknown mode", "Choose test or live.")
		return
	}
	if mode == merchant.Live && !v.verified() {
		h.refuse(w, r, "/dashboard/security", liveNeedsTwoStep)
		return
	}
	v.Sess.Mode = mode
	if err := h.Store.TouchSession(r.Context(), v.Sess); err != nil {
		h.internal(w, r, err)
		return
	}
	to := r.PostForm.Get("back")
	if !strings.HasPrefix(to, "/dashboard/") || strings.HasPrefix(to, "/dashboard/payments/") || strings.ContainsAny(to, "?#\\") {
		to = "/dashboard/"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

var totpOpts = totp.ValidateOpts{Period: 30, Skew: 1, Digits: 6}
