package client_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

func TestTokenIsCached(t *testing.T) {
	g := newFakeGateway()
	t.Cleanup(g.Close)
	c := newClient(t, g, nil)
	ctx := context.Background()

	for range 5 {
		tok, err := c.Token(ctx)
		if err != nil || tok != "tok-1" {
			t.Fatalf("Token = %q, %v; want tok-1", tok, err)
		}
	}
	bill, err := c.CreateBill(ctx, validBill("ORDER1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Verify(ctx, bill.Reference); err != nil {
		t.Fatal(err)
	}
	if tokens, _ := g.counts(); tokens != 1 {
		t.Errorf("token requests = %d, want 1", tokens)
	}
}

func TestTokenConcurrentCallersShareOneFetch(t *testing.T) {
	g := newFakeGateway()
	t.Cleanup(g.Close)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	g.set(func(g *fakeGateway) { g.tokenArrived, g.tokenRelease = arrived, release })
	c := newClient(t, g, nil)

	const callers = 20
	var wg sync.WaitGroup
	tokens := make([]string, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { tokens[i], errs[i] = c.Token(context.Background()) })
	}
	<-arrived // one fetch is in flight; hold it while the others pile up
	close(release)
	wg.Wait()

	for i := range callers {
		if errs[i] != nil || tokens[i] != "tok-1" {
			t.Errorf("caller %d: Token = %q, %v; want tok-1", i, tokens[i], errs[i])
		}
	}
	if n, _ := g.counts(); n != 1 {
		t.Errorf("token requests = %d, want 1", n)
	}
}

func TestTokenRefreshedEarly(t *testing.T) {
	tests := []struct {
		name     string
		lifetime int // seconds
		after    time.Duration
		want     string
	}{
		// 10% of an hour is 360 s, more than the 60 s floor.
		{"hour, 361 s left", 3600, 3239 * time.Second, "tok-1"},
		{"hour, 359 s left", 3600, 3241 * time.Second, "tok-2"},
		// 10% of five minutes is 30 s: the 60 s floor wins.
		{"5 min, 61 s left", 300, 239 * time.Second, "tok-1"},
		{"5 min, 59 s left", 300, 241 * time.Second, "tok-2"},
		// A one-minute token would be stale from birth with a 60 s margin:
		// half its life is used instead.
		{"1 min, 31 s left", 60, 29 * time.Second, "tok-1"},
		{"1 min, 29 s left", 60, 31 * time.Second, "tok-2"},
		{"expired", 3600, 2 * time.Hour, "tok-2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway()
			t.Cleanup(g.Close)
			g.set(func(g *fakeGateway) { g.lifetime = tt.lifetime })
			clk := newClock()
			c := newClient(t, g, func(cfg *client.Config) { cfg.Now = clk.Now })
			ctx := context.Background()

			if _, err := c.Token(ctx); err != nil {
				t.Fatal(err)
			}
			clk.Advance(tt.after)
			got, err := c.Token(ctx)
			if err != nil || got != tt.want {
				t.Errorf("Token after %s = %q, %v; want %q", tt.after, got, err, tt.want)
			}
		})
	}
}

// While a refresh is in flight and the old token is still valid, other
// callers are not made to wait for it.
func TestTokenRefreshDoesNotBlockOthers(t *testing.T) {
	g := newFakeGateway()
	t.Cleanup(g.Close)
	clk := newClock()
	c := newClient(t, g, func(cfg *client.Config) { cfg.Now = clk.Now })
	ctx := context.Background()
	if _, err := c.Token(ctx); err != nil {
		t.Fatal(err)
	}

	clk.Advance(3300 * time.Second) // inside the refresh window, not expired
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	g.set(func(g *fakeGateway) { g.tokenArrived, g.tokenRelease = arrived, release })
	refreshed := make(chan string)
	go func() {
		tok, _ := c.Token(ctx)
		refreshed <- tok
	}()
	<-arrived

	if tok, err := c.Token(ctx); err != nil || tok != "tok-1" {
		t.Errorf("Token during refresh = %q, %v; want the old tok-1", tok, err)
	}
	close(release)
	if tok := <-refreshed; tok != "tok-2" {
		t.Errorf("refreshing caller got %q, want tok-2", tok)
	}
	if tok, _ := c.Token(ctx); tok != "tok-2" {
		t.Errorf("Token after refresh = %q, want tok-2", tok)
	}
}

