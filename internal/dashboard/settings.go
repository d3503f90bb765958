package dashboard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/form"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
)

func (h *Handler) ipnSettings(w http.ResponseWriter, r *http.Request) {
	h.renderIPNSettings(w, r, http.StatusOK, h.takeNote(w, r, map[string]any{}))
}

func (h *Handler) renderIPNSettings(w http.ResponseWriter, r *http.Request, status int, data map[string]any) {
	v := visitOf(r)
	st, err := h.Store.Settings(r.Context(), v.Merchant.Code, v.Sess.Mode)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	data["Settings"] = st.IPN
	if _, ok := data["Origins"]; !ok {
		data["Origins"] = strings.Join(st.CallbackOrigins, "\n")
	}
	data["HasPassword"] = st.IPN.Password != ""
	if _, ok := data["URL"]; !ok {
		data["URL"], data["Username"] = st.IPN.URL, st.IPN.Username
	}
	h.render(w, r, status, "ipn_settings.html", data)
}

// saveIPNSettings applies the checks `kadi merchant set-ipn` does (live
// https, no private addresses); a blank password keeps the old one, and
// saving re-enables an endpoint a 410 disabled.
func (h *Handler) saveIPNSettings(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	u, err1 := formValue(r, "url", 2048)
	user, err2 := formValue(r, "username", 100)
	pass := r.PostForm.Get("password")
	again := map[string]any{"URL": u, "Username": user}
	if err1 != nil || err2 != nil || len(pass) > 200 || u == "" || user == "" {
		again["Error"] = "The URL and username are required (URL at most 2048 characters, username 100)."
		h.renderIPNSettings(w, r, http.StatusBadRequest, again)
		return
	}
	if err := ipn.CheckUsername(user); err != nil {
		again["Error"] = err.Error()
		h.renderIPNSettings(w, r, http.StatusBadRequest, again)
		return
	}
	if err := ipn.CheckTarget(r.Context(), u, v.Sess.Mode, net.DefaultResolver, h.NAT64Prefixes...); err != nil {
		again["Error"] = err.Error()
		h.renderIPNSettings(w, r, http.StatusBadRequest, again)
		return
	}
	if pass == "" {
		st, err := h.Store.Settings(r.Context(), v.Merchant.Code, v.Sess.Mode)
		if err != nil {
			h.internal(w, r, err)
			return
		}
		if st.IPN.Password == "" {
			again["Error"] = "A password is required: the gateway sends it with every notification."
			h.renderIPNSettings(w, r, http.StatusBadRequest, again)
			return
		}
		pass = st.IPN.Password
	}
	resent, err := h.Store.SetIPN(r.Context(), v.Merchant.Code, v.Sess.Mode, merchant.IPNConfig{URL: u, Username: user, Password: pass})
	if err != nil {
		h.internal(w, r, err)
		return
	}
	note := "Saved."
	if resent > 0 {
		note += " " + ipn.ResentNote(resent)
	}
	if v.Sess.Mode == merchant.Test && !h.AllowPrivateIPN {
		if why := ipn.Unreachable(r.Context(), u, net.DefaultResolver, h.NAT64Prefixes...); why != "" {
			note += " But " + why + ": the gateway will not deliver there unless its operator allows private addresses in test mode."
		}
	}
	h.back(w, r, "/dashboard/settings/ipn", note)
}

// testIPN sends a signed sample notification to the configured URL and
// shows what the receiver answered.
func (h *Handler) testIPN(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	a, err := h.IPN.Test(context.WithoutCancel(r.Context()), v.Merchant.Code, v.Sess.Mode)
	detail := string(v.Sess.Mode) + ": " + a.URL + " answered " + a.Error
	if err != nil {
		h.renderIPNSettings(w, r, http.StatusOK, map[string]any{"TestError": err.Error()})
		return
	}
	if a.StatusCode > 0 {
		detail = string(v.Sess.Mode) + ": " + a.URL + " answered HTTP " + itoa(a.StatusCode)
	}
	h.audit(r, audit.IPNTested, detail)
	a.Latency = a.Latency.Round(time.Microsecond) // as the log keeps attempts' latencies
	h.renderIPNSettings(w, r, http.StatusOK, map[string]any{"Test": a})
}

// saveCallbackOrigins registers the origins the mode's hosted-form
// results may go back to, as `kadi merchant set-callbacks` does; none
// allows any callbackUrl.
func (h *Handler) saveCallbackOrigins(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	list := r.PostForm.Get("origins")
	origins, err := form.ParseCallbackOrigins(list, v.Sess.Mode)
	if len(list) > 2000 {
		err = errors.New("at most 2,000 characters")
	}
	if err != nil {
		h.renderIPNSettings(w, r, http.StatusBadRequest, map[string]any{"Origins": list, "OriginsError": err.Error()})
		return
	}
	if err := h.Store.SetCallbackOrigins(r.Context(), v.Merchant.Code, v.Sess.Mode, origins); err != nil {
		h.internal(w, r, err)
		return
	}
	note := "Saved: results go back to any callbackUrl your forms name."
	if len(origins) > 0 {
		note = "Saved: results go back only to " + strings.Join(origins, ", ") + "."
	}
	h.back(w, r, "/dashboard/settings/ipn", note)
}
