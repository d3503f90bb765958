package jsonorder

import (
	"encoding/json"
	"strings"
	"testing"
)

// Members come back in the order they were written, at every depth, and
// are written out again in that order, unescaped.
func TestRoundTripKeepsOrder(t *testing.T) {
	for _, in := range []string{
		`{"z":1,"a":2,"m":3}`,
		`{"b":{"y":true,"x":null},"a":[{"q":"1","p":"2"},[],{}]}`,
		`{"example":"<a href=\"x\">&</a>"}`,
		`[3,"two",{"k":1.50}]`,
		`"plain"`,
	} {
		dec := json.NewDecoder(strings.NewReader(in))
		dec.UseNumber()
		v, err := Decode(dec)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		out, err := Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if string(out) != in {
			t.Errorf("round trip of %s gave %s", in, out)
		}
	}
}

func TestAccessors(t *testing.T) {
	dec := json.NewDecoder(strings.NewReader(`{"o":{"s":"v"},"a":[1],"n":null,"s":"text"}`))
	v, err := Decode(dec)
	if err != nil {
		t.Fatal(err)
	}
	o := v.(Object)
	switch {
	case o.Obj("o").Str("s") != "v", len(o.Arr("a")) != 1, o.Str("s") != "text":
		t.Errorf("accessors of %v", o)
	case o.Has("n"), o.Has("missing"), !o.Has("s"):
		t.Errorf("Has: null and absent are not there, a string is")
	case o.Obj("s") != nil, o.Str("o") != "":
		t.Errorf("a value of another kind reads as the zero value")
	}
}

func TestDecodeRefusesBrokenJSON(t *testing.T) {
	for _, in := range []string{`{"a":`, `[1,`, `}`, ``} {
		if _, err := Decode(json.NewDecoder(strings.NewReader(in))); err == nil {
			t.Errorf("%q decoded without an error", in)
		}
	}
}
