package ipn_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/ipn"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// The body a receiver gets for a real payment, byte for byte: spec 2.7's
// fields in their JSON types with the values docs/ipn.md fixes. Values
// drawn at random (references, codes) are replaced by placeholders after
// checking they are the right ones.
func TestPayloadGolden(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "")
	rc := newReceiver(t, s, nil)
	f.setIPN(t, s.Code, rc.URL+"/kadi/ipn")
	paidAt := time.Date(2026, 3, 14, 9, 26, 53, 589_000_000, time.UTC) // 12:26:53.589 in Nairobi
	b := f.payAt(t, s, paidAt)
	ev := f.event(t, s, b.Reference)
	stop := f.runWorker(t, fast(ipn.Config{}), nil)
	waitFor(t, "delivery", f.statusIs(t, ev.ID, ipn.Delivered))
	stop()
	reqs := rc.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	body := reqs[0].body

	var indented bytes.Buffer
	if err := json.Indent(&indented, body, "", "  "); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, body)
	}
	got := strings.NewReplacer(
		`"`+b.Reference+`"`, `"<bill reference>"`,
		`"`+b.OrderReference+`"`, `"<order reference>"`,
		`"`+s.Outlets[0]+`"`, `"<outlet code>"`,
		`"`+s.SettlementAccount+`"`, `"<settlement account>"`,
		`"`+ev.PaymentID+`"`, `"<payment id>"`,
	).Replace(indented.String()) + "\n"

	path := filepath.Join("testdata", "payload.golden.json")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("payload differs from %s:\n%s\nwant:\n%s", path, got, want)
	}
}

// The JSON types spec 2.7 documents, checked on their own so that a wrong
// type cannot slip into the golden file with -update.
func TestPayloadTypes(t *testing.T) {
	f := newFixture(t)
	s := f.shop(t, "https://shop.example/ipn")
	b := f.pay(t, s)
	ev := f.event(t, s, b.Reference)

	dec := json.NewDecoder(bytes.NewReader(ev.Payload))
	dec.UseNumber()
	var p map[string]any
	if err := dec.Decode(&p); err != nil {
		t.Fatal(err)
	}
	obj := func(v any) map[string]any { m, _ := v.(map[string]any); return m }
	customer, tx, bank := obj(p["customer"]), obj(p["transaction"]), obj(p["bank"])
	if customer == nil || tx == nil || bank == nil || len(p) != 4 {
		t.Fatalf("top level %v, want exactly callbackType, customer, transaction and bank", p)
	}
	str := func(where map[string]any, key, want string) {
		v, ok := where[key].(string)
		if !ok {
			t.Errorf("%s is %T, want a JSON string", key, where[key])
		} else if want != "" && v != want {
			t.Errorf("%s = %q, want %q", key, v, want)
		}
	}
	num := func(key, want string) {
		v, ok := tx[key].(json.Number)
		if !ok {
			t.Errorf("transaction.%s is %T, want a JSON number", key, tx[key])
		} else if string(v) != want {
			t.Errorf("transaction.%s = %s, want %s", key, v, want)
		}
	}
	str(p, "callbackType", "IPN")
	str(customer, "name", "Wanjiku Kamau")
	str(customer, "mobileNumber", "+254 712345678")
	if v, present := customer["reference"]; !present || v != nil {
		t.Errorf("customer.reference = %v (present %v), want null", v, present)
	}
	num("amount", "1500.00")
	num("orderAmount", "1500.00")
	num("serviceCharge", "0")
	str(tx, "reference", "NETREF0000000001")
	str(tx, "paymentMode", "CARD")
	str(tx, "billNumber", b.Reference)
	str(tx, "servedBy", s.Outlets[0])
	str(tx, "additionalInfo", b.OrderReference)
	str(tx, "status", "SUCCESS")
	str(tx, "remarks", "")
	str(tx, "date", "")
	if d, _ := tx["date"].(string); !regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.0$`).MatchString(d) {
		t.Errorf("transaction.date %q is not yyyy-MM-dd HH:mm:ss.S", d)
	}
	str(bank, "reference", ev.PaymentID)
	str(bank, "transactionType", "C")
	str(bank, "account", s.SettlementAccount)
}
