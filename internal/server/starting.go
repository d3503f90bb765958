package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/kadipay/kadi/internal/secret"
)

// AnswerWhileStarting answers on ln while the gateway is being built (its
// database waited for, its migrations run): /livez 200, /healthz and
// /readyz 503, anything else 503 with Retry-After, as a page for a browser
// and JSON otherwise. Until then the port took connections and answered
// none, so probes and clients waited for their own timeouts, and an
// orchestrator could not tell a node starting from one hung. The function
// returned stops answering and leaves ln open, its next connections for
// Serve; it must be called once, before Serve.
func AnswerWhileStarting(ln net.Listener) (stop func()) {
	tl, ok := ln.(*net.TCPListener)
	if !ok {
		return func() {} // no way to stop accepting but closing it
	}
	handoff := &handoffListener{TCPListener: tl, conns: make(chan net.Conn), done: make(chan struct{})}
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		handoff.accept()
	}()
	srv := &http.Server{Handler: http.HandlerFunc(starting), ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(handoff)
	}()
	return func() {
		handoff.Close()
		// Accept's wait ends at a deadline already past; ln stays open.
		_ = tl.SetDeadline(time.Now())
		<-accepting
		_ = tl.SetDeadline(time.Time{})
		// Short: a connection opened but silent (a browser's preconnect)
		// holds Shutdown to its end, and the gateway's start with it.
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
	}
}

// handoffListener hands the interim server the connections one goroutine
// accepts from the real listener, so that closing it stops the interim
// server without closing the real one.
type handoffListener struct {
	*net.TCPListener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *handoffListener) accept() {
	for {
		c, err := l.TCPListener.Accept()
		if err != nil {
			select {
			case <-l.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of file descriptors, say
			continue
		}
		select {
		case l.conns <- c:
		case <-l.done:
			c.Close()
			return
		}
	}
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

// startingRetry is what a client starting too early is asked to wait.
const (
	startingRetry = "5"
	msgStarting   = "the gateway is starting; try again in a few seconds"
)

// starting answers a request that came before the gateway could, in the
// shape its endpoint answers an outage with (api/openapi.yaml), so that a
// client reads it as it reads any 503: the bill's own shape, OAuth's on
// the token endpoints, a page on the hosted form and the dashboard.
func starting(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set(RequestIDHeader, secret.NewID("req"))
	h.Set("Cache-Control", "no-store")
	// Cleaned as the gateway cleans it once started (withCleanPath): a
	// base URL ending in a slash posts its bills to //payment/v2/bills.
	path := strings.TrimSuffix(cleanPath(r.URL.Path), "/")
	if path == "/livez" {
		h.Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"alive"}`))
		return
	}
	h.Set("Retry-After", startingRetry)
	body := `{"code":"temporarily_unavailable","message":"` + msgStarting + `"}`
	switch {
	case path == "/readyz":
		body = `{"status":"not ready","failed":"starting"}`
	case path == "/healthz":
		body = `{"status":"unavailable"}`
	case path == "/identity/v2/token" || path == "/token" || path == "/v1/token":
		body = `{"error":"temporarily_unavailable","error_description":"` + msgStarting + `","code":"temporarily_unavailable","message":"` + msgStarting + `"}`
	case path == "/payment/v2/bills":
		body = `{"reference":"","amount":"","serviceId":"","status":false,"orderRef":"","channel":"CARD","remarks":"` + msgStarting +
			`","systemCode":"","code":"temporarily_unavailable","message":"` + msgStarting + `"}`
	case strings.HasPrefix(path, "/cardPay"), strings.HasPrefix(path, "/dashboard"), strings.Contains(r.Header.Get("Accept"), "text/html"):
		// A shopper sent to the card form, or a merchant's staff to the
		// dashboard: nothing was taken, and the page tries again.
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'none'")
		w.WriteHeader(http.StatusServiceUnavailable)
		// A refresh loads the address again by GET: right for a page, but
		// a posted form (the shop's checkout, a card) became a GET of
		// /cardPay, answered as a shop form that is not valid. Posted,
		// the shopper is sent back to post again.
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			_, _ = w.Write([]byte(startingPageTop + `<meta http-equiv="refresh" content="` + startingRetry + `">` + startingPageBody +
				`This page tries again in a few seconds.</p></main></body></html>`))
		} else {
			_, _ = w.Write([]byte(startingPageTop + startingPageBody + `Go back and try again in a few seconds.</p></main></body></html>`))
		}
		return
	}
	h.Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte(body))
}

const (
	startingPageTop  = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">`
	startingPageBody = `<title>Starting</title></head><body><main><h1>Starting up</h1><p>This payment service is starting. Nothing was charged. `
)
