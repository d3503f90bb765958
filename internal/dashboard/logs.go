package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/ipn"
)

var eventID = regexp.MustCompile(`^msg_[0-9a-f]{24}$`)

// ipnLogPage is how many notifications the IPN log shows a page.
const ipnLogPage = 50

// ipnLog lists the mode's notifications, newest first, with every attempt.
func (h *Handler) ipnLog(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	f := ipn.Filter{MerchantCode: v.Merchant.Code, Mode: v.Sess.Mode, Limit: ipnLogPage}
	st, err := ipn.ParseStatus(r.URL.Query().Get("status"))
	before := r.URL.Query().Get("before")
	if err != nil || (before != "" && !eventID.MatchString(before)) {
		h.fail(w, r, http.StatusBadRequest, "Filter not understood", "Status is pending, parked, delivered or failed.")
		return
	}
	f.Status, f.Before = st, before
	evs, err := h.Store.IPNEvents(r.Context(), f)
	if err != nil {
		h.internal(w, r, err)
		return
	}
	// History, not Attempts: a field of that name hid the event's count
	// of attempts, and the page printed the whole slice in its place.
	// What support looks for is the payment a notification is about: its
	// bill, order and amount, read from the payload that was sent.
	type row struct {
		ipn.Event
		History []ipn.Attempt
		About   ipn.PayloadTransaction
	}
	rows := make([]row, len(evs))
	for i, ev := range evs {
		rows[i].Event = ev
		if rows[i].History, err = h.Store.IPNAttempts(r.Context(), ev.ID); err != nil {
			h.internal(w, r, err)
			return
		}
		var p ipn.Payload
		if json.Unmarshal(ev.Payload, &p) == nil {
			rows[i].About = p.Transaction
		}
	}
	// A full page may have more behind it: older ones start after its
	// last.
	next := ""
	if len(evs) == f.Limit {
		q := url.Values{"before": {evs[len(evs)-1].ID}}
		if f.Status != "" {
			q.Set("status", string(f.Status))
		}
		next = "/dashboard/ipn?" + q.Encode()
	}
	h.render(w, r, http.StatusOK, "ipn_log.html", h.takeNote(w, r, map[string]any{"Events": rows, "Status": string(f.Status), "Statuses": ipn.Statuses,
		"Next": next}))
}

// replayIPN sends one event again; another merchant's or mode's event is
// the same 404 as a missing one.
func (h *Handler) replayIPN(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	id := r.PathValue("id")
	if !eventID.MatchString(id) {
		h.notFound(w, r)
		return
	}
	ev, err := h.Store.IPNEvent(r.Context(), id)
	if errors.Is(err, ipn.ErrNotFound) || (err == nil && (ev.MerchantCode != v.Merchant.Code || ev.Mode != v.Sess.Mode)) {
		h.notFound(w, r)
		return
	} else if err != nil {
		h.internal(w, r, err)
		return
	}
	// The store audits the replay, with this actor, in its transaction.
	if _, err := h.Store.ReplayIPN(r.Context(), id, h.Now(), "dashboard "+clientIP(r)); err != nil {
		h.internal(w, r, err)
		return
	}
	// Back to the list the replay was made from, its filter kept.
	to := "/dashboard/ipn"
	if st, err := ipn.ParseStatus(r.PostForm.Get("from_status")); err == nil && st != "" {
		to += "?status=" + url.QueryEscape(string(st))
	}
	h.back(w, r, to, "Notification "+id+" is on its way again.")
}

// auditLog shows who did what, when and from where.
func (h *Handler) auditLog(w http.ResponseWriter, r *http.Request) {
	v := visitOf(r)
	var evs []audit.Event
	var err error
	if before := r.URL.Query().Get("before"); before != "" {
		at, id, perr := parseCursor(before, auditID.MatchString)
		if perr != nil {
			h.fail(w, r, http.StatusBadRequest, "Page not understood", "Go back to the audit log and follow its links.")
			return
		}
		evs, err = h.Store.AuditEventsBefore(r.Context(), v.Merchant.Code, at, id, auditLogPage)
	} else {
		evs, err = h.Store.AuditEvents(r.Context(), v.Merchant.Code, auditLogPage)
	}
	if err != nil {
		h.internal(w, r, err)
		return
	}
	if !v.verified() {
		// The log covers both modes; live settings it names are for a
		// session that passed two-step verification, as live mode is.
		for i := range evs {
			if audit.LiveDetail(evs[i].Detail) {
				evs[i].Detail = "(live mode: shown after two-step verification)"
			}
		}
	}
	next := ""
	if len(evs) == auditLogPage {
		last := evs[len(evs)-1]
		next = "/dashboard/audit?" + url.Values{"before": {cursor(last.At, last.ID)}}.Encode()
	}
	h.render(w, r, http.StatusOK, "audit.html", map[string]any{"Events": evs, "Next": next})
}

// auditLogPage is how many events the audit log shows a page; auditID is
// the shape of an event's id.
const auditLogPage = 100

var auditID = regexp.MustCompile(`^aud_[0-9a-f]{24}$`)
