// Package asset serves the hosted pages' and the dashboard's stylesheets
// and scripts from an embedded tree, under URLs that name their content
// (/static/card.js?v=3f2a…): a browser keeps each file for a year and
// fetches it again only when a release changes it. A shopper on a slow
// phone then downloads the card page's scripts and styles once, not on
// every page of every checkout.
package asset

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
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
		f.files[strings.TrimPrefix(p, root+"/")] = file{data: data, version: letters(sum[:6]), contentType: ct}
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
	h.Set("ETag", `"`+file.version+`"`)
	if r.URL.Query().Get("v") == file.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(file.data))
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
