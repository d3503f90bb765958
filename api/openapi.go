// Package openapi holds the gateway's API contract: openapi.yaml, the
// source of truth, and openapi.json, generated from it by
// `go test ./api -run TestJSONIsTheYAML -update` so that the binary can
// serve and read the document without a YAML parser. A test fails when the
// two differ.
package openapi

import _ "embed"

//go:generate go test -run TestJSONIsTheYAML -update

//go:embed openapi.yaml
var yamlDoc []byte

//go:embed openapi.json
var jsonDoc []byte

// YAML returns the document as written. Callers must not modify it.
func YAML() []byte { return yamlDoc }

// JSON returns the document in JSON form. Callers must not modify it.
func JSON() []byte { return jsonDoc }
