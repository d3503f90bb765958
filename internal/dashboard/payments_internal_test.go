package dashboard

import (
	"testing"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/payment"
)

// A row says paid only when the bill and its attempt agree: the list
// reads the bills, then their attempts, and an attempt may succeed in
// between.
func TestListedBillPaid(t *testing.T) {
	for _, tt := range []struct {
		state   bill.State
		attempt payment.Status
		want    bool
	}{
		{bill.Paid, payment.Succeeded, true},
		{bill.Processing, payment.Succeeded, false},
		{bill.Open, payment.Failed, false},
		{bill.Processing, payment.Processing, false},
		{bill.Open, "", false},
	} {
		l := listedBill{Bill: bill.Bill{State: tt.state}, Attempt: payment.Payment{Status: tt.attempt}}
		if got := l.Paid(); got != tt.want {
			t.Errorf("bill %s, attempt %q: Paid() = %v, want %v", tt.state, tt.attempt, got, tt.want)
		}
	}
}
