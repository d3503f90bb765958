package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	openapi "github.com/kadipay/kadi/api"
)

// The real binary serves the contract it was built with: /openapi.json and
// /openapi.yaml are the embedded document, byte for byte, /openapi.json
// loads and validates as OpenAPI 3.1, and /docs is the reference page
// rendered from it.
func TestOpenAPIServed(t *testing.T) {
	g := startGateway(t, nil)
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := http.Get(g.BaseURL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		return resp, body
	}

	for _, tc := range []struct {
		path, contentType string
		want              []byte
	}{
		{"/openapi.json", "application/json", openapi.JSON()},
		{"/openapi.yaml", "application/yaml; charset=utf-8", openapi.YAML()},
	} {
		resp, body := get(tc.path)
		if ct := resp.Header.Get("Content-Type"); ct != tc.contentType {
			t.Errorf("GET %s: Content-Type %q, want %q", tc.path, ct, tc.contentType)
		}
		if !bytes.Equal(body, tc.want) {
			t.Errorf("GET %s is not the document embedded in this build", tc.path)
		}
		if resp.Header.Get("ETag") == "" || resp.Header.Get("Cache-Control") == "" {
			t.Errorf("GET %s: no caching headers: %v", tc.path, resp.Header)
		}
	}

	_, body := get("/openapi.json")
	doc, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatalf("/openapi.json does not load: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("/openapi.json is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Errorf("/openapi.json is not valid: %v", err)
	}
	fromYAML, err := openapi3.NewLoader().LoadFromData(openapi.YAML())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := doc.MarshalJSON()
	b, _ := fromYAML.MarshalJSON()
	if !bytes.Equal(a, b) {
		t.Error("/openapi.json and api/openapi.yaml describe different APIs")
	}

	resp, page := get("/docs")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Errorf("/docs headers: %v", resp.Header)
	}
	for _, want := range []string{"/payment/v2/bills", "/identity/v2/token", "/cardPay", "IPNPayload", "webhook-signature"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("/docs does not mention %s", want)
		}
	}
}

// The IPN the real binary sends follows the document's webhook (headers,
// Basic credentials, body), and the delivery log endpoints answer as
// documented: list, one event with its history, a replay, and the errors
// of each. Every answer goes through the contract-checking transport.
func TestIPNFollowsTheDocument(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var ids []string
	var broken []error
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			err = contractCheck.Webhook("ipn", r, body)
		}
		mu.Lock()
		ids = append(ids, r.Header.Get("webhook-id"))
		if err != nil {
			broken = append(broken, err)
		}
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	defer receiver.Close()
	received := func() (int, []error) { mu.Lock(); defer mu.Unlock(); return len(ids), append([]error(nil), broken...) }

	var m merchantCreds
	g := startGateway(t, func(dir string) {
		m = createMerchant(t, dir, "Contract Shop")
		setTestIPN(t, []string{"--data-dir", dir}, m.MerchantCode, receiver.URL+"/ipn", "shop", "ipn-secret-1")
	}, "--allow-private-ipn", "--ipn-poll", "100ms")
	s := newShopper(t, g, m)
	b := s.createBill(t, "CONTRACT1", "1500.00")
	if page := s.submit(t, s.paymentForm(t, b, testCard("4242424242424242"))); !strings.Contains(page.Body, "Transaction Successfull") {
		t.Fatalf("payment: %s", page.Body)
	}
	waitFor(t, "the IPN", func() bool { n, _ := received(); return n >= 1 })

	key := "Basic " + m.Test.APIKey
	var list struct {
		Notifications []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"notifications"`
	}
	waitFor(t, "the IPN to be logged as delivered", func() bool {
		call(t, g, http.MethodGet, "/payment/v2/notifications?status=delivered", key, "", "", http.StatusOK, &list)
		return len(list.Notifications) == 1
	})
	id := list.Notifications[0].ID
	var one map[string]any
	call(t, g, http.MethodGet, "/payment/v2/notifications/"+id, key, "", "", http.StatusOK, &one)
	call(t, g, http.MethodPost, "/payment/v2/notifications/"+id+"/replay", key, "", "", http.StatusAccepted, &one)
	waitFor(t, "the replayed IPN", func() bool { n, _ := received(); return n >= 2 })

	var refused map[string]any
	call(t, g, http.MethodGet, "/payment/v2/notifications?status=lost", key, "", "", http.StatusBadRequest, &refused)
	call(t, g, http.MethodGet, "/payment/v2/notifications/msg_000000000000000000000000", key, "", "", http.StatusNotFound, &refused)
	call(t, g, http.MethodPost, "/payment/v2/notifications/"+id+"/replay", "Basic kadi_test_wrong", "", "", http.StatusUnauthorized, &refused)

	n, errs := received()
	for _, err := range errs {
		t.Error(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n < 2 || ids[0] != id || ids[1] != id {
		t.Errorf("webhook-ids %v, want the logged id %s twice", ids, id)
	}
}
