package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/store"
)

func ipnRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

// ipnSetup makes a data dir with a merchant (created through the CLI) and
// one notification in the outbox, written the way a successful payment
// writes it.
func ipnSetup(t *testing.T) (dir, code string, ev ipn.Event) {
	t.Helper()
	dir = t.TempDir()
	out, err := ipnRun(t, "merchant", "create", "--data-dir", dir, "--name", "Duka", "--json")
	if err != nil {
		t.Fatalf("merchant create: %v\n%s", err, out)
	}
	var creds merchant.Credentials
	if err := json.Unmarshal([]byte(out), &creds); err != nil {
		t.Fatal(err)
	}
	db := ipnStore(t, dir)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	amount, _ := money.FromMinor(150000, "KES")
	b := bill.Bill{Reference: secret.RandomUpperAlnum(12), MerchantCode: creds.MerchantCode, Mode: merchant.Test, OrderReference: "ORDER1",
		RequestHash: "h", CustomerName: "C", BillerCode: creds.BillerCode, Outlet: creds.OutletCode, Amount: amount, Description: "d",
		State: bill.Open, ExpiresAt: now.Add(time.Hour), CreatedAt: now}
	if _, _, err := db.InsertBill(ctx, b); err != nil {
		t.Fatal(err)
	}
	p := payment.Payment{ID: secret.NewID("pay"), BillReference: b.Reference, MerchantCode: creds.MerchantCode, Mode: merchant.Test,
		Status: payment.Processing, Amount: amount, CallbackURL: "https://shop.example/cb", CreatedAt: now, UpdatedAt: now}
	if err := db.StartPayment(ctx, p); err != nil {
		t.Fatal(err)
	}
	p.Status = payment.Succeeded
	ev = ipn.Event{ID: secret.NewID("msg"), MerchantCode: creds.MerchantCode, Mode: merchant.Test, PaymentID: p.ID,
		Payload: []byte(`{"callbackType":"IPN","transaction":{"billNumber":"` + b.Reference + `"}}`), Status: ipn.Pending, NextAttemptAt: now, CreatedAt: now}
	if err := db.FinishPayment(ctx, p, 5, &ev); err != nil {
		t.Fatal(err)
	}
	return dir, creds.MerchantCode, ev
}

