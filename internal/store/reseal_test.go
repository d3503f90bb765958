package store_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/keyring"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/store"
)

// sealedColumns are every column Reseal must cover, read raw.
var sealedColumns = []string{
	`SELECT notification_secret FROM merchant_settings`,
	`SELECT previous_notification_secret FROM merchant_settings WHERE previous_notification_secret <> ''`,
	`SELECT ipn_password FROM merchant_settings WHERE ipn_password <> ''`,
	`SELECT totp_secret FROM merchants WHERE totp_secret <> ''`,
	`SELECT notice FROM checkout_sessions WHERE notice <> ''`,
}

// TestReseal: after a rotation, Reseal puts every stored secret under the
// new key (the raw columns name it), the gateway reads them back as they
// were, a node holding only the new key reads them too (so the previous
// key may be retired), and a second run has nothing left to do.
func TestReseal(t *testing.T) {
	t.Run("SQLite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "kadi.db")
		testReseal(t, func(t *testing.T, keys *keyring.Keyring) *store.DB { return openSealed(t, path, keys) })
	})
	t.Run("PostgreSQL", func(t *testing.T) {
		url := freshSchema(t, postgresURL(t))
		testReseal(t, func(t *testing.T, keys *keyring.Keyring) *store.DB { return openSealed(t, url, keys) })
	})
}

func openSealed(t *testing.T, url string, keys *keyring.Keyring) *store.DB {
	t.Helper()
	sealer, err := secret.NewRingSealer(keys.Purpose("sealed-secrets"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(t.Context(), url, store.WithSealer(sealer))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testReseal(t *testing.T, open func(*testing.T, *keyring.Keyring) *store.DB) {
	ctx := t.Context()
	now := time.Now()
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	orig := keyring.Ring{Keys: []keyring.Key{{ID: secret.LegacyKeyID, Secret: secret.RandomBytes(32)}}}
	if err := keyring.WriteFile(keyFile, orig); err != nil {
		t.Fatal(err)
	}
	keys, err := keyring.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, keys)

	// One of each sealed secret, under the original key.
	c, err := merchant.Onboard(ctx, s, "Reseal Shop", now)
	if err != nil {
		t.Fatal(err)
	}
	const ipnPassword, totp = "ipn-Password-0123456789", "JBSWY3DPEHPK3PXP"
	if _, err := s.SetIPN(ctx, c.MerchantCode, merchant.Test, merchant.IPNConfig{URL: "https://shop.example/ipn", Username: "u", Password: ipnPassword}); err != nil {
		t.Fatal(err)
	}
	must(t, s.EnableTOTP(ctx, c.MerchantCode, totp, nil, now))
	// A rotated notification secret that still signs: sealed as it was.
	must(t, s.SetNotificationSecret(ctx, c.MerchantCode, merchant.Test, secret.NewNotificationSecret(), now.Add(time.Hour)))
	amount, err := money.FromMinor(150_000, "KES")
	must(t, err)
	b := bill.Bill{Reference: secret.RandomUpperAlnum(12), MerchantCode: c.MerchantCode, Mode: merchant.Test, OrderReference: "RESEAL1",
		RequestHash: secret.NewID("req"), CustomerName: "Wanjiru", BillerCode: "123456", Outlet: "87654321", Amount: amount,
		Description: "coffee", State: bill.Open, ExpiresAt: now.Add(time.Hour), CreatedAt: now}
	_, _, err = s.InsertBill(ctx, b)
	must(t, err)
	_, sess := checkout.New(c.MerchantCode, merchant.Test, b.Reference, map[string]string{"amount": "1500.00"}, now)
	must(t, s.CreateCheckout(ctx, sess))
	notice := checkout.Notice{Declined: "declined", FirstName: "Wanjiru", LastName: "Kamau", Expiry: "12 / 30"}
	must(t, s.SetCheckoutNotice(ctx, sess.IDHash, notice))
	// A value stored before sealing existed, in clear: sealed by Reseal too.
	must(t, s.ExecRaw(ctx, `UPDATE merchant_settings SET ipn_password = ? WHERE merchant_code = ? AND mode = ?`, "clear-Password-1", c.MerchantCode, "live"))
	want := readSecrets(t, s, c.MerchantCode, sess.IDHash)

	rawIDs(t, s, secret.LegacyKeyID, 6) // 2 notification secrets and a previous one, an IPN password, TOTP, a notice; and the clear one

	// Rotate: the gateway reloads the ring, then Reseal.
	if err := keyring.WriteFile(keyFile, orig.Rotate(secret.RandomBytes(32))); err != nil {
		t.Fatal(err)
	}
	if _, err := keys.Reload(); err != nil {
		t.Fatal(err)
	}
	stats, err := s.Reseal(ctx)
	if err != nil {
		t.Fatalf("Reseal: %v", err)
	}
	if stats.Resealed != 7 || stats.Current != 0 || stats.Changed != 0 {
		t.Errorf("Reseal = %+v, want 7 resealed", stats)
	}
	rawIDs(t, s, "k1", 7)
	if got := readSecrets(t, s, c.MerchantCode, sess.IDHash); got != want {
		t.Errorf("after Reseal the secrets read %q, want %q", got, want)
	}
	if stats, err := s.Reseal(ctx); err != nil || stats.Resealed != 0 || stats.Current != 7 {
		t.Errorf("second Reseal = %+v, %v; want nothing to do", stats, err)
	}

	// A node given only the new key reads everything.
	retired := keys.Ring()
	retired.Keys = retired.Keys[:1]
	s.Close()
	only := open(t, keyring.New(retired))
	if got := readSecrets(t, only, c.MerchantCode, sess.IDHash); got != want {
		t.Errorf("with the previous key retired the secrets read %q, want %q", got, want)
	}
}

// rawIDs checks that every stored secret is sealed under key id (n values).
func rawIDs(t *testing.T, s *store.DB, id string, n int) {
	t.Helper()
	var seen int
	for _, q := range sealedColumns {
		values, err := store.RawStrings(t.Context(), s, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for _, v := range values {
			if got, ok := secret.SealedKeyID(v); !ok && strings.HasPrefix(v, "clear-") {
				continue
			} else if !ok || got != id {
				t.Errorf("%s: a value sealed under %q (%v), want %q", q, got, ok, id)
			}
			seen++
		}
	}
	if seen != n {
		t.Errorf("%d sealed values, want %d", seen, n)
	}
}

// readSecrets reads every secret back through the store, as one string.
func readSecrets(t *testing.T, s *store.DB, code, checkoutHash string) string {
	t.Helper()
	ctx := context.Background()
	var parts []string
	for _, mode := range merchant.Modes {
		st, err := s.Settings(ctx, code, mode)
		if err != nil {
			t.Fatalf("Settings %s: %v", mode, err)
		}
		parts = append(parts, st.NotificationSecret, st.PreviousSecret, st.IPN.Password)
	}
	totp, _, err := s.TOTP(ctx, code)
	if err != nil {
		t.Fatalf("TOTP: %v", err)
	}
	c, err := s.CheckoutByHash(ctx, checkoutHash, time.Now())
	if err != nil {
		t.Fatalf("CheckoutByHash: %v", err)
	}
	return strings.Join(append(parts, totp, c.Notice.FirstName+" "+c.Notice.Expiry), "|")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
