package api_test

import (
	"encoding/json"
	"fmt"
	"github.com/kadipay/kadi/internal/acquirer/sim"
	"github.com/kadipay/kadi/internal/secret"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/api"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/server/servertest"
)

func TestBillResponses(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Bill Shop")
	token := g.Token(c, merchant.Test)

	body := func(change func(order map[string]any, b map[string]any)) map[string]any {
		b := servertest.BillBody(c, "ORDER1001", "1500.00")
		if change != nil {
			change(servertest.Order(b), b)
		}
		return b
	}
	cases := []struct {
		name, golden string
		body         any
	}{
		{"valid", "bill_200", body(nil)},
		{"identical retry", "bill_200_retry", body(nil)},
		{"every field broken", "bill_400_every_field", body(func(o, b map[string]any) {
			b["customer"] = map[string]any{"name": "Jane <Doe> " + strings.Repeat("x", 50)}
			o["reference"] = "ORD-1/2 is far too long"
			o["description"] = "<b>" + strings.Repeat("y", 70)
			o["billerCode"] = "000000"
			o["outlet"] = "00000000"
			o["channel"] = "MPESA"
			o["currency"] = "XYZ"
			o["expiry"] = "tomorrow"
		})},
		{"everything missing", "bill_400_missing", map[string]any{}},
		{"blank fields", "bill_400_blank", body(func(o, b map[string]any) {
			b["customer"] = map[string]any{"name": "   "}
			for k := range o {
				o[k] = " "
			}
		})},
		{"wrong types", "bill_400_types", body(func(o, b map[string]any) {
			b["customer"] = map[string]any{"name": map[string]any{"first": "Jane"}}
			o["reference"] = []any{"ORDER1001"}
			o["amount"] = true
			o["expiry"] = false
		})},
		{"control character in name", "bill_400_control_character", body(func(o, b map[string]any) {
			b["customer"] = map[string]any{"name": "Jane\u0007Wanjiru"}
		})},
		{"amount with too many decimals", "bill_400_amount_precision", body(func(o, b map[string]any) { o["amount"] = "10.001" })},
		{"amount without decimals allowed", "bill_400_amount_precision_ugx", body(func(o, b map[string]any) { o["currency"], o["amount"] = "UGX", "100.5" })},
		{"zero amount", "bill_400_amount_not_positive", body(func(o, b map[string]any) { o["amount"] = "0.00" })},
		{"amount over the maximum", "bill_400_amount_too_large", body(func(o, b map[string]any) { o["amount"] = "10000000.01" })},
		{"amount with a thousands separator", "bill_400_amount_format", body(func(o, b map[string]any) { o["amount"] = "1,500" })},
		{"negative amount", "bill_400_amount_negative", body(func(o, b map[string]any) { o["amount"] = "-5" })},
		{"known currency not supported", "bill_400_currency", body(func(o, b map[string]any) { o["currency"] = "JPY" })},
		{"expiry in the past", "bill_400_expiry_past", body(func(o, b map[string]any) { o["expiry"] = "2020-01-01T00:00:00+03:00" })},
		{"expiry in an unknown format", "bill_400_expiry_format", body(func(o, b map[string]any) { o["expiry"] = "2099-01-01 10:00" })},
		{"expiry without offset, past", "bill_400_expiry_local_past", body(func(o, b map[string]any) { o["expiry"] = "2020-01-17T00:00:00" })},
		// Reported with the other rules (invalid_type), not as a body that
		// is not JSON.
		{"customer not an object", "bill_400_customer_not_object", body(func(o, b map[string]any) { b["customer"] = "Jane" })},
		{"truncated JSON", "bill_400_malformed", `{"customer":`},
		{"empty body", "bill_400_empty", ``},
		{"JSON array", "bill_400_array", `[{"customer":{}}]`},
		{"trailing data", "bill_400_trailing", `{} {}`},
		{"repeated member", "bill_400_duplicate", `{"order":{"amount":"1","amount":"1500"}}`},
		{"same order reference, other amount", "bill_409", body(func(o, b map[string]any) { o["amount"] = "1600.00" })},
		{"body over 64 KiB", "bill_413", body(func(o, b map[string]any) { o["description"] = strings.Repeat("z", 70<<10) })},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := servertest.BillRequest(token, tc.body)
			rec := g.Serve(req)
			checkGolden(t, tc.golden, req, rec, known(c))
			if rec.Code != http.StatusOK {
				// status must be the JSON boolean false, never "false".
				var raw map[string]json.RawMessage
				_ = json.Unmarshal(rec.Body.Bytes(), &raw)
				if string(raw["status"]) != "false" {
					t.Errorf("failed bill's status is %s, want the JSON boolean false", raw["status"])
				}
			}
		})
	}
}

