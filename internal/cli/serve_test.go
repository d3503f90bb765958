package cli

import (
	"net/netip"
	"slices"
	"testing"
)

func TestParsePrefixes(t *testing.T) {
	got, err := parsePrefixes(" 10.0.0.0/8, 192.0.2.7 ,::1,2001:db8::1/32,")
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("2001:db8::/32")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parsePrefixes = %v, %v; want %v", got, err, want)
	}
	if got, err := parsePrefixes(""); err != nil || len(got) != 0 {
		t.Errorf("empty: %v, %v; want nobody", got, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "localhost", "10.0.0.0/8;1.2.3.4"} {
		if _, err := parsePrefixes(bad); err == nil {
			t.Errorf("parsePrefixes(%q) accepted", bad)
		}
	}
}
