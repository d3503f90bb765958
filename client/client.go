package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config holds what a merchant receives at onboarding. Load the secrets from
// the environment or a secret store, never from source code.
type Config struct {
	// BaseURL is the API host, such as "https://api.kadi.example". A path
	// prefix is kept.
	BaseURL string
	// PaymentFormURL is the hosted form's host; empty means BaseURL.
	PaymentFormURL string

	// APIKey is the raw key from the dashboard, for test or live mode; the
	// key decides which mode every later call runs in.
	APIKey string
	// Username is the merchant code; Password the account password.
	Username, Password string

	// HTTPClient sends every request; nil means a client with a 30 s timeout.
	HTTPClient *http.Client
	// Now tells the time for token expiry; nil means time.Now. Tests set it
	// to move time forward without waiting.
	Now func() time.Time
}

// Client talks to one Kadi gateway with one merchant's credentials. It is
// safe for concurrent use and meant to be shared: each Client caches its own
// token, so one per process avoids needless token requests.
type Client struct {
	base, formBase string
	apiKey         string
	username       string
	password       string
	http           *http.Client
	now            func() time.Time

	// Token caches; see token.go.
	mu      sync.Mutex
	access  tokenCache
	payment tokenCache
}

const (
	userAgent = "kadi-go-client"
	// maxResponseBody bounds what a misbehaving server or proxy can make the
	// client buffer; every real answer is a few hundred bytes.
	maxResponseBody = 1 << 20
)

