package form

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/contract"
	"github.com/kadipay/kadi/internal/merchant"
)

// The form fields /cardPay reads and the callback fields it posts back are
// exactly the ones api/openapi.yaml documents (CardPayForm, Callback).
func TestFieldsMatchTheDocument(t *testing.T) {
	v, err := contract.Load()
	if err != nil {
		t.Fatal(err)
	}
	var form []string
	for _, f := range fields {
		form = append(form, f.name)
	}
	form = append(form, checkoutField)
	var callback []string
	for _, f := range (Callback{}).Fields() {
		callback = append(callback, f.Name)
	}
	for _, tc := range []struct {
		schema string
		code   []string
	}{
		{"CardPayForm", form},
		{"Callback", callback},
	} {
		sort.Strings(tc.code)
		if doc := v.Properties(tc.schema); !reflect.DeepEqual(doc, tc.code) {
			t.Errorf("%s: the document has %v, the code %v", tc.schema, doc, tc.code)
		}
	}
}

// A callback origin holding a card number is refused, without repeating
// it: saved, it would be in the audit log.
func TestCallbackOriginsRefuseCardNumbers(t *testing.T) {
	_, err := ParseCallbackOrigins("https://shop.example, https://4242424242424242.shop.example", merchant.Test)
	if err == nil || strings.Contains(err.Error(), "4242") {
		t.Errorf("ParseCallbackOrigins with a card number: %v", err)
	}
	if got, err := ParseCallbackOrigins("https://shop.example", merchant.Test); err != nil || len(got) != 1 {
		t.Errorf("ParseCallbackOrigins(https://shop.example) = %v, %v", got, err)
	}
}
