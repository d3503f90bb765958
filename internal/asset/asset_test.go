package asset_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/kadipay/kadi/internal/asset"
)

func TestFiles(t *testing.T) {
	tree := fstest.MapFS{
		"static/card.js":      {Data: []byte("let a = 1;")},
		"static/kadi.css":     {Data: []byte("body{}")},
		"static/sub/deep.css": {Data: []byte("p{}")},
	}
	f, err := asset.New(tree, "static", "/static/")
	if err != nil {
		t.Fatal(err)
	}
	cardURL, err := f.URL("card.js")
	if err != nil || !strings.HasPrefix(cardURL, "/static/card.js?v=") || strings.ContainsAny(cardURL[len("/static/card.js?v="):], "0123456789") {
		t.Fatalf("URL(card.js) = %q, %v; want a version of letters", cardURL, err)
	}
	if _, err := f.URL("missing.js"); err == nil {
		t.Error("URL of a file the tree lacks gave no error")
	}
	tree["static/card.js"] = &fstest.MapFile{Data: []byte("let a = 2;")}
	changed, _ := asset.New(tree, "static", "/static/")
	if u, _ := changed.URL("card.js"); u == cardURL {
		t.Error("new content kept the old URL: browsers would keep the old script")
	}

	get := func(target string, header ...string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, req)
		return rec
	}
	rec := get(cardURL)
	if rec.Code != http.StatusOK || rec.Body.String() != "let a = 1;" ||
		rec.Header().Get("Cache-Control") != "public, max-age=31536000, immutable" ||
		rec.Header().Get("X-Content-Type-Options") != "nosniff" || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/javascript") {
		t.Errorf("the versioned URL: %d %q %v", rec.Code, rec.Body, rec.Header())
	}
	etag := rec.Header().Get("ETag")
	for _, target := range []string{"/static/card.js", "/static/card.js?v=old"} {
		if rec := get(target); rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "no-cache" {
			t.Errorf("%s: %d, Cache-Control %q; want no-cache", target, rec.Code, rec.Header().Get("Cache-Control"))
		}
	}
	if rec := get("/static/card.js", "If-None-Match", etag); rec.Code != http.StatusNotModified || rec.Body.Len() != 0 {
		t.Errorf("revalidation with the ETag: %d, %d bytes; want 304", rec.Code, rec.Body.Len())
	}
	if rec := get("/static/sub/deep.css"); rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/css") {
		t.Errorf("a file in a subdirectory: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	for _, target := range []string{"/static/", "/static/sub/", "/static/sub", "/static/nope.js", "/static/../static/card.js"} {
		if rec := get(target); rec.Code != http.StatusNotFound || strings.Contains(rec.Body.String(), "card.js") {
			t.Errorf("%s: %d %q; want 404 and no listing", target, rec.Code, rec.Body)
		}
	}
}