// New checks cfg and returns a Client. It makes no request: wrong credentials
// show up on the first call.
func New(cfg Config) (*Client, error) {
	base, err := checkBaseURL("BaseURL", cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	formBase := base
	if cfg.PaymentFormURL != "" {
		if formBase, err = checkBaseURL("PaymentFormURL", cfg.PaymentFormURL); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct{ name, value string }{
		{"APIKey", cfg.APIKey}, {"Username", cfg.Username}, {"Password", cfg.Password},
	} {
		if f.value == "" {
			return nil, fmt.Errorf("%w: %s is empty", ErrInvalidConfig, f.name)
		}
	}
	c := &Client{
		base:     base,
		formBase: formBase,
		apiKey:   cfg.APIKey,
		username: cfg.Username,
		password: cfg.Password,
		http:     cfg.HTTPClient,
		now:      cfg.Now,
		payment:  tokenCache{forPages: true},
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// checkBaseURL accepts an absolute http(s) URL and returns it without a
// trailing slash, so paths can be appended by concatenation.
func checkBaseURL(name, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrInvalidConfig, name, err)
	}
	// Redacted: an error message must not repeat a password put in the URL.
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("%w: %s %q is not an absolute http(s) URL", ErrInvalidConfig, name, u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%w: %s %q must not carry a query, fragment or user info", ErrInvalidConfig, name, u.Redacted())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// doBearer sends an API request with the cached token. A 401 invalid_token
// means the token expired early or was revoked (a regenerated API key), so
// the client drops it and tries once more with a fresh one. Resending is safe
// because the gateway treats an identical bill request as the same bill.
func (c *Client) doBearer(ctx context.Context, method, path string, query url.Values, body any) (*response, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("kadi: encoding request: %w", err)
		}
	}
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	for attempt := 1; ; attempt++ {
		token, err := c.Token(ctx)
		if err != nil {
			return nil, err
		}
		header := http.Header{"Authorization": {"Bearer " + token}}
		if payload != nil {
			header.Set("Content-Type", "application/json")
		}
		resp, err := c.send(ctx, method, target, header, payload)
		if err != nil {
			return nil, err
		}
		if attempt == 1 && resp.status == http.StatusUnauthorized && invalidToken(resp.header) {
			c.dropToken(token)
			continue
		}
		return resp, nil
	}
}

// doKey sends a request authenticated by the API key, as the token
// endpoints and the delivery log ask: query, if any, goes in the URL and
// form, unless nil, is the body. It returns a 2xx answer or the gateway's
// error.
func (c *Client) doKey(ctx context.Context, method, path string, query, form url.Values) (*response, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	// The gateway takes the raw API key here, not base64(user:pass).
	header := http.Header{"Authorization": {"Basic " + c.apiKey}}
	var payload []byte
	if form != nil {
		header.Set("Content-Type", "application/x-www-form-urlencoded")
		payload = []byte(form.Encode())
	}
	resp, err := c.send(ctx, method, target, header, payload)
	if err != nil {
		return nil, err
	}
	if resp.status/100 != 2 {
		return nil, c.apiError(resp)
	}
	return resp, nil
}

// invalidToken reports whether a 401 carries RFC 6750's invalid_token, the
// one refusal a fresh token can cure. Other 401s would only fail again.
func invalidToken(h http.Header) bool {
	for _, v := range h.Values("WWW-Authenticate") {
		// One header value may hold several challenges ("Basic ..., Bearer
		// error=..."), so look for both words rather than parse.
		v = strings.ToLower(v)
		if strings.Contains(v, "bearer") && strings.Contains(v, "invalid_token") {
			return true
		}
	}
	return false
}

// response is a fully read HTTP answer: reading it at once frees the
// connection for reuse and lets the caller decode the body twice (success
// shape, then error shape) without buffering games.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) requestID() string { return r.header.Get("X-Request-Id") }

func (c *Client) send(ctx context.Context, method, target string, header http.Header, payload []byte) (*response, error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, fmt.Errorf("kadi: %s %s: %w", method, target, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	resp, err := c.http.Do(req)
	if err != nil {
		// The error names the URL, which never carries a secret: tokens and
		// passwords travel in headers and bodies only.
		return nil, fmt.Errorf("kadi: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))
	if err != nil {
		return nil, fmt.Errorf("kadi: %s %s: reading response: %w", method, req.URL.Path, err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: data}, nil
}

// errorBody is the union of every error shape the gateway uses: OAuth's
// error/error_description on the token endpoint, code/message elsewhere, and
// remarks/errors on a refused bill.
type errorBody struct {
	Code             string       `json:"code"`
	Message          string       `json:"message"`
	Error            string       `json:"error"`
	ErrorDescription string       `json:"error_description"`
	Remarks          string       `json:"remarks"`
	Errors           []FieldError `json:"errors"`
}

// apiError builds the error for a refused request. The body is read on a best
// effort basis: a proxy's HTML error page still yields the status and the
// request id.
func (c *Client) apiError(r *response) *APIError {
	var b errorBody
	_ = json.Unmarshal(r.body, &b)
	fallback := http.StatusText(r.status)
	if r.status/100 == 2 {
		// A refusal dressed as success (a bill with status false on 200)
		// must not read "OK".
		fallback = "request refused"
	}
	return &APIError{
		StatusCode: r.status,
		Code:       firstNonEmpty(b.Code, b.Error),
		Message:    firstNonEmpty(b.Message, b.ErrorDescription, b.Remarks, fallback),
		RequestID:  r.requestID(),
		Fields:     b.Errors,
		RetryAfter: c.retryAfter(r.header.Get("Retry-After")),
	}
}

// retryAfter reads both forms RFC 9110 allows: seconds or an HTTP date.
func (c *Client) retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(c.now()); d > 0 {
			return d
		}
	}
	return 0
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// looseString takes a JSON string, number or boolean as its text. The
// gateway's status fields change type between success ("1") and failure
// (false), and older gateways sent numbers where the spec says decimal text.
type looseString string

func (s *looseString) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = ""
		return nil
	}
	// encoding/json hands over one complete, valid value, never empty.
	switch b[0] {
	case '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = looseString(v)
	case '{', '[':
		return fmt.Errorf("kadi: expected a string, number or boolean, got %.40s", b)
	default:
		*s = looseString(b)
	}
	return nil
}

// is compares case-insensitively and ignoring spaces, for "True" and " 1".
func (s looseString) is(want ...string) bool {
	v := strings.TrimSpace(string(s))
	for _, w := range want {
		if strings.EqualFold(v, w) {
			return true
		}
	}
	return false
}
