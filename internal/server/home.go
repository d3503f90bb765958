package server

import (
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

// home answers GET / so that someone who opens the gateway's address in a
// browser, or curls it, learns what it is and where to go next, instead of
// meeting a JSON 404. It lists what its own listener serves (mux): with
// --form-addr the API's listener listed /cardPay, and with
// --dashboard-addr a link to the dashboard would be a 404.
type home struct {
	publicURL string
	mux       *http.ServeMux
}

// serves reports whether h's listener answers method on path with
// anything but its catch-all.
func (h home) serves(method, path string) bool {
	_, pattern := h.mux.Handler(&http.Request{Method: method, URL: &url.URL{Path: path}, Host: "kadi"})
	return pattern != "/"
}

// served are the endpoints h's listener answers.
func (h home) served() []endpoint {
	var out []endpoint
	for _, e := range endpoints {
		if path, _, _ := strings.Cut(e.Path, "?"); h.serves(e.Method, path) {
			out = append(out, e)
		}
	}
	return out
}

// endpoint is one line of what the gateway offers.
type endpoint struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	What   string `json:"what"`
}

var endpoints = []endpoint{
	{"POST", "/identity/v2/token", "an access token (Basic API key; username, password)"},
	{"POST", "/token", "a pay-only payment-token for the hosted form (also /v1/token)"},
	{"POST", "/payment/v2/bills", "create a bill (Bearer access token)"},
	{"POST", "/cardPay", "the hosted card form: the shop's checkout posts the customer here"},
	{"GET", "/payment/v2/query?billReference=…", "verify a payment (Bearer access token)"},
	{"GET", "/payment/v2/notifications", "the IPN delivery log (Basic API key)"},
	{"GET", "/livez", "liveness: the process serves (whatever its database does)"},
	{"GET", "/healthz", "health: the process and its database answer"},
	{"GET", "/readyz", "readiness: database, schema and IPN worker"},
	{"GET", "/docs", "the API reference (the OpenAPI 3.1 document: /openapi.json, /openapi.yaml)"},
}

const docsURL = "https://github.com/kadipay/kadi/tree/main/docs"

var homePage = template.Must(template.New("home").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Kadi payment gateway</title></head>
<body><main>
<h1>Kadi payment gateway</h1>
<p>This is the API of a Kadi hosted card payment gateway at {{.URL}}. Merchants integrate with it
from their servers; shoppers reach it only through a shop's checkout.</p>
<h2>Endpoints</h2>
<ul>{{range .Endpoints}}<li><code>{{.Method}} {{.Path}}</code>: {{.What}}</li>{{end}}</ul>
{{if .Dashboard}}<p>Merchants: <a href="/dashboard/">sign in to the dashboard</a> to see payments and manage keys and IPN.</p>{{end}}
<p>Documentation: <a href="{{.Docs}}">{{.Docs}}</a> (API, hosted form, IPN, test cards, security).</p>
</main></body></html>
`))

func (h home) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if strings.Contains(r.Header.Get("Accept"), "text/html") {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		_ = homePage.Execute(w, map[string]any{"URL": h.publicURL, "Endpoints": h.served(), "Docs": docsURL, "Dashboard": h.serves("GET", "/dashboard/")})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	doc := map[string]any{"name": "Kadi payment gateway", "docs": docsURL, "endpoints": h.served()}
	if h.serves("GET", "/dashboard/") {
		doc["dashboard"] = h.publicURL + "/dashboard/"
	}
	_ = json.NewEncoder(w).Encode(doc)
}
