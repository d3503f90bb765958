package apidocs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/kadipay/kadi/internal/jsonorder"
)

// object is a JSON object of the document, in the order it was written.
type object = jsonorder.Object

// decode reads JSON keeping the order of every object's members.
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := jsonorder.Decode(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the document")
	}
	return v, nil
}

// pretty indents JSON for an example block.
func pretty(v any) string {
	raw, err := jsonorder.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return strings.TrimSpace(buf.String())
}
