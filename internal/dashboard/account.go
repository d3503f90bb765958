package dashboard

import (
	"context"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/pquerna/otp/totp"
	"rsc.io/qr"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// totpSecretSize is a second factor's secret in bytes: RFC 4226 asks for
// 160 bits.
const totpSecretSize = 20

func (h *Handler) security(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "security.html", h.takeNote(w, r, map[string]any{}))
}

// changePassword needs the current password; the new one follows the
// onboarding rules and differs from the current. Every other session ends.
func (h *Handler) changePassword(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	next := r.PostForm.Get("new")
	switch err := secret.CheckPasswordStrength(next); {
	case errors.Is(err, secret.ErrPasswordText):
		h.render(w, r, http.StatusBadRequest, "security.html", map[string]any{"Error": "The new password can hold letters, digits, spaces and symbols, up to 200 bytes: no tabs, line breaks or other control characters."})
		return
	case err != nil:
		h.render(w, r, http.StatusBadRequest, "security.html", map[string]any{"Error": "The new password needs at least 12 characters, with letters and digits."})
		return
	}
	if next != r.PostForm.Get("confirm") {
		h.render(w, r, http.StatusBadRequest, "security.html", map[string]any{"Error": "The two new passwords differ."})
		return
	}
	if !h.reauthenticate(w, r, "current", func() {
		h.render(w, r, http.StatusUnauthorized, "security.html", map[string]any{"Error": "The current password is not right."})
	}) {
		return
	}
	if ok, _ := secret.CheckPassword(v.Merchant.PasswordHash, next); ok {
		h.render(w, r, http.StatusBadRequest, "security.html", map[string]any{"Error": "The new password must differ from the current one."})
		return
	}
	if err := h.Store.SetPassword(r.Context(), v.Merchant.Code, secret.HashPassword(next)); err != nil {
		h.internal(w, r, err)
		return
	}
	if err := h.Store.DeleteSessions(r.Context(), v.Merchant.Code, v.Sess.IDHash); err != nil {
		h.internal(w, r, err)
		return
	}
	h.audit(r, audit.PasswordChange, "other sessions signed out")
	h.back(w, r, "/dashboard/security", "Password changed. Every other session is signed out. Your shop's server must now send the new password for tokens (POST /identity/v2/token and POST /token).")
}

// startTOTP shows a new secret as a QR code (rendered here, no third
// party) and as text, to confirm with a first code.
func (h *Handler) startTOTP(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	if v.TOTPOn {
		h.fail(w, r, http.StatusConflict, "Two-step verification is already on", "It stays as it is.")
		return
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: "Kadi", AccountName: v.Merchant.Code, SecretSize: totpSecretSize})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	h.renderEnrolment(w, r, http.StatusOK, key.Secret(), "")
}

// renderEnrolment is the security page showing secret to scan or type, with
// errMsg when a confirmation was refused.
func (h *Handler) renderEnrolment(w http.ResponseWriter, r *http.Request, status int, secret, errMsg string) {
	// What authenticator apps read (github.com/google/google-authenticator/wiki/Key-Uri-Format).
	u := url.URL{Scheme: "otpauth", Host: "totp", Path: "/Kadi:" + visitOf(r).Merchant.Code, RawQuery: url.Values{
		"secret": {secret}, "issuer": {"Kadi"}, "algorithm": {"SHA1"}, "digits": {"6"}, "period": {"30"}}.Encode()}
	code, err := qr.Encode(u.String(), qr.M)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	// PNG, not png.Encode(code.Image()): rsc.io/qr v0.2.0's Image draws
	// the modules one pixel each in its corner, a code no app can scan.
	h.render(w, r, status, "security.html", map[string]any{"Enrol": secret, "Error": errMsg,
		"QR": template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(code.PNG()))})
}

// confirmTOTP turns the second factor on once a code from the new secret
// checks out and the password is given again (a session alone, left open
// on a shared computer, must not be able to lock its merchant out behind
// someone else's app), and shows the recovery codes once (only their
// hashes are kept). Every other session ends: none of them proved the new
// factor. A factor already on is not replaced here.
func (h *Handler) confirmTOTP(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	if v.TOTPOn {
		h.fail(w, r, http.StatusConflict, "Two-step verification is already on", "It stays as it is.")
		return
	}
	sec, err1 := formValue(r, "secret", 64)
	code, err2 := formValue(r, "code", 10)
	if err1 != nil || err2 != nil || !enrolmentSecret(sec) {
		h.fail(w, r, http.StatusBadRequest, "Enrolment form not valid", "Start again from Security.")
		return
	}
	step, ok := totpStep(sec, strings.ReplaceAll(code, " ", ""), h.Now())
	if !ok {
		h.renderEnrolment(w, r, http.StatusBadRequest, sec, "That code is not right: enter the 6 digits your app shows now.")
		return
	}
	if !h.reauthenticate(w, r, "password", func() {
		h.renderEnrolment(w, r, http.StatusUnauthorized, sec, "The password is not right.")
	}) {
		return
	}
	codes := make([]string, 10)
	hashes := make([]string, len(codes))
	for i := range codes {
		c := secret.RandomString(10, secret.Unambiguous)
		codes[i] = c[:5] + "-" + c[5:]
		hashes[i] = recoveryHash(codes[i])
	}
	if err := h.Store.EnableTOTP(r.Context(), v.Merchant.Code, sec, hashes, h.Now()); errors.Is(err, merchant.ErrTwoStepOn) {
		// Another session confirmed first, while this one checked the
		// password.
		h.fail(w, r, http.StatusConflict, "Two-step verification is already on", "It stays as it is.")
		return
	} else if err != nil {
		h.internal(w, r, err)
		return
	}
	// The code that confirmed is spent, and this session proved the factor.
	if _, err := h.Store.UseTOTPStep(r.Context(), v.Merchant.Code, step); err != nil {
		h.internal(w, r, err)
		return
	}
	if err := h.Store.DeleteSessions(r.Context(), v.Merchant.Code, v.Sess.IDHash); err != nil {
		h.internal(w, r, err)
		return
	}
	v.Sess.SecondFactor = h.Now()
	if err := h.Store.TouchSession(r.Context(), v.Sess); err != nil {
		h.internal(w, r, err)
		return
	}
	// The page shows the factor on: the visit was read before it was.
	v.TOTPOn = true
	r = r.WithContext(context.WithValue(r.Context(), visitKey{}, v))
	h.render(w, r, http.StatusOK, "security.html", map[string]any{"RecoveryCodes": codes,
		"Note": "Every other session is signed out."})
}

// enrolmentSecret reports whether sec is a secret as startTOTP draws them,
// 160 random bits in base32: the page carries it back, and a secret of a
// few bytes typed into the form instead would make every code guessable
// from a few.
func enrolmentSecret(sec string) bool {
	b, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(sec)
	return err == nil && len(b) >= totpSecretSize
}

func itoa(n int) string { return strconv.Itoa(n) }
