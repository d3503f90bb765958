package form

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/kadipay/kadi/internal/outage/outagetest"
)

// A shopper who left is 499 on the access line, not the "payments paused"
// 503 that an outage alert counts.
func TestShopperGoneIsNotAnOutage(t *testing.T) {
	h := &Handler{Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("POST", "/cardPay", nil).WithContext(ctx)
	if pe := h.problem(r, nil, fmt.Errorf("start payment: %w", outagetest.ConnGivenUp{Err: context.Canceled})); pe.Status != 499 {
		t.Errorf("a shopper gone mid-payment: %d %q, want 499", pe.Status, pe.Title)
	}
	live := httptest.NewRequest("POST", "/cardPay", nil)
	if pe := h.problem(live, nil, fmt.Errorf("start payment: %w", outagetest.ConnGivenUp{Err: context.Canceled})); pe.Status != 503 {
		t.Errorf("the store out of reach, the shopper still there: %d %q, want 503", pe.Status, pe.Title)
	}
}
