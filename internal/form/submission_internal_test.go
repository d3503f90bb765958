package form

import (
	"net/url"
	"testing"
)

// A shop's textarea sends line breaks: in free text they become spaces
// (they were refused as control characters, before any card was asked,
// with no way back to the shop); elsewhere a control character is still
// refused.
func TestProseLineBreaks(t *testing.T) {
	for in, want := range map[string]string{
		"Plot 12\r\nKimathi Street":  "Plot 12 Kimathi Street",
		"Plot 12 \n  Kimathi Street": "Plot 12 Kimathi Street",
		"\nPlot 12\n\n\tNairobi\n":   "Plot 12 Nairobi",
		"one line":                   "one line",
		"tab\tseparated":             "tab separated",
	} {
		s, err := ParseSubmission(url.Values{"address": {in}, "city": {in}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if s.Address != want || s.City != want {
			t.Errorf("%q: address %q, city %q; want %q", in, s.Address, s.City, want)
		}
		if ps := s.checkLengths(false); len(ps) != 0 {
			t.Errorf("%q: problems %v", in, ps)
		}
	}
	s, err := ParseSubmission(url.Values{"orderReference": {"ORD\n1"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if ps := s.checkLengths(false); len(ps) != 1 || ps[0].Field != "orderReference" {
		t.Errorf("a line break in a reference: problems %v, want it refused", ps)
	}
}
