package dashboard

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// developers shows each mode's API key by prefix only, the base URLs and a
// short sample of the five steps.
func (h *Handler) developers(w http.ResponseWriter, r *http.Request) {
	h.renderDevelopers(w, r, http.StatusOK, map[string]any{})
}

func (h *Handler) renderDevelopers(w http.ResponseWriter, r *http.Request, status int, data map[string]any) {
	v := visitOf(r)
	keys := map[string]merchant.APIKey{}
	for _, mode := range merchant.Modes {
		k, err := h.Store.ActiveAPIKey(r.Context(), v.Merchant.Code, mode)
		if err != nil && !errors.Is(err, merchant.ErrNotFound) {
			h.internal(w, r, err)
			return
		}
		keys[string(mode)] = k
	}
	data["Keys"] = keys
	// How long a replaced secret still signs, unless a rotation has just
	// said it: a note, not the page, so settings that cannot be read (a
	// secret sealed under a key this node lacks) leave it out and keep the
	// page's forms, where reveal says what is wrong.
	if data["Rotated"] == nil {
		if st, err := h.Store.Settings(r.Context(), v.Merchant.Code, v.Sess.Mode); err == nil && len(st.SigningSecrets(h.Now())) > 1 {
			data["PreviousUntil"] = &st.PreviousUntil
		}
	}
	// Where merchants reach the API and the form (--public-url), never the
	// Host this page was asked for by: behind a proxy, or on a dashboard
	// listener of its own, that named the wrong place, and any Host a
	// request carried was printed as the merchant's base URL.
	data["Base"] = strings.TrimRight(h.PublicURL, "/")
	data["FormBase"] = data["Base"]
	if h.FormURL != "" {
		// With the form on an address of its own, the API's told merchants
		// to post their checkout where nothing answers /cardPay.
		data["FormBase"] = strings.TrimRight(h.FormURL, "/")
	}
	h.render(w, r, status, "developers.html", data)
}

// reauthenticate asks for the password again (form field "password", or
// field) before a sensitive action, counted with the sign-in lockout. It
// answers the page itself when the password is refused: wrongPassword's
// page for a wrong one, the developers page when nil.
func (h *Handler) reauthenticate(w http.ResponseWriter, r *http.Request, field string, wrongPassword func()) bool {
	v := visitOf(r)
	err := h.Auth.Reauthenticate(r.Context(), v.Merchant, r.PostForm.Get(field), clientIP(r))
	var locked *auth.LockedError
	switch {
	case err == nil:
		return true
	case errors.As(err, &locked):
		h.fail(w, r, http.StatusTooManyRequests, "Too many failed attempts", "Try again in "+locked.Error()[len("too many failed attempts; try again in "):]+".")
	case errors.Is(err, auth.ErrBusy):
		w.Header().Set("Retry-After", "1")
		h.fail(w, r, http.StatusServiceUnavailable, "The gateway is busy", "Try again in a moment.")
	case errors.Is(err, auth.ErrInvalidGrant) && wrongPassword != nil:
		wrongPassword()
	case errors.Is(err, auth.ErrInvalidGrant):
		h.renderDevelopers(w, r, http.StatusUnauthorized, map[string]any{"Error": "The password is not right."})
	default:
		h.internal(w, r, err)
	}
	return false
}

// regenerateKey replaces the mode's API key after the password and an
// explicit confirmation, shows the new key once, and revokes the old key
// and its tokens on every node, as `kadi merchant rotate-key` does.
func (h *Handler) regenerateKey(w http.ResponseWriter, r *http.Request) {
	if r.PostForm.Get("confirm") != "yes" {
		h.renderDevelopers(w, r, http.StatusBadRequest, map[string]any{"Error": "Tick the box to confirm: the current key stops working at once."})
		return
	}
	if !h.reauthenticate(w, r, "password", nil) {
		return
	}
	v := visitOf(r)
	key, err := merchant.RotateKey(r.Context(), h.Store, v.Merchant.Code, v.Sess.Mode, h.Now())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.renderDevelopers(w, r, http.StatusOK, map[string]any{"NewKey": key})
}

