package form

import (
	"net/url"
	"strings"
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
		if ps := s.checkLengths(customerPart); len(ps) != 0 {
			t.Errorf("%q: problems %v", in, ps)
		}
	}
	s, err := ParseSubmission(url.Values{"orderReference": {"ORD\n1"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if ps := s.checkLengths(trustPart); len(ps) != 1 || ps[0].Field != "orderReference" {
		t.Errorf("a line break in a reference: problems %v, want it refused", ps)
	}
}

// Lengths count characters as composed (NFC), as the bill's do: 200 "é"
// sent decomposed (400 code points) fit a 200-character field.
func TestLengthsCountComposedCharacters(t *testing.T) {
	for _, tc := range []struct {
		desc string
		ok   bool
	}{
		{strings.Repeat("\u00e9", 200), true},
		{strings.Repeat("e\u0301", 200), true},
		{strings.Repeat("e\u0301", 201), false},
		{strings.Repeat("x", 201), false},
	} {
		s, err := ParseSubmission(url.Values{"productDescription": {tc.desc}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if ps := s.checkLengths(customerPart); (len(ps) == 0) != tc.ok {
			t.Errorf("%d code points: problems %v, want ok %v", len([]rune(tc.desc)), ps, tc.ok)
		}
	}
}

// A refused callbackUrl says which part to fix.
func TestCallbackURLRefusalSaysWhy(t *testing.T) {
	for raw, want := range map[string]string{
		"https://shop.example./cb":    "without a trailing dot",
		"https://shop.example:0/cb":   "port between 1 and 65535",
		"https://u:p@shop.example/cb": "credentials",
		"https://shop.example;x/cb":   "by DNS name",
	} {
		_, err := CheckCallbackURL(raw, "test")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckCallbackURL(%s): %v, want it to say %q", raw, err, want)
		}
	}
}
