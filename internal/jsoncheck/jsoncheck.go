// Package jsoncheck refuses JSON that two readers could understand
// differently. A body like {"amount":"1","amount":"1500"} means "1500" to
// Go's encoding/json (the last one wins) and "1" to some proxies, WAFs and
// logging pipelines (the first one wins): a gateway that accepts it lets
// whatever sits in front of it check one amount while it charges another.
package jsoncheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrDuplicateName is wrapped by every refusal of a repeated member name.
var ErrDuplicateName = errors.New("duplicate member name")

// maxNameInError keeps a hostile name from filling an error message.
const maxNameInError = 40

// UniqueNames reports an error when any object in data, at any depth, has
// two members of the same name. Names are compared as decoded, so "a" and
// "\u0061" are the same name, and without case, as Go's decoder matches
// struct fields: {"amount":"1","AMOUNT":"1500"} (or "ſ" for "s") would
// otherwise be one body with two readings. It says nothing about other
// syntax errors: the caller's decoder reports those in its own words.
func UniqueNames(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	// One set of names per open object; nil marks an open array.
	var open []map[string]bool
	expectName := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		} else if err != nil {
			return nil // not JSON: for the caller's decoder to describe
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				open = append(open, map[string]bool{})
				expectName = true
			case '[':
				open = append(open, nil)
				expectName = false
			default:
				open = open[:len(open)-1]
				expectName = len(open) > 0 && open[len(open)-1] != nil
			}
			continue
		case string:
			if expectName {
				names := open[len(open)-1]
				if folded := fold(t); names[folded] {
					if len(t) > maxNameInError {
						t = t[:maxNameInError] + "…"
					}
					return fmt.Errorf("%w: %q appears twice in one object", ErrDuplicateName, t)
				}
				names[fold(t)] = true
				expectName = false
				continue
			}
		}
		// A value: inside an object, the next token is a name again.
		expectName = len(open) > 0 && open[len(open)-1] != nil
	}
}

// fold is a name as a case-insensitive match sees it: upper-casing first
// takes "ſ" to "S" and the Kelvin sign stays K, then lower-casing takes both
// to plain "s" and "k".
func fold(name string) string { return strings.ToLower(strings.ToUpper(name)) }
