package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// GET / links the dashboard only where it is served: with a listener of
// its own (--dashboard-addr) the link would be a 404.
func TestHomeLinksTheDashboardOnlyWhereItIs(t *testing.T) {
	for _, here := range []bool{true, false} {
		m := http.NewServeMux()
		m.HandleFunc("/", http.NotFound)
		if here {
			m.HandleFunc("GET /dashboard/{$}", http.NotFound)
		}
		h := home{publicURL: "https://pay.example", mux: m}
		for _, accept := range []string{"text/html", ""} {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set("Accept", accept)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if linked := strings.Contains(rec.Body.String(), "/dashboard/"); rec.Code != http.StatusOK || linked != here {
				t.Errorf("dashboard on this listener %v, Accept %q: %d, links it %v\n%s", here, accept, rec.Code, linked, rec.Body)
			}
		}
	}
}