// revealSecret shows the mode's notification secret after the password.
func (h *Handler) revealSecret(w http.ResponseWriter, r *http.Request) {
	if !h.reauthenticate(w, r, "password", nil) {
		return
	}
	v := visitOf(r)
	st, err := h.Store.Settings(r.Context(), v.Merchant.Code, v.Sess.Mode)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.audit(r, audit.SecretRevealed, string(v.Sess.Mode))
	h.renderDevelopers(w, r, http.StatusOK, map[string]any{"Secret": st.NotificationSecret})
}

// secretOverlaps are how long the rotation form lets a replaced
// notification secret keep signing beside the new one. A form without the
// choice (a page from before it) gets the first.
var secretOverlaps = map[string]time.Duration{"": 24 * time.Hour, "24h": 24 * time.Hour, "1h": time.Hour, "0": 0}

// rotateSecret replaces the notification secret; notifications are signed
// with the new one from the next attempt on, and with the old one too for
// the overlap chosen: replaced at once, every receiver's signature check
// failed until it was given the new secret.
func (h *Handler) rotateSecret(w http.ResponseWriter, r *http.Request) {
	// One click beside "Reveal" replaced it: every receiver's signature
	// check failed at once.
	if r.PostForm.Get("confirm") != "yes" {
		h.renderDevelopers(w, r, http.StatusBadRequest, map[string]any{"Error": "Tick the box to confirm: notifications are signed with the new secret at once."})
		return
	}
	overlap, ok := secretOverlaps[r.PostForm.Get("overlap")]
	if !ok {
		h.renderDevelopers(w, r, http.StatusBadRequest, map[string]any{"Error": "Choose how long the old secret keeps signing: 24 hours, 1 hour or no time."})
		return
	}
	if !h.reauthenticate(w, r, "password", nil) {
		return
	}
	v := visitOf(r)
	s := secret.NewNotificationSecret()
	var until time.Time
	if overlap > 0 {
		until = h.Now().Add(overlap)
	}
	if err := h.Store.SetNotificationSecret(r.Context(), v.Merchant.Code, v.Sess.Mode, s, until); err != nil {
		h.internal(w, r, err)
		return
	}
	data := map[string]any{"Secret": s, "Rotated": true}
	if !until.IsZero() {
		data["PreviousUntil"] = &until
	}
	h.renderDevelopers(w, r, http.StatusOK, data)
}

// endOverlap stops the secret a rotation replaced from signing, after the
// password and a confirmation that the receivers check the new one: the
// only way before was another rotation with no overlap, which replaced
// the secret the receivers had just been given.
func (h *Handler) endOverlap(w http.ResponseWriter, r *http.Request) {
	if r.PostForm.Get("confirm") != "yes" {
		h.renderDevelopers(w, r, http.StatusBadRequest, map[string]any{"Error": "Tick the box to confirm: a receiver that checks only the replaced secret refuses notifications from now on."})
		return
	}
	if !h.reauthenticate(w, r, "password", nil) {
		return
	}
	v := visitOf(r)
	// The overlap the page showed: one begun since by another rotation
	// (another tab, the CLI) is not ended in its place.
	var until time.Time
	if ms, err := strconv.ParseInt(r.PostForm.Get("until"), 10, 64); err == nil && ms > 0 {
		until = time.UnixMilli(ms)
	}
	ended, err := h.Store.EndSecretOverlap(r.Context(), v.Merchant.Code, v.Sess.Mode, until, h.Now())
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if !ended && !until.IsZero() {
		if st, err := h.Store.Settings(r.Context(), v.Merchant.Code, v.Sess.Mode); err == nil && len(st.SigningSecrets(h.Now())) > 1 {
			h.renderDevelopers(w, r, http.StatusConflict, map[string]any{"Error": "The secret was replaced again since this page was shown: nothing was ended. Check which secret your receivers hold, then end the overlap below if they hold the current one."})
			return
		}
	}
	note := "The replaced secret no longer signs: notifications are signed with the current one only."
	if !ended {
		note = "No replaced secret was signing: notifications are signed with the current one only."
	}
	h.renderDevelopers(w, r, http.StatusOK, map[string]any{"Note": note})
}
