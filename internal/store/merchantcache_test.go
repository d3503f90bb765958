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
	path := filepath.Join(t.TempDir(), "kadi.db")
	node, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	node.merchantMaxAge = 200 * time.Millisecond
	other, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

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
	time.Sleep(node.merchantMaxAge)
	if got, _ := node.MerchantByCode(ctx, m.Code); got.PasswordHash != "h3" {
		t.Errorf("another process's change is still unseen after the maximum age: %q", got.PasswordHash)
	}
	if _, err := node.MerchantByCode(ctx, "0000000000"); !errors.Is(err, merchant.ErrNotFound) {
		t.Errorf("unknown merchant: %v", err)
	}
}
