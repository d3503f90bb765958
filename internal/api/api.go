// Package api serves the merchant-facing JSON endpoints of the spec:
// tokens, bills and verification. Handlers decode, call a service, encode;
// errors are turned into HTTP answers in one place (errors.go).
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/clientaddr"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/payment"
)

// Merchants finds the merchant a token belongs to.
type Merchants interface {
	MerchantByCode(ctx context.Context, code string) (merchant.Merchant, error)
}

// Verifications answers verification queries.
type Verifications interface {
	// Verification finds a merchant's bill by its reference or order
	// reference, with its successful payment or else its latest attempt.
	Verification(ctx context.Context, merchantCode string, mode merchant.Mode, ref string) (payment.Verification, error)
}

// Handler serves the API.
type Handler struct {
	Auth          *auth.Service
	Bills         *bill.Service
	Merchants     Merchants
	Verifications Verifications
	// Notifications is the IPN delivery log, scoped per merchant and mode.
	Notifications Notifications
	// Payments says which modes can take a card: a bill of one that
	// cannot is refused when created, where the merchant's engineers see
	// it, not when its shopper pays.
	Payments *payment.Service
	Location *time.Location
	Log      *slog.Logger
}

// credential is what a route takes as proof of who is calling.
type credential int

const (
	// accessToken is a bearer token of scope api (POST /identity/v2/token):
	// the spec's endpoints take it exactly as the spec says.
	accessToken credential = iota
	// apiKey is the mode's API key as HTTP Basic, as the token call takes
	// it. Bearer tokens reach shoppers' browsers (the spec's form carries
	// one), so routes that show or act on other customers' data take this.
	apiKey
)

// route is one row of the table of who may call what.
type route struct {
	pattern string
	takes   credential
	handler http.HandlerFunc
}

// routes is the API's access table (docs/security.md); the token
// endpoints authenticate by themselves, and the hosted form's own rules
// live in package form. A test walks every credential against every row.
func (h *Handler) routes() []route {
	return []route{
		{"POST /payment/v2/bills", accessToken, h.createBill},
		{"GET /payment/v2/query", accessToken, h.query},
		{"GET /payment/v2/notifications", apiKey, h.listNotifications},
		{"GET /payment/v2/notifications/{id}", apiKey, h.showNotification},
		{"POST /payment/v2/notifications/{id}/replay", apiKey, h.replayNotification},
	}
}

// Register adds the API's routes to mux. Every path also answers with a
// trailing slash (one PHP sample posts to /token/), and /v1/token is
// /token under the base URL older integrations hard-code.
func (h *Handler) Register(mux *http.ServeMux) {
	handle := func(pattern string, hf http.HandlerFunc) {
		mux.HandleFunc(pattern, hf)
		mux.HandleFunc(pattern+"/{$}", hf)
	}
	handle("POST /identity/v2/token", h.accessToken)
	handle("POST /token", h.paymentToken)
	handle("POST /v1/token", h.paymentToken)
	for _, rt := range h.routes() {
		fail := h.fail
		if rt.pattern == "POST /payment/v2/bills" {
			// A refused bill, including one refused for its token, keeps
			// the bill's shape (status false, remarks): integrations read
			// only those.
			fail = func(w http.ResponseWriter, r *http.Request, err error) { h.failBill(w, r, bill.Request{}, err) }
		}
		handle(rt.pattern, h.authenticate(rt.takes, rt.handler, fail))
	}
}

type claimsKey struct{}

// errKeyForBearer: HTTP Basic (an API key) where the route takes an access
// token, answered as invalid_token but saying so; errBearerForKey is the
// other way round.
var errKeyForBearer = errors.New("this endpoint takes an access token from POST /identity/v2/token as Authorization: Bearer <token>, not the API key")

// errPayOnlyToken: a valid payment-token on a route that takes access
// tokens.
var errPayOnlyToken = errors.New("a payment-token from POST /token is for the hosted payment form only; use an access token from POST /identity/v2/token")

// errBearerForKey: an access token where the route takes the API key (the
// notifications API), answered as invalid_client but saying so: "the API
// key is not valid" sent integrators to regenerate a key that was fine.
var errBearerForKey error = bearerForKey{}

type bearerForKey struct{}

func (bearerForKey) Error() string {
	return "this endpoint takes the API key as HTTP Basic (Authorization: Basic <API key>), not a bearer token"
}
func (bearerForKey) Is(target error) bool { return target == auth.ErrInvalidClient }

// authenticate admits requests carrying the credential the route takes and
// hands its claims on.
func (h *Handler) authenticate(takes credential, next http.HandlerFunc, fail func(http.ResponseWriter, *http.Request, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var c auth.Claims
		var err error
		switch takes {
		case accessToken:
			scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			if strings.EqualFold(scheme, "Basic") {
				err = errKeyForBearer
				break
			}
			if !strings.EqualFold(scheme, "Bearer") {
				token = ""
			}
			c, err = h.Auth.Verify(strings.TrimSpace(token))
			if err == nil && c.Scope != auth.ScopeAPI {
				err = errPayOnlyToken
			}
		case apiKey:
			if scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " "); strings.EqualFold(scheme, "Bearer") {
				err = errBearerForKey
				break
			}
			c, err = h.Auth.AuthenticateKey(r.Context(), apiKeyFromBasic(r.Header.Get("Authorization")), clientIP(r))
		}
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

// readBody reads r's body to its end (the server bounds its size), less a
// byte order mark: .NET's default UTF-8 encoder writes one, and there is
// no doubt about what follows it.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnreadable, err)
	}
	return bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// clientIP is the address throttles, lockouts and audit lines count: the
// one the request middleware decided (behind a trusted proxy, the client it
// names).
func clientIP(r *http.Request) string { return clientaddr.From(r) }