// .NET's default UTF-8 encoder writes a byte order mark before the JSON:
// taken off, once.
func TestBillAfterAByteOrderMark(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("BOM Shop")
	token := g.Token(c, merchant.Test)
	raw, err := json.Marshal(servertest.BillBody(c, "BOM1", "10"))
	if err != nil {
		t.Fatal(err)
	}
	const bom = "\xef\xbb\xbf"
	if rec := g.Serve(servertest.BillRequest(token, bom+string(raw))); rec.Code != http.StatusOK {
		t.Errorf("one byte order mark: %d %s", rec.Code, rec.Body)
	}
	if rec := g.Serve(servertest.BillRequest(token, bom+bom+string(raw))); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), `"code":"invalid_json"`) {
		t.Errorf("two byte order marks: %d %s, want 400 invalid_json", rec.Code, rec.Body)
	}
}

func TestBillIdenticalRetryReturnsTheOriginal(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Retry Shop")
	token := g.Token(c, merchant.Test)

	first := g.CreateBill(c, token, "RETRY1", "1500.00")
	for _, amount := range []string{"1500.00", "1500"} { // the same value written differently
		again := g.CreateBill(c, token, "RETRY1", amount)
		if again.Reference != first.Reference || again.Amount != "1500.00" {
			t.Errorf("retry with amount %q: reference %s amount %s, want %s 1500.00", amount, again.Reference, again.Amount, first.Reference)
		}
	}
	if rec := g.Serve(servertest.BillRequest(token, servertest.BillBody(c, "RETRY1", "1500.01"))); rec.Code != http.StatusConflict {
		t.Errorf("same reference, other amount: %d, want 409", rec.Code)
	}
	if other := g.CreateBill(c, token, "RETRY2", "1500.00"); other.Reference == first.Reference {
		t.Errorf("a new order reference got the old bill %s", other.Reference)
	}

	// One expiry written in two offsets is one request (it was 409); a
	// second later is another.
	withExpiry := func(expiry string) map[string]any {
		b := servertest.BillBody(c, "RETRY3", "10")
		servertest.Order(b)["expiry"] = expiry
		return b
	}
	at := g.Clock.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	timed := g.MustBill(token, withExpiry(at.Format(time.RFC3339)))
	if again := g.MustBill(token, withExpiry(at.In(time.FixedZone("EAT", 3*3600)).Format(time.RFC3339))); again.Reference != timed.Reference {
		t.Errorf("the same expiry in +03:00: bill %s, want %s", again.Reference, timed.Reference)
	}
	if rec := g.Serve(servertest.BillRequest(token, withExpiry(at.Add(time.Second).Format(time.RFC3339)))); rec.Code != http.StatusConflict {
		t.Errorf("another expiry: %d, want 409", rec.Code)
	}
}

// docs/api.md: the body is read whatever its Content-Type says.
func TestBillBodyIsJSONWhateverTheContentType(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Content Shop")
	token := g.Token(c, merchant.Test)
	for i, ct := range []string{"application/x-www-form-urlencoded", "", "text/plain", "application/json; charset=utf-8"} {
		ref := "CT" + string(rune('A'+i))
		req := servertest.BillRequest(token, servertest.BillBody(c, ref, "99"))
		if ct == "" {
			req.Header.Del("Content-Type")
		} else {
			req.Header.Set("Content-Type", ct)
		}
		rec := g.Serve(req)
		var br api.BillResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &br); err != nil || rec.Code != http.StatusOK || br.OrderRef != ref {
			t.Errorf("Content-Type %q: %d %s", ct, rec.Code, rec.Body)
		}
	}
}

