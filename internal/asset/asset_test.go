package asset_test

import (
	"compress/gzip"
	"io"
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

// A browser that takes gzip gets the file compressed, under an entity tag
// of its own; one that does not, or a file compression would not shrink,
// gets it as it is. Either way the answer says it varies by
// Accept-Encoding, so a shared cache keeps the two apart.
func TestFilesCompressed(t *testing.T) {
	big := strings.Repeat("function f() { return document.querySelectorAll('form'); }\n", 40)
	f, err := asset.New(fstest.MapFS{
		"static/big.js":  {Data: []byte(big)},
		"static/tiny.js": {Data: []byte("1;")},
	}, "static", "/static/")
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string, header ...string) *httptest.ResponseRecorder {
		u, err := f.URL(name)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodGet, u, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		f.ServeHTTP(rec, req)
		if rec.Header().Get("Vary") != "Accept-Encoding" {
			t.Errorf("%s: Vary %q, want Accept-Encoding", name, rec.Header().Get("Vary"))
		}
		return rec
	}

	plain := get("big.js")
	if plain.Header().Get("Content-Encoding") != "" || plain.Body.String() != big {
		t.Errorf("without Accept-Encoding: Content-Encoding %q, %d bytes", plain.Header().Get("Content-Encoding"), plain.Body.Len())
	}
	gz := get("big.js", "Accept-Encoding", "gzip, deflate, br, zstd")
	if gz.Header().Get("Content-Encoding") != "gzip" || gz.Body.Len() >= len(big)/3 {
		t.Fatalf("with gzip: Content-Encoding %q, %d bytes of %d", gz.Header().Get("Content-Encoding"), gz.Body.Len(), len(big))
	}
	zr, err := gzip.NewReader(gz.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || string(got) != big {
		t.Errorf("the gzipped file reads back as %d bytes, %v", len(got), err)
	}
	if gz.Header().Get("ETag") == plain.Header().Get("ETag") {
		t.Error("the gzipped and the plain file share an entity tag")
	}
	if rec := get("big.js", "Accept-Encoding", "gzip", "If-None-Match", gz.Header().Get("ETag")); rec.Code != http.StatusNotModified {
		t.Errorf("revalidating the gzipped file: %d, want 304", rec.Code)
	}
	if rec := get("big.js", "Accept-Encoding", "gzip;q=0"); rec.Header().Get("Content-Encoding") != "" {
		t.Error("gzip;q=0 got gzip")
	}
	if rec := get("tiny.js", "Accept-Encoding", "gzip"); rec.Header().Get("Content-Encoding") != "" || rec.Body.String() != "1;" {
		t.Errorf("a file gzip would grow: Content-Encoding %q, %q", rec.Header().Get("Content-Encoding"), rec.Body)
	}
}
