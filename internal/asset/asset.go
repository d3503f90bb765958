// Package asset serves the hosted pages' and the dashboard's stylesheets
// and scripts from an embedded tree, under URLs that name their content
// (/static/card.js?v=3f2a…): a browser keeps each file for a year and
// fetches it again only when a release changes it. A shopper on a slow
// phone then downloads the card page's scripts and styles once, not on
// every page of every checkout, and, where the browser takes gzip (every
// browser does), compressed: a third of the bytes.
package asset

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
)

// Files is one embedded tree served under one URL prefix.
type Files struct {
	prefix string
	files  map[string]file
}

type file struct {
	data        []byte
	gzipped     []byte // nil when compressing does not make it smaller
	version     string
	contentType string
}

// New reads every file under root in fsys, to be served at prefix (which
// ends in a slash) followed by its name relative to root.
func New(fsys fs.FS, root, prefix string) (*Files, error) {
	f := &Files{prefix: prefix, files: map[string]file{}}
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		gzipped, err := compress(data)
		if err != nil {
			return fmt.Errorf("compress %s: %w", p, err)
		}
		f.files[strings.TrimPrefix(p, root+"/")] = file{data: data, gzipped: gzipped, version: letters(sum[:6]), contentType: ct}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read static files: %w", err)
	}
	return f, nil
}

// URL is where a page loads file name from: its path with the content's
// version. A name the tree lacks is an error, so a template that names a
// missing file fails when it is rendered in a test, not in a browser.
func (f *Files) URL(name string) (string, error) {
	file, ok := f.files[name]
	if !ok {
		return "", fmt.Errorf("no static file %q", name)
	}
	return f.prefix + name + "?v=" + file.version, nil
}

// ServeHTTP answers GET prefix+name. Asked for with its current version, a
// file may be kept for a year (its URL changes with its content); asked
// for without, or with another (a page cached from an earlier release), it
// must be checked again before each use, by its ETag. Directories and
// unknown names are 404: nothing lists the tree.
func (f *Files) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, _ := strings.CutPrefix(r.URL.Path, f.prefix)
	file, ok := f.files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", file.contentType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Add("Vary", "Accept-Encoding")
	data, etag := file.data, `"`+file.version+`"`
	if file.gzipped != nil && acceptsGzip(r.Header.Values("Accept-Encoding")) {
		// Another representation, so another entity tag: a cache must not
		// answer a request that takes no gzip with these bytes.
		data, etag = file.gzipped, `"`+file.version+`-gzip"`
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("ETag", etag)
	if r.URL.Query().Get("v") == file.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
}

// compress is data gzipped, or nil when that is no smaller.
func compress(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if buf.Len() >= len(data) {
		return nil, nil
	}
	return buf.Bytes(), nil
}

// acceptsGzip reports whether Accept-Encoding header values take gzip
// (RFC 9110 §12.5.3): named, or "*", with a weight other than zero. A
// value it cannot read takes nothing: the file goes as it is.
func acceptsGzip(values []string) bool {
	star := false
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(item, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "gzip" && name != "x-gzip" && name != "*" {
				continue
			}
			ok := weighted(params)
			if name == "*" {
				star = ok
				continue
			}
			return ok
		}
	}
	return star
}

// weighted reports whether an Accept-Encoding item's parameters give it a
// weight above zero (none: 1).
func weighted(params string) bool {
	for _, p := range strings.Split(params, ";") {
		key, value, _ := strings.Cut(p, "=")
		if strings.EqualFold(strings.TrimSpace(key), "q") {
			q, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
			return err == nil && q > 0
		}
	}
	return true
}

// letters spells b in the letters a to p, a nibble each: a version with no
// digits never reads as part of a card number or a security code in a
// page (the pages' tests look for those).
func letters(b []byte) string {
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, 'a'+c>>4, 'a'+c&0xf)
	}
	return string(out)
}
