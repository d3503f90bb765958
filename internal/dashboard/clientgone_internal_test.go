package dashboard

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/kadipay/kadi/internal/outage/outagetest"
)

// A merchant who left mid-page is 499 on the access line, not a 503 that
// an outage alert counts.
func TestMerchantGoneIsNotAnOutage(t *testing.T) {
	h := &Handler{Log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := httptest.NewRecorder()
	h.internal(rec, httptest.NewRequest("GET", "/dashboard/payments", nil).WithContext(ctx), fmt.Errorf("list payments: %w", outagetest.SQLStateError("57014")))
	if rec.Code != 499 {
		t.Errorf("a merchant gone mid-page: %d, want 499", rec.Code)
	}
}
