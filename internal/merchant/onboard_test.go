package merchant

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/secret"
)

// fakeRegistry records what onboarding hands to storage.
type fakeRegistry struct {
	mu        sync.Mutex
	merchants map[string]Merchant
	settings  []Settings
	keys      []APIKey
	rotated   []APIKey
	err       error
}

func newFakeRegistry() *fakeRegistry { return &fakeRegistry{merchants: map[string]Merchant{}} }

func (r *fakeRegistry) CreateMerchant(_ context.Context, m Merchant, settings []Settings, keys []APIKey) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.merchants[m.Code] = m
	r.settings = append(r.settings, settings...)
	r.keys = append(r.keys, keys...)
	return nil
}

func (r *fakeRegistry) MerchantByCode(_ context.Context, code string) (Merchant, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.merchants[code]
	if !ok {
		return Merchant{}, ErrNotFound
	}
	return m, nil
}

func (r *fakeRegistry) RotateAPIKey(_ context.Context, key APIKey) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.rotated = append(r.rotated, key)
	return nil
}

func (r *fakeRegistry) SetIPN(context.Context, string, Mode, IPNConfig) (int, error) { return 0, nil }

var onboardNow = time.Date(2026, 3, 15, 9, 30, 0, 0, time.UTC)

func TestOnboardName(t *testing.T) {
	tests := []struct {
		name  string
		input string
		want  string // stored name; "" means ErrBadName
	}{
		{"plain", "Duka la Mama", "Duka la Mama"},
		{"trimmed", "  Duka la Mama \n", "Duka la Mama"},
		{"100 characters", strings.Repeat("a", 100), strings.Repeat("a", 100)},
		{"100 two-byte characters", strings.Repeat("é", 100), strings.Repeat("é", 100)},
		{"100 characters after trimming", " " + strings.Repeat("a", 100) + " ", strings.Repeat("a", 100)},
		{"empty", "", ""},
		{"spaces only", "   ", ""},
		{"101 characters", strings.Repeat("a", 101), ""},
		{"101 two-byte characters", strings.Repeat("é", 101), ""},
		{"punctuation", "Smith & Sons (Nairobi) Ltd.", "Smith & Sons (Nairobi) Ltd."},
		{"a long number that is no card", "Duka 1234567890123456", "Duka 1234567890123456"},
		{"a newline inside", "Duka\nla Mama", ""},
		{"a control character", "Duka\x1b[31m", ""},
		{"not UTF-8", "Duka \xff", ""},
		{"a card number", "4242424242424242", ""},
		{"a card number in groups", "Shop 4242 4242 4242 4242", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := newFakeRegistry()
			creds, err := Onboard(context.Background(), reg, tt.input, onboardNow)
			if tt.want == "" {
				if !errors.Is(err, ErrBadName) {
					t.Fatalf("Onboard(%q) error = %v, want ErrBadName", tt.input, err)
				}
				if len(reg.merchants) != 0 || creds != (Credentials{}) {
					t.Errorf("a refused name still created %v / %+v", reg.merchants, creds)
				}
				return
			}
			if err != nil {
				t.Fatalf("Onboard(%q): %v", tt.input, err)
			}
			if got := reg.merchants[creds.MerchantCode].Name; got != tt.want {
				t.Errorf("stored name %q, want %q", got, tt.want)
			}
		})
	}
}