func TestTokenRefreshFailureKeepsValidToken(t *testing.T) {
	g := newFakeGateway()
	t.Cleanup(g.Close)
	clk := newClock()
	c := newClient(t, g, func(cfg *client.Config) { cfg.Now = clk.Now })
	ctx := context.Background()
	if _, err := c.Token(ctx); err != nil {
		t.Fatal(err)
	}
	g.set(func(g *fakeGateway) { g.tokenFails = true })

	clk.Advance(3300 * time.Second)
	if tok, err := c.Token(ctx); err != nil || tok != "tok-1" {
		t.Errorf("in refresh window: Token = %q, %v; want the still valid tok-1", tok, err)
	}
	clk.Advance(400 * time.Second)
	_, err := c.Token(ctx)
	if apiErr := asAPIError(t, err); apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("after expiry: status %d, want 503", apiErr.StatusCode)
	}
}

// A caller whose context ends mid-fetch must not fail the callers waiting on
// the same fetch: they still have time to get a token.
func TestTokenAbandonedFetchIsRetriedByWaiters(t *testing.T) {
	g := newFakeGateway()
	t.Cleanup(g.Close)
	arrived, release := make(chan struct{}, 2), make(chan struct{})
	g.set(func(g *fakeGateway) { g.tokenArrived, g.tokenRelease = arrived, release })
	c := newClient(t, g, nil)

	leaderCtx, cancel := context.WithCancel(context.Background())
	leaderErr := make(chan error)
	go func() {
		_, err := c.Token(leaderCtx)
		leaderErr <- err
	}()
	<-arrived

	type result struct {
		tok string
		err error
	}
	waiter := make(chan result)
	go func() {
		tok, err := c.Token(context.Background())
		waiter <- result{tok, err}
	}()
	// Give the waiter time to queue behind the fetch. Should it come late,
	// it starts its own fetch and the assertions hold all the same.
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Errorf("leader: err = %v, want context.Canceled", err)
	}
	close(release)
	if r := <-waiter; r.err != nil || r.tok == "" {
		t.Errorf("waiter: Token = %q, %v; want a token", r.tok, r.err)
	}
}

func TestTokenErrors(t *testing.T) {
	tests := []struct {
		name       string
		edit       func(*client.Config)
		lockedOut  bool
		wantStatus int
		wantCode   string
		wantIs     error
		wantRetry  time.Duration
	}{
		{
			name:       "wrong API key",
			edit:       func(c *client.Config) { c.APIKey = "not-the-key" },
			wantStatus: http.StatusUnauthorized, wantCode: "invalid_client", wantIs: client.ErrUnauthorized,
		},
		{
			name:       "wrong password",
			edit:       func(c *client.Config) { c.Password = "wrong" },
			wantStatus: http.StatusBadRequest, wantCode: "invalid_grant", wantIs: client.ErrUnauthorized,
		},
		{
			name:       "locked out",
			lockedOut:  true,
			wantStatus: http.StatusTooManyRequests, wantCode: "invalid_grant", wantIs: client.ErrRateLimited,
			wantRetry: 30 * time.Minute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway()
			t.Cleanup(g.Close)
			g.set(func(g *fakeGateway) { g.lockedOut = tt.lockedOut })
			c := newClient(t, g, tt.edit)

			_, err := c.Token(context.Background())
			apiErr := asAPIError(t, err)
			if apiErr.StatusCode != tt.wantStatus || apiErr.Code != tt.wantCode {
				t.Errorf("got HTTP %d %q, want HTTP %d %q", apiErr.StatusCode, apiErr.Code, tt.wantStatus, tt.wantCode)
			}
			if !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantIs)
			}
			if apiErr.RetryAfter != tt.wantRetry {
				t.Errorf("RetryAfter = %s, want %s", apiErr.RetryAfter, tt.wantRetry)
			}
			if apiErr.RequestID == "" || apiErr.Message == "" {
				t.Errorf("request id %q, message %q: want both", apiErr.RequestID, apiErr.Message)
			}
		})
	}
}

