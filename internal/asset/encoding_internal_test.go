package asset

import "testing"

func TestAcceptsGzip(t *testing.T) {
	for _, tt := range []struct {
		values []string
		want   bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"gzip"}, true},
		{[]string{"gzip, deflate, br, zstd"}, true}, // Chrome's
		{[]string{"br", "GZip"}, true},
		{[]string{"x-gzip"}, true},
		{[]string{"deflate, br"}, false},
		{[]string{"gzip;q=0"}, false},
		{[]string{"gzip; q=0.000"}, false},
		{[]string{"gzip;q=0.5"}, true},
		{[]string{"*"}, true},
		{[]string{"*;q=0"}, false},
		{[]string{"*, gzip;q=0"}, false}, // named beats the star
		{[]string{"gzip;q=0, *"}, false},
		{[]string{"gzip;q=nonsense"}, false},
		{[]string{"identity"}, false},
		{[]string{"gzipped"}, false},
	} {
		if got := acceptsGzip(tt.values); got != tt.want {
			t.Errorf("acceptsGzip(%q) = %t, want %t", tt.values, got, tt.want)
		}
	}
}

// Accept-Encoding is whatever a client sends: never a panic.
func FuzzAcceptsGzip(f *testing.F) {
	for _, s := range []string{"gzip", "gzip;q=0, *", "br;q=1.0, gzip;q=0.8, *;q=0.1", ";;,,=q", "gzip;q=1e400"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		acceptsGzip([]string{v})
	})
}
