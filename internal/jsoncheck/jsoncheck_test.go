package jsoncheck

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestUniqueNames(t *testing.T) {
	tests := []struct {
		body string
		dup  string // the name reported, "" when accepted
	}{
		{`{"amount":"1","amount":"1500"}`, "amount"},
		{`{"order":{"amount":"1","amount":"1500"}}`, "amount"},
		{`{"order":{"amount":"1"},"order":{"amount":"2"}}`, "order"},
		{`{"a":"1","\u0061":"2"}`, "a"},
		{`{"order":{"amount":"1","AMOUNT":"1500"}}`, "AMOUNT"},
		{`{"customer":{"name":"a"},"cuſtomer":{"name":"b"}}`, "cuſtomer"},
		{`{"k":1,"K":2}`, "K"},
		{`{"list":[{"x":1},{"x":2,"x":3}]}`, "x"},
		{`[{"k":1,"k":2}]`, "k"},
		{`{"a":{"b":{"c":{"d":1,"d":2}}}}`, "d"},
		{`{"` + strings.Repeat("n", 100) + `":1,"` + strings.Repeat("n", 100) + `":2}`, strings.Repeat("n", 40) + "…"},
		// Accepted: the same name in sibling or nested objects, names that
		// equal values, empty containers, scalars, and non-JSON (the
		// caller's decoder describes that).
		{`{"customer":{"name":"a"},"order":{"name":"b"}}`, ""},
		{`{"name":{"name":"name"}}`, ""},
		{`{"a":"b","b":"a"}`, ""},
		{`{"a":[],"b":{},"c":[[],[{}]]}`, ""},
		{`{"a":[1,"a",{"a":1}],"b":2}`, ""},
		{`"just a string"`, ""},
		{`{"a":1,`, ""},
		{``, ""},
		{`{"a":1}{"a":2}`, ""},
	}
	for _, tt := range tests {
		err := UniqueNames([]byte(tt.body))
		switch {
		case tt.dup == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tt.body, err)
		case tt.dup != "" && (!errors.Is(err, ErrDuplicateName) || !strings.Contains(err.Error(), `"`+tt.dup+`"`)):
			t.Errorf("%s: %v, want the duplicate %q named", tt.body, err, tt.dup)
		}
	}
}

// FuzzUniqueNames holds UniqueNames to a plain reference: decode into
// generic values, re-checking every object's keys from raw messages.
func FuzzUniqueNames(f *testing.F) {
	for _, s := range []string{`{"a":1,"a":2}`, `{"a":{"b":1},"b":{"a":1}}`, `[{"x":1},{"x":1}]`, `{"\u0061":1,"a":2}`, `{}`, `[]`, `1`, `{"a":[{"b":[{"c":1,"c":2}]}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		err := UniqueNames([]byte(body))
		if !json.Valid([]byte(body)) {
			return
		}
		if want := hasDuplicate(t, json.RawMessage(body)); want != (err != nil) {
			t.Fatalf("%q: UniqueNames = %v, reference says duplicate = %t", body, err, want)
		}
	})
}

// hasDuplicate is the reference: it walks the value with json.Decoder on
// each object separately, counting names.
func hasDuplicate(t *testing.T, raw json.RawMessage) bool {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '{':
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		_, _ = dec.Token() // {
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			name := strings.ToLower(strings.ToUpper(k.(string)))
			if seen[name] {
				return true
			}
			seen[name] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if hasDuplicate(t, v) {
				return true
			}
		}
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			t.Fatal(err)
		}
		for _, it := range items {
			if hasDuplicate(t, it) {
				return true
			}
		}
	}
	return false
}

// BenchmarkUniqueNames checks a create-bill body of the size merchants send.
func BenchmarkUniqueNames(b *testing.B) {
	body := []byte(`{"billerCode":"BLR0001","outletCode":"OUT0001","serviceId":"SRV0001","systemCode":"SYS0001",
	"settlementAccount":"0100012345678","customer":{"name":"Wanjiru Kamau","email":"wanjiru@example.co.ke","mobile":"+254 712 345678"},
	"order":{"orderRef":"ORD-2026-000123","amount":"1500.00","currency":"KES","description":"Two tickets, Nairobi–Mombasa",
	"expiry":"2026-12-01T10:00:00+03:00","callbackUrl":"https://shop.example.co.ke/kadi/callback"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := UniqueNames(body); err != nil {
			b.Fatal(err)
		}
	}
}
