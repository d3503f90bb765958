package form

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"
)

// connGivenUp is pgconn's error for a statement never sent because its
// context had ended: safe to retry (an outage, read alone), the context's
// error under it.
type connGivenUp struct{ err error }

func (e connGivenUp) Error() string     { return "timeout: context already done: " + e.err.Error() }
func (e connGivenUp) Unwrap() error     { return e.err }
func (e connGivenUp) SafeToRetry() bool { return true }

// A shopper who left is 499 on the access line, not the "payments paused"
// 503 that an outage alert counts.
func TestShopperGoneIsNotAnOutage(t *testing.T) {
	h := &Handler{Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("POST", "/cardPay", nil).WithContext(ctx)
	if pe := h.problem(r, nil, fmt.Errorf("start payment: %w", connGivenUp{context.Canceled})); pe.Status != 499 {
		t.Errorf("a shopper gone mid-payment: %d %q, want 499", pe.Status, pe.Title)
	}
	live := httptest.NewRequest("POST", "/cardPay", nil)
	if pe := h.problem(live, nil, fmt.Errorf("start payment: %w", connGivenUp{context.Canceled})); pe.Status != 503 {
		t.Errorf("the store out of reach, the shopper still there: %d %q, want 503", pe.Status, pe.Title)
	}
}
