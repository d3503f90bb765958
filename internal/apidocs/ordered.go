package apidocs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// object is a JSON object with its members in document order: the
// reference page follows the order the document was written in.
type object []member

type member struct {
	key string
	val any
}

func (o object) get(key string) any {
	for _, m := range o {
		if m.key == key {
			return m.val
		}
	}
	return nil
}

func (o object) obj(key string) object { x, _ := o.get(key).(object); return x }
func (o object) str(key string) string { x, _ := o.get(key).(string); return x }
func (o object) arr(key string) []any  { x, _ := o.get(key).([]any); return x }
func (o object) has(key string) bool   { return o.get(key) != nil }

func (o object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		v, err := marshal(m.val)
		if err != nil {
			return nil, err
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// marshal writes JSON without escaping <, > and &: examples are shown as
// text, and the template escapes them for HTML.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// decode reads JSON keeping the order of every object's members.
func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the document")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			o = append(o, member{key, v})
		}
		_, err := dec.Token()
		return o, err
	case '[':
		a := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

// pretty indents JSON for an example block.
func pretty(v any) string {
	raw, err := marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return strings.TrimSpace(buf.String())
}
