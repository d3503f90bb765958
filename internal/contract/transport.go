package contract

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
)

// Covers reports whether the document has an operation for req's method and
// path.
func (v *Validator) Covers(req *http.Request) bool {
	_, _, err := v.router.FindRoute(routable(req))
	return err == nil
}

// Transport wraps next so that every response to a request the document
// covers is checked against it. A response that breaks the document is
// handed to report and turned into an error of the round trip, so the
// test that made the request fails where it made it.
func (v *Validator) Transport(next http.RoundTripper, report func(error)) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil || !v.Covers(req) {
			return resp, err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("contract: read the answer to %s %s: %w", req.Method, req.URL.Path, err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if err := v.Response(req, resp.StatusCode, resp.Header, body); err != nil {
			err = fmt.Errorf("contract: %w", err)
			if report != nil {
				report(err)
			}
			return nil, err
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
