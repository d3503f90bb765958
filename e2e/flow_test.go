package e2e

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/kadipay/kadi/client"
)

// callbackDate is spec 2.5's "yyyy-MM-ddZ" in the default operator zone,
// Africa/Nairobi (UTC+3, no daylight saving): docs/hosted-form.md.
var callbackDate = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}\+0300$`)

// TestFiveStepFlow walks spec §1's five steps against the real binary for
// every outcome the issue names: token, bill, hosted form, the browser's
// POST back to the callback, verification.
func TestFiveStepFlow(t *testing.T) {
	t.Parallel()
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Five Step Shop") })
	s := newShopper(t, g, m)
	// Operators feed the log to processors: every line is JSON, and every
	// request's line carries the request id its response header showed.
	t.Cleanup(func() {
		requests := 0
		for _, l := range g.LogLines() {
			if l.Msg != "request" {
				continue
			}
			requests++
			if l.RequestID == "" || l.Method == "" || l.Status == 0 {
				t.Errorf("request log line without request id, method or status: %+v", l)
			}
		}
		if requests == 0 {
			t.Error("the server logged no request lines")
		}
	})

	cases := []struct {
		name string
		card string
		// challenge is the 3-D Secure code to answer; empty: no challenge
		// expected.
		challenge   string
		wantPaid    bool
		wantMessage string // a part of the callback message, case-insensitive
	}{
		{name: "visa approved", card: "4242424242424242", wantPaid: true},
		{name: "mastercard 2-series approved", card: "2223003122003222", wantPaid: true},
		{name: "amex approved with 4-digit cvv", card: "378282246310005", wantPaid: true},
		{name: "generic decline", card: "4000000000000002", wantMessage: "declined"},
		{name: "insufficient funds", card: "4000000000009995", wantMessage: "insufficient funds"},
		{name: "3-D Secure right code", card: "4000000000003220", challenge: "123456", wantPaid: true},
		{name: "3-D Secure wrong code", card: "4000000000003220", challenge: "654321", wantMessage: "3-D Secure"},
		{name: "invalid card number (Luhn)", card: "4242424242424241", wantMessage: "card number"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			orderRef := "FIVE" + string(rune('A'+i)) + "1"
			b := s.createBill(t, orderRef, "1500.00")
			if b.Amount != "1500.00" {
				t.Fatalf("bill amount %q, want 1500.00", b.Amount)
			}
			form := s.paymentForm(t, b, testCard(tc.card))
			p := s.submit(t, form)

			if tc.challenge != "" {
				if !p.hasForm("/cardPay/3ds") {
					t.Fatalf("card %s: want the 3-D Secure challenge page, got HTTP %d:\n%s", tc.card, p.Status, p.Body)
				}
				if v := s.verify(t, b.Reference); v.Paid {
					t.Fatalf("bill paid while its 3-D Secure challenge is still open: %+v", v)
				}
				p = s.answerChallenge(t, p, tc.challenge)
			}
			cb := s.callback.follow(t, p)

			wantStatus := client.StatusFailed
			if tc.wantPaid {
				wantStatus = client.StatusSuccessful
			}
			if cb.OrderStatus != wantStatus {
				t.Fatalf("orderStatus %q (message %q), want %q", cb.OrderStatus, cb.Message, wantStatus)
			}
			if cb.BillReference != b.Reference || cb.OrderReference != orderRef || cb.OrderAmount != b.Amount {
				t.Errorf("callback names bill %q order %q amount %q, want %q %q %q",
					cb.BillReference, cb.OrderReference, cb.OrderAmount, b.Reference, orderRef, b.Amount)
			}
			if !callbackDate.MatchString(cb.DateTime) {
				t.Errorf("dateTime %q, want yyyy-MM-ddZ in Africa/Nairobi such as 2026-11-21+0300", cb.DateTime)
			}
			if cb.Message == "" {
				t.Error("callback message is empty")
			}
			if tc.wantMessage != "" && !strings.Contains(strings.ToLower(cb.Message), strings.ToLower(tc.wantMessage)) {
				t.Errorf("message %q does not say %q", cb.Message, tc.wantMessage)
			}

			v := s.verify(t, b.Reference)
			t.Logf("callback %+v; verification %+v", cb, v)
			if v.Paid != tc.wantPaid {
				t.Fatalf("Verify.Paid = %v, want %v (%+v)", v.Paid, tc.wantPaid, v)
			}
			if v.OrderRef != orderRef {
				t.Errorf("Verify.OrderRef %q, want %q", v.OrderRef, orderRef)
			}
			if v.Date.IsZero() {
				t.Error("Verify.Date is empty")
			}
			if !tc.wantPaid {
				if cb.TransactionRef != "" {
					t.Errorf("failed payment has transactionRef %q, want empty", cb.TransactionRef)
				}
				if v.TransactionID != "" {
					t.Errorf("unpaid bill verifies with transactionId %q", v.TransactionID)
				}
				return
			}
			if cb.TransactionRef == "" || cb.TransactionRef != v.TransactionID {
				t.Errorf("callback transactionRef %q, Verify transactionId %q: want equal and not empty", cb.TransactionRef, v.TransactionID)
			}
			if v.Amount != b.Amount {
				t.Errorf("Verify.Amount %q, want %q", v.Amount, b.Amount)
			}
			// The order reference finds the same bill (docs/ipn.md).
			if byOrder := s.verify(t, orderRef); byOrder.TransactionID != v.TransactionID || !byOrder.Paid {
				t.Errorf("Verify by order reference: %+v, want %+v", byOrder, v)
			}
			// A resubmitted form (back button, double click) gets the first
			// result, never a second charge.
			again := s.callback.follow(t, s.submit(t, s.paymentForm(t, b, testCard("5555555555554444"))))
			if again.OrderStatus != client.StatusSuccessful || again.TransactionRef != cb.TransactionRef {
				t.Errorf("resubmitting a paid bill: %+v, want the first result %+v", again, cb)
			}
		})
	}

	// docs/api.md: amounts are echoed with exactly the currency's digits.
	t.Run("unpaid bill verifies with a zero amount in currency digits", func(t *testing.T) {
		b := s.createBill(t, "FIVEUNPAID", "1500.00")
		v := s.verify(t, b.Reference)
		if v.Paid || v.TransactionID != "" {
			t.Fatalf("unpaid bill verifies as %+v", v)
		}
		if v.Amount != "0.00" {
			t.Fatalf("unpaid KES bill verifies with amount %q, want \"0.00\"", v.Amount)
		}
	})

	t.Run("unknown reference verifies as not found", func(t *testing.T) {
		_, err := s.c.Verify(context.Background(), "NOSUCHBILL1")
		var apiErr *client.APIError
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
			t.Fatalf("Verify of an unknown reference: %v, want HTTP 404", err)
		}
	})
}

// client.ErrNotFound is a reference the gateway does not know, not any
// 404: with a BaseURL whose path is wrong, the token request reaches no
// endpoint, and a shop branching on ErrNotFound took that for "never
// billed" (an integrator's sweep).
func TestClientNotFoundIsAnUnknownReference(t *testing.T) {
	var m merchantCreds
	g := startGateway(t, func(dir string) { m = createMerchant(t, dir, "Not Found Shop") })
	ctx := context.Background()
	if _, err := g.Client(t, m).Verify(ctx, "NOSUCHBILL1"); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("an unknown reference: %v, want ErrNotFound", err)
	}
	wrong, err := client.New(client.Config{BaseURL: g.BaseURL + "/api", APIKey: m.Test.APIKey, Username: m.MerchantCode, Password: m.Password})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wrong.Verify(ctx, "NOSUCHBILL1"); err == nil || errors.Is(err, client.ErrNotFound) {
		t.Errorf("a BaseURL with a wrong path: %v, want an error that is not ErrNotFound", err)
	}
}
