package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/client"
)

// clock is a settable Config.Now, so token expiry is tested without waiting.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newClient returns a client of g; edit, if not nil, changes the config first.
func newClient(t testing.TB, g *fakeGateway, edit func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{
		BaseURL:    g.URL,
		APIKey:     testAPIKey,
		Username:   testUsername,
		Password:   testPassword,
		HTTPClient: g.Client(),
	}
	if edit != nil {
		edit(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// stubCalls counts the API (non-token) requests a stub served.
type stubCalls struct {
	mu sync.Mutex
	n  int
}

func (s *stubCalls) get() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// newStub returns a client whose gateway issues tokens normally and hands
// every other request to api: for answers the fake gateway never gives. The
// client's clock stands still at newClock's start.
func newStub(t testing.TB, api http.HandlerFunc) (*client.Client, *stubCalls) {
	t.Helper()
	calls := &stubCalls{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "stub-req")
		if r.URL.Path == "/identity/v2/token" {
			writeJSON(w, http.StatusOK, map[string]any{
				"token_type": "bearer", "issued_at": "1763712000000", "expires_in": 3600, "access_token": "stub-token",
			})
			return
		}
		calls.mu.Lock()
		calls.n++
		calls.mu.Unlock()
		api(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{
		BaseURL: srv.URL, APIKey: testAPIKey, Username: testUsername, Password: testPassword,
		Now: newClock().Now,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c, calls
}

// respond answers with a fixed status and raw body.
func respond(status int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// asAPIError fails the test unless err is an *APIError.
func asAPIError(t *testing.T, err error) *client.APIError {
	t.Helper()
	var apiErr *client.APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v (%T) is not an *APIError", err, err)
	}
	return apiErr
}