func ipnStore(t *testing.T, dir string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(dir, "kadi.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// ipnFail records one failed attempt that exhausts the event's schedule.
func ipnFail(t *testing.T, db *store.DB, id string) {
	t.Helper()
	now := time.Now()
	got, err := db.ClaimIPN(context.Background(), ipn.Claim{Owner: "t", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v", err)
	}
	err = db.RecordIPN(context.Background(), ipn.Result{EventID: id, Owner: "t", Status: ipn.Failed, LastError: "gave up after 1 attempts: HTTP 503",
		Attempt: &ipn.Attempt{At: now, URL: "https://shop.example/ipn", StatusCode: 503, Latency: 2 * time.Millisecond, Error: "HTTP 503", Response: "busy"}})
	if err != nil {
		t.Fatal(err)
	}
}

func TestIPNList(t *testing.T) {
	dir, code, ev := ipnSetup(t)
	out, err := ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code)
	if err != nil || !strings.Contains(out, ev.ID) || !strings.Contains(out, "pending") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code, "--status", "delivered")
	if err != nil || strings.Contains(out, ev.ID) {
		t.Fatalf("delivered list shows a pending event: %v\n%s", err, out)
	}
	out, err = ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code, "--mode", "live")
	if err != nil || strings.Contains(out, ev.ID) {
		t.Fatalf("live list shows a test event: %v\n%s", err, out)
	}
	out, err = ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code, "--before", ev.ID)
	if err != nil || !strings.Contains(out, "No IPN events.") {
		t.Fatalf("the page after the only event: %v\n%s", err, out)
	}
	// A mistyped id is not "No IPN events.": all would look well.
	if out, err := ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code, "--before", "msg_nope"); err == nil || !strings.Contains(err.Error(), "no such IPN event") {
		t.Errorf("--before an id that does not exist: %v\n%s", err, out)
	}
	out, err = ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code, "--mode", "test", "--status", "pending", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []eventJSON
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 || list[0].ID != ev.ID || list[0].Status != "pending" {
		t.Fatalf("JSON list %v: %s", err, out)
	}
	for _, args := range [][]string{
		{"ipn", "list", "--data-dir", dir},
		{"ipn", "list", "--data-dir", dir, "--merchant", code, "--status", "lost"},
		{"ipn", "list", "--data-dir", dir, "--merchant", code, "--mode", "prod"},
		{"ipn", "frobnicate"},
	} {
		if _, err := ipnRun(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// kadi ipn list shows times in --timezone (Nairobi by default, like the
// callbacks and IPN) and the whole last error, however long.
func TestIPNListTimesAndErrors(t *testing.T) {
	dir, code, ev := ipnSetup(t)
	db := ipnStore(t, dir)
	now := time.Now()
	got, err := db.ClaimIPN(context.Background(), ipn.Claim{Owner: "t", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %v", err)
	}
	long := "gave up: HTTP 503 from the receiver, which said: " + strings.Repeat("the warehouse is closed for stocktaking ", 4) + "END"
	err = db.RecordIPN(context.Background(), ipn.Result{EventID: ev.ID, Owner: "t", Status: ipn.Failed, LastError: long,
		Attempt: &ipn.Attempt{At: now, URL: "https://shop.example/ipn", StatusCode: 503, Latency: time.Millisecond, Error: "HTTP 503"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code)
	if err != nil || !strings.Contains(out, long) {
		t.Errorf("the last error is cut or missing: %v\n%s", err, out)
	}
	if !strings.Contains(out, "+0300") {
		t.Errorf("times are not in Africa/Nairobi by default:\n%s", out)
	}
	out, err = ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code, "--timezone", "UTC")
	if err != nil || !strings.Contains(out, "+0000") || strings.Contains(out, "+0300") {
		t.Errorf("--timezone UTC: %v\n%s", err, out)
	}
	out, err = ipnRun(t, "ipn", "show", ev.ID, "--data-dir", dir, "--timezone", "Africa/Kampala")
	if err != nil || !strings.Contains(out, "+0300") {
		t.Errorf("show --timezone: %v\n%s", err, out)
	}
	if _, err := ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code, "--timezone", "Mars/Olympus"); err == nil {
		t.Error("an unknown --timezone was accepted")
	}
	// A mistyped merchant code is an error, not "No IPN events.".
	if out, err := ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", "0000000000"); err == nil || !strings.Contains(err.Error(), "no merchant 0000000000") {
		t.Errorf("an unknown merchant: %v\n%s", err, out)
	}
}

func TestIPNShow(t *testing.T) {
	dir, _, ev := ipnSetup(t)
	// The ID may come before or after the flags.
	for _, args := range [][]string{{"ipn", "show", ev.ID, "--data-dir", dir}, {"ipn", "show", "--data-dir", dir, ev.ID}} {
		out, err := ipnRun(t, args...)
		if err != nil || !strings.Contains(out, ev.PaymentID) || !strings.Contains(out, `"callbackType": "IPN"`) || !strings.Contains(out, "none yet") {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	ipnFail(t, ipnStore(t, dir), ev.ID)
	out, err := ipnRun(t, "ipn", "show", ev.ID, "--data-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"failed", "503", "https://shop.example/ipn", "busy", "gave up after 1 attempts"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out, err = ipnRun(t, "ipn", "show", ev.ID, "--data-dir", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var shown struct {
		eventJSON
		AttemptLog []attemptJSON `json:"attemptLog"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatal(err)
	}
	if shown.ID != ev.ID || string(shown.Payload) != string(ev.Payload) || len(shown.AttemptLog) != 1 ||
		shown.AttemptLog[0].StatusCode != 503 || shown.AttemptLog[0].LatencyMS != 2 || shown.AttemptLog[0].Response != "busy" {
		t.Errorf("JSON show: %s", out)
	}
	if _, err := ipnRun(t, "ipn", "show", "msg_unknown", "--data-dir", dir); !errors.Is(err, ipn.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
	if _, err := ipnRun(t, "ipn", "show", "--data-dir", dir); !errors.Is(err, errUsage) {
		t.Errorf("no id: %v", err)
	}
}

func TestIPNReplay(t *testing.T) {
	dir, code, ev := ipnSetup(t)
	db := ipnStore(t, dir)
	ipnFail(t, db, ev.ID)
	out, err := ipnRun(t, "ipn", "replay", ev.ID, "--data-dir", dir)
	if err != nil || !strings.Contains(out, ev.ID) {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	got, err := db.IPNEvent(context.Background(), ev.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ipn.Pending || got.Attempts != 0 || got.Replays != 1 || got.NextAttemptAt.After(time.Now()) {
		t.Errorf("after replay: %+v", got)
	}
	events, _ := db.AuditEvents(context.Background(), code, 20)
	audited := false
	for _, e := range events {
		audited = audited || (e.Action == audit.IPNReplayed && strings.Contains(e.Detail, ev.ID))
	}
	if !audited {
		t.Errorf("replay not audit-logged: %+v", events)
	}
	if _, err := ipnRun(t, "ipn", "replay", "msg_unknown", "--data-dir", dir); !errors.Is(err, ipn.ErrNotFound) {
		t.Errorf("replay of an unknown id: %v", err)
	}
}

// set-ipn refuses URLs the live-mode guard would refuse anyway, so the
// merchant learns at once rather than from failed deliveries.
func TestIPNSetIPNChecksURL(t *testing.T) {
	dir, code, _ := ipnSetup(t)
	set := func(mode, url string) error {
		_, err := ipnRun(t, "merchant", "set-ipn", "--data-dir", dir, "--merchant", code, "--mode", mode, "--url", url,
			"--username", "u", "--password", "p")
		return err
	}
	for _, c := range []struct{ mode, url string }{
		{"live", "http://shop.example/ipn"},
		{"live", "https://127.0.0.1/ipn"},
		{"live", "https://localhost/ipn"},
		{"live", "https://[::ffff:169.254.169.254]/ipn"},
		{"test", "http://2130706433/ipn"},
	} {
		if err := set(c.mode, c.url); !errors.Is(err, errUsage) {
			t.Errorf("%s %s: %v, want refused", c.mode, c.url, err)
		}
	}
	// Basic authentication splits at the first colon: no receiver could
	// check such a username.
	if _, err := ipnRun(t, "merchant", "set-ipn", "--data-dir", dir, "--merchant", code, "--mode", "test", "--url", "https://shop.example/ipn",
		"--username", "shop:1", "--password", "p"); !errors.Is(err, errUsage) {
		t.Errorf("a username with a colon: %v, want refused", err)
	}
	for _, c := range []struct{ mode, url string }{{"live", "https://shop.example/ipn"}, {"test", "http://127.0.0.1:9000/ipn"}} {
		if err := set(c.mode, c.url); err != nil {
			t.Errorf("%s %s refused: %v", c.mode, c.url, err)
		}
	}
}

// A notification parked for want of a URL is sent when set-ipn saves one,
// and set-ipn says so; `ipn list --status parked` finds it before.
func TestSetIPNSendsParked(t *testing.T) {
	dir, code, ev := ipnSetup(t)
	db := ipnStore(t, dir)
	now := time.Now()
	got, err := db.ClaimIPN(t.Context(), ipn.Claim{Owner: "w", Now: now, LeaseUntil: now.Add(time.Minute), Limit: 1})
	if err != nil || len(got) != 1 {
		t.Fatalf("claim: %d, %v", len(got), err)
	}
	if err := db.RecordIPN(t.Context(), ipn.Result{EventID: ev.ID, Owner: "w", Status: ipn.Parked, NextAttemptAt: now, LastError: "no IPN URL"}); err != nil {
		t.Fatal(err)
	}
	out, err := ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code, "--status", "parked")
	if err != nil || !strings.Contains(out, ev.ID) || !strings.Contains(out, "parked") {
		t.Fatalf("ipn list --status parked: %v\n%s", err, out)
	}
	out, err = ipnRun(t, "merchant", "set-ipn", "--data-dir", dir, "--merchant", code, "--mode", "test", "--url", "https://shop.example/ipn",
		"--username", "shop", "--password", "p")
	if err != nil || !strings.Contains(out, "1 parked notification (from the last 3 days) is being sent there now.") {
		t.Fatalf("set-ipn: %v\n%s", err, out)
	}
	if got, _ := db.IPNEvent(t.Context(), ev.ID); got.Status != ipn.Pending {
		t.Errorf("after set-ipn the event is %s", got.Status)
	}
	if out, err := ipnRun(t, "ipn", "list", "--data-dir", dir, "--merchant", code, "--status", "sent"); !errors.Is(err, errUsage) ||
		!strings.Contains(out, "pending, parked, delivered or failed") {
		t.Errorf("--status sent: %v\n%s", err, out)
	}
}

// A receiver's answer is outside text: printed in a table it must not
// reach the operator's terminal as escape sequences or bidirectional
// overrides, nor break the row.
func TestOneLine(t *testing.T) {
	for _, tt := range []struct {
		in   string
		max  int
		want string
	}{
		{"ok", 0, "ok"},
		{"a\n b\t c", 0, "a b c"},
		{"\x1b]52;c;cGF3bmVk\x07 copied", 0, "\ufffd]52;c;cGF3bmVk\ufffd copied"},
		{"\x1b[2J\x1b[H", 0, "\ufffd[2J\ufffd[H"},
		{"\u009b31m red", 0, "\ufffd31m red"},
		{"evil\u202egnp.exe", 0, "evil\ufffdgnp.exe"},
		{"Duka la Mama Wanjiku", 10, "Duka la M…"},
	} {
		if got := oneLine(tt.in, tt.max); got != tt.want {
			t.Errorf("oneLine(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
	}
}

// rotate-secret prints when the replaced secret stops signing in the zone
// merchant show and ipn list use (it printed UTC beside their +0300).
func TestRotateSecretSaysUntilInTheZone(t *testing.T) {
	dir, code, _ := ipnSetup(t)
	out, err := ipnRun(t, "merchant", "rotate-secret", "--data-dir", dir, "--merchant", code, "--mode", "test", "--overlap", "1h", "--timezone", "Africa/Nairobi")
	if err != nil || !regexp.MustCompile(`signs notifications until \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \+0300`).MatchString(out) {
		t.Errorf("rotate-secret: %v\n%s", err, out)
	}
}
