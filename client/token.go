package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

const (
	tokenPath        = "/identity/v2/token"
	paymentTokenPath = "/token"
	// minRefreshMargin is how long before expiry a token is replaced at the
	// least, so that a request started with it still lands in time even on
	// a slow network.
	minRefreshMargin = 60 * time.Second
)

// tokenFetch is one token request in flight, shared by every caller that
// needs a token meanwhile, so a burst of requests costs one token request.
type tokenFetch struct {
	done  chan struct{} // closed when the fields below are final
	token string
	err   error
	// abandoned means the fetching caller's context ended: that says
	// nothing about the gateway, so waiters with time left try again.
	abandoned bool
}

// tokenCache is one kind of token, cached and replaced before it expires.
// Its fields are guarded by the Client's mu.
type tokenCache struct {
	token     string
	refreshAt time.Time
	expiresAt time.Time
	lifetime  time.Duration // of the last token stored
	fetch     *tokenFetch
	// forPages: the token goes into pages a shopper may submit long after
	// they were rendered, so it is replaced once half its lifetime has
	// gone; with a tenth left, a form rendered then stopped working
	// within six minutes.
	forPages bool
}

// Token returns an access token; the other methods call it themselves. The
// token is cached and replaced before it expires: once less than a tenth of
// its lifetime or 60 seconds, whichever is larger, remains. Concurrent
// callers share one token request.
//
// If replacing a token fails while the old one is still valid, the old one
// is returned: a gateway hiccup should not fail a checkout early.
//
// The access token creates bills and reads every payment of the merchant:
// keep it on the server. The hosted form's token field takes
// [Client.PaymentToken], which can only pay.
func (c *Client) Token(ctx context.Context) (string, error) {
	return c.cached(ctx, &c.access, c.requestToken)
}

// PaymentToken returns a pay-only payment-token (POST /token) for the
// hosted form's token field, the one token that goes to the shopper's
// browser: the gateway's other endpoints refuse it. It is cached and
// shared like [Client.Token]'s, but replaced once half its lifetime has
// gone, so a form rendered with it stays payable for at least half the
// lifetime (30 minutes with the gateway's default hour). Its answer carries
// no lifetime; the gateway gives it the access token's, which this asks
// for first if it has none.
func (c *Client) PaymentToken(ctx context.Context) (string, error) {
	return c.cached(ctx, &c.payment, c.requestPaymentToken)
}

// cached returns tc's token, fetching one with request when there is none
// or it is due for replacement.
func (c *Client) cached(ctx context.Context, tc *tokenCache, request func(context.Context) (string, time.Duration, error)) (string, error) {
	for {
		c.mu.Lock()
		now := c.now()
		if tc.token != "" && now.Before(tc.refreshAt) {
			token := tc.token
			c.mu.Unlock()
			return token, nil
		}
		if f := tc.fetch; f != nil {
			// Refreshing early exists so that nobody waits: while the old
			// token is still valid, use it and let the fetch run.
			if tc.token != "" && now.Before(tc.expiresAt) {
				token := tc.token
				c.mu.Unlock()
				return token, nil
			}
			c.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if f.abandoned {
				continue
			}
			return f.token, f.err
		}

		f := &tokenFetch{done: make(chan struct{})}
		tc.fetch = f
		c.mu.Unlock()

		token, lifetime, err := request(ctx)

		c.mu.Lock()
		tc.fetch = nil
		if err == nil {
			tc.store(token, now, lifetime)
		} else if tc.token != "" && c.now().Before(tc.expiresAt) {
			token, err = tc.token, nil
		}
		c.mu.Unlock()

		f.token, f.err = token, err
		f.abandoned = err != nil && ctx.Err() != nil
		close(f.done)
		return token, err
	}
}

// store caches a token. Expiry counts from when the request was sent, on the
// local clock, rather than from the gateway's issued_at: that keeps a skewed
// merchant clock from using a token past its end.
func (tc *tokenCache) store(token string, sent time.Time, lifetime time.Duration) {
	margin := max(lifetime/10, minRefreshMargin)
	if tc.forPages {
		margin = lifetime / 2
	}
	// A token shorter-lived than two minutes would otherwise be "due for
	// refresh" from birth and every call would fetch a new one.
	margin = min(margin, lifetime/2)
	tc.token, tc.lifetime = token, lifetime
	tc.expiresAt = sent.Add(lifetime)
	tc.refreshAt = tc.expiresAt.Add(-margin)
}

// dropToken forgets an access token the gateway refused, unless another
// caller has already replaced it.
func (c *Client) dropToken(token string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.access.token == token {
		c.access.token = ""
	}
}

// tokenResponse leaves out token_type (always bearer) and issued_at (see
// store).
type tokenResponse struct {
	ExpiresIn   looseString `json:"expires_in"`
	AccessToken string      `json:"access_token"`
}

func (c *Client) requestToken(ctx context.Context) (string, time.Duration, error) {
	resp, err := c.doKey(ctx, http.MethodPost, tokenPath, nil, url.Values{"username": {c.username}, "password": {c.password}})
	if err != nil {
		return "", 0, err
	}
	var tr tokenResponse
	if err := json.Unmarshal(resp.body, &tr); err != nil || tr.AccessToken == "" {
		return "", 0, malformed(resp, "token response without access_token")
	}
	seconds, err := strconv.ParseInt(string(tr.ExpiresIn), 10, 64)
	if err != nil || seconds < 0 {
		return "", 0, malformed(resp, fmt.Sprintf("token expires_in %q", tr.ExpiresIn))
	}
	return tr.AccessToken, time.Duration(seconds) * time.Second, nil
}

// paymentTokenResponse is POST /token's answer.
type paymentTokenResponse struct {
	Status       string `json:"status"`
	PaymentToken string `json:"payment-token"`
}

func (c *Client) requestPaymentToken(ctx context.Context) (string, time.Duration, error) {
	// The lifetime is the access token's (the gateway's --token-ttl).
	if _, err := c.Token(ctx); err != nil {
		return "", 0, err
	}
	c.mu.Lock()
	lifetime := c.access.lifetime
	c.mu.Unlock()
	resp, err := c.doKey(ctx, http.MethodPost, paymentTokenPath, nil, url.Values{"merchantCode": {c.username}, "password": {c.password}, "grant_type": {"password"}})
	if err != nil {
		return "", 0, err
	}
	var pr paymentTokenResponse
	if err := json.Unmarshal(resp.body, &pr); err != nil || pr.PaymentToken == "" {
		return "", 0, malformed(resp, "token response without payment-token")
	}
	return pr.PaymentToken, lifetime, nil
}

// malformed reports a success status with a body that cannot be used, with
// the request id so support can find the exchange.
func malformed(r *response, what string) error {
	return fmt.Errorf("%w: HTTP %d: %s [request id %s]", ErrMalformedResponse, r.status, what, r.requestID())
}
