package apidocs

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	openapi "github.com/kadipay/kadi/api"
)

func serveMux(t *testing.T) *http.ServeMux {
	t.Helper()
	h, err := New()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	return mux
}

func TestServesTheDocument(t *testing.T) {
	mux := serveMux(t)
	cases := []struct {
		path, contentType string
		body              []byte // nil: not compared
	}{
		{"/openapi.json", "application/json", openapi.JSON()},
		{"/openapi.yaml", "application/yaml; charset=utf-8", openapi.YAML()},
		{"/docs", "text/html; charset=utf-8", nil},
		{"/docs/", "text/html; charset=utf-8", nil},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != tc.contentType {
				t.Fatalf("%d %q, want 200 %q", rec.Code, rec.Header().Get("Content-Type"), tc.contentType)
			}
			if tc.body != nil && !bytes.Equal(rec.Body.Bytes(), tc.body) {
				t.Error("body is not the embedded document")
			}
			etag := rec.Header().Get("ETag")
			if etag == "" || !strings.HasPrefix(rec.Header().Get("Cache-Control"), "public, max-age=") ||
				rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("caching headers: %v", rec.Header())
			}
			// A client that has it is told so, without the body.
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			req.Header.Set("If-None-Match", etag)
			again := httptest.NewRecorder()
			mux.ServeHTTP(again, req)
			if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
				t.Errorf("If-None-Match: %d with %d bytes, want 304 and none", again.Code, again.Body.Len())
			}
		})
	}
}

// The reference shows every operation, webhook and schema of the document,
// runs no script and loads nothing: its one inline style is allowed by the
// hash in its Content-Security-Policy, and nothing else is.
func TestReferencePage(t *testing.T) {
	rec := httptest.NewRecorder()
	serveMux(t).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/docs", nil))
	page := rec.Body.String()

	doc, err := openapi3.NewLoader().LoadFromData(openapi.YAML())
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			want = append(want, `id="op-`+op.OperationID+`"`, `<span class="path">`+path+`</span>`, `>`+method+`<`)
		}
	}
	for name := range doc.Webhooks {
		want = append(want, `id="webhook-`+name+`-post"`)
	}
	for name, s := range doc.Components.Schemas {
		want = append(want, `id="schema-`+name+`"`)
		for prop := range s.Value.Properties {
			want = append(want, `<code>`+prop+`</code>`)
		}
	}
	want = append(want, "Transaction Successfull", "webhook-signature", `<code>{$request.body#/callbackUrl}</code>`)
	for _, w := range want {
		if !strings.Contains(page, w) {
			t.Errorf("the reference lacks %s", w)
		}
	}

	csp := rec.Header().Get("Content-Security-Policy")
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllStringSubmatch(page, -1)
	if len(style) != 1 {
		t.Fatalf("%d style elements, want 1", len(style))
	}
	sum := sha256.Sum256([]byte(style[0][1]))
	if !strings.Contains(csp, "style-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
		t.Errorf("the CSP %q does not allow the page's style by its hash", csp)
	}
	for _, bad := range []string{"<script", " style=", "<link", "<img", "http://", "https://cdn"} {
		if strings.Contains(strings.ToLower(page), bad) && !(bad == "http://" && onlyInText(page)) {
			t.Errorf("the reference contains %q", bad)
		}
	}
	for _, directive := range []string{"default-src 'none'", "frame-ancestors 'none'", "base-uri 'none'"} {
		if !strings.Contains(csp, directive) || strings.Contains(csp, "unsafe") {
			t.Errorf("CSP %q: want %s and nothing unsafe", csp, directive)
		}
	}
}

// onlyInText: http:// appears in the page only as text (server defaults,
// examples), never as a resource the page loads.
func onlyInText(page string) bool {
	return !regexp.MustCompile(`(src|href)="http://`).MatchString(page)
}

func TestMarkdownEscapes(t *testing.T) {
	cases := []struct{ in, want string }{
		{"plain", "<p>plain</p>"},
		{"a `<b>` c", "<p>a <code>&lt;b&gt;</code> c</p>"},
		{"**bold** and *em*", "<p><strong>bold</strong> and <em>em</em></p>"},
		{"`**not bold**`", "<p><code>**not bold**</code></p>"},
		{"<script>alert(1)</script>", "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"},
		{"[site](https://example.com/a?b=1&c=2)", `<p><a href="https://example.com/a?b=1&amp;c=2">site</a></p>`},
		{"[x](javascript:alert(1))", "<p>[x](javascript:alert(1))</p>"},
		{`[x](https://e.com/"onmouseover=)`, `<p><a href="https://e.com/&#34;onmouseover=">x</a></p>`},
		{"one\ntwo\n\nthree", "<p>one two</p><p>three</p>"},
		{"- a\n  more\n- b", "<ul><li>a more</li><li>b</li></ul>"},
	}
	for _, tc := range cases {
		if got := string(markdown(tc.in)); got != tc.want {
			t.Errorf("markdown(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
