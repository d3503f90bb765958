package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/kadipay/kadi/internal/contract"
	"github.com/kadipay/kadi/internal/jsonorder"
	"github.com/kadipay/kadi/internal/merchant"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.json from the current responses")

// volatile names the body fields whose values change from run to run. A
// value is replaced only when it has the expected form, so a wrong form
// still shows up as a golden diff; the placeholder is always a JSON string
// standing in for a string, so the golden keeps every JSON type visible.
var volatile = map[string]struct {
	form        *regexp.Regexp
	placeholder string
}{
	"access_token":        {regexp.MustCompile(`^[A-Za-z0-9_-]{40,}$`), "<token>"},
	"payment-token":       {regexp.MustCompile(`^[A-Za-z0-9_-]{40,}$`), "<token>"},
	"notification-secret": {regexp.MustCompile(`^whsec_[A-Za-z0-9+/]{43}=$`), "<notification-secret>"},
	"issued_at":           {regexp.MustCompile(`^[0-9]{13}$`), "<unix-ms>"},
	"reference":           {regexp.MustCompile(`^[A-Z0-9]{12}$`), "<bill-reference>"},
	"transactionId":       {regexp.MustCompile(`^\S+$`), "<transaction-ref>"},
	"date":                {regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+03:00$`), "<iso8601+03:00>"},
}

// goldenHeaders are the response headers a merchant's code may read.
var goldenHeaders = []string{"Allow", "Cache-Control", "Content-Type", "Retry-After", "WWW-Authenticate", "X-Request-Id"}

// known maps the onboarding values of merchants to placeholders.
func known(cs ...merchant.Credentials) map[string]string {
	out := map[string]string{}
	for i, c := range cs {
		suffix := ""
		if i > 0 {
			suffix = strconv.Itoa(i + 1)
		}
		out[c.MerchantCode] = "<merchantCode" + suffix + ">"
		out[c.ServiceID] = "<serviceId" + suffix + ">"
		out[c.SystemCode] = "<systemCode" + suffix + ">"
		out[c.BillerCode] = "<billerCode" + suffix + ">"
		out[c.OutletCode] = "<outletCode" + suffix + ">"
	}
	return out
}

// document is api/openapi.yaml, loaded once per test binary.
var document = sync.OnceValues(contract.Load)

// checkContract checks rec, the answer to req, against api/openapi.yaml:
// the operation for req's method and path must document its status, its
// headers and its body, field for field. An answer of no operation (an
// unknown path) must be the document's Error.
func checkContract(t *testing.T, name string, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	v, err := document()
	if err != nil {
		t.Fatal(err)
	}
	if v.Covers(req) {
		err = v.Response(req, rec.Code, rec.Header(), rec.Body.Bytes())
	} else {
		err = v.Body("Error", rec.Body.Bytes())
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
	}
}

// checkGolden compares rec, normalised, with testdata/name.golden.json,
// checks it against api/openapi.yaml (checkContract), and checks the rules
// every API response keeps: a request id, and a message on every error.
func checkGolden(t *testing.T, name string, req *http.Request, rec *httptest.ResponseRecorder, knownValues map[string]string) {
	t.Helper()
	checkContract(t, name, req, rec)
	if rec.Header().Get("X-Request-Id") == "" {
		t.Errorf("%s: response has no X-Request-Id header", name)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("%s: body is not a JSON object: %v\n%s", name, err, rec.Body)
	}
	if rec.Code >= 400 {
		if msg, _ := body["message"].(string); strings.TrimSpace(msg) == "" {
			t.Errorf("%s: error body has no message: %s", name, rec.Body)
		}
	}

	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.UseNumber()
	parsed, err := jsonorder.Decode(dec)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	headers := object{}
	for _, h := range goldenHeaders {
		v := rec.Header().Get(h)
		switch {
		case v == "":
			continue
		case h == "X-Request-Id":
			v = "<request-id>"
		case h == "Retry-After":
			if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 1800 {
				v = "<seconds, at most 1800>"
			}
		}
		headers = append(headers, member{Key: h, Value: v})
	}
	doc := object{
		{Key: "status", Value: json.Number(strconv.Itoa(rec.Code))},
		{Key: "headers", Value: headers},
		{Key: "body", Value: scrub(parsed, "", knownValues)},
	}
	var buf bytes.Buffer
	render(&buf, doc, "")
	buf.WriteByte('\n')
	got := buf.Bytes()

	path := filepath.Join("testdata", name+".golden.json")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// object keeps members in wire order, so a golden also pins field order.
type (
	object = jsonorder.Object
	member = jsonorder.Member
)

func scrub(v any, key string, knownValues map[string]string) any {
	switch x := v.(type) {
	case object:
		out := make(object, len(x))
		for i, m := range x {
			out[i] = member{Key: m.Key, Value: scrub(m.Value, m.Key, knownValues)}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = scrub(e, key, knownValues)
		}
		return out
	case string:
		if p, ok := knownValues[x]; ok && x != "" {
			return p
		}
		if vol, ok := volatile[key]; ok && vol.form.MatchString(x) {
			return vol.placeholder
		}
	}
	return v
}

func render(buf *bytes.Buffer, v any, indent string) {
	switch x := v.(type) {
	case object:
		if len(x) == 0 {
			buf.WriteString("{}")
			return
		}
		buf.WriteString("{\n")
		for i, m := range x {
			buf.WriteString(indent + "  ")
			writeScalar(buf, m.Key)
			buf.WriteString(": ")
			render(buf, m.Value, indent+"  ")
			if i < len(x)-1 {
				buf.WriteByte(',')
			}
			buf.WriteByte('\n')
		}
		buf.WriteString(indent + "}")
	case []any:
		if len(x) == 0 {
			buf.WriteString("[]")
			return
		}
		buf.WriteString("[\n")
		for i, e := range x {
			buf.WriteString(indent + "  ")
			render(buf, e, indent+"  ")
			if i < len(x)-1 {
				buf.WriteByte(',')
			}
			buf.WriteByte('\n')
		}
		buf.WriteString(indent + "]")
	default:
		writeScalar(buf, x)
	}
}

// writeScalar keeps < and > readable: placeholders are written <like-this>.
func writeScalar(buf *bytes.Buffer, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	buf.Write(bytes.TrimRight(b.Bytes(), "\n"))
}

// Every golden file is written, and so checked against api/openapi.yaml,
// by a test: a golden no test names would be checked by nothing.
func TestEveryGoldenIsChecked(t *testing.T) {
	goldens, err := filepath.Glob(filepath.Join("testdata", "*.golden.json"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	sources, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var code strings.Builder
	for _, src := range sources {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		code.Write(b)
	}
	for _, g := range goldens {
		name := strings.TrimSuffix(filepath.Base(g), ".golden.json")
		if !strings.Contains(code.String(), `"`+name+`"`) {
			t.Errorf("%s: no test writes it", g)
		}
	}
}
