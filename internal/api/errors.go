package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/outage"
	"github.com/kadipay/kadi/internal/payment"
)

// Error is docs/api.md's error body; every error body has a message.
type Error struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Errors  []bill.FieldError `json:"errors,omitempty"`
}

// oauthError is RFC 6749 §5.2's shape plus the code and message that
// existing client libraries read (one crashes when code is missing).
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
	Code        string `json:"code"`
	Message     string `json:"message"`
}

// bodyTooLarge is the 413's message; the server's body bound
// (http.MaxBytesReader) is what refuses.
const bodyTooLarge = "request body is larger than 64 KiB"

// errUnreadable: the body could not be read to its end (cut short, a bad
// chunked encoding, a client too slow to send it): the client's doing,
// not an outage of the gateway's, whatever the error under it says.
var errUnreadable = errors.New("the request body could not be read to its end")

// statusClientClosed is what the access log shows for a request whose
// client left before the answer (nginx's 499): nobody reads the answer,
// and nothing failed.
const statusClientClosed = 499

// msgUnavailable is the answer during a database outage. A request may
// be repeated as it is: bills are idempotent by reference.
const msgUnavailable = "the gateway cannot reach its database right now; try again in a few seconds"

// classify decides, for every error the API can meet, its HTTP status and
// its stable code. This is the one place that does. ctx is the request's:
// a request whose client left is 499 whatever the store said of the work
// it stopped (a cancelled statement, a connection given up), and one whose
// time ran out waiting for the database is an outage. judged is err as it
// was decided from, to log.
func classify(ctx context.Context, err error) (status int, code, message string, judged error) {
	kind, judged := outage.Of(ctx, err)
	status, code, message = statusOf(kind, judged)
	return status, code, message, judged
}

// statusOf is classify's table, err's kind told.
func statusOf(kind outage.Kind, err error) (status int, code, message string) {
	var maxBytes *http.MaxBytesError
	var validation *bill.ValidationError
	var locked *auth.LockedError
	var req *auth.RequestError
	switch {
	case kind == outage.ClientLeft:
		return statusClientClosed, "client_closed_request", "the client closed the connection"
	case errors.As(err, &maxBytes):
		return http.StatusRequestEntityTooLarge, "body_too_large", bodyTooLarge
	case errors.As(err, &locked):
		return http.StatusTooManyRequests, "too_many_attempts", locked.Error()
	case errors.Is(err, auth.ErrBusy):
		return http.StatusServiceUnavailable, "temporarily_unavailable", err.Error()
	case errors.Is(err, errPayOnlyToken):
		return http.StatusForbidden, "insufficient_scope", err.Error()
	case errors.Is(err, payment.ErrLiveDisabled):
		return http.StatusServiceUnavailable, "live_disabled", err.Error() + ": live bills cannot be paid here yet; ask the gateway's operator"
	case errors.As(err, &req):
		return http.StatusBadRequest, req.Code, req.Message
	case errors.Is(err, auth.ErrInvalidClient):
		return http.StatusUnauthorized, "invalid_client", err.Error()
	case errors.Is(err, auth.ErrInvalidGrant):
		// 401, not RFC 6749's 400: public clients of the gateway whose API
		// Kadi implements handle only 200 and 401, and a 400 crashes one.
		return http.StatusUnauthorized, "invalid_grant", err.Error()
	case errors.Is(err, auth.ErrTokenExpired), errors.Is(err, auth.ErrTokenRevoked), errors.Is(err, errKeyForBearer):
		return http.StatusUnauthorized, "invalid_token", err.Error()
	case errors.Is(err, auth.ErrInvalidToken), errors.Is(err, merchant.ErrNotFound):
		// A valid token whose merchant is gone is as good as revoked.
		return http.StatusUnauthorized, "invalid_token", auth.ErrInvalidToken.Error()
	case errors.As(err, &validation):
		return http.StatusBadRequest, "invalid_request", "the bill request breaks one or more field rules"
	case errors.Is(err, bill.ErrMalformed):
		return http.StatusBadRequest, "invalid_json", err.Error()
	case errors.Is(err, errUnreadable):
		// Before outage.Is: a body cut short reads as io.ErrUnexpectedEOF
		// and a stalled one as a net.Error, which say "database down"
		// elsewhere.
		return http.StatusBadRequest, "invalid_request", errUnreadable.Error()
	case errors.Is(err, bill.ErrReferenceReused):
		return http.StatusConflict, "duplicate_reference", err.Error()
	case errors.Is(err, bill.ErrNotFound):
		return http.StatusNotFound, "not_found", "no bill with that reference for this merchant"
	case errors.Is(err, errMissingReference), errors.Is(err, errBadReference), errors.Is(err, errRepeatedReference), errors.Is(err, errBadNotificationQuery):
		return http.StatusBadRequest, "invalid_request", err.Error()
	case errors.Is(err, errNotificationNotFound):
		return http.StatusNotFound, "not_found", err.Error()
	case kind == outage.Unavailable:
		return http.StatusServiceUnavailable, "temporarily_unavailable", msgUnavailable
	case errors.Is(err, context.Canceled):
		return statusClientClosed, "client_closed_request", "the client closed the connection"
	}
	return http.StatusInternalServerError, "internal_error", "internal error"
}

