package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/clientaddr"
	"github.com/kadipay/kadi/internal/logging"
)

func TestRequestID(t *testing.T) {
	var logs bytes.Buffer
	var seen string
	h := withRequest(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = logging.RequestID(r.Context())
	}), logging.New(&logs, slog.LevelInfo), clientaddr.Resolver{}, nil)

	cases := []struct {
		incoming string
		kept     bool
	}{
		{"", false},
		{"merchant-req.42_abc", true},
		{"short", false},                 // under 8 characters
		{strings.Repeat("a", 65), false}, // over 64
		{"has space in it", false},       // outside the safe set
		{"inject\"quote<tag>", false},    // would break logs or pages
		{"req_0123456789abcdef", true},
		// A card number would be echoed and logged in clear.
		{"4242424242424242", false},
		{"4242-4242-4242-4242", false},
		{"4242.4242.4242.4242", false},
		{"4242_4242_4242_4242", false},
	}
	ids := map[string]bool{}
	for _, tc := range cases {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if tc.incoming != "" {
			req.Header.Set(RequestIDHeader, tc.incoming)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		got := rec.Header().Get(RequestIDHeader)
		if got == "" || got != seen {
			t.Errorf("incoming %q: header %q, context %q", tc.incoming, got, seen)
		}
		if kept := got == tc.incoming; kept != tc.kept {
			t.Errorf("incoming %q: answered %q, kept=%v want %v", tc.incoming, got, kept, tc.kept)
		}
		if !tc.kept && ids[got] {
			t.Errorf("generated id %q twice", got)
		}
		ids[got] = true
		if strings.Contains(logs.String(), "4242_4242") || strings.Contains(logs.String(), "4242.4242") {
			t.Errorf("incoming %q: a card number in the log", tc.incoming)
		}
		if !strings.Contains(logs.String(), `"request_id":"`+got+`"`) {
			t.Errorf("the access log does not carry request id %q", got)
		}
	}
}

func TestBodyLimit(t *testing.T) {
	var readErr error
	var n int64
	h := withRequest(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, readErr = io.Copy(io.Discard, r.Body)
	}), slog.New(slog.NewTextHandler(io.Discard, nil)), clientaddr.Resolver{}, nil)

	const limit = 65536 // docs/api.md: bodies over 64 KiB are refused
	for _, size := range []int{limit, limit + 1} {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(make([]byte, size)))
		h.ServeHTTP(httptest.NewRecorder(), req)
		var tooLarge *http.MaxBytesError
		if size <= limit && (readErr != nil || n != int64(size)) {
			t.Errorf("%d bytes: read %d, %v", size, n, readErr)
		}
		if size > limit && (n > limit || !errors.As(readErr, &tooLarge)) {
			t.Errorf("%d bytes: read %d, %v; want the 64 KiB limit", size, n, readErr)
		}
	}
}

// A panic becomes a 500 with docs/api.md's JSON body, the request id, and
// one error log line; the server keeps serving.
func TestPanicRecovered(t *testing.T) {
	var logs bytes.Buffer
	h := withRequest(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("boom 4242424242424242")
	}), logging.New(&logs, slog.LevelInfo), clientaddr.Resolver{}, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/payment/v2/query", nil))

	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d", rec.Code)
	}
	id := rec.Header().Get(RequestIDHeader)
	var body struct{ Code, Message string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code == "" || !strings.Contains(body.Message, id) {
		t.Errorf("body %q (%v): want JSON code and a message quoting the request id %s", rec.Body, err, id)
	}
	if strings.Contains(rec.Body.String(), "boom") {
		t.Error("the panic value reaches the client")
	}
	if !strings.Contains(logs.String(), "panic serving request") || strings.Contains(logs.String(), "4242424242424242") {
		t.Errorf("log: %s", logs.String())
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
}

// The access line says what the client got, in the fields log collectors
// read: a handler that writes nothing is a 200 (it was logged as status 0).
func TestAccessLine(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		status  float64
	}{
		{"nothing written", func(http.ResponseWriter, *http.Request) {}, 200},
		{"a body", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }, 200},
		{"a status", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }, 418},
	} {
		var logs bytes.Buffer
		h := withRequest(tc.handler, logging.New(&logs, slog.LevelInfo), clientaddr.Resolver{}, nil)
		req := httptest.NewRequest(http.MethodPost, "/payment/v2/bills", nil)
		req.RemoteAddr = "192.0.2.7:4711"
		req.Header.Set(RequestIDHeader, "req-line-1")
		h.ServeHTTP(httptest.NewRecorder(), req)
		var line map[string]any
		if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
			t.Fatalf("%s: %v\n%s", tc.name, err, logs.String())
		}
		want := map[string]any{"level": "INFO", "msg": "request", "request_id": "req-line-1", "method": "POST",
			"path": "/payment/v2/bills", "status": tc.status, "remote": "192.0.2.7"}
		for k, v := range want {
			if line[k] != v {
				t.Errorf("%s: %s is %v, want %v", tc.name, k, line[k], v)
			}
		}
		if _, ok := line["duration_ms"].(float64); !ok {
			t.Errorf("%s: duration_ms %v", tc.name, line["duration_ms"])
		}
		if _, ok := line["time"].(string); !ok || len(line) != len(want)+2 {
			t.Errorf("%s: fields %v", tc.name, line)
		}
	}
}

