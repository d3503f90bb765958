package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Sentinel errors. The first three classify an [*APIError] through
// [errors.Is], so callers can branch without knowing status codes.
var (
	// ErrNotFound matches an APIError for something the gateway does not
	// know, such as [Client.Verify] of a reference that was never billed.
	// Another merchant's bill is reported the same way. A 404 of a path
	// the gateway does not serve (a wrong BaseURL) does not match it.
	ErrNotFound = errors.New("kadi: not found")

	// ErrUnauthorized matches an APIError for refused credentials: a wrong
	// API key, username or password, or a token that stayed invalid after
	// the client fetched a fresh one.
	ErrUnauthorized = errors.New("kadi: unauthorized")

	// ErrRateLimited matches an APIError for HTTP 429. The gateway locks a
	// credential out after repeated failures; APIError.RetryAfter says for
	// how long.
	ErrRateLimited = errors.New("kadi: rate limited")

	// ErrInvalidConfig is wrapped by the error [New] returns for a Config it
	// cannot work with.
	ErrInvalidConfig = errors.New("kadi: invalid config")

	// ErrMalformedResponse is wrapped when the gateway answers with success
	// but a body this client cannot read, such as an HTML page from a proxy.
	ErrMalformedResponse = errors.New("kadi: malformed response")

	// ErrInvalidCallback is wrapped by every error [ParseCallback] returns.
	ErrInvalidCallback = errors.New("kadi: invalid callback")
)

// noSuchEndpoint is the gateway's message for a path it does not serve.
const noSuchEndpoint = "no such endpoint"

// APIError is the gateway's refusal of a request. Quote RequestID to
// support: the gateway's logs carry the same id.
type APIError struct {
	StatusCode int
	// Code is machine-readable: an OAuth error ("invalid_grant") from the
	// token endpoint, the gateway's error code elsewhere. May be empty.
	Code      string
	Message   string
	RequestID string
	// Fields lists every rule a rejected bill broke, all at once, so a form
	// can show them together.
	Fields []FieldError
	// RetryAfter is how long the gateway asked the client to wait, from the
	// Retry-After header; zero when it did not say.
	RetryAfter time.Duration
}

// FieldError is one broken rule of a request, Field naming it the way the
// JSON body does ("order.amount").
type FieldError struct {
	Field, Code, Message string
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "kadi: HTTP %d", e.StatusCode)
	if e.Code != "" {
		fmt.Fprintf(&b, " %s", e.Code)
	}
	if e.Message != "" {
		fmt.Fprintf(&b, ": %s", e.Message)
	}
	for i, f := range e.Fields {
		sep := "; "
		if i == 0 {
			sep = " ("
		}
		fmt.Fprintf(&b, "%s%s: %s", sep, f.Field, f.Message)
	}
	if len(e.Fields) > 0 {
		b.WriteString(")")
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, ", retry after %s", e.RetryAfter)
	}
	if e.RequestID != "" {
		fmt.Fprintf(&b, " [request id %s]", e.RequestID)
	}
	return b.String()
}

// Is lets errors.Is classify an APIError by the sentinels above.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		// Not any 404: a BaseURL with a wrong path reaches no endpoint (the
		// gateway's "no such endpoint", a proxy's page), which a shop must
		// not take for a reference never billed.
		return e.StatusCode == http.StatusNotFound && e.Code == "not_found" && e.Message != noSuchEndpoint
	case ErrUnauthorized:
		// Kadi answers invalid_grant with 401; gateways that follow RFC
		// 6749 §5.2 to the letter send 400. Either is a refused login.
		return e.StatusCode == http.StatusUnauthorized || e.StatusCode == http.StatusForbidden ||
			e.Code == "invalid_client" || e.Code == "invalid_grant"
	case ErrRateLimited:
		return e.StatusCode == http.StatusTooManyRequests
	}
	return false
}
