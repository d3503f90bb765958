package form_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// unreadable is a store whose revoked keys cannot be read, as in a
// database outage.
type unreadable struct{ auth.Repo }

func (unreadable) RevokedKeys(context.Context, time.Time) ([]string, error) {
	return nil, errors.New("database down")
}

// A node that has not read the revoked keys for a while cannot vouch for
// a token: its shop's form gets the "payments paused" page, not "your
// session is not valid", and the API a 503 (before, a query a node could
// answer from memory was answered to a token revoked meanwhile).
func TestTokensWhileRevokedKeysAreUnread(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Unread Shop")
	tok := g.Token(c, merchant.Test)
	b := g.CreateBill(c, tok, "UNREAD1", "10")

	r := auth.NewRevocations()
	if err := r.Refresh(t.Context(), g.Store, time.Now()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go r.Watch(ctx, unreadable{g.Store}, time.Millisecond, time.Now, slog.New(slog.DiscardHandler))
	g.Auth.Revocations = r

	deadline := time.Now().Add(30 * time.Second)
	for {
		rec := g.ServeOnce(servertest.QueryRequest(tok, b.Reference))
		if rec.Code == http.StatusServiceUnavailable && strings.Contains(rec.Body.String(), `"temporarily_unavailable"`) && rec.Header().Get("Retry-After") != "" {
			break
		}
		if rec.Code != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("query while the revoked keys go unread: %d %s", rec.Code, rec.Body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	posted := g.ServeOnce(servertest.CardPayRequest(servertest.FormFields(c, tok, b)))
	page := g.ServeOnce(httptest.NewRequest(http.MethodGet, posted.Header().Get("Location"), nil))
	if body := page.Body.String(); page.Code != http.StatusServiceUnavailable || !strings.Contains(body, "Payments paused for a moment") {
		t.Errorf("the shop's form while the revoked keys go unread: %d, then %d\n%s", posted.Code, page.Code, body)
	}
}
