package contract

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Drift compares the JSON field names of Go type t (its json tags) with the
// property names of the named schemas of components/schemas taken
// together (a type that answers in two shapes, such as a bill and a refused
// bill, is one Go type). Nested structs and slices of structs are compared
// with their properties' schemas too. It returns one line for every name
// only one side has: a field added to the code but not to the document,
// or the reverse.
func (v *Validator) Drift(t reflect.Type, schemas ...string) error {
	var ss []*openapi3.Schema
	for _, name := range schemas {
		s := v.Schema(name)
		if s == nil {
			return fmt.Errorf("api/openapi.yaml has no schema %s", name)
		}
		ss = append(ss, s)
	}
	var problems []string
	drift(t, ss, t.Name()+" ~ "+strings.Join(schemas, "|"), &problems)
	if len(problems) > 0 {
		return fmt.Errorf("the code and api/openapi.yaml disagree:\n\t%s", strings.Join(problems, "\n\t"))
	}
	return nil
}

func drift(t reflect.Type, schemas []*openapi3.Schema, where string, problems *[]string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	props := map[string][]*openapi3.Schema{}
	for _, s := range schemas {
		for name, ref := range s.Properties {
			if ref != nil && ref.Value != nil {
				props[name] = append(props[name], ref.Value)
			}
		}
	}
	fields := JSONFields(t)
	for _, name := range sortedKeys(fields) {
		sub, ok := props[name]
		if !ok {
			*problems = append(*problems, fmt.Sprintf("%s: field %q is in the code, not in the document", where, name))
			continue
		}
		ft := fields[name]
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			if ft.Kind() == reflect.Slice {
				var items []*openapi3.Schema
				for _, s := range sub {
					if s.Items != nil && s.Items.Value != nil {
						items = append(items, s.Items.Value)
					}
				}
				sub = items
			}
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && len(JSONFields(ft)) > 0 && hasProperties(sub) {
			drift(ft, sub, where+"."+name, problems)
		}
	}
	for _, name := range sortedKeys(props) {
		if _, ok := fields[name]; !ok {
			*problems = append(*problems, fmt.Sprintf("%s: property %q is in the document, not in the code", where, name))
		}
	}
}

func hasProperties(ss []*openapi3.Schema) bool {
	return slices.ContainsFunc(ss, func(s *openapi3.Schema) bool { return len(s.Properties) > 0 })
}

// JSONFields maps the JSON names of struct type t's fields, as
// encoding/json writes them, to their types.
func JSONFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	if t.Kind() != reflect.Struct {
		return out
	}
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for n, ft := range JSONFields(f.Type) {
				out[n] = ft
			}
			continue
		}
		if tag == "" {
			// Untagged fields are written under their Go name; the
			// gateway's wire types tag every field, so this shows up as
			// drift rather than passing silently.
			name = f.Name
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
