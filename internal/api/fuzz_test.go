package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

// FuzzCreateBill posts arbitrary bodies to the bill endpoint through the
// real gateway: never a 5xx, and the answer's status is the string "1" with
// 200 or the JSON boolean false otherwise.
func FuzzCreateBill(f *testing.F) {
	g := servertest.Start(f, servertest.Options{})
	c := g.Onboard("Fuzz Shop")
	token := g.Token(c, merchant.Test)
	valid, _ := json.Marshal(servertest.BillBody(c, "FUZZ1", "1500"))
	f.Add(string(valid))
	f.Add(`{"customer":{"name":1},"order":{"amount":1e309}}`)
	f.Add(`{"order":{"amount":"-0.00","currency":"kes"}}}`)
	f.Add(`[]`)
	f.Add(strings.Repeat(`{"a":`, 500))
	f.Fuzz(func(t *testing.T, body string) {
		req, _ := http.NewRequest(http.MethodPost, "/payment/v2/bills", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := g.Serve(req)
		if rec.Code >= 500 {
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		var resp struct {
			Status  any    `json:"status"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("answer is not JSON: %s", rec.Body)
		}
		switch {
		case rec.Code == http.StatusOK && resp.Status != "1":
			t.Fatalf("200 with status %#v", resp.Status)
		case rec.Code != http.StatusOK && resp.Status != false:
			t.Fatalf("%d with status %#v", rec.Code, resp.Status)
		case rec.Code != http.StatusOK && resp.Message == "":
			t.Fatalf("%d without a message", rec.Code)
		}
	})
}
