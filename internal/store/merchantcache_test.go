package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
)

// Merchants come from memory: a change made through the same DB shows at
// once; one made by another process (another node, the CLI) within the
// cache's maximum age; and a caller cannot change the cached copy.
func TestMerchantCache(t *testing.T) {
	ctx := context.Background()
	node, other := twoNodes(t)
	node.merchants.maxAge = 200 * time.Millisecond

	m := merchant.Merchant{Code: "1234567890", Name: "Duka", PasswordHash: "h1", BillerCode: "B1", Outlets: []string{"OUT1"}, CreatedAt: time.UnixMilli(1)}
	if err := node.CreateMerchant(ctx, m, nil, nil); err != nil {
		t.Fatal(err)
	}
	got, err := node.MerchantByCode(ctx, m.Code)
	if err != nil || got.Name != "Duka" {
		t.Fatalf("MerchantByCode: %+v, %v", got, err)
	}
	got.Outlets[0] = "CHANGED"
	if again, _ := node.MerchantByCode(ctx, m.Code); again.Outlets[0] != "OUT1" {
		t.Fatal("a caller changed the cached merchant")
	}

	if err := node.SetPassword(ctx, m.Code, "h2"); err != nil {
		t.Fatal(err)
	}
	if got, _ := node.MerchantByCode(ctx, m.Code); got.PasswordHash != "h2" {
		t.Errorf("a password changed through this DB is not seen at once: %q", got.PasswordHash)
	}

	if err := other.SetPassword(ctx, m.Code, "h3"); err != nil {
		t.Fatal(err)
	}
	if got, _ := node.MerchantByCode(ctx, m.Code); got.PasswordHash != "h2" {
		t.Errorf("served %q from the database at once: the cache is not used", got.PasswordHash)
	}
	time.Sleep(node.merchants.maxAge)
	if got, _ := node.MerchantByCode(ctx, m.Code); got.PasswordHash != "h3" {
		t.Errorf("another process's change is still unseen after the maximum age: %q", got.PasswordHash)
	}
	if _, err := node.MerchantByCode(ctx, "0000000000"); !errors.Is(err, merchant.ErrNotFound) {
		t.Errorf("unknown merchant: %v", err)
	}
}

// A mode's settings come from memory too for the IPN worker, which reads
// them at every delivery: saved through the same DB they show at once, by
// another process within the maximum age. Settings itself always reads.
func TestSettingsCache(t *testing.T) {
	ctx := context.Background()
	node, other := twoNodes(t)
	node.settings.maxAge = 200 * time.Millisecond
	creds, err := merchant.Onboard(ctx, node, "Duka", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	code := creds.MerchantCode
	url := func() string {
		t.Helper()
		st, err := node.RecentSettings(ctx, code, merchant.Test)
		if err != nil {
			t.Fatal(err)
		}
		return st.IPN.URL
	}
	set := func(db *DB, u string) {
		t.Helper()
		if _, err := db.SetIPN(ctx, code, merchant.Test, merchant.IPNConfig{URL: u, Username: "u", Password: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	set(node, "https://a.example/ipn")
	if got := url(); got != "https://a.example/ipn" {
		t.Fatalf("IPN URL %q", got)
	}
	set(node, "https://b.example/ipn")
	if got := url(); got != "https://b.example/ipn" {
		t.Errorf("an IPN URL saved through this DB is not seen at once: %q", got)
	}
	if err := node.SetNotificationSecret(ctx, code, merchant.Test, "new-secret", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if st, _ := node.RecentSettings(ctx, code, merchant.Test); st.NotificationSecret != "new-secret" {
		t.Errorf("a secret rotated through this DB is not seen at once")
	}
	set(other, "https://c.example/ipn")
	if got := url(); got != "https://b.example/ipn" {
		t.Errorf("served %q from the database at once: the cache is not used", got)
	}
	if st, _ := node.Settings(ctx, code, merchant.Test); st.IPN.URL != "https://c.example/ipn" {
		t.Errorf("Settings served %q: it must read the database", st.IPN.URL)
	}
	time.Sleep(node.settings.maxAge)
	if got := url(); got != "https://c.example/ipn" {
		t.Errorf("another process's change is still unseen after the maximum age: %q", got)
	}
}

// twoNodes opens one SQLite database twice: a node and another process.
func twoNodes(t *testing.T) (node, other *DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kadi.db")
	for _, db := range []**DB{&node, &other} {
		var err error
		if *db, err = Open(context.Background(), path); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*db).Close() })
	}
	return node, other
}
