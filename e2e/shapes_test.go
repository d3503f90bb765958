package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The five steps driven with the request shapes real integrations send,
// against the real binary over raw HTTP: token bodies as a form and as
// JSON, /token and /v1/token, trailing slashes, an order.expiry without an
// offset, and the three forms of a mobile number, which the IPN carries in
// E.123 form.
func TestFiveStepsWithRealIntegrationShapes(t *testing.T) {
	t.Parallel()
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Shapes Shop") })
	nairobi, err := time.LoadLocation("Africa/Nairobi")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		tokenPath  string
		tokenJSON  bool
		formToken  string // "access" or the path of a payment-token call
		slash      string // appended to the bill and query paths
		expiry     string
		mobile     string
		wantMobile string
	}{
		{"form token body, E.123 mobile", "/identity/v2/token", false, "access", "", "", "+254 712345678", "+254 712345678"},
		{"JSON token body, E.164 mobile", "/identity/v2/token", true, "/token", "", "", "+254712345678", "+254 712345678"},
		{"trailing slashes, national mobile", "/identity/v2/token/", false, "/v1/token", "/", "", "0712345678", "+254 712345678"},
		{"/v1/token/, offset-less expiry", "/identity/v2/token", false, "/v1/token/", "", time.Now().In(nairobi).Add(36 * time.Hour).Format("2006-01-02T15:04:05"), "", ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// 1. Token.
			body, ctype := url.Values{"username": {m.Username}, "password": {m.Password}}.Encode(), "application/x-www-form-urlencoded"
			if tt.tokenJSON {
				b, _ := json.Marshal(map[string]string{"username": m.Username, "password": m.Password})
				body, ctype = string(b), "application/json"
			}
			var tok struct {
				AccessToken string `json:"access_token"`
				ExpiresIn   int    `json:"expires_in"`
			}
			call(t, g, http.MethodPost, tt.tokenPath, "Basic "+m.Test.APIKey, ctype, body, http.StatusOK, &tok)
			if tok.AccessToken == "" || tok.ExpiresIn != 3600 {
				t.Fatalf("token: %+v", tok)
			}
			formToken := tok.AccessToken
			if tt.formToken != "access" {
				var pt map[string]string
				call(t, g, http.MethodPost, tt.formToken, "Basic "+m.Test.APIKey, "application/x-www-form-urlencoded",
					url.Values{"merchantCode": {m.MerchantCode}, "password": {m.Password}, "grant_type": {"password"}}.Encode(), http.StatusOK, &pt)
				formToken = pt["payment-token"]
			}

			// 2. Bill.
			ref := fmt.Sprintf("SHAPE%d", i)
			order := map[string]any{"billerCode": m.BillerCode, "reference": ref, "amount": "1500", "currency": "KES",
				"description": "Two bags of coffee", "channel": "CARD", "outlet": m.OutletCode}
			if tt.expiry != "" {
				order["expiry"] = tt.expiry
			}
			billBody, _ := json.Marshal(map[string]any{"customer": map[string]any{"name": "Wanjiru Kamau"}, "order": order})
			var bill map[string]any
			call(t, g, http.MethodPost, "/payment/v2/bills"+tt.slash, "Bearer "+tok.AccessToken, "", string(billBody), http.StatusOK, &bill)
			if bill["status"] != "1" {
				t.Fatalf("bill: %v", bill)
			}

			// 3 and 4. The hosted form and the callback it sends back.
			form := url.Values{"token": {formToken}, "merchantCode": {m.MerchantCode}, "outletCode": {m.OutletCode},
				"amount": {"1500.00"}, "orderReference": {ref}, "billReference": {bill["reference"].(string)},
				"cardNumber": {"4242424242424242"}, "cardSecurity": {"123"}, "cardExpiryMonth": {"12"},
				"cardExpiryYear": {time.Now().AddDate(2, 0, 0).Format("2006")}, "cardFirstName": {"Wanjiru"}, "cardLastName": {"Kamau"},
				"mobileNumber": {tt.mobile}, "emailAddress": {"wanjiru@example.com"}, "callbackUrl": {"https://shop.example.com/callback"}}
			resp, err := http.PostForm(g.BaseURL+"/cardPay", form)
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !regexp.MustCompile(`name="orderStatus" value="Transaction Successfull"`).Match(page) {
				t.Fatalf("callback page: %s\n%s", resp.Status, page)
			}

			// 5. Verify.
			var v map[string]any
			call(t, g, http.MethodGet, "/payment/v2/query"+tt.slash+"?billReference="+ref, "Bearer "+tok.AccessToken, "", "", http.StatusOK, &v)
			if v["status"] != true || v["amount"] != "1500.00" {
				t.Fatalf("verification: %v", v)
			}

			// The IPN carries the mobile number in E.123 form.
			var log struct {
				Notifications []struct {
					Payload struct {
						Customer struct {
							MobileNumber string `json:"mobileNumber"`
						} `json:"customer"`
						Transaction struct {
							BillNumber string `json:"billNumber"`
						} `json:"transaction"`
					} `json:"payload"`
				} `json:"notifications"`
			}
			call(t, g, http.MethodGet, "/payment/v2/notifications?limit=500", "Basic "+m.Test.APIKey, "", "", http.StatusOK, &log)
			found := false
			for _, n := range log.Notifications {
				if n.Payload.Transaction.BillNumber == bill["reference"] {
					found = true
					if n.Payload.Customer.MobileNumber != tt.wantMobile {
						t.Errorf("IPN mobileNumber %q, want %q", n.Payload.Customer.MobileNumber, tt.wantMobile)
					}
				}
			}
			if !found {
				t.Errorf("no IPN for bill %v", bill["reference"])
			}
		})
	}
}

// call makes one API request and decodes its JSON answer into out,
// failing unless the status is want.
func call(t *testing.T, g *gateway, method, path, auth, ctype, body string, want int, out any) {
	t.Helper()
	req, err := http.NewRequest(method, g.BaseURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s %s", method, path, resp.Status, raw)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, raw)
	}
}
