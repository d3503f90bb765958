package client_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/kadipay/kadi/client"
)

// Receiving instant payment notifications: unlike the callback, an IPN is
// authenticated (Basic credentials and a signature), so it may be acted on.
// It can arrive more than once; record it idempotently.
func ExampleNewIPNHandler() {
	ipn, err := client.NewIPNHandler(client.IPNConfig{
		// In production: os.Getenv("KADI_NOTIFICATION_SECRET") and so on.
		Secret:   "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
		Username: "shop-ipn",
		Password: "ipn-s3cret-passw0rd",
	}, func(ctx context.Context, n client.Notification) error {
		// Mark the order paid, in one transaction, only if it is not
		// already: n.ID is the same on every delivery of this
		// notification. Compare the amount with the order's as decimals.
		fmt.Println("paid:", n.Transaction.AdditionalInfo, n.Transaction.Amount, "bill", n.Transaction.BillNumber)
		return nil // the gateway gets its 2xx only now
	})
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /kadi/ipn", ipn)

	shop := httptest.NewServer(mux) // stands in for https://shop.example
	defer shop.Close()
	resp := postAsGateway(shop.URL + "/kadi/ipn") // what the gateway does
	fmt.Println(resp.Status)
	// Output:
	// paid: ORDER1001 1500.00 bill KD0000000001
	// 204 No Content
}

// postAsGateway sends a notification the way the gateway does: Basic
// credentials and a Standard Webhooks signature over "id.timestamp.body".
func postAsGateway(url string) *http.Response {
	body := `{"callbackType":"IPN","customer":{"name":"Wanjiku Kamau","mobileNumber":"","reference":null},` +
		`"transaction":{"date":"2026-11-21 14:03:07.5","reference":"SIMNETREF000001","paymentMode":"CARD","amount":1500.00,` +
		`"billNumber":"KD0000000001","orderAmount":1500.00,"serviceCharge":0,"servedBy":"OUTLET01",` +
		`"additionalInfo":"ORDER1001","status":"SUCCESS","remarks":"Payment approved"},` +
		`"bank":{"reference":"pay_0001","transactionType":"C","account":"0123456789012"}}`
	id, ts := "msg_0001", strconv.FormatInt(time.Now().Unix(), 10)
	key, _ := base64.StdEncoding.DecodeString("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + body))

	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.SetBasicAuth("shop-ipn", "ipn-s3cret-passw0rd")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	resp.Body.Close()
	return resp
}
