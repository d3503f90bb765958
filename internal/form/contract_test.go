package form

import (
	"reflect"
	"sort"
	"testing"

	"github.com/kadipay/kadi/internal/contract"
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
