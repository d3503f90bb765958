package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/server/servertest"
)

// /readyz says ready only when the node can do all its work, and names
// what is missing otherwise; /healthz and /livez do not care about the
// IPN worker or the schema.
func TestReadiness(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	probe := func(path string) (int, map[string]string, http.Header) {
		rec := g.ServeOnce(httptest.NewRequest(http.MethodGet, path, nil))
		var body map[string]string
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: %d %q: %v", path, rec.Code, rec.Body, err)
		}
		return rec.Code, body, rec.Header()
	}
	waitFor := func(want int, failed string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			code, body, h := probe("/readyz")
			if code == want && body["failed"] == failed {
				if code == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
					t.Errorf("a 503 without Retry-After")
				}
				// /metrics says so too: it answers while the node is
				// not ready, so its up series cannot.
				gauge := "\nkadi_ready 1\n"
				if want != http.StatusOK {
					gauge = "\nkadi_ready 0\n"
				}
				scrape := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				scrape.RemoteAddr = "127.0.0.1:5555"
				if m := g.ServeOnce(scrape).Body.String(); !strings.Contains(m, gauge) {
					t.Errorf("/readyz %d, and /metrics does not say %q", code, strings.TrimSpace(gauge))
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: %d %v, want %d failed=%q", code, body, want, failed)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	waitFor(http.StatusServiceUnavailable, "ipn") // nothing delivers notifications yet
	for _, path := range []string{"/healthz", "/livez"} {
		if code, _, _ := probe(path); code != http.StatusOK {
			t.Errorf("%s without the IPN worker: %d, want 200", path, code)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.IPN.Run(ctx) }()
	defer func() { stop(); <-done }()
	waitFor(http.StatusOK, "")

	db, err := sql.Open("sqlite", filepath.Join(g.Dir, "kadi.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var latest string
	if err := db.QueryRow(`SELECT MAX(version) FROM schema_migrations`).Scan(&latest); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version = ?`, latest); err != nil {
		t.Fatal(err)
	}
	waitFor(http.StatusServiceUnavailable, "migrations")
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, latest); err != nil {
		t.Fatal(err)
	}
	waitFor(http.StatusOK, "")
	// A newer release migrated the database (a rolling upgrade): this
	// node stays ready until its turn to be replaced.
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES ('9999_a_later_release', 0)`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the readiness cache
	waitFor(http.StatusOK, "")

	stop()
	<-done
	g.Store.Close()
	waitFor(http.StatusServiceUnavailable, "database")
}
