package card

import "fmt"

// CheckCVV validates the security code's shape for the card's brand: four
// digits on Amex, three everywhere else. Only the issuer can say whether it
// is the right code; this just spares it a request that cannot succeed.
func CheckCVV(cvv string, b Brand) error {
	want := 3
	if b == Amex {
		want = 4
	}
	if len(cvv) != want {
		return fmt.Errorf("card: security code must be %d digits: %w", want, ErrCVV)
	}
	for i := 0; i < len(cvv); i++ {
		if !isDigit(cvv[i]) {
			return fmt.Errorf("card: security code must be %d digits: %w", want, ErrCVV)
		}
	}
	return nil
}