// fail answers with err's status and logs it once: server faults at error
// level; caller mistakes, an outage and a client gone on the access line.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	status, code, message, err := classify(r.Context(), err)
	if status == http.StatusInternalServerError {
		h.Log.ErrorContext(r.Context(), "request failed", "err", err)
		message = "internal error; quote the X-Request-Id header to support"
	} else {
		logging.Refused(r.Context(), h.Log, "request refused", "code", code, "err", err)
	}
	authHeaders(w, err, code)
	body := Error{Code: code, Message: message}
	var validation *bill.ValidationError
	if errors.As(err, &validation) {
		body.Errors = validation.Fields
	}
	writeJSON(w, status, body)
}

// failOAuth answers a token request in the OAuth 2.0 error shape.
func (h *Handler) failOAuth(w http.ResponseWriter, r *http.Request, err error) {
	status, code, message, err := classify(r.Context(), err)
	if status == http.StatusInternalServerError {
		h.fail(w, r, err)
		return
	}
	logging.Refused(r.Context(), h.Log, "token refused", "code", code, "err", err)
	authHeaders(w, err, code)
	writeJSON(w, status, oauthError{Error: code, Description: message, Code: code, Message: message})
}

// authHeaders adds what RFC 6750, RFC 7617 and RFC 9110 ask of an
// authentication failure: the challenge, or when to come back.
// It reads err only for the codes that need more than the code: a
// refusal is common (every query of an unknown bill), and matching err
// against an outage's error types cost it a microsecond.
func authHeaders(w http.ResponseWriter, err error, code string) {
	switch code {
	case "too_many_attempts":
		if locked := (*auth.LockedError)(nil); errors.As(err, &locked) {
			w.Header().Set("Retry-After", strconv.Itoa(int(locked.RetryAfter.Seconds()+0.999)))
		}
	case "temporarily_unavailable":
		retry := time.Second
		if outage.Is(err) {
			retry = outage.RetryAfter
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(retry.Seconds())))
	case "invalid_token":
		w.Header().Set("WWW-Authenticate", `Bearer realm="kadi", error="invalid_token"`)
	case "insufficient_scope":
		w.Header().Set("WWW-Authenticate", `Bearer realm="kadi", error="insufficient_scope"`)
	case "invalid_client", "invalid_grant":
		// A 401 names its scheme (RFC 9110): the token call's is Basic.
		w.Header().Set("WWW-Authenticate", `Basic realm="kadi"`)
	}
}
