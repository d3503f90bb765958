package card

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckCVV(t *testing.T) {
	tests := []struct {
		name    string
		cvv     string
		brand   Brand
		wantErr error
	}{
		{"visa 3", "123", Visa, nil},
		{"mastercard 3", "000", Mastercard, nil},
		{"discover 3", "987", Discover, nil},
		{"jcb 3", "456", JCB, nil},
		{"diners 3", "789", DinersClub, nil},
		{"unionpay 3", "321", UnionPay, nil},
		{"amex 4", "1234", Amex, nil},

		{"amex 3", "123", Amex, ErrCVV},
		{"amex 5", "12345", Amex, ErrCVV},
		{"visa 4", "1234", Visa, ErrCVV},
		{"visa 2", "12", Visa, ErrCVV},
		{"empty", "", Visa, ErrCVV},
		{"letter", "12a", Visa, ErrCVV},
		{"space", "12 ", Visa, ErrCVV},
		{"sign", "+12", Visa, ErrCVV},
		{"amex letter", "12a4", Amex, ErrCVV},
		{"arabic-indic digits", "١٢٣", Visa, ErrCVV},
		{"unknown brand still needs 3", "1234", Brand(""), ErrCVV},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckCVV(tt.cvv, tt.brand)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("CheckCVV(%q, %s) = %v, want %v", tt.cvv, tt.brand, err, tt.wantErr)
			}
			if err != nil && len(tt.cvv) > 1 && strings.Contains(err.Error(), tt.cvv) {
				t.Errorf("error %q repeats the security code", err)
			}
		})
	}
}
