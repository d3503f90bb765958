package sim

import "github.com/kadipay/kadi/internal/payment"

// The test-card table of docs/hosted-form.md. These numbers are public test cards;
// they live only here, in tests and in docs. Every other Luhn-valid card of
// a known brand is approved in test mode.

// ChallengeCode approves a 3-D Secure challenge in the simulator.
const ChallengeCode = "123456"

// TestCard is one row of the documented table, for docs and the demo shop.
type TestCard struct {
	Number  string
	Result  string
	outcome string // approved, declined, error, challenge
	code    string
	message string
}

// TestCards lists the documented test cards in display order.
var TestCards = []TestCard{
	{Number: "4242424242424242", Result: "Visa, approved", outcome: "approved"},
	{Number: "4111111111111111", Result: "Visa, approved", outcome: "approved"},
	{Number: "5555555555554444", Result: "Mastercard, approved", outcome: "approved"},
	{Number: "2223003122003222", Result: "Mastercard, approved", outcome: "approved"},
	{Number: "378282246310005", Result: "Amex, approved (4-digit CVV)", outcome: "approved"},
	{Number: "4000000000000002", Result: "declined: generic decline", outcome: "declined", code: "generic_decline", message: "Your card was declined"},
	{Number: "4000000000009995", Result: "declined: insufficient funds", outcome: "declined", code: "insufficient_funds", message: "Your card has insufficient funds"},
	{Number: "4000000000000069", Result: "declined: expired card", outcome: "declined", code: payment.DeclineExpiredCard, message: "Your card has expired"},
	{Number: "4000000000000127", Result: "declined: incorrect CVV", outcome: "declined", code: "incorrect_cvc", message: "Your card's security code is incorrect"},
	{Number: "4000000000000119", Result: "acquirer error: nothing charged, retry", outcome: "error", code: "processing_error",
		message: "The card network could not process the payment; nothing was charged, please try again"},
	{Number: "4000000000003220", Result: "3-D Secure challenge: code " + ChallengeCode + " approves", outcome: "challenge"},
}

// Grouped returns the number in groups of four (Amex 4-6-5), as people type it.
func (c TestCard) Grouped() string {
	n := c.Number
	if len(n) == 15 {
		return n[:4] + " " + n[4:10] + " " + n[10:]
	}
	out := ""
	for i := 0; i < len(n); i += 4 {
		if i > 0 {
			out += " "
		}
		out += n[i:min(i+4, len(n))]
	}
	return out
}

var special = func() map[string]TestCard {
	m := map[string]TestCard{}
	for _, c := range TestCards {
		if c.outcome != "approved" {
			m[c.Number] = c
		}
	}
	return m
}()
