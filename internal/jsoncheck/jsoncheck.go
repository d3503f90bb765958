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
	"strings"
	"unicode/utf8"
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
//
// It is a byte scanner rather than a walk of json.Decoder tokens: it runs
// on every bill a merchant creates, and the token walk allocated for each
// token (a tenth of the CPU of creating a bill).
func UniqueNames(data []byte) error {
	// Room for a usual body's names without growing (no allocation for
	// the bodies merchants send).
	var folded [512]byte
	var names [32][2]int
	var open [8]int
	s := scanner{folded: folded[:0], names: names[:0], open: open[:0]}
	return s.run(data)
}

// scanner keeps the folded names of every open object in one buffer:
// names holds their spans, and each open container remembers where its
// names start (-1 for an array).
type scanner struct {
	folded []byte
	names  [][2]int
	open   []int
}

func (s *scanner) run(data []byte) error {
	expectName := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{':
			s.open = append(s.open, len(s.names))
			expectName = true
		case '[':
			s.open = append(s.open, -1)
			expectName = false
		case '}', ']':
			if len(s.open) == 0 {
				return nil // not JSON: for the caller's decoder to describe
			}
			if first := s.open[len(s.open)-1]; first >= 0 {
				if len(s.names) > first {
					s.folded = s.folded[:s.names[first][0]]
				}
				s.names = s.names[:first]
			}
			s.open = s.open[:len(s.open)-1]
			expectName = false
		case ',':
			expectName = len(s.open) > 0 && s.open[len(s.open)-1] >= 0
		case '"':
			end, escaped := stringEnd(data, i+1)
			if end < 0 {
				return nil
			}
			if expectName {
				if err := s.name(data[i:end+1], escaped); err != nil {
					return err
				}
				expectName = false
			}
			i = end
		}
	}
	return nil
}

// stringEnd is the index of the quote closing the string that starts at
// from, or -1, and whether the string holds an escape.
func stringEnd(data []byte, from int) (int, bool) {
	escaped := false
	for j := from; j < len(data); j++ {
		switch data[j] {
		case '"':
			return j, escaped
		case '\\':
			escaped = true
			j++
		}
	}
	return -1, escaped
}

// name records one member name of the innermost object, quoted as it was
// sent, and refuses it if that object already has it.
func (s *scanner) name(quoted []byte, escaped bool) error {
	if len(s.open) == 0 || s.open[len(s.open)-1] < 0 {
		return nil
	}
	raw := quoted[1 : len(quoted)-1]
	start := len(s.folded)
	if escaped || !isASCII(raw) {
		var decoded string
		if err := json.Unmarshal(quoted, &decoded); err != nil {
			return nil
		}
		s.folded = append(s.folded, fold(decoded)...)
	} else {
		for _, b := range raw {
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			s.folded = append(s.folded, b)
		}
	}
	name := s.folded[start:]
	for _, span := range s.names[s.open[len(s.open)-1]:] {
		if bytes.Equal(s.folded[span[0]:span[1]], name) {
			shown := string(raw)
			if escaped || !isASCII(raw) {
				_ = json.Unmarshal(quoted, &shown)
			}
			if len(shown) > maxNameInError {
				shown = shown[:maxNameInError] + "…"
			}
			return fmt.Errorf("%w: %q appears twice in one object", ErrDuplicateName, shown)
		}
	}
	s.names = append(s.names, [2]int{start, len(s.folded)})
	return nil
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// fold is a name as a case-insensitive match sees it: upper-casing first
// takes "ſ" to "S" and the Kelvin sign stays K, then lower-casing takes both
// to plain "s" and "k".
func fold(name string) string { return strings.ToLower(strings.ToUpper(name)) }
