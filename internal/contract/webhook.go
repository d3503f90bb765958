package contract

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// Webhook checks a request the gateway sent to a merchant (the IPN)
// against the document's webhooks/name: its headers, its Basic
// credentials and its body, field for field.
func (v *Validator) Webhook(name string, req *http.Request, body []byte) error {
	item := v.doc.Webhooks[name]
	if item == nil {
		return fmt.Errorf("api/openapi.yaml has no webhook %s", name)
	}
	op := item.GetOperation(req.Method)
	if op == nil {
		return fmt.Errorf("webhook %s: api/openapi.yaml has no %s", name, req.Method)
	}
	r := req.Clone(context.Background())
	r.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{
		Request: r,
		Route:   &routers.Route{Spec: v.doc, Path: name, PathItem: item, Method: req.Method, Operation: op},
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: basicCredentials},
	}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		return fmt.Errorf("webhook %s: the request breaks api/openapi.yaml: %w\nbody: %s", name, err, clip(body))
	}
	return nil
}

// basicCredentials holds an HTTP Basic scheme to its shape: the header is
// there and decodes to a username and password. Whether they are right is
// the receiver's business.
func basicCredentials(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	s := in.SecurityScheme
	if s == nil || s.Type != "http" || s.Scheme != "basic" {
		return fmt.Errorf("security scheme %s: only HTTP Basic is checked here", in.SecuritySchemeName)
	}
	if _, _, ok := in.RequestValidationInput.Request.BasicAuth(); !ok {
		return fmt.Errorf("no Basic credentials")
	}
	return nil
}