func TestInvalidTokenIsReplacedAndRetriedOnce(t *testing.T) {
	tests := []struct {
		name         string
		rejectBearer int  // bearer requests refused with invalid_token
		revoke       bool // regenerate the API key between calls
		wantErr      bool
		wantTokens   int
	}{
		{name: "token expired early", rejectBearer: 1, wantTokens: 2},
		{name: "token revoked", revoke: true, wantTokens: 2},
		{name: "refused twice: give up", rejectBearer: 2, wantErr: true, wantTokens: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFakeGateway()
			t.Cleanup(g.Close)
			c := newClient(t, g, nil)
			ctx := context.Background()
			if _, err := c.Token(ctx); err != nil {
				t.Fatal(err)
			}
			if tt.revoke {
				g.revokeTokens()
			}
			g.set(func(g *fakeGateway) { g.rejectBearer = tt.rejectBearer })

			bill, err := c.CreateBill(ctx, validBill("ORDER1"))
			if tt.wantErr {
				apiErr := asAPIError(t, err)
				if apiErr.StatusCode != http.StatusUnauthorized || !errors.Is(err, client.ErrUnauthorized) {
					t.Errorf("err = %v, want a 401 matching ErrUnauthorized", err)
				}
			} else if err != nil || bill.Reference == "" {
				// The fake refuses an empty body, so success also shows
				// the retry resent the JSON.
				t.Fatalf("CreateBill = %+v, %v; want a bill", bill, err)
			}
			if tokens, _ := g.counts(); tokens != tt.wantTokens {
				t.Errorf("token requests = %d, want %d", tokens, tt.wantTokens)
			}
		})
	}
}

// Only invalid_token is worth a new token; any other 401 would fail again.
func TestOther401IsNotRetried(t *testing.T) {
	c, calls := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"code": "insufficient_scope", "message": "no"})
	})
	_, err := c.Verify(context.Background(), "KD0000000001")
	if apiErr := asAPIError(t, err); apiErr.Code != "insufficient_scope" {
		t.Errorf("code = %q, want insufficient_scope", apiErr.Code)
	}
	if n := calls.get(); n != 1 {
		t.Errorf("API requests = %d, want 1", n)
	}
}

// The payment-token, for the shopper's browser, is not the access token:
// it comes from POST /token, is cached and shared like the access token,
// and is replaced on the access token's schedule (its answer carries no
// lifetime; the gateway gives both the same).
func TestPaymentToken(t *testing.T) {
	g := newFakeGateway()
	t.Cleanup(g.Close)
	g.set(func(g *fakeGateway) { g.lifetime = 300 })
	clk := newClock()
	c := newClient(t, g, func(cfg *client.Config) { cfg.Now = clk.Now })
	ctx := context.Background()

	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() { got[i], _ = c.PaymentToken(ctx) })
	}
	wg.Wait()
	for i, tok := range got {
		if tok != "pay-1" {
			t.Fatalf("PaymentToken %d = %q, want pay-1 (one request shared)", i, tok)
		}
	}
	if access, err := c.Token(ctx); err != nil || access == "pay-1" {
		t.Fatalf("Token = %q, %v: the access token must not be the payment-token", access, err)
	}
	// A form rendered with it must stay payable a while: it is replaced
	// once half its life has gone, not with a tenth left (a form rendered
	// then lasted six minutes of an hour's token).
	clk.Advance(149 * time.Second) // 151 s left of 5 minutes: still fresh
	if tok, _ := c.PaymentToken(ctx); tok != "pay-1" {
		t.Errorf("PaymentToken with 151 s left = %q, want pay-1", tok)
	}
	clk.Advance(2 * time.Second) // 149 s left: replaced
	if tok, _ := c.PaymentToken(ctx); tok != "pay-2" {
		t.Errorf("PaymentToken with 149 s left = %q, want pay-2", tok)
	}
	g.mu.Lock()
	requests := g.paymentTokenRequests
	g.mu.Unlock()
	if requests != 2 {
		t.Errorf("%d payment-token requests, want 2", requests)
	}

	bad := newClient(t, g, func(cfg *client.Config) { cfg.Password = "wrong-password-1" })
	if _, err := bad.PaymentToken(ctx); err == nil {
		t.Error("PaymentToken with a wrong password succeeded")
	}
}
