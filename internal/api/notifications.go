package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/ipn"
)

// Notifications is the IPN delivery log a merchant may read and replay.
type Notifications interface {
	IPNEvents(ctx context.Context, f ipn.Filter) ([]ipn.Event, error)
	IPNEvent(ctx context.Context, id string) (ipn.Event, error)
	IPNAttempts(ctx context.Context, id string) ([]ipn.Attempt, error)
	ReplayIPN(ctx context.Context, id string, now time.Time, actor string) (ipn.Event, error)
}

// NotificationResponse is one IPN event as a merchant sees it: what was
// sent, where it stands, and (for a single event) every attempt.
type NotificationResponse struct {
	ID            string            `json:"id"` // the webhook-id header
	PaymentID     string            `json:"paymentId"`
	Status        string            `json:"status"` // pending, parked, delivered, failed
	Attempts      int               `json:"attempts"`
	Replays       int               `json:"replays"`
	CreatedAt     string            `json:"createdAt"`
	NextAttemptAt *string           `json:"nextAttemptAt"`
	DeliveredAt   *string           `json:"deliveredAt"`
	LastError     string            `json:"lastError"`
	Payload       json.RawMessage   `json:"payload"`
	History       []AttemptResponse `json:"history,omitempty"`
}

// AttemptResponse is one request to the merchant's receiver.
type AttemptResponse struct {
	Seq        int    `json:"seq"`
	At         string `json:"at"`
	URL        string `json:"url"`
	StatusCode int    `json:"statusCode"` // 0: no HTTP answer
	LatencyMs  int64  `json:"latencyMs"`
	Error      string `json:"error"`
	Response   string `json:"response"` // the start of the receiver's body
}

var (
	errNotificationNotFound = errors.New("no notification with that id for this merchant and mode")
	errBadNotificationQuery = errors.New("the notifications query is not valid")
	notificationID          = regexp.MustCompile(`^msg_[0-9a-f]{24}$`)
)

// notIDRune is outside the ids Kadi draws (a prefix, "_", letters and
// digits).
func notIDRune(r rune) bool { return r != '_' && notAlnum(r) }

// badNotificationQuery names the one parameter at fault: one sentence
// listing every rule never said which.
func badNotificationQuery(rule string) error {
	return fmt.Errorf("%w: %s", errBadNotificationQuery, rule)
}

func (h *Handler) listNotifications(w http.ResponseWriter, r *http.Request) {
	c := claimsOf(r)
	f := ipn.Filter{MerchantCode: c.MerchantCode, Mode: c.Mode, Limit: 100}
	st, err := ipn.ParseStatus(r.URL.Query().Get("status"))
	if err != nil {
		h.fail(w, r, badNotificationQuery(err.Error()))
		return
	}
	f.Status = st
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			h.fail(w, r, badNotificationQuery("limit must be a whole number from 1 to 500"))
			return
		}
		f.Limit = n
	}
	// before pages past the newest 500 (the last id of a page gives the
	// next); paymentId finds one payment's event.
	if v := r.URL.Query().Get("before"); v != "" {
		if !notificationID.MatchString(v) {
			h.fail(w, r, badNotificationQuery("before must be a notification id (msg_…), the last of the page before"))
			return
		}
		f.Before = v
	}
	if v := r.URL.Query().Get("paymentId"); v != "" {
		if len(v) > 64 || !strings.HasPrefix(v, "pay_") || strings.IndexFunc(v, notIDRune) >= 0 {
			h.fail(w, r, badNotificationQuery("paymentId must be a payment id (pay_…)"))
			return
		}
		f.PaymentID = v
	}
	evs, err := h.Notifications.IPNEvents(r.Context(), f)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := make([]NotificationResponse, len(evs))
	for i, ev := range evs {
		out[i] = h.notification(ev)
	}
	writeJSON(w, http.StatusOK, map[string]any{"notifications": out})
}

func (h *Handler) showNotification(w http.ResponseWriter, r *http.Request) {
	ev, err := h.merchantsEvent(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	atts, err := h.Notifications.IPNAttempts(r.Context(), ev.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	resp := h.notification(ev)
	resp.History = make([]AttemptResponse, len(atts))
	for i, a := range atts {
		resp.History[i] = AttemptResponse{Seq: a.Seq, At: h.iso(a.At), URL: a.URL, StatusCode: a.StatusCode,
			LatencyMs: a.Latency.Milliseconds(), Error: a.Error, Response: a.Response}
	}
	writeJSON(w, http.StatusOK, resp)
}

// replayNotification sends an event again as a new round with the same
// webhook-id, as `kadi ipn replay` does; it is audit-logged.
func (h *Handler) replayNotification(w http.ResponseWriter, r *http.Request) {
	ev, err := h.merchantsEvent(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ev, err = h.Notifications.ReplayIPN(r.Context(), ev.ID, time.Now(), "api")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, h.notification(ev))
}

// merchantsEvent loads the event named in the path if it belongs to the
// token's merchant and mode; anyone else's looks exactly like a missing one.
func (h *Handler) merchantsEvent(r *http.Request) (ipn.Event, error) {
	c, id := claimsOf(r), r.PathValue("id")
	if !notificationID.MatchString(id) {
		return ipn.Event{}, errNotificationNotFound
	}
	ev, err := h.Notifications.IPNEvent(r.Context(), id)
	if errors.Is(err, ipn.ErrNotFound) || (err == nil && (ev.MerchantCode != c.MerchantCode || ev.Mode != c.Mode)) {
		return ipn.Event{}, errNotificationNotFound
	}
	return ev, err
}

func (h *Handler) notification(ev ipn.Event) NotificationResponse {
	resp := NotificationResponse{ID: ev.ID, PaymentID: ev.PaymentID, Status: string(ev.Status), Attempts: ev.Attempts,
		Replays: ev.Replays, CreatedAt: h.iso(ev.CreatedAt), LastError: ev.LastError, Payload: json.RawMessage(ev.Payload)}
	if ev.Status == ipn.Pending {
		next := h.iso(ev.NextAttemptAt)
		resp.NextAttemptAt = &next
	}
	if !ev.DeliveredAt.IsZero() {
		at := h.iso(ev.DeliveredAt)
		resp.DeliveredAt = &at
	}
	return resp
}

func (h *Handler) iso(t time.Time) string { return t.In(h.Location).Format(isoOffset) }
