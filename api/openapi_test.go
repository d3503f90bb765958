package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/yaml"

	openapi "github.com/kadipay/kadi/api"
)

var update = flag.Bool("update", false, "rewrite openapi.json from openapi.yaml")

// The document must be a valid OpenAPI 3.1 document: kin-openapi checks its
// structure, every $ref, and every example against its schema.
func TestDocumentIsValidOpenAPI31(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.YAML())
	if err != nil {
		t.Fatalf("load api/openapi.yaml: %v", err)
	}
	if doc.OpenAPI != "3.1.0" || !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi is %q, want 3.1.0", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Errorf("api/openapi.yaml is not valid OpenAPI 3.1: %v", err)
	}
	if len(doc.Webhooks) == 0 {
		t.Error("the IPN webhook is missing")
	}
}

// The binary serves and reads openapi.json; it must say what openapi.yaml
// says.
func TestJSONIsTheYAML(t *testing.T) {
	fromYAML, err := yaml.YAMLToJSON(openapi.YAML())
	if err != nil {
		t.Fatalf("convert api/openapi.yaml: %v", err)
	}
	if *update {
		var out bytes.Buffer
		if err := json.Indent(&out, fromYAML, "", "  "); err != nil {
			t.Fatal(err)
		}
		out.WriteByte('\n')
		if err := os.WriteFile("openapi.json", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	var want, got any
	if err := json.Unmarshal(fromYAML, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(openapi.JSON(), &got); err != nil {
		t.Fatalf("api/openapi.json: %v", err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Error("api/openapi.json is not api/openapi.yaml: run go generate ./api")
	}
}
