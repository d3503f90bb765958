package server

import (
	_ "embed"
	"net/http"
)

// faviconICO is a 32-pixel padlock in the pages' accent colour. Every
// browser asks each listener for /favicon.ico on the first page it shows
// (the hosted form, the dashboard, the API docs): a 404 there put a
// failed request in every shopper's console and a 404 in the access log
// and in kadi_http_requests_total for every checkout.
//
//go:embed favicon.ico
var faviconICO []byte

func favicon(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "image/x-icon")
	w.Header().Set("Cache-Control", "public, max-age=604800")
	_, _ = w.Write(faviconICO)
}
