package api

import (
	"reflect"
	"testing"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/contract"
	"github.com/kadipay/kadi/internal/ipn"
)

// Every type the API reads or writes has the fields api/openapi.yaml says,
// no more and no fewer: a field added to the code and not to the document,
// or the reverse, fails here even before a response shows it.
func TestWireTypesMatchTheDocument(t *testing.T) {
	v, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		value   any
		schemas []string
	}{
		{TokenResponse{}, []string{"AccessToken"}},
		{PaymentTokenResponse{}, []string{"PaymentToken"}},
		{oauthError{}, []string{"OAuthError"}},
		{Error{}, []string{"Error"}},
		{bill.FieldError{}, []string{"FieldError"}},
		{bill.Request{}, []string{"BillRequest"}},
		// One Go type answers a bill and a refused bill.
		{BillResponse{}, []string{"Bill", "BillFailure"}},
		{VerificationResponse{}, []string{"Verification"}},
		{NotificationResponse{}, []string{"NotificationDetail"}},
		{AttemptResponse{}, []string{"Attempt"}},
		{ipn.Payload{}, []string{"IPNPayload"}},
		{ipn.PayloadCustomer{}, []string{"IPNCustomer"}},
		{ipn.PayloadTransaction{}, []string{"IPNTransaction"}},
		{ipn.PayloadBank{}, []string{"IPNBank"}},
	}
	for _, tc := range cases {
		typ := reflect.TypeOf(tc.value)
		t.Run(typ.String(), func(t *testing.T) {
			if err := v.Drift(typ, tc.schemas...); err != nil {
				t.Error(err)
			}
		})
	}
	// A list entry is an event without its history.
	want := v.Properties("NotificationDetail")
	want = slicesDelete(want, "history")
	if got := v.Properties("Notification"); !reflect.DeepEqual(got, want) {
		t.Errorf("Notification has %v, want NotificationDetail's without history: %v", got, want)
	}
	if got := v.Properties("NotificationList"); !reflect.DeepEqual(got, []string{"notifications"}) {
		t.Errorf("NotificationList has %v, want [notifications] (listNotifications)", got)
	}
}

func slicesDelete(s []string, x string) []string {
	out := s[:0:0]
	for _, e := range s {
		if e != x {
			out = append(out, e)
		}
	}
	return out
}
