package e2e

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// /metrics of the real binary, scraped from loopback after a bill and a
// payment: the standard Go and process series and Kadi's own, by route
// pattern.
func TestMetricsFromTheBinary(t *testing.T) {
	t.Parallel()
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Metrics Shop") })
	s := newShopper(t, g, m)
	b := s.createBill(t, "METRICS1", "10.00")
	s.submit(t, s.paymentForm(t, b, testCard("4242424242424242")))

	resp, err := http.Get(g.BaseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := string(body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, text)
	}
	for _, want := range []string{
		"\ngo_goroutines ", "\nprocess_resident_memory_bytes ", "\nprocess_cpu_seconds_total ",
		`kadi_http_requests_total{method="POST",route="/payment/v2/bills",status="200"} 1`,
		`kadi_http_request_duration_seconds_bucket{method="POST",route="/cardPay",le="+Inf"} 1`,
		`kadi_bills_created_total{mode="test"} 1`,
		`kadi_payments_total{brand="VISA",mode="test",outcome="succeeded"} 1`,
		`kadi_acquirer_duration_seconds_count{answer="approved",call="charge",mode="test"} 1`,
		"\nkadi_ipn_queue_depth ", "\nkadi_ipn_oldest_pending_age_seconds ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in the scrape", want)
		}
	}
	// kadi serve's collector settings when the environment sets none
	// (internal/cli: collectorSettings).
	if os.Getenv("GOGC") == "" && !strings.Contains(text, "\ngo_gc_gogc_percent 400\n") {
		t.Errorf("go_gc_gogc_percent is not 400 in the scrape")
	}
	if os.Getenv("GOMEMLIMIT") == "" && !strings.Contains(text, "\ngo_gc_gomemlimit_bytes 1.00663296e+08\n") {
		t.Errorf("go_gc_gomemlimit_bytes is not 96 MiB in the scrape")
	}
	if strings.Contains(text, b.Reference) {
		t.Errorf("the bill reference %s is a label", b.Reference)
	}
}
