package server_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// The series an operator's dashboards read: Go and process, requests by
// route pattern (never by path), bills, payments by outcome and brand,
// the acquirer's latency.
func TestMetricsSeries(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Metrics Shop")
	tok := g.Token(c, merchant.Test)
	g.CreateBill(c, tok, "MET1", "10")
	paid, _ := g.Pay(c, tok, "MET2", "10", servertest.Card{Number: "4242424242424242", CVV: "123"})
	declined, _ := g.Pay(c, tok, "MET3", "10", servertest.Card{Number: "4000000000000002", CVV: "123"})
	for _, ref := range []string{"NOSUCHBILL1", "NOSUCHBILL2"} {
		g.Serve(servertest.QueryRequest(tok, ref))
	}
	g.Serve(httptest.NewRequest(http.MethodGet, "/no/such/path", nil))

	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr = "127.0.0.1:5555"
	g.Handler.ServeHTTP(rec, req)
	text := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, text)
	}
	for _, want := range []string{
		"\ngo_goroutines ",
		"\nprocess_resident_memory_bytes ",
		`kadi_http_requests_total{method="GET",route="/payment/v2/query",status="404"} 2`,
		`kadi_http_requests_total{method="POST",route="/payment/v2/bills",status="200"} 3`,
		`kadi_http_requests_total{method="POST",route="/identity/v2/token",status="200"} 1`,
		`kadi_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`kadi_http_request_duration_seconds_count{method="POST",route="/cardPay"} 2`,
		`kadi_http_requests_total{method="GET",route="/cardPay/page/{id}",status="200"} 2`,
		`kadi_bills_created_total{mode="test"} 3`,
		`kadi_payments_total{brand="VISA",mode="test",outcome="succeeded"} 1`,
		`kadi_payments_total{brand="VISA",mode="test",outcome="failed"} 1`,
		`kadi_acquirer_duration_seconds_count{answer="approved",call="charge",mode="test"} 1`,
		`kadi_acquirer_duration_seconds_count{answer="declined",call="charge",mode="test"} 1`,
		"kadi_ipn_queue_depth ",
		// The shop has no IPN URL: the paid bill's notification is
		// parked as the payment stores it.
		`kadi_ipn_deliveries_total{outcome="parked"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in the scrape", want)
		}
	}
	// The connection pool: an operator sees requests waiting for a
	// connection before they time out.
	for _, series := range []string{"go_sql_max_open_connections", "go_sql_open_connections", "go_sql_in_use_connections",
		"go_sql_wait_count_total", "go_sql_wait_duration_seconds_total"} {
		if !regexp.MustCompile(`(?m)^` + series + `\{db_name="kadi"\} \d`).MatchString(text) {
			t.Errorf("no pool series %s in the scrape", series)
		}
	}
	if !regexp.MustCompile(`(?m)^go_sql_max_open_connections\{db_name="kadi"\} [1-9]`).MatchString(text) {
		t.Errorf("the pool's size is not published\n%s", text)
	}
	// The group-commit writer's counters (SQLite): three bills and two
	// payments (started, charged in the simulator's ledger, finished) are
	// at least nine writes, and a commit carries one or more.
	writes, commits := scraped(t, text, "kadi_store_writes_total"), scraped(t, text, "kadi_store_commits_total")
	if writes < 9 || commits < 1 || commits > writes || scraped(t, text, "kadi_store_commit_seconds_total") <= 0 {
		t.Errorf("store writer series: %v writes, %v commits\n%s", writes, commits, text)
	}
	// And how long each waited and each commit took.
	waited, timed := scraped(t, text, "kadi_store_write_wait_seconds_count"), scraped(t, text, "kadi_store_commit_duration_seconds_count")
	if waited < 9 || timed < 1 || timed > waited || scraped(t, text, "kadi_store_commit_duration_seconds_sum") <= 0 {
		t.Errorf("store writer histograms: %v writes waited, %v commits timed\n%s", waited, timed, text)
	}
	// Of those commits, the ones a checkpoint ran beside (none or some).
	if beside := scraped(t, text, "kadi_store_commit_beside_checkpoint_seconds_count"); beside > timed {
		t.Errorf("%v commits timed beside a checkpoint, of %v", beside, timed)
	}
	// The checkpointer beside the writer has run, and has not failed.
	if n := scraped(t, text, "kadi_store_checkpoints_total"); n < 1 || scraped(t, text, "kadi_store_checkpoint_failures_total") != 0 {
		t.Errorf("checkpointer series: %v checkpoints\n%s", n, text)
	}
	if !strings.Contains(text, "\nkadi_store_wal_frames_behind ") {
		t.Errorf("no WAL frames behind gauge\n%s", text)
	}
	// Paths never become labels: a label per bill or page would grow
	// without bound and publish references.
	for _, leak := range []string{paid.Reference, declined.Reference, "NOSUCHBILL", "/cardPay/page/k", "/no/such/path"} {
		if strings.Contains(text, leak) {
			t.Errorf("%q in the scrape", leak)
		}
	}
}

// scraped is the value of an unlabelled series in a text exposition.
func scraped(t *testing.T, text, name string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %s in the scrape", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return v
}
