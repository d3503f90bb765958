package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	openapi "github.com/kadipay/kadi/api"
)

// The real binary serves the contract it was built with: /openapi.json and
// /openapi.yaml are the embedded document, byte for byte, /openapi.json
// loads and validates as OpenAPI 3.1, and /docs is the reference page
// rendered from it.
func TestOpenAPIServed(t *testing.T) {
	g := startGateway(t, nil)
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Get(g.BaseURL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return resp, body
	}

	for _, tc := range []struct {
		path, contentType string
		want              []byte
	}{
		{"/openapi.json", "application/json", openapi.JSON()},
		{"/openapi.yaml", "application/yaml; charset=utf-8", openapi.YAML()},
	} {
		resp, body := get(tc.path)
		if ct := resp.Header.Get("Content-Type"); ct != tc.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, ct, tc.contentType)
		}
		if !bytes.Equal(body, tc.want) {
			t.Errorf("GET %s is not the document embedded in this build", tc.path)
		}
		if resp.Header.Get("ETag") == "" || resp.Header.Get("Cache-Control") == "" {
			t.Errorf("GET %s: no caching headers: %v", tc.path, resp.Header)
		}
	}

	_, body := get("/openapi.json")
	doc, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatalf("/openapi.json does not load: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("/openapi.json is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Errorf("/openapi.json is not valid: %v", err)
	}
	fromYAML, err := openapi3.NewLoader().LoadFromData(openapi.YAML())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := doc.MarshalJSON()
	b, _ := fromYAML.MarshalJSON()
	if !bytes.Equal(a, b) {
		t.Error("/openapi.json and api/openapi.yaml describe different APIs")
	}

	resp, page := get("/docs")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("/docs headers: %v", resp.Header)
	}
	for _, want := range []string{"/payment/v2/bills", "/identity/v2/token", "/cardPay", "IPNPayload", "webhook-signature"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("/docs does not mention %s", want)
		}
	}
}
