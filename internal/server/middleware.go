package server

import (
	"context"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/clientaddr"
	"github.com/kadipay/kadi/internal/logging"
	"github.com/kadipay/kadi/internal/secret"
)

// MaxBody is docs/api.md's limit on any request body.
const MaxBody = 64 << 10

// RequestIDHeader is on every response and in every log line.
const RequestIDHeader = "X-Request-Id"

var safeRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{8,64}$`)

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// withRequest gives every request an id (a sane incoming one is kept, so a
// merchant can correlate) and its client address (decided here once, so
// that throttle, lockout, audit and this log agree), bounds its body,
// recovers panics and logs it once.
func withRequest(next http.Handler, log *slog.Logger, addrs clientaddr.Resolver, m *httpMetrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(RequestIDHeader)
		// An id that looks like a card number would be logged and echoed in
		// clear: replace it like any other unusable id.
		if !safeRequestID.MatchString(id) || card.RedactPath(id) != id {
			id = secret.NewID("req")
		}
		client := addrs.Resolve(r.RemoteAddr, r.Header)
		ctx := clientaddr.With(logging.WithRequestID(r.Context(), id), client)
		r = r.WithContext(ctx)
		w.Header().Set(RequestIDHeader, id)
		r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
		rec := &statusRecorder{ResponseWriter: w}
		start := time.Now()
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				log.ErrorContext(ctx, "panic serving request", "panic", p, "method", r.Method, "path", loggedPath(r.URL.Path))
				if rec.status == 0 {
					rec.Header().Set("Content-Type", "application/json")
					rec.WriteHeader(http.StatusInternalServerError)
					_, _ = rec.Write([]byte(`{"code":"internal_error","message":"internal error; quote request id ` + id + `"}`))
				}
			}
			// The path only: query strings can hold references but never
			// card data, which travels in bodies, and bodies are not logged.
			took := time.Since(start)
			status := rec.status
			if status == 0 {
				status = http.StatusOK // nothing written: net/http answers 200
			}
			m.observe(r, status, took)
			accessLog(ctx, log.Handler(), r, status, took, client)
		}()
		next.ServeHTTP(rec, r)
	})
}

// accessLog writes a request's access line. It builds the record itself
// rather than through Logger.InfoContext, which captures the caller's
// stack for a source position the log never prints and boxes each value:
// on /healthz the line is most of what the gateway adds to a bare handler
// (docs/performance.md, "Middleware").
func accessLog(ctx context.Context, h slog.Handler, r *http.Request, status int, took time.Duration, client string) {
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	line := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	line.AddAttrs(slog.String("method", r.Method), slog.String("path", loggedPath(r.URL.Path)), slog.Int("status", status),
		slog.Int64("duration_ms", took.Milliseconds()), slog.String("remote", client))
	if peer := clientaddr.Socket(r.RemoteAddr); peer != client {
		line.AddAttrs(slog.String("proxy", peer)) // who vouched for remote
	}
	line.Add(logging.Notes(ctx)...)
	_ = h.Handle(ctx, line)
}

// withBudget gives each request at most d (its handler's store calls end
// with it): a database host that hangs, neither answering nor resetting
// its connections, held requests until it came back, past the server's
// write timeout, and a card was charged a minute after a shopper's click
// whose page had long given up. The payments CSV streams for as long as it
// takes, within the write timeout; the health probes bound their own ping
// (2 s) and, polled thousands of times a second, are spared the timer.
func withBudget(next http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/livez", "/healthz", "/readyz", "/dashboard/payments.csv":
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		timed := r.WithContext(ctx)
		next.ServeHTTP(w, timed)
		r.Pattern = timed.Pattern // the route the mux chose, for the access log and metrics
	})
}

// withCleanPath serves a path with repeated slashes or dot segments as its
// clean form, as if asked so. Go's mux answered them 307 with an empty
// body: a base URL ending in a slash ("https://gw/" + "/payment/v2/bills")
// sent every call there, and clients that do not follow a 307 for a POST
// (Java's HttpURLConnection, PHP's cURL by default) got no answer they
// could read. It comes first, so that the access log's path (which cuts a
// hosted page's id off by its prefix) and every later check see the path
// that is served. A path with escapes is left to the mux.
func withCleanPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// CONNECT's target is an authority, not a path; the mux leaves it
		// as it is too.
		if r.URL.RawPath == "" && r.Method != http.MethodConnect {
			if clean := cleanPath(r.URL.Path); clean != r.URL.Path {
				u := *r.URL
				u.Path = clean
				r.URL = &u // in place: the handlers around the mux read r's route back
			}
		}
		next.ServeHTTP(w, r)
	})
}

// cleanPath is p without repeated slashes and dot segments, keeping a
// trailing slash (every API path answers with one).
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean
}

// withHSTS asks browsers to keep to https, on every answer when the public
// URL is https: only the card pages did, so a dashboard sign-in (which sets
// a Secure cookie) or a shop's first redirect could be taken to http.
func withHSTS(next http.Handler, https bool) http.Handler {
	if !https {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
		next.ServeHTTP(w, r)
	})
}

// loggedPath is a path as the logs may hold it: a hosted page's id opens
// that page (and a card page's checkout) to whoever holds it, so it is
// cut off; a card number in it, however split, is masked.
func loggedPath(p string) string {
	// Cleaned here too: a path with escapes is left unclean for the mux,
	// and //cardPay/page/ID%41 was logged with its id whole.
	if rest, ok := strings.CutPrefix(cleanPath(p), "/cardPay/page/"); ok && rest != "" {
		return "/cardPay/page/…"
	}
	if len(p) > maxLoggedPath {
		// A path of a megabyte of numbers cost the redactor a second a
		// request. What is cut off is not logged, nor the digits and
		// separators before the cut, which could be part of a card.
		p = strings.TrimRightFunc(p[:maxLoggedPath], func(r rune) bool { return !unicode.IsLetter(r) }) + "…"
	}
	return card.RedactPath(p)
}

// maxLoggedPath bounds how much of a request path the access log keeps:
// no route of ours is a tenth as long.
const maxLoggedPath = 1024
