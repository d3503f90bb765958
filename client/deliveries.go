package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

const deliveriesPath = "/payment/v2/notifications"

// Delivery statuses: where a notification stands in the gateway's delivery
// log.
const (
	// DeliveryPending: not yet acknowledged; the gateway tries again at
	// [Delivery.NextAttemptAt].
	DeliveryPending = "pending"
	// DeliveryParked: waiting for the mode to have a usable IPN URL; it is
	// sent when one is saved (within three days) or replayed.
	DeliveryParked = "parked"
	// DeliveryDelivered: the receiver answered 2xx.
	DeliveryDelivered = "delivered"
	// DeliveryFailed: every retry failed; only a replay sends it again.
	DeliveryFailed = "failed"
)

// Delivery is one notification in the gateway's delivery log: what was
// sent and how its delivery went. The log is the merchant's own, for the
// mode of the client's API key.
type Delivery struct {
	// ID is the notification's webhook-id, the same as [Notification.ID]
	// when it arrives.
	ID        string
	PaymentID string
	Status    string // one of the Delivery* statuses
	// Attempts counts the requests of the current round: a replay starts
	// a new round at 0. Replays counts the rounds a replay started;
	// History holds every request of every round.
	Attempts int
	Replays  int
	// CreatedAt is when the payment queued it. NextAttemptAt is set only
	// while pending; DeliveredAt only once delivered.
	CreatedAt, NextAttemptAt, DeliveredAt time.Time
	LastError                             string
	// Payload is the notification's body exactly as sent.
	Payload json.RawMessage
	// History is every request made to the receiver, oldest first; only
	// [Client.Delivery] fills it.
	History []DeliveryAttempt
}

// DeliveryAttempt is one request to the merchant's IPN receiver.
type DeliveryAttempt struct {
	Seq int
	At  time.Time
	URL string
	// StatusCode is the receiver's HTTP status; 0 when it gave none (a
	// refused connection, a timeout).
	StatusCode int
	Latency    time.Duration
	Error      string
	// Response is the start of the receiver's body.
	Response string
}

// DeliveryFilter narrows [Client.Deliveries]. The zero value lists the
// newest 100 of every status.
type DeliveryFilter struct {
	Status string // one of the Delivery* statuses; empty: all
	// Limit is 1 to 500, checked by the gateway (any other is an
	// invalid_request there); 0 means the gateway's default, 100.
	Limit int
	// Before is the ID of the last delivery of a page: the next page
	// starts after it.
	Before string
	// PaymentID finds one payment's notification.
	PaymentID string
}

type deliveryBody struct {
	ID            string  `json:"id"`
	PaymentID     string  `json:"paymentId"`
	Status        string  `json:"status"`
	Attempts      int     `json:"attempts"`
	Replays       int     `json:"replays"`
	CreatedAt     string  `json:"createdAt"`
	NextAttemptAt *string `json:"nextAttemptAt"`
	DeliveredAt   *string `json:"deliveredAt"`
	LastError     string  `json:"lastError"`
	// Payload is raw JSON; kept as such so the merchant sees the bytes
	// that were signed.
	Payload json.RawMessage `json:"payload"`
	History []struct {
		Seq        int    `json:"seq"`
		At         string `json:"at"`
		URL        string `json:"url"`
		StatusCode int    `json:"statusCode"`
		LatencyMs  int64  `json:"latencyMs"`
		Error      string `json:"error"`
		Response   string `json:"response"`
	} `json:"history"`
}

// Deliveries lists the delivery log, newest first. To page, pass the last
// ID of a page as the next filter's Before; an empty page is the end.
//
// The delivery log takes the API key itself, never a token: tokens reach
// shoppers' browsers, and the log shows every customer's payments.
func (c *Client) Deliveries(ctx context.Context, f DeliveryFilter) ([]Delivery, error) {
	q := url.Values{}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Limit != 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Before != "" {
		q.Set("before", f.Before)
	}
	if f.PaymentID != "" {
		q.Set("paymentId", f.PaymentID)
	}
	resp, err := c.doKey(ctx, http.MethodGet, deliveriesPath, q, nil)
	if err != nil {
		return nil, err
	}
	var list struct {
		Notifications []deliveryBody `json:"notifications"`
	}
	if err := json.Unmarshal(resp.body, &list); err != nil || list.Notifications == nil {
		return nil, malformed(resp, "delivery log without notifications")
	}
	out := make([]Delivery, len(list.Notifications))
	for i, b := range list.Notifications {
		if out[i], err = b.delivery(); err != nil {
			return nil, malformed(resp, err.Error())
		}
	}
	return out, nil
}

// Delivery reads one notification of the log with its History. An ID the
// merchant does not own, in this mode, is an [*APIError] matching
// [ErrNotFound].
func (c *Client) Delivery(ctx context.Context, id string) (*Delivery, error) {
	return c.oneDelivery(ctx, http.MethodGet, id, "")
}

// Redeliver sends a notification again now, as a new round of attempts
// with the same webhook-id (a receiver that records by ID ignores it if
// it has it). Use it after fixing a receiver that failed every retry.
func (c *Client) Redeliver(ctx context.Context, id string) (*Delivery, error) {
	return c.oneDelivery(ctx, http.MethodPost, id, "/replay")
}

func (c *Client) oneDelivery(ctx context.Context, method, id, suffix string) (*Delivery, error) {
	if id == "" {
		return nil, errors.New("kadi: a delivery needs its ID")
	}
	resp, err := c.doKey(ctx, method, deliveriesPath+"/"+url.PathEscape(id)+suffix, nil, nil)
	if err != nil {
		return nil, err
	}
	var b deliveryBody
	if err := json.Unmarshal(resp.body, &b); err != nil || b.ID == "" {
		return nil, malformed(resp, "delivery without id")
	}
	d, err := b.delivery()
	if err != nil {
		return nil, malformed(resp, err.Error())
	}
	return &d, nil
}

func (b deliveryBody) delivery() (Delivery, error) {
	d := Delivery{ID: b.ID, PaymentID: b.PaymentID, Status: b.Status, Attempts: b.Attempts, Replays: b.Replays,
		LastError: b.LastError, Payload: b.Payload}
	var err error
	date := func(name, v string, into *time.Time) {
		if err != nil || v == "" {
			return
		}
		if *into, err = parseDate(v); err != nil {
			err = fmt.Errorf("delivery %s: %s: %w", b.ID, name, err)
		}
	}
	date("createdAt", b.CreatedAt, &d.CreatedAt)
	if b.NextAttemptAt != nil {
		date("nextAttemptAt", *b.NextAttemptAt, &d.NextAttemptAt)
	}
	if b.DeliveredAt != nil {
		date("deliveredAt", *b.DeliveredAt, &d.DeliveredAt)
	}
	for _, h := range b.History {
		a := DeliveryAttempt{Seq: h.Seq, URL: h.URL, StatusCode: h.StatusCode,
			Latency: time.Duration(h.LatencyMs) * time.Millisecond, Error: h.Error, Response: h.Response}
		date("history.at", h.At, &a.At)
		d.History = append(d.History, a)
	}
	return d, err
}
