package formdata

import (
	"bytes"
	"errors"
	"mime/multipart"
	"testing"
)

func body(t testing.TB, file bool, fields ...[2]string) ([]byte, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if file {
		w, _ := mw.CreateFormFile("upload", "card.txt")
		_, _ = w.Write([]byte("4242"))
	}
	mw.Close()
	return b.Bytes(), mw.Boundary()
}

func TestRead(t *testing.T) {
	b, boundary := body(t, false, [2]string{"token", "abc"}, [2]string{"amount", "10.00"}, [2]string{"amount", "11.00"})
	got, ok := Boundary("multipart/form-data; boundary=" + boundary)
	if !ok || got != boundary {
		t.Fatalf("Boundary = %q, %v", got, ok)
	}
	v, err := Read(b, boundary)
	if err != nil || v.Get("token") != "abc" || len(v["amount"]) != 2 {
		t.Fatalf("Read = %v, %v", v, err)
	}
	if _, err := Read(b[:len(b)/2], boundary); !errors.Is(err, ErrMalformed) {
		t.Errorf("a body cut short: %v", err)
	}
	withFile, boundary := body(t, true, [2]string{"token", "abc"})
	if _, err := Read(withFile, boundary); !errors.Is(err, ErrNotText) {
		t.Errorf("a file part: %v", err)
	}
	for _, ct := range []string{"application/x-www-form-urlencoded", "multipart/form-data", "multipart/mixed; boundary=x", "", "multipart/form-data; boundary="} {
		if _, ok := Boundary(ct); ok {
			t.Errorf("Boundary(%q) found one", ct)
		}
	}
}

// FuzzRead: any body is read or refused with one of the package's errors,
// never a panic.
func FuzzRead(f *testing.F) {
	b, boundary := body(f, false, [2]string{"token", "abc"})
	f.Add(b, boundary)
	f.Add([]byte("--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--x--\r\n"), "x")
	f.Fuzz(func(t *testing.T, b []byte, boundary string) {
		if boundary == "" {
			return
		}
		if _, err := Read(b, boundary); err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrNotText) {
			t.Fatalf("Read: %v", err)
		}
	})
}
