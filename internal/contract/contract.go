// Package contract holds the gateway to api/openapi.yaml: it checks real
// responses against the document's operation for their method, path and
// status. Tests use it (the golden responses of internal/api, every
// response of the end-to-end suite); the binary does not.
package contract

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	openapi "github.com/kadipay/kadi/api"
)

// ErrNoOperation: the document describes no operation for the request's
// method and path (GET /healthz, the dashboard, a test's own receiver).
var ErrNoOperation = errors.New("no operation in api/openapi.yaml")

// Validator checks responses against the document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

var registerHTML sync.Once

// Load reads api/openapi.yaml.
func Load() (*Validator, error) {
	doc, err := openapi3.NewLoader().LoadFromData(openapi.YAML())
	if err != nil {
		return nil, fmt.Errorf("load api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	// Route by path alone: the servers are templates ({base_url},
	// {payment_form_url}) that tests fill with whatever port they got.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	for _, item := range doc.Paths.Map() {
		item.Servers = nil
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route api/openapi.yaml: %w", err)
	}
	// Hosted pages are HTML; their status and headers are checked, their
	// body is text.
	registerHTML.Do(func() {
		openapi3filter.RegisterBodyDecoder("text/html", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
			b, err := io.ReadAll(r)
			return string(b), err
		})
	})
	return &Validator{doc: doc, router: router}, nil
}

// Response checks one response to req. It returns ErrNoOperation when the
// document has no operation for req's method and path, and otherwise a
// description of every way the response breaks the document: an
// undocumented status, a missing or malformed header, a body that is not
// the schema (an extra or missing field included).
func (v *Validator) Response(req *http.Request, status int, header http.Header, body []byte) error {
	r := routable(req)
	route, params, err := v.router.FindRoute(r)
	if err != nil {
		return fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrNoOperation)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s %s answered %d, which api/openapi.yaml does not describe: %w\nbody: %s",
			req.Method, route.Path, status, err, clip(body))
	}
	return nil
}

// routable is req as the router matches it: by path alone (tests run the
// gateway on whatever address they got), and a path with the one trailing
// slash every route also takes is the same operation.
func routable(req *http.Request) *http.Request {
	r := req.Clone(context.Background())
	r.URL.Scheme, r.URL.Host, r.Host = "", "", ""
	if p := r.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		r.URL.Path, r.URL.RawPath = strings.TrimSuffix(p, "/"), ""
	}
	return r
}

// Body checks a JSON body against a schema of components/schemas, for
// answers that belong to no operation (the JSON 404 of an unknown path).
func (v *Validator) Body(schema string, body []byte) error {
	s := v.Schema(schema)
	if s == nil {
		return fmt.Errorf("api/openapi.yaml has no schema %s", schema)
	}
	var value any
	if err := json.Unmarshal(body, &value); err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	if err := s.VisitJSON(value, openapi3.EnableJSONSchema2020(), openapi3.MultiErrors()); err != nil {
		return fmt.Errorf("body is not %s: %w\nbody: %s", schema, err, clip(body))
	}
	return nil
}

// Schema returns components/schemas/name, or nil.
func (v *Validator) Schema(name string) *openapi3.Schema {
	ref := v.doc.Components.Schemas[name]
	if ref == nil {
		return nil
	}
	return ref.Value
}

// Properties returns the property names of components/schemas/name, sorted.
func (v *Validator) Properties(name string) []string {
	s := v.Schema(name)
	if s == nil {
		return nil
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Document is the parsed document, for tests that look into it.
func (v *Validator) Document() *openapi3.T { return v.doc }

// IsJSON reports whether a Content-Type names JSON.
func IsJSON(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt == "application/json"
}

func clip(b []byte) string {
	if len(b) > 2000 {
		return string(b[:2000]) + "…"
	}
	return string(b)
}