func TestOnboardCredentials(t *testing.T) {
	reg := newFakeRegistry()
	creds, err := Onboard(context.Background(), reg, "Duka la Mama", onboardNow)
	if err != nil {
		t.Fatal(err)
	}
	digits := func(n int) *regexp.Regexp { return regexp.MustCompile(fmt.Sprintf(`^[1-9][0-9]{%d}$`, n-1)) }
	for _, f := range []struct {
		what  string
		value string
		n     int
	}{
		{"merchant code", creds.MerchantCode, 10},
		{"biller code", creds.BillerCode, 6},
		{"outlet code", creds.OutletCode, 8},
		{"service id", creds.ServiceID, 6},
		{"system code", creds.SystemCode, 7},
	} {
		if !digits(f.n).MatchString(f.value) {
			t.Errorf("%s = %q, want %d digits not starting with 0", f.what, f.value, f.n)
		}
	}
	if !regexp.MustCompile(`^[1-9][0-9]{12}$`).MatchString(creds.SettlementAccount) {
		t.Errorf("settlement account = %q", creds.SettlementAccount)
	}
	if creds.Username != creds.MerchantCode {
		t.Errorf("username %q, want the merchant code %q", creds.Username, creds.MerchantCode)
	}

	m, ok := reg.merchants[creds.MerchantCode]
	if !ok {
		t.Fatalf("merchant %s not stored", creds.MerchantCode)
	}
	if m.BillerCode != creds.BillerCode || len(m.Outlets) != 1 || m.Outlets[0] != creds.OutletCode ||
		m.ServiceID != creds.ServiceID || m.SystemCode != creds.SystemCode || m.SettlementAccount != creds.SettlementAccount ||
		!m.CreatedAt.Equal(onboardNow) {
		t.Errorf("stored merchant %+v does not match credentials %+v", m, creds)
	}

	// Only hashes are stored, and they match what the merchant was shown.
	if err := secret.CheckPasswordStrength(creds.Password); err != nil {
		t.Errorf("generated password %q: %v", creds.Password, err)
	}
	if m.PasswordHash == creds.Password || strings.Contains(m.PasswordHash, creds.Password) {
		t.Error("password stored in clear")
	}
	if ok, err := secret.CheckPassword(m.PasswordHash, creds.Password); !ok || err != nil {
		t.Errorf("stored hash does not check the password shown: %v, %v", ok, err)
	}

	shown := map[Mode]ModeCredential{Test: creds.Test, Live: creds.Live}
	if creds.Test.APIKey == creds.Live.APIKey || creds.Test.NotificationSecret == creds.Live.NotificationSecret {
		t.Error("test and live share a credential")
	}
	if len(reg.keys) != 2 || len(reg.settings) != 2 {
		t.Fatalf("stored %d keys and %d settings, want one of each per mode", len(reg.keys), len(reg.settings))
	}
	ids := map[string]bool{}
	for _, k := range reg.keys {
		mc := shown[k.Mode]
		if !strings.HasPrefix(mc.APIKey, "kadi_"+string(k.Mode)+"_") {
			t.Errorf("%s key %q lacks its mode prefix", k.Mode, mc.APIKey)
		}
		if k.Hash != secret.HashAPIKey(mc.APIKey) || k.MerchantCode != creds.MerchantCode || !k.CreatedAt.Equal(onboardNow) || !k.RevokedAt.IsZero() {
			t.Errorf("stored %s key %+v does not match the key shown", k.Mode, k)
		}
		if strings.Contains(k.Hash, mc.APIKey) || strings.Contains(k.ID, mc.APIKey) {
			t.Errorf("%s API key stored in clear", k.Mode)
		}
		ids[k.ID] = true
	}
	if len(ids) != 2 || ids[""] {
		t.Errorf("key IDs %v, want two distinct", ids)
	}
	for _, s := range reg.settings {
		if s.MerchantCode != creds.MerchantCode || s.NotificationSecret != shown[s.Mode].NotificationSecret ||
			!strings.HasPrefix(s.NotificationSecret, "whsec_") {
			t.Errorf("stored %s settings %+v do not match the secret shown", s.Mode, s)
		}
	}
	if reg.keys[0].Mode == reg.keys[1].Mode || reg.settings[0].Mode == reg.settings[1].Mode {
		t.Error("one mode got two credentials, the other none")
	}

	again, err := Onboard(context.Background(), reg, "Duka la Mama", onboardNow)
	if err != nil {
		t.Fatal(err)
	}
	if again.MerchantCode == creds.MerchantCode || again.Password == creds.Password || again.Test.APIKey == creds.Test.APIKey {
		t.Error("a second merchant got the first one's credentials")
	}
}

func TestOnboardStoreError(t *testing.T) {
	reg := newFakeRegistry()
	reg.err = errors.New("disk full")
	creds, err := Onboard(context.Background(), reg, "Duka la Mama", onboardNow)
	if !errors.Is(err, reg.err) {
		t.Fatalf("error = %v, want it to wrap %v", err, reg.err)
	}
	if creds != (Credentials{}) {
		t.Errorf("credentials %+v returned for a merchant that was not stored", creds)
	}
}

func TestRotateKey(t *testing.T) {
	ctx := context.Background()
	reg := newFakeRegistry()
	creds, err := Onboard(ctx, reg, "Duka la Mama", onboardNow)
	if err != nil {
		t.Fatal(err)
	}
	later := onboardNow.Add(time.Hour)
	key, err := RotateKey(ctx, reg, creds.MerchantCode, Live, later)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(key, "kadi_live_") || key == creds.Live.APIKey {
		t.Errorf("new key %q, want a fresh kadi_live_ key", key)
	}
	if len(reg.rotated) != 1 {
		t.Fatalf("%d rotations stored, want 1", len(reg.rotated))
	}
	k := reg.rotated[0]
	if k.Hash != secret.HashAPIKey(key) || k.MerchantCode != creds.MerchantCode || k.Mode != Live || !k.CreatedAt.Equal(later) || k.ID == "" {
		t.Errorf("stored rotation %+v does not match the new key", k)
	}

	if _, err := RotateKey(ctx, reg, "4999999999", Test, later); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown merchant: %v, want ErrNotFound", err)
	}
	if len(reg.rotated) != 1 {
		t.Error("a key was stored for an unknown merchant")
	}

	reg.err = errors.New("disk full")
	if key, err := RotateKey(ctx, reg, creds.MerchantCode, Test, later); !errors.Is(err, reg.err) || key != "" {
		t.Errorf("store error: %q, %v; want no key and %v", key, err, reg.err)
	}
}