// docs/api.md: unknown fields are ignored and a JSON number is accepted
// where the spec says decimal text.
func TestBillLenientFields(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Lenient Shop")
	token := g.Token(c, merchant.Test)

	extra := servertest.BillBody(c, "EXTRA1", "250.50")
	extra["customer"].(map[string]any)["customerid"] = "C-42"
	extra["customer"].(map[string]any)["email"] = "jane@example.com"
	servertest.Order(extra)["notes"] = map[string]any{"gift": true}
	extra["meta"] = []any{1, "two"}
	if b := g.MustBill(token, extra); b.Amount != "250.50" || b.OrderRef != "EXTRA1" {
		t.Errorf("extra fields: %+v", b)
	}

	for _, tc := range []struct {
		literal, want string
	}{{"1000", "1000.00"}, {"1000.5", "1000.50"}, {"7.25", "7.25"}} {
		body := `{"customer":{"name":"Jane"},"order":{"billerCode":"` + c.BillerCode + `","reference":"NUM` +
			strings.ReplaceAll(tc.literal, ".", "") + `","amount":` + tc.literal + `,"currency":"KES","description":"Numbers","channel":"CARD","outlet":"` + c.OutletCode + `"}}`
		if b := g.MustBill(token, body); b.Amount != tc.want {
			t.Errorf("amount %s: echoed %q, want %q", tc.literal, b.Amount, tc.want)
		}
	}
}

// docs/security.md: test and live are separate worlds.
func TestModesAreSeparate(t *testing.T) {
	g := servertest.Start(t, servertest.Options{LiveAcquirer: sim.New(secret.RandomBytes(32), nil)})
	c := g.Onboard("Two Worlds")
	testToken, liveToken := g.Token(c, merchant.Test), g.Token(c, merchant.Live)

	live := g.CreateBill(c, liveToken, "SAME1", "500")
	test := g.CreateBill(c, testToken, "TESTONLY1", "700")
	for _, tc := range []struct {
		name, token, ref string
	}{
		{"test token, live bill reference", testToken, live.Reference},
		{"test token, live order reference", testToken, live.OrderRef},
		{"live token, test bill reference", liveToken, test.Reference},
		{"live token, test order reference", liveToken, test.OrderRef},
	} {
		if rec := g.Serve(servertest.QueryRequest(tc.token, tc.ref)); rec.Code != http.StatusNotFound {
			t.Errorf("%s: %d %s, want 404", tc.name, rec.Code, rec.Body)
		}
	}
	if got := g.Query(liveToken, live.Reference); got.OrderRef != "SAME1" {
		t.Errorf("live token cannot see its own bill: %+v", got)
	}
	// An order reference is unique per merchant and mode, so the test world
	// may reuse it with other details.
	if again := g.CreateBill(c, testToken, "SAME1", "900"); again.Reference == live.Reference {
		t.Errorf("test bill SAME1 is the live bill %s", live.Reference)
	}
}

// An order.expiry without an offset, as a PHP sample sends it, is local
// time in the operator's zone (--timezone, Africa/Nairobi by default).
func TestBillExpiryWithoutOffset(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Local Time Shop")
	nairobi, err := time.LoadLocation("Africa/Nairobi")
	if err != nil {
		t.Fatal(err)
	}
	at := g.Clock.Now().In(nairobi).Add(48 * time.Hour).Truncate(time.Second)
	b := servertest.BillBody(c, "LOCAL1", "10")
	servertest.Order(b)["expiry"] = at.Format("2006-01-02T15:04:05")
	created := g.MustBill(g.Token(c, merchant.Test), b)
	stored, err := g.Store.BillByReference(t.Context(), c.MerchantCode, merchant.Test, created.Reference)
	if err != nil {
		t.Fatal(err)
	}
	if !stored.ExpiresAt.Equal(at) {
		t.Errorf("expiry %s stored as %s, want %s", at.Format("2006-01-02T15:04:05"), stored.ExpiresAt, at)
	}
}

