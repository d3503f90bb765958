package sim

// The test-card table of decisions §6. These numbers are public test cards;
// they live only here, in tests and in docs.
const (
	cardDeclined          = "4000000000000002"
	cardInsufficientFunds = "4000000000009995"
	cardExpired           = "4000000000000069"
	cardIncorrectCVV      = "4000000000000127"
	cardAcquirerError     = "4000000000000119"
	cardThreeDSecure      = "4000000000003220"

	// ChallengeCode approves a 3-D Secure challenge in the simulator.
	ChallengeCode = "123456"
)

type behaviour struct {
	outcome string // approved, declined, error, challenge
	code    string
	message string
}

// Cards that do something other than approve. Every other Luhn-valid card of
// a known brand is approved, including the documented approving test cards.
var special = map[string]behaviour{
	cardDeclined:          {"declined", "generic_decline", "Your card was declined"},
	cardInsufficientFunds: {"declined", "insufficient_funds", "Your card has insufficient funds"},
	cardExpired:           {"declined", "expired_card", "Your card has expired"},
	cardIncorrectCVV:      {"declined", "incorrect_cvc", "Your card's security code is incorrect"},
	cardAcquirerError:     {"error", "processing_error", "The card network could not process the payment; nothing was charged, please try again"},
	cardThreeDSecure:      {"challenge", "", ""},
}
