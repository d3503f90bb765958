// Package apidocs serves the API contract of api/openapi.yaml on the API
// listener: the document itself (GET /openapi.json, GET /openapi.yaml) and
// a readable reference rendered from it (GET /docs), all built into the
// binary: no CDN, no script.
package apidocs

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
	"time"

	_ "embed"

	openapi "github.com/kadipay/kadi/api"
)

//go:embed templates/docs.html
var pageTemplate string

//go:embed templates/docs.css
var css string

// cacheFor: the document changes only with the binary; a short public
// lifetime plus an ETag keeps clients fresh after an upgrade.
const cacheFor = 5 * time.Minute

// Handler serves the document and its reference page.
type Handler struct {
	jsonDoc, yamlDoc, docs document
	csp                    string
}

// document is one representation, ready to serve.
type document struct {
	body        []byte
	contentType string
	etag        string
}

func newDocument(body []byte, contentType string) document {
	sum := sha256.Sum256(body)
	return document{body: body, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
}

// New renders the reference page from the embedded document once.
func New() (*Handler, error) {
	return newHandler(openapi.JSON(), openapi.YAML())
}

func newHandler(jsonDoc, yamlDoc []byte) (*Handler, error) {
	p, err := build(jsonDoc)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("docs").Parse(pageTemplate)
	if err != nil {
		return nil, fmt.Errorf("parse the reference template: %w", err)
	}
	var buf bytes.Buffer
	data := struct {
		*page
		CSS template.CSS
	}{p, template.CSS(css)}
	if err := tmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("render the API reference: %w", err)
	}
	// The one inline style is allowed by its hash; nothing else may load
	// or run.
	sum := sha256.Sum256([]byte(css))
	return &Handler{
		jsonDoc: newDocument(jsonDoc, "application/json"),
		yamlDoc: newDocument(yamlDoc, "application/yaml; charset=utf-8"),
		docs:    newDocument(buf.Bytes(), "text/html; charset=utf-8"),
		csp: "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
			"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	}, nil
}

// Register adds GET /openapi.json, GET /openapi.yaml and GET /docs to mux.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, r *http.Request) { h.serveDocument(w, r, h.jsonDoc) })
	mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) { h.serveDocument(w, r, h.yamlDoc) })
	mux.HandleFunc("GET /docs", h.serveDocs)
	mux.HandleFunc("GET /docs/{$}", h.serveDocs)
}

func (h *Handler) serveDocument(w http.ResponseWriter, r *http.Request, d document) {
	// The contract is public: client generators and API tools on other
	// origins may read it.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	serve(w, r, d)
}

func (h *Handler) serveDocs(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Security-Policy", h.csp)
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("X-Frame-Options", "DENY")
	serve(w, r, h.docs)
}

func serve(w http.ResponseWriter, r *http.Request, d document) {
	hd := w.Header()
	hd.Set("Content-Type", d.contentType)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(cacheFor.Seconds())))
	hd.Set("ETag", d.etag)
	// ServeContent answers If-None-Match with 304 and ranges as the RFC
	// says; no modification time, so the ETag decides.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(d.body))
}
