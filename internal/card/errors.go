// Package card validates and protects cardholder data: card numbers,
// expiry dates and security codes, plus redaction of card numbers from text
// bound for logs.
//
// Every error message here is safe to show a customer and to log: none ever
// contains a card number or security code, only what was wrong with it.
package card

import "errors"

// Errors returned by this package. Callers tell them apart with errors.Is.
var (
	ErrPANFormat    = errors.New("card number must be 12 to 19 digits, optionally grouped by single spaces or dashes")
	ErrLuhn         = errors.New("card number check digit is wrong")
	ErrBrand        = errors.New("card brand is not supported")
	ErrExpiryFormat = errors.New("card expiry date is not valid")
	ErrExpired      = errors.New("card has expired")
	ErrCVV          = errors.New("card security code is not valid")
)
