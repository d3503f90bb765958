package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/auth"
)

// FuzzReadFields: a token endpoint's body, whatever its Content-Type says
// (form encoding, JSON, multipart), is either fields, each once, or an
// invalid_request: never a panic, never another error.
func FuzzReadFields(f *testing.F) {
	for _, seed := range [][2]string{
		{"application/x-www-form-urlencoded", "username=1000000001&password=s3cret"},
		{"", `{"username":1000000001,"password":"s3cret"}`},
		{"application/json", `{"username":"a","password":true}`},
		{"multipart/form-data; boundary=X", "--X\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\n1000000001\r\n--X--\r\n"},
		{"multipart/form-data; boundary=X", "--X\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\"\r\n\r\nx\r\n--X--\r\n"},
		{"multipart/form-data; boundary=X", "--X\r\n\r\n"},
		{"multipart/form-data", "a=b"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, contentType, body string) {
		req := httptest.NewRequest(http.MethodPost, "/identity/v2/token", strings.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		v, err := readFields(req)
		var re *auth.RequestError
		switch {
		case err != nil && !errors.As(err, &re):
			t.Fatalf("%q %q: %v, want an invalid_request", contentType, body, err)
		case err != nil && re.Code != "invalid_request":
			t.Fatalf("%q %q: code %q", contentType, body, re.Code)
		case err == nil:
			for k, vals := range v {
				if len(vals) != 1 {
					t.Fatalf("%q %q: field %q read %d times", contentType, body, k, len(vals))
				}
			}
		}
	})
}
