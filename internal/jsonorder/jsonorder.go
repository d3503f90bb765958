// Package jsonorder reads JSON keeping every object's members in the order
// they were written, and writes them back in that order: the API reference
// follows the order its document was written in, and a golden response
// pins the order of the fields on the wire.
package jsonorder

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Object is a JSON object with its members in document order.
type Object []Member

// Member is one name and value of an Object.
type Member struct {
	Key   string
	Value any
}

// Get is the value of key, nil when absent.
func (o Object) Get(key string) any {
	for _, m := range o {
		if m.Key == key {
			return m.Value
		}
	}
	return nil
}

// Obj, Str and Arr are Get for a value of that kind; the zero value when
// absent or of another kind.
func (o Object) Obj(key string) Object { x, _ := o.Get(key).(Object); return x }
func (o Object) Str(key string) string { x, _ := o.Get(key).(string); return x }
func (o Object) Arr(key string) []any  { x, _ := o.Get(key).([]any); return x }

// Has reports whether key is present with a value other than null.
func (o Object) Has(key string) bool { return o.Get(key) != nil }

// MarshalJSON writes the members in order, without escaping <, > and &
// (see Marshal).
func (o Object) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, err := Marshal(m.Key)
		if err != nil {
			return nil, err
		}
		buf.Write(k)
		buf.WriteByte(':')
		v, err := Marshal(m.Value)
		if err != nil {
			return nil, err
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// Marshal writes JSON without escaping <, > and &: values are shown as
// text, and whatever shows them escapes for its own medium.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Decode reads one JSON value from dec: objects as Object, arrays as
// []any, everything else as dec's tokens (json.Number with UseNumber).
func Decode(dec *json.Decoder) (any, error) {
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
		o := Object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, _ := k.(string)
			v, err := Decode(dec)
			if err != nil {
				return nil, err
			}
			o = append(o, Member{Key: key, Value: v})
		}
		_, err := dec.Token()
		return o, err
	case '[':
		a := []any{}
		for dec.More() {
			v, err := Decode(dec)
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
