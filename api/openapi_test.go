package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/oasdiff/yaml"
	yaml3 "github.com/oasdiff/yaml3"

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
// says, in the same order (the reference page at /docs follows it).
func TestJSONIsTheYAML(t *testing.T) {
	ordered, err := toJSON(openapi.YAML())
	if err != nil {
		t.Fatalf("convert api/openapi.yaml: %v", err)
	}
	if *update {
		if err := os.WriteFile("openapi.json", ordered, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(ordered, openapi.JSON()) {
		t.Error("api/openapi.json is not api/openapi.yaml: run go generate ./api")
	}
	// The converter here must read YAML as kin-openapi's own reader does.
	reference, err := yaml.YAMLToJSON(openapi.YAML())
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(reference, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(ordered, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Error("toJSON reads api/openapi.yaml differently from oasdiff/yaml")
	}
}

// toJSON converts YAML to indented JSON keeping the order of mappings.
func toJSON(src []byte) ([]byte, error) {
	var doc yaml3.Node
	if err := yaml3.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeNode(&buf, &doc, ""); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

func writeNode(buf *bytes.Buffer, n *yaml3.Node, indent string) error {
	switch n.Kind {
	case yaml3.DocumentNode:
		return writeNode(buf, n.Content[0], indent)
	case yaml3.AliasNode:
		return writeNode(buf, n.Alias, indent)
	case yaml3.MappingNode:
		if len(n.Content) == 0 {
			buf.WriteString("{}")
			return nil
		}
		buf.WriteString("{\n")
		for i := 0; i < len(n.Content); i += 2 {
			key, err := json.Marshal(n.Content[i].Value)
			if err != nil {
				return err
			}
			buf.WriteString(indent + "  ")
			buf.Write(key)
			buf.WriteString(": ")
			if err := writeNode(buf, n.Content[i+1], indent+"  "); err != nil {
				return err
			}
			if i+2 < len(n.Content) {
				buf.WriteByte(',')
			}
			buf.WriteByte('\n')
		}
		buf.WriteString(indent + "}")
	case yaml3.SequenceNode:
		if len(n.Content) == 0 {
			buf.WriteString("[]")
			return nil
		}
		buf.WriteString("[\n")
		for i, c := range n.Content {
			buf.WriteString(indent + "  ")
			if err := writeNode(buf, c, indent+"  "); err != nil {
				return err
			}
			if i+1 < len(n.Content) {
				buf.WriteByte(',')
			}
			buf.WriteByte('\n')
		}
		buf.WriteString(indent + "]")
	case yaml3.ScalarNode:
		return writeScalar(buf, n)
	default:
		return fmt.Errorf("line %d: unexpected YAML node kind %v", n.Line, n.Kind)
	}
	return nil
}

func writeScalar(buf *bytes.Buffer, n *yaml3.Node) error {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		b, err := strconv.ParseBool(n.Value)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int", "!!float":
		// Kept as written (1500.00 stays 1500.00) when it is a JSON number.
		if !json.Valid([]byte(n.Value)) {
			return fmt.Errorf("line %d: %q is not a JSON number", n.Line, n.Value)
		}
		buf.WriteString(n.Value)
	default:
		enc := json.NewEncoder(buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(n.Value); err != nil {
			return err
		}
		buf.Truncate(buf.Len() - 1) // Encode's newline
	}
	return nil
}
