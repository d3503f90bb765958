// Package api serves the merchant-facing JSON endpoints of the spec:
// tokens, bills and verification. Handlers decode, call a service, encode;
// errors are turned into HTTP answers in one place (errors.go).
package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
)

// Merchants finds the merchant a token belongs to.
type Merchants interface {
	MerchantByCode(ctx context.Context, code string) (merchant.Merchant, error)
}

// Payments answers verification queries.
type Payments interface {
	SuccessfulPayment(ctx context.Context, billRef string) (payment.Payment, error)
	LatestPayment(ctx context.Context, billRef string) (payment.Payment, error)
}

// Handler serves the API.
type Handler struct {
	Auth      *auth.Service
	Bills     *bill.Service
	Merchants Merchants
	Payments  Payments
	// Notifications is the IPN delivery log, scoped per merchant and mode.
	Notifications Notifications
	Location      *time.Location
	Log           *slog.Logger
}

// Register adds the API's routes to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /identity/v2/token", h.accessToken)
	mux.HandleFunc("POST /token", h.paymentToken)
	// A refused bill, including one refused for its token, keeps the
	// bill's shape (status false, remarks): integrations read only those.
	mux.HandleFunc("POST /payment/v2/bills", h.bearer(h.createBill, func(w http.ResponseWriter, r *http.Request, err error) {
		h.failBill(w, r, bill.Request{}, err)
	}))
	mux.HandleFunc("GET /payment/v2/query", h.bearer(h.query, h.fail))
	mux.HandleFunc("GET /payment/v2/notifications", h.bearer(h.listNotifications, h.fail))
	mux.HandleFunc("GET /payment/v2/notifications/{id}", h.bearer(h.showNotification, h.fail))
	mux.HandleFunc("POST /payment/v2/notifications/{id}/replay", h.bearer(h.replayNotification, h.fail))
}

type claimsKey struct{}

// bearer admits requests with a valid token and hands the claims on.
func (h *Handler) bearer(next http.HandlerFunc, fail func(http.ResponseWriter, *http.Request, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			token = ""
		}
		c, err := h.Auth.Verify(strings.TrimSpace(token))
		if err != nil {
			fail(w, r, err)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), claimsKey{}, c)))
	}
}

func claimsOf(r *http.Request) auth.Claims {
	c, _ := r.Context().Value(claimsKey{}).(auth.Claims)
	return c
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
