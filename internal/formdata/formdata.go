// Package formdata reads multipart/form-data bodies of text fields: what
// PHP's cURL sends for an array body, fetch for a FormData, and a browser
// for a form with enctype="multipart/form-data". Kadi takes no files.
package formdata

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
)

var (
	// ErrMalformed: the body is not valid multipart/form-data.
	ErrMalformed = errors.New("the body is not valid multipart/form-data")
	// ErrNotText: a part is a file, or has no field name.
	ErrNotText = errors.New("a multipart body may hold only named text fields")
)

// Boundary is the boundary of a multipart/form-data Content-Type, and
// false for any other type.
func Boundary(contentType string) (string, bool) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return "", false
	}
	return params["boundary"], true
}

// Read reads body's text fields, in order, repeats kept. The caller bounds
// the body's size.
func Read(body []byte, boundary string) (url.Values, error) {
	// mime/multipart takes a body cut off between parts for a whole one:
	// a body is whole only when its closing boundary came.
	if !bytes.HasSuffix(bytes.TrimRight(body, "\r\n"), []byte("--"+boundary+"--")) {
		return nil, ErrMalformed
	}
	v := url.Values{}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return v, nil
		}
		if err != nil {
			return nil, ErrMalformed
		}
		if part.FileName() != "" || part.FormName() == "" {
			return nil, ErrNotText
		}
		value, err := io.ReadAll(part)
		if err != nil {
			return nil, ErrMalformed
		}
		v.Add(part.FormName(), string(value))
	}
}
