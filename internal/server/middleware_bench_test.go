package server

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/kadipay/kadi/internal/clientaddr"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/metrics"
)

// BenchmarkMiddleware measures what the middleware adds to a request
// that does nothing: the bare handler is the baseline; "no log output"
// is the request id, body bound and panic recovery with the access log
// formatted but thrown away; "log to a file" also writes the line, as
// kadi serve does to stderr.
func BenchmarkMiddleware(b *testing.B) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) })
	f, err := os.Create(filepath.Join(b.TempDir(), "log"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare handler", ok},
		{"no log output", withRequest(ok, logging.New(io.Discard, slog.LevelInfo), clientaddr.Resolver{}, nil)},
		{"log to a file", withRequest(ok, logging.New(f, slog.LevelInfo), clientaddr.Resolver{}, nil)},
		{"no log output, route metrics", withRequest(ok, logging.New(io.Discard, slog.LevelInfo), clientaddr.Resolver{}, newHTTPMetrics(metrics.New()))},
		{"clean path only", withCleanPath(ok)},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
			for b.Loop() {
				c.h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