// The access log holds the path, with a card number in it masked however
// it is split: slashes too, which the logs' own redaction leaves alone
// (they join a file path's numbered directories).
func TestAccessLogMasksACardInThePath(t *testing.T) {
	var logs bytes.Buffer
	h := withRequest(http.NotFoundHandler(), logging.New(&logs, slog.LevelInfo), clientaddr.Resolver{}, nil)
	for _, p := range []string{"/x/4242/4242/4242/4242", "/x/4242.4242.4242.4242", "/x/4242424242424242/y"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	if strings.Contains(logs.String(), "4242/4242/4242/4242") || strings.Count(logs.String(), "424242******4242") != 3 {
		t.Errorf("access log:\n%s", logs.String())
	}
}

// An unclean path is served, and logged, as its clean form: the access
// log cut a hosted page's id off by its prefix, which //cardPay/page/ID
// did not have.
func TestCleanPath(t *testing.T) {
	var logs bytes.Buffer
	var served []string
	h := withCleanPath(withRequest(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served = append(served, r.URL.Path)
	}), logging.New(&logs, slog.LevelInfo), clientaddr.Resolver{}, nil))
	for _, tt := range []struct{ in, want string }{
		{"//cardPay/page/SEALEDPAGEID", "/cardPay/page/SEALEDPAGEID"},
		{"/identity//v2/token/", "/identity/v2/token/"},
		{"/a/./b/../token", "/a/token"},
		{"/token/", "/token/"},
		{"/", "/"},
	} {
		served = nil
		req := httptest.NewRequest(http.MethodPost, "/", nil)
		req.URL.Path = tt.in
		h.ServeHTTP(httptest.NewRecorder(), req)
		if len(served) != 1 || served[0] != tt.want {
			t.Errorf("%s served as %q, want %q", tt.in, served, tt.want)
		}
	}
	// A path with escapes is left to the mux, but not logged whole.
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET //cardPay/page/SEALED%50AGEID HTTP/1.1\r\nHost: x\r\n\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	req.RemoteAddr = "192.0.2.1:1234"
	h.ServeHTTP(httptest.NewRecorder(), req)
	if strings.Contains(logs.String(), "SEALEDPAGEID") || strings.Contains(logs.String(), "SEALED%50AGEID") {
		t.Errorf("a hosted page's id in the access log:\n%s", logs.String())
	}
	// CONNECT names an authority: left as it is.
	served = nil
	connect := httptest.NewRequest(http.MethodConnect, "/", nil)
	connect.URL.Path = ""
	h.ServeHTTP(httptest.NewRecorder(), connect)
	if len(served) != 1 || served[0] != "" {
		t.Errorf("CONNECT served as %q, want its empty path", served)
	}
}

// A request path of a megabyte is logged cut short, before the redactor
// (which costs more the longer a run of numbers is) reads it, and no digit
// next to the cut is left: it could be the start of a card.
func TestLoggedPathIsBounded(t *testing.T) {
	long := "/x/" + strings.Repeat("0,19,38,", 100_000)
	got := loggedPath(long)
	if len(got) > maxLoggedPath+len("…") || !strings.HasSuffix(got, "…") {
		t.Fatalf("a %d-byte path logged as %d bytes: %.40q…", len(long), len(got), got)
	}
	card := "/x/" + strings.Repeat("a", maxLoggedPath-10) + "4242424242424242"
	if got := loggedPath(card); strings.Contains(got, "4242") {
		t.Errorf("a card cut by the bound is left in the log: %q", got[len(got)-20:])
	}
	if got := loggedPath("/payment/v2/query"); got != "/payment/v2/query" {
		t.Errorf("a short path: %q", got)
	}
}
