package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

func TestNewRejectsBadConfig(t *testing.T) {
	valid := client.Config{BaseURL: "https://api.kadi.example", APIKey: "k", Username: "u", Password: "p"}
	tests := []struct {
		name string
		edit func(*client.Config)
	}{
		{"no base URL", func(c *client.Config) { c.BaseURL = "" }},
		{"relative base URL", func(c *client.Config) { c.BaseURL = "api.kadi.example" }},
		{"other scheme", func(c *client.Config) { c.BaseURL = "ftp://api.kadi.example" }},
		{"base URL with query", func(c *client.Config) { c.BaseURL = "https://api.kadi.example/?x=1" }},
		{"base URL with user info", func(c *client.Config) { c.BaseURL = "https://me:pw@api.kadi.example" }},
		{"bad form URL", func(c *client.Config) { c.PaymentFormURL = "javascript:alert(1)" }},
		{"no API key", func(c *client.Config) { c.APIKey = "" }},
		{"no username", func(c *client.Config) { c.Username = "" }},
		{"no password", func(c *client.Config) { c.Password = "" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.edit(&cfg)
			c, err := client.New(cfg)
			if c != nil || !errors.Is(err, client.ErrInvalidConfig) {
				t.Errorf("New = %v, %v; want ErrInvalidConfig", c, err)
			}
		})
	}
	if _, err := client.New(valid); err != nil {
		t.Errorf("New(valid) = %v", err)
	}
}

func TestAPIErrorMessage(t *testing.T) {
	tests := []struct {
		err  client.APIError
		want string
	}{
		{
			client.APIError{StatusCode: 404, Code: "not_found", Message: "no bill with that reference", RequestID: "r1"},
			"kadi: HTTP 404 not_found: no bill with that reference [request id r1]",
		},
		{
			client.APIError{StatusCode: 400, Message: "the bill has invalid fields", Fields: []client.FieldError{
				{Field: "order.amount", Code: "invalid_amount", Message: "must be greater than zero"},
				{Field: "customer.name", Code: "required", Message: "is required"},
			}},
			"kadi: HTTP 400: the bill has invalid fields (order.amount: must be greater than zero; customer.name: is required)",
		},
		{
			client.APIError{StatusCode: 429, Code: "invalid_grant", Message: "locked", RetryAfter: 30 * time.Minute},
			"kadi: HTTP 429 invalid_grant: locked, retry after 30m0s",
		},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q\nwant %q", got, tt.want)
		}
	}
}

func TestAPIErrorIs(t *testing.T) {
	sentinels := []error{client.ErrNotFound, client.ErrUnauthorized, client.ErrRateLimited}
	tests := []struct {
		err  *client.APIError
		want error // nil: matches none
	}{
		{&client.APIError{StatusCode: 404, Code: "not_found", Message: "no bill with that reference for this merchant"}, client.ErrNotFound},
		// A BaseURL with a wrong path: no endpoint there, or a proxy's
		// page; not a reference never billed.
		{&client.APIError{StatusCode: 404, Code: "not_found", Message: "no such endpoint"}, nil},
		{&client.APIError{StatusCode: 404}, nil},
		{&client.APIError{StatusCode: 401}, client.ErrUnauthorized},
		{&client.APIError{StatusCode: 403}, client.ErrUnauthorized},
		{&client.APIError{StatusCode: 400, Code: "invalid_grant"}, client.ErrUnauthorized},
		{&client.APIError{StatusCode: 429}, client.ErrRateLimited},
		{&client.APIError{StatusCode: 400, Code: "invalid_request"}, nil},
		{&client.APIError{StatusCode: 500}, nil},
	}
	for _, tt := range tests {
		for _, s := range sentinels {
			if got := errors.Is(tt.err, s); got != (s == tt.want) {
				t.Errorf("errors.Is(%v, %v) = %v", tt.err, s, got)
			}
		}
	}
}

func TestRetryAfterAsDate(t *testing.T) {
	// The stub's client tells the time with a clock that never moves.
	retryAt := newClock().Now().Add(90 * time.Second)
	c, _ := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", retryAt.Format(http.TimeFormat))
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"code": "rate_limited", "message": "slow down"})
	})
	_, err := c.Verify(context.Background(), "KD1")
	if !errors.Is(err, client.ErrRateLimited) {
		t.Fatalf("err = %v, want ErrRateLimited", err)
	}
	if got := asAPIError(t, err).RetryAfter; got != 90*time.Second {
		t.Errorf("RetryAfter = %s, want 90s", got)
	}
}
