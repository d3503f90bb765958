package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"

	"github.com/kadipay/kadi/client"
)

// A checkout: create the bill, then send the customer's browser to the hosted
// card page with a form of hidden inputs. The card data is left out, so the
// gateway collects it on its own page.
func Example_checkout() {
	gateway := newFakeGateway() // stands in for https://api.kadi.example
	defer gateway.Close()

	kadi, err := client.New(client.Config{
		BaseURL:        gateway.URL,
		PaymentFormURL: "https://pay.kadi.example",
		// In production: os.Getenv("KADI_API_KEY") and so on.
		APIKey:   "test-api-key",
		Username: "1000000001",
		Password: "s3cret-passw0rd",
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	bill, err := kadi.CreateBill(ctx, client.BillRequest{
		Customer: client.Customer{Name: "Wanjiku Kamau"},
		Order: client.Order{
			BillerCode:  "BILLER01",
			Reference:   "ORDER1001",
			Amount:      "1500",
			Currency:    "KES",
			Description: "Two tickets",
			Outlet:      "OUTLET01",
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("bill", bill.Reference, "for", bill.Amount)

	// The form goes to the customer's browser: it carries the pay-only
	// payment-token, never the access token that creates bills and reads
	// every payment.
	token, err := kadi.PaymentToken(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// In an http.Handler, write to the ResponseWriter, with
	// Cache-Control: no-store since the form carries the token.
	err = kadi.RenderPaymentForm(os.Stdout, client.PaymentForm{
		Token:              token,
		OutletCode:         "OUTLET01",
		MerchantCode:       "1000000001",
		Amount:             bill.Amount,
		OrderReference:     "ORDER1001",
		BillReference:      bill.Reference,
		ProductType:        "tickets",
		ProductDescription: "Two tickets",
		ServiceDate:        "2026-11-21",
		CustomerFirstName:  "Wanjiku",
		CustomerLastName:   "Kamau",
		Country:            "KE",
		MobileNumber:       "+254 712345678",
		EmailAddress:       "wanjiku@example.com",
		City:               "Nairobi",
		CallbackURL:        "https://shop.example/kadi/callback",
	}, client.FormOptions{SubmitLabel: "Pay KES 1,500.00"})
	if err != nil {
		log.Fatal(err)
	}
	// Output:
	// bill KD0000000001 for 1500.00
	// <form id="kadi-payment-form" method="post" action="https://pay.kadi.example/cardPay">
	// <input type="hidden" name="token" value="pay-1">
	// <input type="hidden" name="outletCode" value="OUTLET01">
	// <input type="hidden" name="merchantCode" value="1000000001">
	// <input type="hidden" name="amount" value="1500.00">
	// <input type="hidden" name="orderReference" value="ORDER1001">
	// <input type="hidden" name="billReference" value="KD0000000001">
	// <input type="hidden" name="productType" value="tickets">
	// <input type="hidden" name="productDescription" value="Two tickets">
	// <input type="hidden" name="serviceDate" value="2026-11-21">
	// <input type="hidden" name="customerFirstName" value="Wanjiku">
	// <input type="hidden" name="customerLastName" value="Kamau">
	// <input type="hidden" name="country" value="KE">
	// <input type="hidden" name="mobileNumber" value="&#43;254 712345678">
	// <input type="hidden" name="emailAddress" value="wanjiku@example.com">
	// <input type="hidden" name="postalcodeZip" value="">
	// <input type="hidden" name="address" value="">
	// <input type="hidden" name="city" value="Nairobi">
	// <input type="hidden" name="ipAddress" value="">
	// <input type="hidden" name="callbackUrl" value="https://shop.example/kadi/callback">
	// <button type="submit">Pay KES 1,500.00</button>
	// </form>
}

// The callback handler: the browser's word is only a hint, so the handler
// asks the gateway before giving value. Here a genuine callback is followed
// by a forged one claiming success for a bill nobody paid.
func ExampleParseCallback() {
	gateway := newFakeGateway() // stands in for https://api.kadi.example
	defer gateway.Close()
	kadi, err := client.New(client.Config{
		BaseURL: gateway.URL, APIKey: "test-api-key", Username: "1000000001", Password: "s3cret-passw0rd",
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// The shop's own record of each order: what it costs, and its bill.
	type order struct{ amount, bill string }
	orders := map[string]*order{"ORDER1001": {amount: "1500.00"}, "ORDER1002": {amount: "90000.00"}}
	for _, ref := range []string{"ORDER1001", "ORDER1002"} {
		bill, err := kadi.CreateBill(ctx, client.BillRequest{
			Customer: client.Customer{Name: "Wanjiku Kamau"},
			Order: client.Order{BillerCode: "BILLER01", Reference: ref, Amount: orders[ref].amount,
				Currency: "KES", Description: "Order " + ref, Outlet: "OUTLET01"},
		})
		if err != nil {
			log.Fatal(err)
		}
		orders[ref].bill = bill.Reference
	}
	gateway.pay(orders["ORDER1001"].bill) // the customer pays on the hosted page

	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cb, err := client.ParseCallback(r)
		if err != nil {
			http.Error(w, "bad callback", http.StatusBadRequest)
			return
		}
		if !cb.Successful() {
			fmt.Fprintln(w, "payment failed:", cb.Message) // offer to try again
			return
		}
		v, err := kadi.Verify(r.Context(), cb.BillReference)
		if err != nil {
			// Not a verdict on the payment: the customer may reload.
			http.Error(w, "please try again in a moment", http.StatusServiceUnavailable)
			return
		}
		// Amounts come back with exactly the currency's digits ("1500.00"),
		// so text comparison works when the shop keeps them that way too.
		if o := orders[v.OrderRef]; !v.Paid || o == nil || v.Amount != o.amount {
			fmt.Println(cb.OrderReference, "is not paid: nothing shipped")
			fmt.Fprintln(w, "We could not confirm your payment yet.")
			return
		}
		fmt.Printf("%s paid %s by transaction %s: shipping\n", v.OrderRef, v.Amount, v.TransactionID)
		fmt.Fprintln(w, "Thank you!")
	}))
	defer shop.Close()

	// What the customer's browser posts after paying, and then a forgery.
	for _, ref := range []string{"ORDER1001", "ORDER1002"} {
		resp, err := http.PostForm(shop.URL+"/kadi/callback", url.Values{
			"orderAmount":    {orders[ref].amount},
			"orderReference": {ref},
			"orderStatus":    {client.StatusSuccessful},
			"message":        {"Payment received"},
			"dateTime":       {"2026-11-21+0300"},
			"billReference":  {orders[ref].bill},
			"transactionRef": {"TX00000001"},
		})
		if err != nil {
			log.Fatal(err)
		}
		resp.Body.Close()
	}
	// Output:
	// ORDER1001 paid 1500.00 by transaction TX00000001: shipping
	// ORDER1002 is not paid: nothing shipped
}

// A refused bill lists every broken rule, ready to show next to the form's
// fields; the request id is what support asks for.
func ExampleAPIError() {
	gateway := newFakeGateway() // stands in for https://api.kadi.example
	defer gateway.Close()
	kadi, err := client.New(client.Config{
		BaseURL: gateway.URL, APIKey: "test-api-key", Username: "1000000001", Password: "s3cret-passw0rd",
	})
	if err != nil {
		log.Fatal(err)
	}

	_, err = kadi.CreateBill(context.Background(), client.BillRequest{
		Customer: client.Customer{Name: ""},
		Order: client.Order{BillerCode: "BILLER01", Reference: "ORDER1003", Amount: "0",
			Currency: "KES", Description: "Nothing", Outlet: "OUTLET01"},
	})
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		fmt.Println("HTTP", apiErr.StatusCode, "request", apiErr.RequestID)
		for _, f := range apiErr.Fields {
			fmt.Printf("%s: %s\n", f.Field, f.Message)
		}
	}
	// Output:
	// HTTP 400 request req_000000000000000000000002
	// customer.name: is required
	// order.amount: must be greater than zero
}