// An order.expiry further away than the bill's longest life (30 days by
// default) is capped, not refused: integrations send far-off times such as
// decisions.md's own "2030-01-17T00:00:00" to mean no particular expiry.
func TestBillExpiryIsCapped(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Far Expiry Shop")
	tok := g.Token(c, merchant.Test)
	for i, expiry := range []string{"2030-01-17T00:00:00", "9999-12-31T23:59:59Z"} {
		body := servertest.BillBody(c, fmt.Sprintf("FAR%d", i), "10")
		body["order"].(map[string]any)["expiry"] = expiry
		created := g.MustBill(tok, body)
		b, err := g.Store.BillByID(t.Context(), created.Reference)
		if err != nil {
			t.Fatal(err)
		}
		if want := b.CreatedAt.Add(bill.DefaultPolicy().MaxTTL); !b.ExpiresAt.Equal(want) {
			t.Errorf("expiry %s: the bill expires at %v, want the cap %v", expiry, b.ExpiresAt, want)
		}
	}
}

// A retry of a bill that can no longer take a payment says so: a merchant
// retrying after a timeout would otherwise send its shopper to it.
func TestRetryOfADeadBillSaysSo(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Retry Shop")
	token := g.Token(c, merchant.Test)
	g.Pay(c, token, "PAIDRETRY", "10", servertest.Card{Number: approvingCard, CVV: "737"})
	if got := g.MustBill(token, servertest.BillBody(c, "PAIDRETRY", "10")); !strings.HasSuffix(got.Remarks, "returning the original, which is paid") {
		t.Errorf("retry of a paid bill: %q", got.Remarks)
	}
	// And for a program, in headers (the body keeps the spec's fields):
	// Stripe's on a replayed answer, which a new bill's answer has not,
	// and what the bill can do.
	if rec := g.Serve(servertest.BillRequest(token, servertest.BillBody(c, "PAIDRETRY", "10"))); rec.Header().Get("Idempotent-Replayed") != "true" ||
		rec.Header().Get("Kadi-Bill-State") != "paid" || strings.Contains(rec.Body.String(), "billState") {
		t.Errorf("retry of a paid bill: %v %s", rec.Header(), rec.Body)
	}
	short := servertest.BillBody(c, "SHORTRETRY", "10")
	servertest.Order(short)["expiry"] = g.Clock.Now().Add(time.Hour).Format(time.RFC3339)
	rec := g.Serve(servertest.BillRequest(token, short))
	if rec.Code != http.StatusOK || rec.Header().Get("Idempotent-Replayed") != "" || rec.Header().Get("Kadi-Bill-State") != "open" {
		t.Fatalf("create: %d %s %v", rec.Code, rec.Body, rec.Header())
	}
	g.Clock.Advance(2 * time.Hour)
	token = g.Token(c, merchant.Test)
	if rec := g.Serve(servertest.BillRequest(token, short)); !strings.Contains(rec.Body.String(), "which has expired: create a new bill") || rec.Header().Get("Kadi-Bill-State") != "expired" {
		t.Errorf("retry of an expired bill: %v %s", rec.Header(), rec.Body)
	}
}

// Without a live connector a live bill is refused when it is created,
// where the merchant's engineers see it, not when its shopper pays.
func TestLiveBillsNeedALiveConnector(t *testing.T) {
	g := servertest.Start(t, servertest.Options{})
	c := g.Onboard("Not Live Yet")
	req := servertest.BillRequest(g.Token(c, merchant.Live), servertest.BillBody(c, "LIVE1", "10"))
	rec := g.Serve(req)
	checkGolden(t, "bill_503_live_disabled", req, rec, known(c))
	if rec.Header().Get("Retry-After") != "" {
		t.Error("a live_disabled refusal asks to be retried")
	}
	if got := g.MustBill(g.Token(c, merchant.Test), servertest.BillBody(c, "TEST1", "10")); got.Status != "1" {
		t.Errorf("test mode: %+v", got)
	}
}
