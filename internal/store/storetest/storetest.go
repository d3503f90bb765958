// Package storetest is the behaviour suite every store.Store must pass. The
// SQLite and PostgreSQL runs of the same SQL share it, so a difference
// between the two databases shows up as a failing case rather than as a
// production surprise.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/auth"
	"github.com/kadipay/kadi/internal/bill"
	"github.com/kadipay/kadi/internal/card"
	"github.com/kadipay/kadi/internal/checkout"
	"github.com/kadipay/kadi/internal/ipn"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/money"
	"github.com/kadipay/kadi/internal/payment"
	"github.com/kadipay/kadi/internal/secret"
	"github.com/kadipay/kadi/internal/session"
	"github.com/kadipay/kadi/internal/store"
)

// RawExecer is implemented by stores whose tests let the suite step around
// the store's own guards to reach the database's last line of defence. The
// store package adds it only in its own test binary; elsewhere the cases
// that need it are skipped.
type RawExecer interface {
	// ExecRaw runs one statement written with ? placeholders.
	ExecRaw(ctx context.Context, query string, args ...any) error
}

// AuditLister reads the audit log back. The Store interface leaves it out
// (no service reads the log yet) but the SQL store has it, and the suite
// needs it to see that writes were audited.
type AuditLister interface {
	AuditEvents(ctx context.Context, merchantCode string, limit int) ([]audit.Event, error)
	AuditEventsBefore(ctx context.Context, merchantCode string, at time.Time, id string, limit int) ([]audit.Event, error)
}

func auditEvents(t *testing.T, s store.Store, merchantCode string, limit int) []audit.Event {
	t.Helper()
	l, ok := s.(AuditLister)
	if !ok {
		t.Fatalf("%T does not implement AuditLister", s)
	}
	events, err := l.AuditEvents(t.Context(), merchantCode, limit)
	must(t, "AuditEvents", err)
	return events
}

// auditDetails are the details of a merchant's audit entries of one
// action. Entries of one millisecond come in no set order, so a test
// that took "the latest" could read the one written just before it.
func auditDetails(t *testing.T, s store.Store, merchantCode, action string) []string {
	t.Helper()
	var details []string
	for _, ev := range auditEvents(t, s, merchantCode, 100) {
		if ev.Action == action {
			details = append(details, ev.Detail)
		}
	}
	return details
}

// Run exercises every Store method's contract. open must return a fresh,
// empty, migrated store on each call and close it with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	cases := []struct {
		name string
		test func(t *testing.T, s store.Store)
	}{
		{"Merchant/RoundTrip", testMerchantRoundTrip},
		{"Merchant/UnknownCode", testMerchantUnknown},
		{"Merchant/CreateIsAtomic", testMerchantCreateAtomic},
		{"Merchant/Settings", testSettings},
		{"Merchant/RotateNotificationSecret", testRotateNotificationSecret},
		{"Merchant/EndSecretOverlap", testEndSecretOverlap},
		{"Merchant/ListInPages", testMerchantsAfter},
		{"Merchant/SetIPN", testSetIPN},
		{"Merchant/SetIPNUnknownMerchant", testSetIPNUnknown},
		{"APIKey/ByHash", testAPIKeyByHash},
		{"APIKey/Rotate", testRotateAPIKey},
		{"AuthFailures/LocksOnMaxFailuresWithinWindow", testLockout},
		{"AuthFailures/WindowExpiryResetsCount", testLockoutWindowReset},
		{"AuthFailures/ClearForgetsFailuresNotLocks", testLockoutClear},
		{"AuthFailures/ClearAfterExpiredLock", testLockoutClearAfterExpiry},
		{"AuthFailures/LockAgainAfterExpiry", testLockoutAgain},
		{"AuthFailures/SubjectsAreSeparate", testLockoutSubjects},
		{"AuthFailures/Concurrent", testLockoutConcurrent},
		{"AuthFailures/ConcurrentReservations", testReservationsConcurrent},
		{"AuthFailures/ReservationSucceeds", testReservationSucceeds},
		{"AuthFailures/Throttle", testThrottle},
		{"AuthFailures/Prune", testPruneAuthFailures},
		{"Audit/NewestFirstPerMerchant", testAudit},
		{"Bill/AmountsRoundTrip", testBillRoundTrip},
		{"Bill/SameOrderReferenceSameMode", testBillIdempotent},
		{"Bill/SameOrderReferenceElsewhere", testBillOrderRefScope},
		{"Bill/ReferenceCollision", testBillReferenceCollision},
		{"Bill/LookupsScopedByMerchantAndMode", testBillLookupScope},
		{"Payment/Start", testStartPayment},
		{"Payment/StartNeedsOpenBill", testStartPaymentNotOpen},
		{"Payment/StartConcurrent", testStartPaymentConcurrent},
		{"Payment/SetChallenge", testSetChallenge},
		{"Payment/ClaimChallenge", testClaimChallenge},
		{"Payment/FinishSuccess", testFinishSuccess},
		{"Payment/FinishIsOneTransaction", testFinishAtomic},
		{"Payment/FinishFailure", testFinishFailure},
		{"Payment/FinishUnknownThenSettled", testFinishUnknown},
		{"Payment/OneSuccessPerBillInDatabase", testOneSuccessIndex},
		{"Payment/Latest", testLatestPayment},
		{"Payment/Successful", testSuccessfulPayment},
		{"Payment/Unsettled", testUnsettled},
		{"Payment/Verification", testVerification},
		{"Payment/VerificationPrefersBillReference", testVerificationPrefersBillReference},
		{"Checkout/RoundTrip", testCheckoutRoundTrip},
		{"Checkout/Expiry", testCheckoutExpiry},
		{"Checkout/NoticeAndEnd", testCheckoutNoticeAndEnd},
		{"Session/RoundTrip", testSessionRoundTrip},
		{"Session/Timeouts", testSessionTimeouts},
		{"Session/SignOutEverywhere", testSessionsDeleteOthers},
		{"Dashboard/TOTPAndRecoveryCodes", testTOTP},
		{"Dashboard/BillsPage", testBillsPage},
		{"Dashboard/ShownPayments", testShownPayments},
		{"Dashboard/PaymentTotals", testPaymentTotals},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.test(t, open(t)) })
	}
}

// base has sub-millisecond digits so every round trip also proves that
// times survive to the millisecond and no further.
var base = time.Date(2025, time.March, 14, 9, 26, 53, 589_793_238, time.UTC)

// norm is what a stored time reads back as: milliseconds, location-free.
func norm(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.Truncate(time.Millisecond).UTC()
}

func equal[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

func mustErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: err = %v, want %v", what, err, want)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func amount(t *testing.T, minor int64, code string) money.Amount {
	t.Helper()
	a, err := money.FromMinor(minor, code)
	must(t, "amount", err)
	return a
}

// fixture is an onboarded merchant with the clear API keys' hashes.
type fixture struct {
	m        merchant.Merchant
	settings map[merchant.Mode]merchant.Settings
	keys     map[merchant.Mode]merchant.APIKey
}

// testMerchantsAfter pages through every merchant in code order, none
// twice or left out, with what a list shows.
func testMerchantsAfter(t *testing.T, s store.Store) {
	var want []string
	for range 5 {
		want = append(want, addMerchant(t, s, base).m.Code)
	}
	slices.Sort(want)
	var got []string
	after := ""
	for {
		page, err := s.MerchantsAfter(t.Context(), after, 2)
		must(t, "MerchantsAfter", err)
		if len(page) == 0 {
			break
		}
		for _, m := range page {
			if m.Name != "Duka la Mama Njeri" || m.BillerCode == "" || !m.CreatedAt.Equal(base.Truncate(time.Millisecond)) || m.PasswordHash != "" {
				t.Errorf("listed %+v", m)
			}
			got = append(got, m.Code)
		}
		after = page[len(page)-1].Code
	}
	equal(t, "codes", got, want)
}

func addMerchant(t *testing.T, s store.Store, at time.Time) fixture {
	t.Helper()
	m := merchant.Merchant{
		Code:              secret.RandomDigits(10),
		Name:              "Duka la Mama Njeri",
		PasswordHash:      secret.HashPassword(secret.NewPassword()),
		BillerCode:        secret.RandomDigits(6),
		Outlets:           []string{secret.RandomDigits(8), secret.RandomDigits(8)},
		ServiceID:         secret.RandomDigits(6),
		SystemCode:        secret.RandomDigits(7),
		SettlementAccount: secret.RandomDigits(13),
		CreatedAt:         at,
	}
	f := fixture{m: m, settings: map[merchant.Mode]merchant.Settings{}, keys: map[merchant.Mode]merchant.APIKey{}}
	var settings []merchant.Settings
	var keys []merchant.APIKey
	for _, mode := range merchant.Modes {
		st := merchant.Settings{MerchantCode: m.Code, Mode: mode, NotificationSecret: secret.NewNotificationSecret()}
		k := merchant.APIKey{ID: secret.NewID("key"), MerchantCode: m.Code, Mode: mode,
			Hash: secret.HashAPIKey(secret.NewAPIKey(string(mode))), CreatedAt: at}
		settings, keys = append(settings, st), append(keys, k)
		f.settings[mode], f.keys[mode] = st, k
	}
	must(t, "CreateMerchant", s.CreateMerchant(t.Context(), m, settings, keys))
	return f
}

func newBill(t *testing.T, merchantCode string, mode merchant.Mode, orderRef string, a money.Amount, at time.Time) bill.Bill {
	t.Helper()
	return bill.Bill{
		Reference:      secret.RandomUpperAlnum(12),
		MerchantCode:   merchantCode,
		Mode:           mode,
		OrderReference: orderRef,
		RequestHash:    secret.NewID("req"),
		CustomerName:   "Wanjiku Kamau",
		BillerCode:     "123456",
		Outlet:         "87654321",
		Amount:         a,
		Description:    "Two bags of unga",
		State:          bill.Open,
		ExpiresAt:      at.Add(24 * time.Hour),
		CreatedAt:      at,
	}
}

func addBill(t *testing.T, s store.Store, merchantCode string, mode merchant.Mode, at time.Time) bill.Bill {
	t.Helper()
	b := newBill(t, merchantCode, mode, secret.NewID("order"), amount(t, 150_075, "KES"), at)
	_, created, err := s.InsertBill(t.Context(), b)
	must(t, "InsertBill", err)
	if !created {
		t.Fatalf("InsertBill(%s) created = false for a new order reference", b.OrderReference)
	}
	return b
}

func newPayment(b bill.Bill, at time.Time) payment.Payment {
	return payment.Payment{
		ID:            secret.NewID("pay"),
		BillReference: b.Reference,
		MerchantCode:  b.MerchantCode,
		Mode:          b.Mode,
		Status:        payment.Processing,
		Amount:        b.Amount,
		Card: payment.CardSummary{
			Brand: card.Brand("visa"), First6: "424242", Last4: "4242", ExpMonth: 12, ExpYear: 2030,
			Holder: "W KAMAU", Fingerprint: secret.NewID("fp"),
		},
		CallbackURL:  "https://shop.example/callback?order=1",
		MobileNumber: "254712345678",
		EmailAddress: "wanjiku@example.com",
		CreatedAt:    at,
		UpdatedAt:    at,
	}
}

// startPayment claims b for a new payment made at at.
func startPayment(t *testing.T, s store.Store, b bill.Bill, at time.Time) payment.Payment {
	t.Helper()
	p := newPayment(b, at)
	must(t, "StartPayment", s.StartPayment(t.Context(), p))
	return p
}

// finish settles p at at with status; a success carries its outbox event.
func finish(p payment.Payment, status payment.Status, at time.Time) (payment.Payment, *ipn.Event) {
	p.Status, p.UpdatedAt = status, at
	var ev *ipn.Event
	switch status {
	case payment.Succeeded:
		p.NetworkRef, p.ApprovalCode, p.Message = secret.NewID("net"), "A1B2C3", payment.MsgApproved
		ev = &ipn.Event{ID: secret.NewID("msg"), MerchantCode: p.MerchantCode, Mode: p.Mode, PaymentID: p.ID,
			Payload: []byte(`{"callbackType":"IPN"}`), Status: ipn.Pending, NextAttemptAt: at, CreatedAt: at}
	case payment.Failed:
		p.NetworkRef, p.DeclineCode, p.Message = secret.NewID("net"), "card_declined", "Your card was declined"
	case payment.Unknown:
		p.Message = payment.MsgUnknown
	}
	return p, ev
}

func finishPayment(t *testing.T, s store.Store, p payment.Payment, status payment.Status, maxFailures int, at time.Time) payment.Payment {
	t.Helper()
	p, ev := finish(p, status, at)
	must(t, "FinishPayment "+string(status), s.FinishPayment(t.Context(), p, maxFailures, ev))
	return p
}

func normMerchant(m merchant.Merchant) merchant.Merchant {
	m.CreatedAt = norm(m.CreatedAt)
	m.Outlets = slices.Sorted(slices.Values(m.Outlets))
	return m
}

func normSettings(st merchant.Settings) merchant.Settings {
	st.IPN.DisabledAt = norm(st.IPN.DisabledAt)
	return st
}

// normKey also drops the prefix, which only the dashboard's own read of
// a key returns (ActiveAPIKey).
func normKey(k merchant.APIKey) merchant.APIKey {
	k.CreatedAt, k.RevokedAt, k.Prefix = norm(k.CreatedAt), norm(k.RevokedAt), ""
	return k
}

func normBill(b bill.Bill) bill.Bill {
	b.ExpiresAt, b.CreatedAt = norm(b.ExpiresAt), norm(b.CreatedAt)
	return b
}

func normPayment(p payment.Payment) payment.Payment {
	p.CreatedAt, p.UpdatedAt = norm(p.CreatedAt), norm(p.UpdatedAt)
	return p
}

func billByID(t *testing.T, s store.Store, ref string) bill.Bill {
	t.Helper()
	b, err := s.BillByID(t.Context(), ref)
	must(t, "BillByID", err)
	return b
}

func paymentByID(t *testing.T, s store.Store, id string) payment.Payment {
	t.Helper()
	p, err := s.PaymentByID(t.Context(), id)
	must(t, "PaymentByID", err)
	return p
}

func wantBill(t *testing.T, s store.Store, ref string, state bill.State, failed int) {
	t.Helper()
	b := billByID(t, s, ref)
	if b.State != state || b.FailedAttempts != failed {
		t.Fatalf("bill %s: state %q with %d failed attempts, want %q with %d", ref, b.State, b.FailedAttempts, state, failed)
	}
}

func auditActions(t *testing.T, s store.Store, merchantCode string) []string {
	t.Helper()
	events := auditEvents(t, s, merchantCode, 100)
	var actions []string
	for _, e := range events {
		actions = append(actions, e.Action)
	}
	return actions
}

func testMerchantRoundTrip(t *testing.T, s store.Store) {
	f := addMerchant(t, s, base)
	other := addMerchant(t, s, base.Add(time.Minute))
	for _, want := range []merchant.Merchant{f.m, other.m} {
		got, err := s.MerchantByCode(t.Context(), want.Code)
		must(t, "MerchantByCode", err)
		equal(t, "merchant", normMerchant(got), normMerchant(want))
	}
	// Creating a merchant is a security event: it must reach the audit log.
	if got := auditActions(t, s, f.m.Code); !slices.Contains(got, audit.MerchantAdded) {
		t.Fatalf("audit actions %v, want %s", got, audit.MerchantAdded)
	}
}

func testMerchantUnknown(t *testing.T, s store.Store) {
	addMerchant(t, s, base)
	_, err := s.MerchantByCode(t.Context(), "0000000000")
	mustErr(t, "MerchantByCode(unknown)", err, merchant.ErrNotFound)
}

func testMerchantCreateAtomic(t *testing.T, s store.Store) {
	f := addMerchant(t, s, base)
	tests := []struct {
		name   string
		mutate func(m *merchant.Merchant, keys []merchant.APIKey)
	}{
		{"same code", func(m *merchant.Merchant, _ []merchant.APIKey) { m.Code = f.m.Code }},
		// The key is inserted last: refusing it must take the merchant,
		// outlets and settings inserted before it away too.
		{"taken key hash", func(_ *merchant.Merchant, keys []merchant.APIKey) { keys[0].Hash = f.keys[merchant.Test].Hash }},
		{"taken outlet", func(m *merchant.Merchant, _ []merchant.APIKey) { m.Outlets = []string{f.m.Outlets[0]} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := f.m
			m.Code, m.Outlets = secret.RandomDigits(10), []string{secret.RandomDigits(8)}
			settings := []merchant.Settings{{MerchantCode: m.Code, Mode: merchant.Test, NotificationSecret: secret.NewNotificationSecret()}}
			keys := []merchant.APIKey{{ID: secret.NewID("key"), MerchantCode: m.Code, Mode: merchant.Test,
				Hash: secret.HashAPIKey(secret.NewAPIKey("test")), CreatedAt: base}}
			tt.mutate(&m, keys)
			keys[0].MerchantCode, settings[0].MerchantCode = m.Code, m.Code
			if err := s.CreateMerchant(t.Context(), m, settings, keys); err == nil {
				t.Fatal("CreateMerchant succeeded with a clash")
			}
			if m.Code == f.m.Code {
				got, err := s.MerchantByCode(t.Context(), f.m.Code)
				must(t, "MerchantByCode", err)
				equal(t, "existing merchant", normMerchant(got), normMerchant(f.m))
				return
			}
			_, err := s.MerchantByCode(t.Context(), m.Code)
			mustErr(t, "MerchantByCode after failed create", err, merchant.ErrNotFound)
			_, err = s.Settings(t.Context(), m.Code, merchant.Test)
			mustErr(t, "Settings after failed create", err, merchant.ErrNotFound)
			if got := auditActions(t, s, m.Code); len(got) != 0 {
				t.Fatalf("failed create left audit events %v", got)
			}
		})
	}
}

func testSettings(t *testing.T, s store.Store) {
	f := addMerchant(t, s, base)
	for _, mode := range merchant.Modes {
		got, err := s.Settings(t.Context(), f.m.Code, mode)
		must(t, "Settings", err)
		equal(t, "settings "+string(mode), normSettings(got), f.settings[mode])
	}
	_, err := s.Settings(t.Context(), "0000000000", merchant.Test)
	mustErr(t, "Settings(unknown merchant)", err, merchant.ErrNotFound)
}

// A rotation keeps the secret it replaces, signing until the time given;
// one with no overlap drops it, and any earlier rotation's with it; one
// whose overlap is over reads as none.
func testRotateNotificationSecret(t *testing.T, s store.Store) {
	f := addMerchant(t, s, base)
	first := f.settings[merchant.Test].NotificationSecret
	second, third := secret.NewNotificationSecret(), secret.NewNotificationSecret()
	until := time.Now().Add(24 * time.Hour)
	must(t, "SetNotificationSecret", s.SetNotificationSecret(t.Context(), f.m.Code, merchant.Test, second, until))
	st, err := s.Settings(t.Context(), f.m.Code, merchant.Test)
	must(t, "Settings", err)
	equal(t, "secrets after a rotation with an overlap", [3]string{st.NotificationSecret, st.PreviousSecret, norm(st.PreviousUntil).String()},
		[3]string{second, first, norm(until).String()})
	equal(t, "signing within the overlap", st.SigningSecrets(until.Add(-time.Second)), []string{second, first})
	equal(t, "signing after it", st.SigningSecrets(until), []string{second})

	until = until.Truncate(time.Second)
	withOverlap := "test: the replaced secret signs until " + until.UTC().Format(time.RFC3339)
	equal(t, "the rotation's audit entry", auditDetails(t, s, f.m.Code, audit.SecretRotated), []string{withOverlap})
	must(t, "SetNotificationSecret", s.SetNotificationSecret(t.Context(), f.m.Code, merchant.Test, third, time.Time{}))
	equal(t, "the audit entries after a rotation with no overlap", slices.Sorted(slices.Values(auditDetails(t, s, f.m.Code, audit.SecretRotated))),
		[]string{"test: the replaced secret no longer signs", withOverlap})
	st, err = s.Settings(t.Context(), f.m.Code, merchant.Test)
	must(t, "Settings", err)
	equal(t, "secrets after a rotation without one", [3]string{st.NotificationSecret, st.PreviousSecret, norm(st.PreviousUntil).String()},
		[3]string{third, "", time.Time{}.String()})
	live, err := s.Settings(t.Context(), f.m.Code, merchant.Live)
	must(t, "Settings", err)
	equal(t, "the other mode", normSettings(live), f.settings[merchant.Live])
	mustErr(t, "SetNotificationSecret(unknown merchant)",
		s.SetNotificationSecret(t.Context(), "0000000000", merchant.Test, third, until), merchant.ErrNotFound)

	must(t, "SetNotificationSecret", s.SetNotificationSecret(t.Context(), f.m.Code, merchant.Test, second, time.Now().Add(-time.Second)))
	st, err = s.Settings(t.Context(), f.m.Code, merchant.Test)
	must(t, "Settings", err)
	equal(t, "secrets after an overlap that is over", [3]string{st.NotificationSecret, st.PreviousSecret, norm(st.PreviousUntil).String()},
		[3]string{second, "", time.Time{}.String()})
	ended, err := s.EndSecretOverlap(t.Context(), f.m.Code, merchant.Test, time.Time{}, time.Now())
	must(t, "EndSecretOverlap", err)
	equal(t, "ended an overlap that was over", ended, false)
}

// Ending a rotation's overlap early drops the replaced secret at once,
// with an audit entry; ending it again, or where none runs, changes
// nothing and says so.
func testEndSecretOverlap(t *testing.T, s store.Store) {
	f := addMerchant(t, s, base)
	first := f.settings[merchant.Test].NotificationSecret
	second := secret.NewNotificationSecret()
	ended, err := s.EndSecretOverlap(t.Context(), f.m.Code, merchant.Test, time.Time{}, time.Now())
	must(t, "EndSecretOverlap", err)
	equal(t, "ended with no rotation", ended, false)
	must(t, "SetNotificationSecret", s.SetNotificationSecret(t.Context(), f.m.Code, merchant.Test, second, time.Now().Add(time.Hour)))
	st, err := s.Settings(t.Context(), f.m.Code, merchant.Test) // cached, as the worker reads it
	must(t, "Settings", err)
	equal(t, "signing during the overlap", st.SigningSecrets(time.Now()), []string{second, first})

	// Named by the end the page showed: another rotation's overlap is
	// not ended in its place.
	ended, err = s.EndSecretOverlap(t.Context(), f.m.Code, merchant.Test, st.PreviousUntil.Add(time.Minute), time.Now())
	must(t, "EndSecretOverlap(another overlap's end)", err)
	equal(t, "ended an overlap not the one named", ended, false)
	st, err = s.Settings(t.Context(), f.m.Code, merchant.Test)
	must(t, "Settings", err)
	equal(t, "signing after a refused end", st.SigningSecrets(time.Now()), []string{second, first})
	// Judged at the caller's moment: by a clock past the overlap's end
	// there is nothing left to end.
	ended, err = s.EndSecretOverlap(t.Context(), f.m.Code, merchant.Test, st.PreviousUntil, st.PreviousUntil.Add(time.Second))
	must(t, "EndSecretOverlap(after the overlap)", err)
	equal(t, "ended an overlap that was over at the caller's moment", ended, false)
	ended, err = s.EndSecretOverlap(t.Context(), f.m.Code, merchant.Test, st.PreviousUntil, time.Now())
	must(t, "EndSecretOverlap", err)
	equal(t, "ended during the overlap", ended, true)
	st, err = s.Settings(t.Context(), f.m.Code, merchant.Test)
	must(t, "Settings", err)
	equal(t, "secrets after the overlap ended", [3]string{st.NotificationSecret, st.PreviousSecret, norm(st.PreviousUntil).String()},
		[3]string{second, "", time.Time{}.String()})
	endings := func() []string { return auditDetails(t, s, f.m.Code, audit.SecretOverlapEnded) }
	equal(t, "audit entries of the overlap's end", endings(), []string{"test: the replaced secret no longer signs"})

	ended, err = s.EndSecretOverlap(t.Context(), f.m.Code, merchant.Test, time.Time{}, time.Now())
	must(t, "EndSecretOverlap", err)
	equal(t, "ended again", ended, false)
	equal(t, "audit entries of the overlap's end, after ending it twice", endings(), []string{"test: the replaced secret no longer signs"})
	ended, err = s.EndSecretOverlap(t.Context(), "0000000000", merchant.Test, time.Time{}, time.Now())
	must(t, "EndSecretOverlap(unknown merchant)", err)
	equal(t, "ended for an unknown merchant", ended, false)
}

func testSetIPN(t *testing.T, s store.Store) {
	f := addMerchant(t, s, base)
	if raw, ok := s.(RawExecer); ok {
		// As a 410 Gone from the receiver leaves it.
		must(t, "disable IPN", raw.ExecRaw(t.Context(), `UPDATE merchant_settings SET ipn_disabled_at = ? WHERE merchant_code = ?`,
			base.UnixMilli(), f.m.Code))
		got, err := s.Settings(t.Context(), f.m.Code, merchant.Test)
		must(t, "Settings", err)
		if got.IPN.DisabledAt.IsZero() {
			t.Fatal("Settings does not report a disabled IPN endpoint")
		}
	}
	// DisabledAt in the argument must be ignored: saving a configuration
	// is what re-enables delivery after a 410.
	cfg := merchant.IPNConfig{URL: "https://shop.example/ipn?x=1&y=2", Username: "kadi", Password: "s3cr3t p@ss", DisabledAt: base}
	_, err := s.SetIPN(t.Context(), f.m.Code, merchant.Test, cfg)
	must(t, "SetIPN", err)

	want := f.settings[merchant.Test]
	want.IPN = cfg
	want.IPN.DisabledAt = time.Time{}
	got, err := s.Settings(t.Context(), f.m.Code, merchant.Test)
	must(t, "Settings(test)", err)
	equal(t, "test settings after SetIPN", normSettings(got), want)

	got, err = s.Settings(t.Context(), f.m.Code, merchant.Live)
	must(t, "Settings(live)", err)
	if _, ok := s.(RawExecer); ok {
		if want := norm(base); !norm(got.IPN.DisabledAt).Equal(want) {
			t.Fatalf("live IPN disabled at %v after a test SetIPN, want %v untouched", got.IPN.DisabledAt, want)
		}
		got.IPN.DisabledAt = time.Time{}
	}
	equal(t, "live settings untouched by a test SetIPN", normSettings(got), f.settings[merchant.Live])

	cfg2 := merchant.IPNConfig{URL: "https://shop.example/ipn2"}
	_, err = s.SetIPN(t.Context(), f.m.Code, merchant.Test, cfg2)
	must(t, "SetIPN again", err)
	want.IPN = cfg2
	got, err = s.Settings(t.Context(), f.m.Code, merchant.Test)
	must(t, "Settings(test)", err)
	equal(t, "test settings after a second SetIPN", normSettings(got), want)

	if got := auditActions(t, s, f.m.Code); !slices.Contains(got, audit.IPNChanged) {
		t.Fatalf("audit actions %v, want %s", got, audit.IPNChanged)
	}
}

func testSetIPNUnknown(t *testing.T, s store.Store) {
	f := addMerchant(t, s, base)
	_, err := s.SetIPN(t.Context(), "0000000000", merchant.Test, merchant.IPNConfig{URL: "https://x.example/"})
	mustErr(t, "SetIPN(unknown merchant)", err, merchant.ErrNotFound)
	if got := auditActions(t, s, "0000000000"); len(got) != 0 {
		t.Fatalf("refused SetIPN left audit events %v", got)
	}
	got, err := s.Settings(t.Context(), f.m.Code, merchant.Test)
	must(t, "Settings", err)
	equal(t, "other merchant's settings", normSettings(got), f.settings[merchant.Test])
}

func testAPIKeyByHash(t *testing.T, s store.Store) {
	f := addMerchant(t, s, base)
	for _, mode := range merchant.Modes {
		got, err := s.APIKeyByHash(t.Context(), f.keys[mode].Hash)
		must(t, "APIKeyByHash", err)
		equal(t, "key "+string(mode), normKey(got), normKey(f.keys[mode]))
	}
	_, err := s.APIKeyByHash(t.Context(), secret.HashAPIKey("kadi_test_nobody"))
	mustErr(t, "APIKeyByHash(unknown)", err, merchant.ErrNotFound)
}

func testRotateAPIKey(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	old := f.keys[merchant.Test]
	rotate := func(at time.Time) merchant.APIKey {
		t.Helper()
		raw := secret.NewAPIKey("test")
		k := merchant.APIKey{ID: secret.NewID("key"), MerchantCode: f.m.Code, Mode: merchant.Test,
			Hash: secret.HashAPIKey(raw), Prefix: merchant.KeyPrefix(raw), CreatedAt: at}
		must(t, "RotateAPIKey", s.RotateAPIKey(ctx, k))
		return k
	}
	revoked := func(since time.Time) []string {
		t.Helper()
		ids, err := s.RevokedKeys(ctx, since)
		must(t, "RevokedKeys", err)
		return slices.Sorted(slices.Values(ids))
	}

	at1 := base.Add(time.Hour)
	k1 := rotate(at1)
	_, err := s.APIKeyByHash(ctx, old.Hash)
	mustErr(t, "APIKeyByHash(rotated-out key)", err, merchant.ErrNotFound)
	got, err := s.APIKeyByHash(ctx, k1.Hash)
	must(t, "APIKeyByHash(new key)", err)
	equal(t, "new key", normKey(got), normKey(k1))
	got, err = s.APIKeyByHash(ctx, f.keys[merchant.Live].Hash)
	must(t, "APIKeyByHash(live key)", err)
	equal(t, "live key untouched by a test rotation", normKey(got), normKey(f.keys[merchant.Live]))

	equal(t, "revoked since before the rotation", revoked(base), []string{old.ID})
	equal(t, "revoked since the rotation", revoked(at1), []string{old.ID})
	equal(t, "revoked since after the rotation", revoked(at1.Add(time.Millisecond)), []string(nil))

	// A second rotation revokes only the key then active; the first
	// revocation keeps its time.
	at2 := at1.Add(time.Hour)
	k2 := rotate(at2)
	_, err = s.APIKeyByHash(ctx, k1.Hash)
	mustErr(t, "APIKeyByHash(second rotated-out key)", err, merchant.ErrNotFound)
	if _, err := s.APIKeyByHash(ctx, k2.Hash); err != nil {
		t.Fatalf("APIKeyByHash(newest key): %v", err)
	}
	equal(t, "revoked since the second rotation", revoked(at2), []string{k1.ID})
	equal(t, "revoked since the first rotation", revoked(at1), slices.Sorted(slices.Values([]string{old.ID, k1.ID})))

	if got := auditActions(t, s, f.m.Code); !slices.Contains(got, audit.KeyRotated) {
		t.Fatalf("audit actions %v, want %s", got, audit.KeyRotated)
	}
	// The audit names the new key as the Developers page shows it.
	want := "test key replaced by " + k2.Prefix + "… (" + k2.ID + ")"
	if ev := auditEvents(t, s, f.m.Code, 1); len(ev) != 1 || ev[0].Detail != want {
		t.Fatalf("the rotation's audit detail: %v, want %q", ev, want)
	}
}

var policy = auth.LockoutPolicy{MaxFailures: 3, Window: 10 * time.Minute, LockFor: 30 * time.Minute}

// failure makes one failed attempt — reserve it, then record it failed, as
// auth does around a password check — and checks what the store answers.
// While the subject is locked the reservation is refused with the lock's end.
func failure(t *testing.T, s store.Store, subject string, at time.Time, p auth.LockoutPolicy, wantUntil time.Time, wantNewly bool) {
	t.Helper()
	until, reserved, err := s.ReserveAuthAttempt(t.Context(), subject, at, p)
	must(t, "ReserveAuthAttempt", err)
	newly := false
	if reserved {
		until, newly, err = s.RecordAuthFailure(t.Context(), subject, at, p)
		must(t, "RecordAuthFailure", err)
	} else if !until.After(at) {
		t.Fatalf("attempt at %s refused without a lock", at.Sub(base))
	}
	if !norm(until).Equal(norm(wantUntil)) || newly != wantNewly {
		t.Fatalf("failure at %s: locked until %v (newly %t), want %v (newly %t)",
			at.Sub(base), norm(until), newly, norm(wantUntil), wantNewly)
	}
}

func lockedUntil(t *testing.T, s store.Store, subject string, at time.Time) time.Time {
	t.Helper()
	until, err := s.AuthLockedUntil(t.Context(), subject, at)
	must(t, "AuthLockedUntil", err)
	return norm(until)
}

func testLockout(t *testing.T, s store.Store) {
	const sub = "merchant:1234567890"
	if got := lockedUntil(t, s, sub, base); !got.IsZero() {
		t.Fatalf("AuthLockedUntil with no failures = %v, want zero", got)
	}
	failure(t, s, sub, base, policy, time.Time{}, false)
	failure(t, s, sub, base.Add(5*time.Minute), policy, time.Time{}, false)
	if got := lockedUntil(t, s, sub, base.Add(5*time.Minute)); !got.IsZero() {
		t.Fatalf("AuthLockedUntil before the last allowed failure = %v, want zero", got)
	}
	lockAt := base.Add(9 * time.Minute)
	until := lockAt.Add(policy.LockFor)
	failure(t, s, sub, lockAt, policy, until, true)
	if got := lockedUntil(t, s, sub, lockAt); !got.Equal(norm(until)) {
		t.Fatalf("AuthLockedUntil = %v, want %v", got, norm(until))
	}
	// newlyLocked feeds the audit log: once per lockout, however many
	// failures arrive while it lasts.
	for i := range 2 * policy.MaxFailures {
		failure(t, s, sub, lockAt.Add(time.Duration(i+1)*time.Minute), policy, until, false)
	}
	if got := lockedUntil(t, s, sub, lockAt.Add(time.Hour)); !got.Equal(norm(until)) {
		t.Fatalf("AuthLockedUntil after failures during the lock = %v, want %v unchanged", got, norm(until))
	}
}

func testLockoutWindowReset(t *testing.T, s store.Store) {
	const sub = "ip:192.0.2.1"
	failure(t, s, sub, base, policy, time.Time{}, false)
	failure(t, s, sub, base.Add(time.Minute), policy, time.Time{}, false)
	// The window has passed: this is the first failure of a new count,
	// not the third.
	fresh := base.Add(policy.Window + time.Second)
	failure(t, s, sub, fresh, policy, time.Time{}, false)
	failure(t, s, sub, fresh.Add(time.Minute), policy, time.Time{}, false)
	failure(t, s, sub, fresh.Add(2*time.Minute), policy, fresh.Add(2*time.Minute+policy.LockFor), true)
}

func testLockoutClear(t *testing.T, s store.Store) {
	ctx := t.Context()
	const sub = "merchant:1234567890"
	failure(t, s, sub, base, policy, time.Time{}, false)
	failure(t, s, sub, base.Add(time.Second), policy, time.Time{}, false)
	must(t, "ClearAuthFailures", s.ClearAuthFailures(ctx, sub))
	failure(t, s, sub, base.Add(2*time.Second), policy, time.Time{}, false)
	failure(t, s, sub, base.Add(3*time.Second), policy, time.Time{}, false)
	lockAt := base.Add(4 * time.Second)
	until := lockAt.Add(policy.LockFor)
	failure(t, s, sub, lockAt, policy, until, true)

	// A success elsewhere (or a racing request) must not lift a lock.
	must(t, "ClearAuthFailures", s.ClearAuthFailures(ctx, sub))
	if got := lockedUntil(t, s, sub, lockAt.Add(time.Second)); !got.Equal(norm(until)) {
		t.Fatalf("AuthLockedUntil after Clear during a lock = %v, want %v", got, norm(until))
	}
	failure(t, s, sub, lockAt.Add(2*time.Second), policy, until, false)
}

func testLockoutClearAfterExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	const sub = "merchant:1234567890"
	// A window longer than the lock: failures after the lock ends still
	// fall in the window that began with it.
	p := auth.LockoutPolicy{MaxFailures: 3, Window: time.Hour, LockFor: 15 * time.Minute}
	for i := range p.MaxFailures - 1 {
		failure(t, s, sub, base.Add(time.Duration(i)*time.Second), p, time.Time{}, false)
	}
	lockAt := base.Add(time.Minute)
	failure(t, s, sub, lockAt, p, lockAt.Add(p.LockFor), true)

	after := lockAt.Add(p.LockFor + time.Minute)
	failure(t, s, sub, after, p, time.Time{}, false) // the lock has ended
	must(t, "ClearAuthFailures", s.ClearAuthFailures(ctx, sub))
	// The success forgot the failure before it: two more are not three.
	for i := range p.MaxFailures - 1 {
		failure(t, s, sub, after.Add(time.Duration(i+1)*time.Second), p, time.Time{}, false)
	}
}

func testLockoutAgain(t *testing.T, s store.Store) {
	const sub = "ip:2001:db8::1"
	for i := range policy.MaxFailures - 1 {
		failure(t, s, sub, base.Add(time.Duration(i)*time.Second), policy, time.Time{}, false)
	}
	lockAt := base.Add(time.Minute)
	failure(t, s, sub, lockAt, policy, lockAt.Add(policy.LockFor), true)

	// After the lock has ended, a full new count locks again, and that new
	// lockout is reported once more.
	again := lockAt.Add(policy.LockFor + time.Minute)
	for i := range policy.MaxFailures - 1 {
		failure(t, s, sub, again.Add(time.Duration(i)*time.Second), policy, time.Time{}, false)
	}
	lock2 := again.Add(time.Minute)
	failure(t, s, sub, lock2, policy, lock2.Add(policy.LockFor), true)
}

func testLockoutSubjects(t *testing.T, s store.Store) {
	a, b := "merchant:1111111111", "merchant:2222222222"
	for i := range policy.MaxFailures - 1 {
		failure(t, s, a, base.Add(time.Duration(i)*time.Second), policy, time.Time{}, false)
	}
	failure(t, s, b, base.Add(time.Minute), policy, time.Time{}, false)
	at := base.Add(2 * time.Minute)
	failure(t, s, a, at, policy, at.Add(policy.LockFor), true)
	if got := lockedUntil(t, s, b, at); !got.IsZero() {
		t.Fatalf("AuthLockedUntil(%s) = %v: another subject's failures locked it", b, got)
	}
}

func testLockoutConcurrent(t *testing.T, s store.Store) {
	const sub = "ip:198.51.100.7"
	const n = 10
	p := auth.LockoutPolicy{MaxFailures: n, Window: time.Hour, LockFor: time.Hour}
	var wg sync.WaitGroup
	newly := make(chan bool, n)
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			ctx, at := context.WithoutCancel(t.Context()), base.Add(time.Duration(i)*time.Millisecond)
			_, reserved, err := s.ReserveAuthAttempt(ctx, sub, at, p)
			nl := false
			if err == nil && reserved {
				_, nl, err = s.RecordAuthFailure(ctx, sub, at, p)
			} else if err == nil {
				err = fmt.Errorf("attempt %d of %d refused", i+1, n)
			}
			newly <- nl
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(newly)
	close(errs)
	for err := range errs {
		must(t, "RecordAuthFailure", err)
	}
	count := 0
	for nl := range newly {
		if nl {
			count++
		}
	}
	// n concurrent failures are n failures: none may be lost, and the
	// lockout they cause is reported exactly once.
	if count != 1 {
		t.Fatalf("%d concurrent failures reported %d new lockouts, want 1", n, count)
	}
	if got := lockedUntil(t, s, sub, base); got.IsZero() {
		t.Fatal("not locked after MaxFailures concurrent failures")
	}
}

// Parallel attempts are counted when reserved: of many at once, only the
// policy's allowance gets through to a password check.
func testReservationsConcurrent(t *testing.T, s store.Store) {
	const sub = "merchant:3333333333"
	const n = 40
	p := auth.LockoutPolicy{MaxFailures: 10, Window: time.Hour, LockFor: time.Hour}
	var wg sync.WaitGroup
	var reservedN atomic.Int32
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			_, reserved, err := s.ReserveAuthAttempt(context.WithoutCancel(t.Context()), sub, base, p)
			if reserved {
				reservedN.Add(1)
			}
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, "ReserveAuthAttempt", err)
	}
	if got := reservedN.Load(); got != int32(p.MaxFailures) {
		t.Fatalf("%d of %d concurrent attempts reserved, want exactly %d", got, n, p.MaxFailures)
	}
	// Their failures lock the subject once.
	locks := 0
	for range p.MaxFailures {
		_, newly, err := s.RecordAuthFailure(t.Context(), sub, base, p)
		must(t, "RecordAuthFailure", err)
		if newly {
			locks++
		}
	}
	if locks != 1 || lockedUntil(t, s, sub, base).IsZero() {
		t.Fatalf("%d new locks after the reserved attempts failed, want 1", locks)
	}
}

// A reserved attempt that succeeds is cleared and never locks; one that
// fails below the maximum does not lock either.
func testReservationSucceeds(t *testing.T, s store.Store) {
	ctx := t.Context()
	const sub = "merchant:4444444444"
	for i := range 3 * policy.MaxFailures {
		at := base.Add(time.Duration(i) * time.Second)
		_, reserved, err := s.ReserveAuthAttempt(ctx, sub, at, policy)
		must(t, "ReserveAuthAttempt", err)
		if !reserved {
			t.Fatalf("attempt %d refused though every earlier one succeeded", i+1)
		}
		must(t, "ClearAuthFailures", s.ClearAuthFailures(ctx, sub))
	}
	for i := range policy.MaxFailures - 1 {
		failure(t, s, sub, base.Add(time.Minute+time.Duration(i)*time.Second), policy, time.Time{}, false)
	}
	// An attempt given back unchecked frees its place and no other: the
	// failures above still count, so the next failure locks.
	at := base.Add(2 * time.Minute)
	_, reserved, err := s.ReserveAuthAttempt(ctx, sub, at, policy)
	must(t, "ReserveAuthAttempt", err)
	if !reserved {
		t.Fatal("last allowed attempt refused")
	}
	must(t, "ReleaseAuthAttempt", s.ReleaseAuthAttempt(ctx, sub))
	failure(t, s, sub, at, policy, at.Add(policy.LockFor), true)
}

// An address is throttled with the policy's growing delays, never locked
// for long; the window forgets old failures.
func testThrottle(t *testing.T, s store.Store) {
	ctx := t.Context()
	const sub = "ip:192.0.2.99"
	p := auth.ThrottlePolicy{Free: 2, Window: time.Hour, BaseDelay: time.Second, MaxDelay: 4 * time.Second}
	at := base
	for i, want := range []time.Duration{0, 0, time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second} {
		next, err := s.ThrottleAuthFailure(ctx, sub, at, p)
		must(t, "ThrottleAuthFailure", err)
		wantNext := time.Time{}
		if want > 0 {
			wantNext = at.Add(want)
		}
		if !norm(next).Equal(norm(wantNext)) {
			t.Fatalf("failure %d: next attempt at %v, want %v", i+1, norm(next), norm(wantNext))
		}
		if got := lockedUntil(t, s, sub, at); !got.Equal(norm(wantNext)) {
			t.Fatalf("failure %d: AuthLockedUntil = %v, want %v", i+1, got, norm(wantNext))
		}
		at = at.Add(want)
	}
	later := at.Add(p.Window + time.Second)
	next, err := s.ThrottleAuthFailure(ctx, sub, later, p)
	must(t, "ThrottleAuthFailure", err)
	if !next.IsZero() {
		t.Fatalf("first failure of a new window throttled until %v", next)
	}
}

// Counts that no longer matter are forgotten; a running lock, a count in
// its window, and one whose last attempt may still be being checked are
// kept.
func testPruneAuthFailures(t *testing.T, s store.Store) {
	ctx := t.Context()
	const window = 30 * time.Minute
	throttle := auth.ThrottlePolicy{Free: 5, Window: window, BaseDelay: time.Second, MaxDelay: time.Minute}
	lockout := auth.LockoutPolicy{MaxFailures: 3, Window: window, LockFor: time.Hour}
	fail := func(subject string, at time.Time) bool {
		t.Helper()
		_, reserved, err := s.ReserveAuthAttempt(ctx, subject, at, lockout)
		must(t, "ReserveAuthAttempt", err)
		_, locked, err := s.RecordAuthFailure(ctx, subject, at, lockout)
		must(t, "RecordAuthFailure", err)
		if !reserved {
			t.Fatalf("%s at %v: not reserved", subject, at)
		}
		return locked
	}

	// The last attempt a window allows, reserved a second before the
	// window ends, is checked while a prune runs a second after: its
	// failure still locks the subject.
	const inFlight = "dashboard:4999999998"
	fail(inFlight, base)
	fail(inFlight, base)
	last := base.Add(window - time.Second)
	_, reserved, err := s.ReserveAuthAttempt(ctx, inFlight, last, lockout)
	must(t, "ReserveAuthAttempt", err)
	_, err = s.PruneAuthFailures(ctx, base.Add(window+time.Second), window)
	must(t, "PruneAuthFailures", err)
	_, locked, err := s.RecordAuthFailure(ctx, inFlight, last, lockout)
	must(t, "RecordAuthFailure", err)
	if !reserved || !locked {
		t.Errorf("the window's last attempt, checked across a prune: reserved %v, locked %v; want both", reserved, locked)
	}

	// Two windows on: a stale count goes, a running lock and a count in
	// its window stay.
	_, err = s.ThrottleAuthFailure(ctx, "ip:192.0.2.10", base, throttle) // stale by now
	must(t, "ThrottleAuthFailure", err)
	const lockedOut = "dashboard:4999999999"
	for range 3 {
		fail(lockedOut, base.Add(50*time.Minute)) // locked until base + 1 h 50 min
	}
	_, err = s.ThrottleAuthFailure(ctx, "ip:192.0.2.11", base.Add(45*time.Minute), throttle) // in its window
	must(t, "ThrottleAuthFailure", err)
	now := base.Add(2*window + 5*time.Minute)
	n, err := s.PruneAuthFailures(ctx, now, window)
	must(t, "PruneAuthFailures", err)
	equal(t, "rows forgotten", n, int64(1)) // the stale address; the in-flight subject is locked
	if got := lockedUntil(t, s, lockedOut, now); !got.Equal(norm(base.Add(110 * time.Minute))) {
		t.Errorf("a running lock after pruning: locked until %v", got)
	}
	// The recent count goes on: its next failures count from where it was.
	for range 4 {
		_, err = s.ThrottleAuthFailure(ctx, "ip:192.0.2.11", now, throttle)
		must(t, "ThrottleAuthFailure", err)
	}
	if next, err := s.ThrottleAuthFailure(ctx, "ip:192.0.2.11", now, throttle); err != nil || next.IsZero() {
		t.Errorf("a count in its window was forgotten: the sixth failure waits until %v, %v", next, err)
	}
}

func testAudit(t *testing.T, s store.Store) {
	ctx := t.Context()
	const code, other = "5555500000", "5555500001"
	var want []audit.Event
	for i, action := range []string{audit.IPNChanged, audit.KeyRotated, audit.IPNReplayed} {
		e := audit.Event{ID: secret.NewID("aud"), At: base.Add(time.Duration(i) * time.Minute), MerchantCode: code,
			Actor: "cli", Action: action, Detail: fmt.Sprintf("détail %d: ünïcode ✓", i)}
		must(t, "RecordAudit", s.RecordAudit(ctx, e))
		e.At = norm(e.At)
		want = append([]audit.Event{e}, want...) // newest first
	}
	must(t, "RecordAudit", s.RecordAudit(ctx, audit.Event{ID: secret.NewID("aud"), At: base.Add(time.Hour),
		MerchantCode: other, Actor: "api", Action: audit.LockedOut, Detail: "other merchant"}))

	for _, limit := range []int{10, 2} {
		got := auditEvents(t, s, code, limit)
		for i := range got {
			got[i].At = norm(got[i].At)
		}
		equal(t, fmt.Sprintf("AuditEvents(limit %d)", limit), got, want[:min(limit, len(want))])
	}
	// Paging: after each row, the rows after it, also when two share a
	// millisecond (the id breaks the tie).
	twin := audit.Event{ID: "aud_" + strings.Repeat("0", 24), At: want[1].At, MerchantCode: code, Actor: "cli", Action: audit.IPNTested}
	must(t, "RecordAudit", s.RecordAudit(ctx, twin))
	all := auditEvents(t, s, code, 10)
	l := s.(AuditLister)
	for i, e := range all {
		rest, err := l.AuditEventsBefore(ctx, code, e.At, e.ID, 10)
		must(t, "AuditEventsBefore", err)
		var ids, wantIDs []string
		for _, r := range rest {
			ids = append(ids, r.ID)
		}
		for _, r := range all[i+1:] {
			wantIDs = append(wantIDs, r.ID)
		}
		equal(t, fmt.Sprintf("AuditEventsBefore(row %d)", i), ids, wantIDs)
	}
}

func testBillRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	tests := []struct {
		currency string
		minor    int64 // 1500.75 KES, 150000 UGX, 1500.750 BHD
		text     string
	}{
		{"KES", 150_075, "1500.75"},
		{"UGX", 150_000, "150000"},
		{"BHD", 1_500_750, "1500.750"},
	}
	for _, tt := range tests {
		t.Run(tt.currency, func(t *testing.T) {
			b := newBill(t, f.m.Code, merchant.Live, "order-"+tt.currency, amount(t, tt.minor, tt.currency), base)
			stored, created, err := s.InsertBill(ctx, b)
			must(t, "InsertBill", err)
			if !created {
				t.Fatal("InsertBill created = false for a new order reference")
			}
			equal(t, "InsertBill result", normBill(stored), normBill(b))

			byRef, err := s.BillByReference(ctx, f.m.Code, merchant.Live, b.Reference)
			must(t, "BillByReference", err)
			byOrder, err := s.BillByOrderReference(ctx, f.m.Code, merchant.Live, b.OrderReference)
			must(t, "BillByOrderReference", err)
			byID, err := s.BillByID(ctx, b.Reference)
			must(t, "BillByID", err)
			lookups := map[string]bill.Bill{"BillByReference": byRef, "BillByOrderReference": byOrder, "BillByID": byID}
			for name, got := range lookups {
				equal(t, name, normBill(got), normBill(b))
				if got.Amount.String() != tt.text {
					t.Fatalf("%s amount reads %s, want %s", name, got.Amount, tt.text)
				}
			}
		})
	}
}

func testBillIdempotent(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	first := newBill(t, f.m.Code, merchant.Test, "INV-001", amount(t, 1000, "KES"), base)
	if _, created, err := s.InsertBill(ctx, first); err != nil || !created {
		t.Fatalf("InsertBill(first) = created %t, %v", created, err)
	}
	// A retry, possibly with a different body: the service decides
	// between replay and conflict, so the store hands back the original.
	retry := newBill(t, f.m.Code, merchant.Test, "INV-001", amount(t, 2000, "KES"), base.Add(time.Minute))
	got, created, err := s.InsertBill(ctx, retry)
	must(t, "InsertBill(retry)", err)
	if created {
		t.Fatal("InsertBill(retry) created a second bill for one order reference")
	}
	equal(t, "InsertBill(retry) result", normBill(got), normBill(first))
	_, err = s.BillByID(ctx, retry.Reference)
	mustErr(t, "BillByID(retry's reference)", err, bill.ErrNotFound)
}

func testBillOrderRefScope(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	g := addMerchant(t, s, base)
	first := newBill(t, f.m.Code, merchant.Test, "INV-001", amount(t, 1000, "KES"), base)
	if _, created, err := s.InsertBill(ctx, first); err != nil || !created {
		t.Fatalf("InsertBill(first) = created %t, %v", created, err)
	}
	tests := []struct {
		name string
		b    bill.Bill
	}{
		{"other mode", newBill(t, f.m.Code, merchant.Live, "INV-001", amount(t, 1000, "KES"), base)},
		{"other merchant", newBill(t, g.m.Code, merchant.Test, "INV-001", amount(t, 1000, "KES"), base)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, created, err := s.InsertBill(ctx, tt.b)
			must(t, "InsertBill", err)
			if !created {
				t.Fatalf("InsertBill returned %s instead of creating a separate bill", got.Reference)
			}
			equal(t, "InsertBill result", normBill(got), normBill(tt.b))
			got, err = s.BillByOrderReference(ctx, tt.b.MerchantCode, tt.b.Mode, "INV-001")
			must(t, "BillByOrderReference", err)
			equal(t, "BillByOrderReference", normBill(got), normBill(tt.b))
		})
	}
	got, err := s.BillByOrderReference(ctx, f.m.Code, merchant.Test, "INV-001")
	must(t, "BillByOrderReference(first)", err)
	equal(t, "first bill", normBill(got), normBill(first))
}

func testBillReferenceCollision(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	g := addMerchant(t, s, base)
	first := addBill(t, s, f.m.Code, merchant.Test, base)
	tests := []struct {
		name         string
		merchantCode string
		mode         merchant.Mode
	}{
		{"same merchant and mode", f.m.Code, merchant.Test},
		{"other mode", f.m.Code, merchant.Live},
		{"other merchant", g.m.Code, merchant.Test},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBill(t, tt.merchantCode, tt.mode, secret.NewID("order"), amount(t, 500, "KES"), base)
			b.Reference = first.Reference
			_, _, err := s.InsertBill(ctx, b)
			mustErr(t, "InsertBill(taken reference)", err, bill.ErrDuplicateReference)
			_, err = s.BillByOrderReference(ctx, tt.merchantCode, tt.mode, b.OrderReference)
			mustErr(t, "BillByOrderReference after a collision", err, bill.ErrNotFound)
		})
	}
	equal(t, "first bill", normBill(billByID(t, s, first.Reference)), normBill(first))
}

func testBillLookupScope(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	g := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	tests := []struct {
		name         string
		merchantCode string
		mode         merchant.Mode
	}{
		{"other merchant", g.m.Code, merchant.Test},
		{"other mode", f.m.Code, merchant.Live},
		{"unknown merchant", "0000000000", merchant.Test},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.BillByReference(ctx, tt.merchantCode, tt.mode, b.Reference)
			mustErr(t, "BillByReference", err, bill.ErrNotFound)
			_, err = s.BillByOrderReference(ctx, tt.merchantCode, tt.mode, b.OrderReference)
			mustErr(t, "BillByOrderReference", err, bill.ErrNotFound)
		})
	}
	_, err := s.BillByReference(ctx, f.m.Code, merchant.Test, b.OrderReference)
	mustErr(t, "BillByReference(an order reference)", err, bill.ErrNotFound)
	_, err = s.BillByID(ctx, "NOSUCHBILL00")
	mustErr(t, "BillByID(unknown)", err, bill.ErrNotFound)
}

func testStartPayment(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	for _, tt := range []struct {
		currency string
		minor    int64
	}{{"KES", 150_075}, {"UGX", 150_000}, {"BHD", 1_500_750}} {
		t.Run(tt.currency, func(t *testing.T) {
			b := newBill(t, f.m.Code, merchant.Test, secret.NewID("order"), amount(t, tt.minor, tt.currency), base)
			if _, _, err := s.InsertBill(ctx, b); err != nil {
				t.Fatal(err)
			}
			p := startPayment(t, s, b, base.Add(time.Second))
			wantBill(t, s, b.Reference, bill.Processing, 0)
			equal(t, "PaymentByID", normPayment(paymentByID(t, s, p.ID)), normPayment(p))

			second := newPayment(b, base.Add(2*time.Second))
			mustErr(t, "second StartPayment", s.StartPayment(ctx, second), payment.ErrBillBusy)
			_, err := s.PaymentByID(ctx, second.ID)
			mustErr(t, "PaymentByID(refused payment)", err, payment.ErrNotFound)
		})
	}
	_, err := s.PaymentByID(ctx, "pay_nosuch")
	mustErr(t, "PaymentByID(unknown)", err, payment.ErrNotFound)
}

func testStartPaymentNotOpen(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	paid := addBill(t, s, f.m.Code, merchant.Test, base)
	finishPayment(t, s, startPayment(t, s, paid, base), payment.Succeeded, 3, base.Add(time.Second))
	blocked := addBill(t, s, f.m.Code, merchant.Test, base)
	finishPayment(t, s, startPayment(t, s, blocked, base), payment.Failed, 1, base.Add(time.Second))
	wantBill(t, s, blocked.Reference, bill.Blocked, 1)

	for _, b := range []bill.Bill{paid, blocked} {
		err := s.StartPayment(ctx, newPayment(b, base.Add(time.Minute)))
		mustErr(t, "StartPayment on a "+string(billByID(t, s, b.Reference).State)+" bill", err, payment.ErrBillBusy)
	}
	wantBill(t, s, paid.Reference, bill.Paid, 0)
	wantBill(t, s, blocked.Reference, bill.Blocked, 1)
}

func testStartPaymentConcurrent(t *testing.T, s store.Store) {
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	const n = 20
	ps := make([]payment.Payment, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		ps[i] = newPayment(b, base.Add(time.Second))
		wg.Go(func() {
			<-start
			errs[i] = s.StartPayment(context.WithoutCancel(t.Context()), ps[i])
		})
	}
	close(start)
	wg.Wait()

	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner < 0:
			winner = i
		case err == nil:
			t.Fatalf("StartPayment succeeded for both %s and %s on one bill", ps[winner].ID, ps[i].ID)
		case !errors.Is(err, payment.ErrBillBusy):
			t.Fatalf("StartPayment %d: %v, want nil or ErrBillBusy", i, err)
		}
	}
	if winner < 0 {
		t.Fatalf("none of %d concurrent StartPayment calls claimed the open bill", n)
	}
	wantBill(t, s, b.Reference, bill.Processing, 0)
	latest, err := s.LatestPayment(t.Context(), b.Reference)
	must(t, "LatestPayment", err)
	if latest.ID != ps[winner].ID {
		t.Fatalf("LatestPayment = %s, want the winner %s", latest.ID, ps[winner].ID)
	}
	for i, p := range ps {
		if i == winner {
			continue
		}
		_, err := s.PaymentByID(t.Context(), p.ID)
		mustErr(t, "PaymentByID(loser)", err, payment.ErrNotFound)
	}
}

func testSetChallenge(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	p := startPayment(t, s, b, base)
	p.Status, p.ChallengeRef, p.UpdatedAt = payment.Challenge, secret.NewID("3ds"), base.Add(time.Second)
	must(t, "SetChallenge", s.SetChallenge(ctx, p))
	equal(t, "payment after SetChallenge", normPayment(paymentByID(t, s, p.ID)), normPayment(p))
	wantBill(t, s, b.Reference, bill.Processing, 0)

	again := p
	again.ChallengeRef = secret.NewID("3ds")
	mustErr(t, "SetChallenge twice", s.SetChallenge(ctx, again), payment.ErrStale)
	equal(t, "payment after a refused SetChallenge", normPayment(paymentByID(t, s, p.ID)), normPayment(p))

	done := finishPayment(t, s, p, payment.Succeeded, 3, base.Add(time.Minute))
	mustErr(t, "SetChallenge after finish", s.SetChallenge(ctx, again), payment.ErrStale)
	equal(t, "finished payment", normPayment(paymentByID(t, s, p.ID)), normPayment(done))
}

// testClaimChallenge: of many concurrent answers to one challenge exactly
// one claims it, and a claimed or finished payment cannot be claimed again.
func testClaimChallenge(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	p := startPayment(t, s, b, base)
	mustErr(t, "ClaimChallenge of a processing payment", s.ClaimChallenge(ctx, p.ID, "node-a/1", base), payment.ErrStale)
	p.Status, p.ChallengeRef, p.UpdatedAt = payment.Challenge, secret.NewID("3ds"), base.Add(time.Second)
	must(t, "SetChallenge", s.SetChallenge(ctx, p))

	const n = 10
	errs := make(chan error, n)
	for range n {
		go func() { errs <- s.ClaimChallenge(ctx, p.ID, "node-a/1", base.Add(2*time.Second)) }()
	}
	won := 0
	for range n {
		if err := <-errs; err == nil {
			won++
		} else if !errors.Is(err, payment.ErrStale) {
			t.Fatalf("ClaimChallenge: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d answers claimed the challenge, want 1", won)
	}
	if got := paymentByID(t, s, p.ID); got.Status != payment.Processing || got.ChallengeRef != p.ChallengeRef {
		t.Fatalf("claimed payment: %s %q", got.Status, got.ChallengeRef)
	}
	finishPayment(t, s, p, payment.Succeeded, 3, base.Add(time.Minute))
	mustErr(t, "ClaimChallenge after finish", s.ClaimChallenge(ctx, p.ID, "node-a/1", base.Add(time.Hour)), payment.ErrStale)
}

func testFinishSuccess(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	p := startPayment(t, s, b, base)
	done := finishPayment(t, s, p, payment.Succeeded, 3, base.Add(1500*time.Millisecond))
	equal(t, "PaymentByID", normPayment(paymentByID(t, s, p.ID)), normPayment(done))
	wantBill(t, s, b.Reference, bill.Paid, 0)
	won, err := s.SuccessfulPayment(ctx, b.Reference)
	must(t, "SuccessfulPayment", err)
	equal(t, "SuccessfulPayment", normPayment(won), normPayment(done))

	// Whatever arrives second (a replayed answer, a reconciler) is stale
	// and changes nothing.
	for _, status := range []payment.Status{payment.Failed, payment.Succeeded, payment.Unknown} {
		late, ev := finish(p, status, base.Add(time.Minute))
		mustErr(t, "FinishPayment("+string(status)+") after success", s.FinishPayment(ctx, late, 1, ev), payment.ErrStale)
	}
	equal(t, "PaymentByID after stale finishes", normPayment(paymentByID(t, s, p.ID)), normPayment(done))
	wantBill(t, s, b.Reference, bill.Paid, 0)
}

func testFinishAtomic(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b1 := addBill(t, s, f.m.Code, merchant.Test, base)
	p1, ev1 := finish(startPayment(t, s, b1, base), payment.Succeeded, base.Add(time.Second))
	must(t, "FinishPayment", s.FinishPayment(ctx, p1, 3, ev1))

	// The outbox row is written in the same transaction: when it cannot
	// be (here, a reused event id) the charge is not recorded either, so
	// no success can exist without its notification.
	b2 := addBill(t, s, f.m.Code, merchant.Test, base)
	started := startPayment(t, s, b2, base)
	p2, ev2 := finish(started, payment.Succeeded, base.Add(time.Second))
	ev2.ID = ev1.ID
	if err := s.FinishPayment(ctx, p2, 3, ev2); err == nil {
		t.Fatal("FinishPayment succeeded although its outbox row could not be written")
	}
	equal(t, "payment after a failed finish", normPayment(paymentByID(t, s, p2.ID)), normPayment(started))
	wantBill(t, s, b2.Reference, bill.Processing, 0)
	_, err := s.SuccessfulPayment(ctx, b2.Reference)
	mustErr(t, "SuccessfulPayment after a failed finish", err, payment.ErrNotFound)
}

func testFinishFailure(t *testing.T, s store.Store) {
	ctx := t.Context()
	const maxFailures = 3
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	at := base
	for i := 1; i <= maxFailures; i++ {
		at = at.Add(time.Minute)
		p := startPayment(t, s, b, at)
		done := finishPayment(t, s, p, payment.Failed, maxFailures, at.Add(time.Second))
		equal(t, "PaymentByID", normPayment(paymentByID(t, s, p.ID)), normPayment(done))
		want := bill.Open
		if i == maxFailures {
			want = bill.Blocked
		}
		wantBill(t, s, b.Reference, want, i)

		late, ev := finish(p, payment.Failed, at.Add(2*time.Second))
		mustErr(t, "FinishPayment twice", s.FinishPayment(ctx, late, maxFailures, ev), payment.ErrStale)
		wantBill(t, s, b.Reference, want, i) // a stale failure is not counted again
	}
	_, err := s.SuccessfulPayment(ctx, b.Reference)
	mustErr(t, "SuccessfulPayment of a blocked bill", err, payment.ErrNotFound)
}

func testFinishUnknown(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	tests := []struct {
		name      string
		challenge bool
		then      payment.Status
		wantState bill.State
		wantFails int
	}{
		{"unknown then succeeded", false, payment.Succeeded, bill.Paid, 0},
		{"unknown then failed", false, payment.Failed, bill.Open, 1},
		{"challenge then succeeded", true, payment.Succeeded, bill.Paid, 0},
		{"challenge then failed", true, payment.Failed, bill.Open, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := addBill(t, s, f.m.Code, merchant.Test, base)
			p := startPayment(t, s, b, base)
			if tt.challenge {
				p.Status, p.ChallengeRef, p.UpdatedAt = payment.Challenge, secret.NewID("3ds"), base.Add(time.Second)
				must(t, "SetChallenge", s.SetChallenge(ctx, p))
			} else {
				p = finishPayment(t, s, p, payment.Unknown, 3, base.Add(time.Second))
				equal(t, "unknown payment", normPayment(paymentByID(t, s, p.ID)), normPayment(p))
			}
			// Maybe charged: the bill must stay claimed until we know.
			wantBill(t, s, b.Reference, bill.Processing, 0)
			mustErr(t, "StartPayment while unsettled", s.StartPayment(ctx, newPayment(b, base.Add(2*time.Second))), payment.ErrBillBusy)

			done := finishPayment(t, s, p, tt.then, 3, base.Add(time.Minute))
			equal(t, "settled payment", normPayment(paymentByID(t, s, p.ID)), normPayment(done))
			wantBill(t, s, b.Reference, tt.wantState, tt.wantFails)
		})
	}
}

func testOneSuccessIndex(t *testing.T, s store.Store) {
	raw, ok := s.(RawExecer)
	if !ok {
		t.Skip("the store offers no RawExecer; its own test binary runs this case")
	}
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	p1 := finishPayment(t, s, startPayment(t, s, b, base), payment.Unknown, 3, base.Add(time.Second))
	// StartPayment itself never lets a second attempt in while one is
	// unsettled; reopen the bill behind its back to reach the index.
	must(t, "reopen bill", raw.ExecRaw(ctx, `UPDATE bills SET state = ? WHERE reference = ?`, string(bill.Open), b.Reference))
	p2 := startPayment(t, s, b, base.Add(2*time.Second))

	won := finishPayment(t, s, p1, payment.Succeeded, 3, base.Add(time.Minute))
	second, ev := finish(p2, payment.Succeeded, base.Add(time.Minute))
	if err := s.FinishPayment(ctx, second, 3, ev); err == nil {
		t.Fatal("the database accepted a second successful payment for one bill")
	}
	got, err := s.SuccessfulPayment(ctx, b.Reference)
	must(t, "SuccessfulPayment", err)
	equal(t, "SuccessfulPayment", normPayment(got), normPayment(won))
	equal(t, "refused payment", normPayment(paymentByID(t, s, p2.ID)), normPayment(p2))
}

func testLatestPayment(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	_, err := s.LatestPayment(ctx, b.Reference)
	mustErr(t, "LatestPayment(no attempts)", err, payment.ErrNotFound)

	first := finishPayment(t, s, startPayment(t, s, b, base), payment.Failed, 3, base.Add(time.Second))
	got, err := s.LatestPayment(ctx, b.Reference)
	must(t, "LatestPayment", err)
	equal(t, "LatestPayment after one attempt", normPayment(got), normPayment(first))

	second := startPayment(t, s, b, base.Add(time.Minute))
	got, err = s.LatestPayment(ctx, b.Reference)
	must(t, "LatestPayment", err)
	equal(t, "LatestPayment after two attempts", normPayment(got), normPayment(second))

	other := addBill(t, s, f.m.Code, merchant.Test, base)
	_, err = s.LatestPayment(ctx, other.Reference)
	mustErr(t, "LatestPayment(other bill)", err, payment.ErrNotFound)
}

func testSuccessfulPayment(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	finishPayment(t, s, startPayment(t, s, b, base), payment.Failed, 3, base.Add(time.Second))
	_, err := s.SuccessfulPayment(ctx, b.Reference)
	mustErr(t, "SuccessfulPayment(only a failure)", err, payment.ErrNotFound)

	won := finishPayment(t, s, startPayment(t, s, b, base.Add(time.Minute)), payment.Succeeded, 3, base.Add(2*time.Minute))
	finishPayment(t, s, startPayment(t, s, addBill(t, s, f.m.Code, merchant.Test, base), base), payment.Failed, 3, base.Add(3*time.Minute))
	got, err := s.SuccessfulPayment(ctx, b.Reference)
	must(t, "SuccessfulPayment", err)
	equal(t, "SuccessfulPayment", normPayment(got), normPayment(won))
}

// A merchant's query reads its bill with the payment that decides the
// answer: none, the latest attempt, then the one success; found by bill
// or order reference, and only by the bill's own merchant and mode.
func testVerification(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	verify := func(what, ref string) payment.Verification {
		t.Helper()
		v, err := s.Verification(ctx, f.m.Code, merchant.Test, ref)
		must(t, "Verification "+what, err)
		equal(t, what+": bill reference", v.BillReference, b.Reference)
		equal(t, what+": order reference", v.OrderReference, b.OrderReference)
		equal(t, what+": bill amount", v.Amount, b.Amount)
		equal(t, what+": bill created", norm(v.CreatedAt), norm(b.CreatedAt))
		v.Payment.UpdatedAt = norm(v.Payment.UpdatedAt)
		return v
	}
	// shown is what a query shows of p.
	shown := func(p payment.Payment) payment.Payment {
		return payment.Payment{ID: p.ID, Status: p.Status, NetworkRef: p.NetworkRef, Amount: p.Amount, UpdatedAt: norm(p.UpdatedAt), Message: p.Message}
	}
	equal(t, "never attempted", verify("never attempted", b.Reference).Payment, payment.Payment{Amount: money.Amount{Currency: b.Amount.Currency}})

	declined := finishPayment(t, s, startPayment(t, s, b, base.Add(time.Second)), payment.Failed, 3, base.Add(2*time.Second))
	equal(t, "after a decline", verify("after a decline", b.Reference).Payment, shown(declined))
	second := startPayment(t, s, b, base.Add(time.Minute))
	equal(t, "while a second attempt runs", verify("second attempt", b.Reference).Payment, shown(second))
	paid := finishPayment(t, s, second, payment.Succeeded, 3, base.Add(2*time.Minute))
	equal(t, "paid", verify("paid", b.Reference).Payment, shown(paid))
	equal(t, "paid, by order reference", verify("by order reference", b.OrderReference).Payment, shown(paid))

	g := addMerchant(t, s, base)
	for what, look := range map[string]func() (payment.Verification, error){
		"unknown reference": func() (payment.Verification, error) {
			return s.Verification(ctx, f.m.Code, merchant.Test, "NOSUCHBILL")
		},
		"another merchant": func() (payment.Verification, error) { return s.Verification(ctx, g.m.Code, merchant.Test, b.Reference) },
		"another mode":     func() (payment.Verification, error) { return s.Verification(ctx, f.m.Code, merchant.Live, b.Reference) },
		"another merchant, by order reference": func() (payment.Verification, error) {
			return s.Verification(ctx, g.m.Code, merchant.Test, b.OrderReference)
		},
	} {
		_, err := look()
		mustErr(t, "Verification: "+what, err, bill.ErrNotFound)
	}
}

// An order reference shaped like a bill reference finds its bill until a
// bill is drawn with that reference, which the query then finds first
// (bill.FindEither), even after the first bill was paid and verified.
func testVerificationPrefersBillReference(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	ref := secret.RandomUpperAlnum(12)
	ordered := newBill(t, f.m.Code, merchant.Test, ref, amount(t, 150_075, "KES"), base)
	_, _, err := s.InsertBill(ctx, ordered)
	must(t, "InsertBill", err)
	finishPayment(t, s, startPayment(t, s, ordered, base.Add(time.Second)), payment.Succeeded, 3, base.Add(2*time.Second))
	for range 2 {
		v, err := s.Verification(ctx, f.m.Code, merchant.Test, ref)
		must(t, "Verification by order reference", err)
		equal(t, "found by its order reference", v.BillReference, ordered.Reference)
	}
	drawn := newBill(t, f.m.Code, merchant.Test, secret.NewID("order"), amount(t, 99_00, "KES"), base.Add(time.Minute))
	drawn.Reference = ref
	_, _, err = s.InsertBill(ctx, drawn)
	must(t, "InsertBill with the order reference as its reference", err)
	v, err := s.Verification(ctx, f.m.Code, merchant.Test, ref)
	must(t, "Verification by bill reference", err)
	equal(t, "found by its bill reference", v.BillReference, drawn.Reference)
}

func testUnsettled(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	g := addMerchant(t, s, base)
	cutoff := base.Add(time.Hour)
	before, after := cutoff.Add(-time.Minute), cutoff.Add(time.Minute)
	// A challenge waits for its shopper longer than a charge for its
	// acquirer.
	challengeCutoff := cutoff.Add(-15 * time.Minute)

	// mk leaves one payment on a fresh bill in status, last touched at at
	// by the run node of a node.
	mode := merchant.Test
	mk := func(code string, status payment.Status, at time.Time, node string) payment.Payment {
		t.Helper()
		b := addBill(t, s, code, mode, base)
		p := newPayment(b, at)
		p.Node = node
		must(t, "StartPayment", s.StartPayment(ctx, p))
		switch status {
		case payment.Processing:
		case payment.Challenge:
			p.Status, p.ChallengeRef = payment.Challenge, secret.NewID("3ds")
			must(t, "SetChallenge", s.SetChallenge(ctx, p))
		default:
			p = finishPayment(t, s, p, status, 3, at)
		}
		return p
	}
	want := []payment.Payment{
		mk(f.m.Code, payment.Processing, before, ""),
		mk(f.m.Code, payment.Challenge, challengeCutoff.Add(-time.Minute), "n1/run1"),
		mk(g.m.Code, payment.Unknown, before, "n2/run1"),
		// Left processing by n1's earlier run: n1's new run takes it at once.
		mk(f.m.Code, payment.Processing, after, "n1/run1"),
	}
	mk(f.m.Code, payment.Succeeded, before, "")
	mk(f.m.Code, payment.Failed, before, "")
	mk(f.m.Code, payment.Processing, after, "")
	mk(f.m.Code, payment.Unknown, after, "n1/run1")
	mk(g.m.Code, payment.Processing, cutoff, "")        // touched at the cutoff is not before it
	mk(f.m.Code, payment.Processing, after, "n1/run2")  // n1's current run is charging it
	mk(f.m.Code, payment.Processing, after, "n10/run1") // another node, whose name n1 starts
	mk(f.m.Code, payment.Challenge, after, "n1/run1")   // waits for the shopper, not a charge
	mk(f.m.Code, payment.Challenge, before, "")         // past the charges' cutoff, not the challenges'
	// Live: charges only when live is among the modes asked for;
	// challenges whatever the modes.
	mode = merchant.Live
	liveCharge := mk(f.m.Code, payment.Unknown, before, "")
	liveChallenge := mk(f.m.Code, payment.Challenge, challengeCutoff.Add(-time.Minute), "")
	want = append(want, liveChallenge)

	q := payment.Unsettled{Before: cutoff, ChallengesBefore: challengeCutoff, Modes: []merchant.Mode{merchant.Test}, NodePrefix: "n1/", Self: "n1/run2", Limit: 500}
	got, err := s.UnsettledPayments(ctx, q)
	must(t, "UnsettledPayments", err)
	byID := func(ps []payment.Payment) map[string]payment.Payment {
		m := map[string]payment.Payment{}
		for _, p := range ps {
			m[p.ID] = normPayment(p)
		}
		return m
	}
	equal(t, "UnsettledPayments", byID(got), byID(want))
	// Without a node name, the cutoff alone.
	q.NodePrefix, q.Self = "", ""
	got, err = s.UnsettledPayments(ctx, q)
	must(t, "UnsettledPayments", err)
	equal(t, "UnsettledPayments without a node", byID(got), byID(append(want[:3:3], liveChallenge)))
	q.Modes = append(q.Modes, merchant.Live)
	got, err = s.UnsettledPayments(ctx, q)
	must(t, "UnsettledPayments", err)
	equal(t, "UnsettledPayments with live", byID(got), byID(append(want[:3:3], liveChallenge, liveCharge)))
	q.Modes = nil
	got, err = s.UnsettledPayments(ctx, q)
	must(t, "UnsettledPayments", err)
	equal(t, "UnsettledPayments of no mode", byID(got), byID([]payment.Payment{want[1], liveChallenge}))

	// Page by page, each after the last of the one before, the same
	// payments, oldest first, each once.
	q.Modes = []merchant.Mode{merchant.Test, merchant.Live}
	q.Limit = 2
	var paged []payment.Payment
	for range 10 {
		page, err := s.UnsettledPayments(ctx, q)
		must(t, "UnsettledPayments", err)
		paged = append(paged, page...)
		if len(page) < q.Limit {
			break
		}
		q.AfterUpdated, q.AfterID = page[len(page)-1].UpdatedAt, page[len(page)-1].ID
	}
	if len(paged) != 5 {
		t.Errorf("UnsettledPayments by pages of 2: %d payments, want 5", len(paged))
	}
	for i := 1; i < len(paged); i++ {
		if a, b := paged[i-1], paged[i]; a.UpdatedAt.After(b.UpdatedAt) || a.UpdatedAt.Equal(b.UpdatedAt) && a.ID >= b.ID {
			t.Errorf("page order: %s at %v before %s at %v", a.ID, a.UpdatedAt, b.ID, b.UpdatedAt)
		}
	}
	equal(t, "UnsettledPayments by pages", byID(paged), byID(append(want[:3:3], liveChallenge, liveCharge)))

	// A node's name in any script: its earlier run's charges are its own.
	mode = merchant.Test
	accented := mk(f.m.Code, payment.Processing, after, "nœud-été/run1")
	got, err = s.UnsettledPayments(ctx, payment.Unsettled{Before: cutoff, ChallengesBefore: challengeCutoff, Modes: []merchant.Mode{merchant.Test},
		NodePrefix: "nœud-été/", Self: "nœud-été/run2", Limit: 500})
	must(t, "UnsettledPayments", err)
	if _, ok := byID(got)[accented.ID]; !ok {
		t.Errorf("a payment left processing by an earlier run of node nœud-été is not listed for its next run")
	}
}

func testCheckoutRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	fields := map[string]string{"callbackUrl": "https://shop.example/return", "customerFirstName": "Wanjiku", "address": "Moi Avenue, \"Nairobi\""}
	id, c := checkout.New(f.m.Code, merchant.Test, b.Reference, fields, base)
	must(t, "CreateCheckout", s.CreateCheckout(ctx, c))

	got, err := s.CheckoutByHash(ctx, checkout.Hash(id), base)
	must(t, "CheckoutByHash", err)
	want := c
	want.CreatedAt, want.ExpiresAt = norm(c.CreatedAt), norm(c.ExpiresAt)
	got.CreatedAt, got.ExpiresAt = norm(got.CreatedAt), norm(got.ExpiresAt)
	equal(t, "session", got, want)

	p := startPayment(t, s, b, base)
	must(t, "BindCheckoutPayment", s.BindCheckoutPayment(ctx, c.IDHash, p.ID))
	got, err = s.CheckoutByHash(ctx, c.IDHash, base)
	must(t, "CheckoutByHash", err)
	equal(t, "bound payment", got.PaymentID, p.ID)

	// The id itself is no key: only its hash finds the session.
	_, err = s.CheckoutByHash(ctx, id, base)
	mustErr(t, "CheckoutByHash(the clear id)", err, checkout.ErrNotFound)
	mustErr(t, "BindCheckoutPayment(unknown)", s.BindCheckoutPayment(ctx, checkout.Hash("nope"), p.ID), checkout.ErrNotFound)
}

func testCheckoutExpiry(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	_, old := checkout.New(f.m.Code, merchant.Test, b.Reference, map[string]string{}, base)
	_, fresh := checkout.New(f.m.Code, merchant.Test, b.Reference, map[string]string{}, base.Add(checkout.TTL/2))
	must(t, "CreateCheckout", s.CreateCheckout(ctx, old))
	must(t, "CreateCheckout", s.CreateCheckout(ctx, fresh))

	end := base.Add(checkout.TTL)
	if _, err := s.CheckoutByHash(ctx, old.IDHash, end.Add(-time.Millisecond)); err != nil {
		t.Fatalf("session a moment before its expiry: %v", err)
	}
	_, err := s.CheckoutByHash(ctx, old.IDHash, end)
	mustErr(t, "session at its expiry", err, checkout.ErrNotFound)

	n, err := s.DeleteExpiredCheckouts(ctx, end)
	must(t, "DeleteExpiredCheckouts", err)
	equal(t, "sessions deleted", n, int64(1))
	if _, err := s.CheckoutByHash(ctx, fresh.IDHash, end); err != nil {
		t.Fatalf("an unexpired session was deleted: %v", err)
	}
}

func testCheckoutNoticeAndEnd(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	b := addBill(t, s, f.m.Code, merchant.Test, base)
	_, c := checkout.New(f.m.Code, merchant.Test, b.Reference, map[string]string{}, base)
	must(t, "CreateCheckout", s.CreateCheckout(ctx, c))
	got, err := s.CheckoutByHash(ctx, c.IDHash, base)
	must(t, "CheckoutByHash", err)
	equal(t, "a new session's notice", got.Notice, checkout.Notice{})

	n := checkout.Notice{Errors: map[string]string{"cardNumber": "is not a valid card number"}, Declined: "Card declined", DeclineCode: "card_declined",
		FirstName: "Wanjiku", LastName: "O'Brien", Expiry: "04 / 31"}
	must(t, "SetCheckoutNotice", s.SetCheckoutNotice(ctx, c.IDHash, n))
	got, err = s.CheckoutByHash(ctx, c.IDHash, base)
	must(t, "CheckoutByHash", err)
	equal(t, "notice", got.Notice, n)
	must(t, "SetCheckoutNotice(replace)", s.SetCheckoutNotice(ctx, c.IDHash, checkout.Notice{Declined: "Insufficient funds"}))
	got, _ = s.CheckoutByHash(ctx, c.IDHash, base)
	equal(t, "replaced notice", got.Notice, checkout.Notice{Declined: "Insufficient funds"})
	mustErr(t, "SetCheckoutNotice(unknown)", s.SetCheckoutNotice(ctx, checkout.Hash("nope"), n), checkout.ErrNotFound)

	at := base.Add(time.Minute)
	must(t, "EndCheckout", s.EndCheckout(ctx, c.IDHash, at))
	_, err = s.CheckoutByHash(ctx, c.IDHash, at)
	mustErr(t, "an ended session", err, checkout.ErrNotFound)
	mustErr(t, "EndCheckout(again)", s.EndCheckout(ctx, c.IDHash, at), checkout.ErrNotFound)
}

func testSessionRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	id, ss := session.New(f.m.Code, base)
	// A sign-in checked against a password changed since stores nothing.
	_, refused := session.New(f.m.Code, base)
	mustErr(t, "CreateSession with a changed password", s.CreateSession(ctx, refused, "an older hash"), session.ErrPasswordChanged)
	_, err := s.SessionByHash(ctx, refused.IDHash, base.Add(time.Minute))
	mustErr(t, "SessionByHash of a refused session", err, session.ErrNotFound)
	must(t, "CreateSession", s.CreateSession(ctx, ss, f.m.PasswordHash))
	got, err := s.SessionByHash(ctx, session.Hash(id), base.Add(time.Minute))
	must(t, "SessionByHash", err)
	equal(t, "merchant", got.MerchantCode, f.m.Code)
	equal(t, "mode", got.Mode, merchant.Test)
	equal(t, "csrf", got.CSRF, ss.CSRF)
	got.Mode, got.SecondFactor, got.LastSeenAt = merchant.Live, base.Add(2*time.Minute), base.Add(2*time.Minute)
	must(t, "TouchSession", s.TouchSession(ctx, got))
	again, err := s.SessionByHash(ctx, got.IDHash, base.Add(3*time.Minute))
	must(t, "SessionByHash", err)
	equal(t, "touched", []any{again.Mode, norm(again.SecondFactor), norm(again.LastSeenAt)}, []any{merchant.Live, norm(base.Add(2 * time.Minute)), norm(base.Add(2 * time.Minute))})
	// Activity alone, from a request holding the copy read before the
	// change: the mode and second factor stay as changed.
	stale := got
	stale.Mode, stale.SecondFactor = merchant.Test, time.Time{}
	must(t, "SeenSession", s.SeenSession(ctx, stale.IDHash, base.Add(4*time.Minute)))
	again, err = s.SessionByHash(ctx, got.IDHash, base.Add(5*time.Minute))
	must(t, "SessionByHash", err)
	equal(t, "seen", []any{again.Mode, norm(again.SecondFactor), norm(again.LastSeenAt)}, []any{merchant.Live, norm(base.Add(2 * time.Minute)), norm(base.Add(4 * time.Minute))})
	mustErr(t, "SeenSession of no session", s.SeenSession(ctx, "nosuch", base), session.ErrNotFound)
	_, err = s.SessionByHash(ctx, id, base)
	mustErr(t, "SessionByHash(the clear id)", err, session.ErrNotFound)
	must(t, "DeleteSession", s.DeleteSession(ctx, got.IDHash))
	_, err = s.SessionByHash(ctx, got.IDHash, base.Add(3*time.Minute))
	mustErr(t, "SessionByHash after sign-out", err, session.ErrNotFound)
	mustErr(t, "TouchSession after sign-out", s.TouchSession(ctx, got), session.ErrNotFound)
}

func testSessionTimeouts(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	_, ss := session.New(f.m.Code, base)
	must(t, "CreateSession", s.CreateSession(ctx, ss, f.m.PasswordHash))
	if _, err := s.SessionByHash(ctx, ss.IDHash, base.Add(session.IdleTimeout-time.Millisecond)); err != nil {
		t.Fatalf("a moment before the idle timeout: %v", err)
	}
	_, err := s.SessionByHash(ctx, ss.IDHash, base.Add(session.IdleTimeout))
	mustErr(t, "at the idle timeout", err, session.ErrNotFound)
	// Kept busy, it still ends at MaxAge.
	ss.LastSeenAt = base.Add(session.MaxAge - time.Minute)
	must(t, "TouchSession", s.TouchSession(ctx, ss))
	_, err = s.SessionByHash(ctx, ss.IDHash, base.Add(session.MaxAge))
	mustErr(t, "at the absolute timeout", err, session.ErrNotFound)
}

func testSessionsDeleteOthers(t *testing.T, s store.Store) {
	ctx := t.Context()
	f, other := addMerchant(t, s, base), addMerchant(t, s, base)
	_, keep := session.New(f.m.Code, base)
	_, gone := session.New(f.m.Code, base)
	_, others := session.New(other.m.Code, base)
	for _, ss := range []session.Session{keep, gone} {
		must(t, "CreateSession", s.CreateSession(ctx, ss, f.m.PasswordHash))
	}
	must(t, "CreateSession", s.CreateSession(ctx, others, other.m.PasswordHash))
	must(t, "DeleteSessions", s.DeleteSessions(ctx, f.m.Code, keep.IDHash))
	for _, tt := range []struct {
		ss    session.Session
		alive bool
	}{{keep, true}, {gone, false}, {others, true}} {
		_, err := s.SessionByHash(ctx, tt.ss.IDHash, base)
		if (err == nil) != tt.alive {
			t.Errorf("session of %s: %v, want alive %t", tt.ss.MerchantCode, err, tt.alive)
		}
	}
}

func testTOTP(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	sec, enabled, err := s.TOTP(ctx, f.m.Code)
	must(t, "TOTP", err)
	if sec != "" || !enabled.IsZero() {
		t.Fatalf("a new merchant has a second factor: %q %v", sec, enabled)
	}
	must(t, "EnableTOTP", s.EnableTOTP(ctx, f.m.Code, "JBSWY3DPEHPK3PXP", []string{"h1", "h2"}, base))
	sec, enabled, err = s.TOTP(ctx, f.m.Code)
	must(t, "TOTP", err)
	equal(t, "totp", []any{sec, norm(enabled)}, []any{"JBSWY3DPEHPK3PXP", norm(base)})
	ok, err := s.UseRecoveryCode(ctx, f.m.Code, "h1", base)
	must(t, "UseRecoveryCode", err)
	again, err := s.UseRecoveryCode(ctx, f.m.Code, "h1", base)
	must(t, "UseRecoveryCode", err)
	unknown, err := s.UseRecoveryCode(ctx, f.m.Code, "nope", base)
	must(t, "UseRecoveryCode", err)
	equal(t, "recovery code first, again, unknown", []bool{ok, again, unknown}, []bool{true, false, false})

	// A time step is spent once, and none before the last spent one.
	var steps []bool
	for _, step := range []int64{100, 100, 99, 101} {
		ok, err := s.UseTOTPStep(ctx, f.m.Code, step)
		must(t, "UseTOTPStep", err)
		steps = append(steps, ok)
	}
	equal(t, "steps 100, 100, 99, 101", steps, []bool{true, false, false, true})
	// A factor that is on is not replaced, nor are its recovery codes.
	if err := s.EnableTOTP(ctx, f.m.Code, "KRSXG5CTMVRXEZLU", []string{"h3"}, base); !errors.Is(err, merchant.ErrTwoStepOn) {
		t.Fatalf("EnableTOTP over a factor that is on: %v, want %v", err, merchant.ErrTwoStepOn)
	}
	sec, _, err = s.TOTP(ctx, f.m.Code)
	must(t, "TOTP", err)
	ok, err = s.UseRecoveryCode(ctx, f.m.Code, "h2", base)
	must(t, "UseRecoveryCode", err)
	equal(t, "the secret and a recovery code after a refused EnableTOTP", []any{sec, ok}, []any{"JBSWY3DPEHPK3PXP", true})
	if err := s.EnableTOTP(ctx, "NOSUCHMERCHANT", "KRSXG5CTMVRXEZLU", nil, base); !errors.Is(err, merchant.ErrNotFound) {
		t.Fatalf("EnableTOTP of no merchant: %v", err)
	}
	// After an operator's reset a new secret starts afresh: its first code
	// may fall on any step.
	resetter, ok := s.(interface {
		ResetAccess(ctx context.Context, code, passwordHash string, twoStep bool, at time.Time) error
	})
	if !ok {
		t.Fatalf("%T cannot reset a merchant's access", s)
	}
	must(t, "ResetAccess", resetter.ResetAccess(ctx, f.m.Code, "", true, base))
	must(t, "EnableTOTP", s.EnableTOTP(ctx, f.m.Code, "KRSXG5CTMVRXEZLU", nil, base))
	ok, err = s.UseTOTPStep(ctx, f.m.Code, 50)
	must(t, "UseTOTPStep", err)
	equal(t, "a step after a new secret", ok, true)
}

// testBillsPage walks a merchant's bills with the keyset: every bill once,
// newest first, and the filters keep to their merchant and mode.
func testBillsPage(t *testing.T, s store.Store) {
	ctx := t.Context()
	f, other := addMerchant(t, s, base), addMerchant(t, s, base)
	var want []string
	for i := range 7 {
		// Two bills share each creation time: the reference breaks the tie.
		b := addBill(t, s, f.m.Code, merchant.Test, base.Add(time.Duration(i/2)*time.Second))
		want = append(want, b.Reference)
	}
	addBill(t, s, f.m.Code, merchant.Live, base)
	addBill(t, s, other.m.Code, merchant.Test, base)
	var got []string
	filter := bill.ListFilter{MerchantCode: f.m.Code, Mode: merchant.Test, Limit: 3, Now: base}
	for range 10 {
		page, err := s.BillsPage(ctx, filter)
		must(t, "BillsPage", err)
		for _, b := range page {
			got = append(got, b.Reference)
		}
		if len(page) < filter.Limit {
			break
		}
		last := page[len(page)-1]
		filter.After = &bill.Cursor{CreatedAt: last.CreatedAt, Reference: last.Reference}
	}
	if len(got) != len(want) {
		t.Fatalf("paged %d bills, want %d: %v", len(got), len(want), got)
	}
	seen := map[string]bool{}
	for i, ref := range got {
		if seen[ref] {
			t.Fatalf("bill %s twice", ref)
		}
		seen[ref] = true
		if i > 0 && newer(t, s, got[i], got[i-1], f.m.Code) {
			t.Fatalf("bill %s comes after the older %s", got[i], got[i-1])
		}
	}
	one, err := s.BillsPage(ctx, bill.ListFilter{MerchantCode: f.m.Code, Mode: merchant.Test, Search: strings.ToLower(want[3]), Limit: 10, Now: base})
	must(t, "BillsPage(search)", err)
	if len(one) != 1 || one[0].Reference != want[3] {
		t.Fatalf("search by reference: %v", one)
	}
	expired, err := s.BillsPage(ctx, bill.ListFilter{MerchantCode: f.m.Code, Mode: merchant.Test, State: bill.Expired, Limit: 10, Now: base.Add(48 * time.Hour)})
	must(t, "BillsPage(expired)", err)
	equal(t, "expired bills two days on", len(expired), len(want))
}

// testShownPayments gives each listed bill the attempt that says most
// about it, past one statement's worth of references.
func testShownPayments(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	var refs []string
	for i := range 60 {
		refs = append(refs, addBill(t, s, f.m.Code, merchant.Test, base.Add(time.Duration(i)*time.Second)).Reference)
	}
	bills := func(i int) bill.Bill {
		b, err := s.BillByID(ctx, refs[i])
		must(t, "BillByID", err)
		return b
	}
	// Bill 3: declined, then paid. Bill 55 (past the first statement's
	// fifty): declined twice; the second decline is shown.
	finishPayment(t, s, startPayment(t, s, bills(3), base.Add(time.Minute)), payment.Failed, 5, base.Add(time.Minute))
	paid := finishPayment(t, s, startPayment(t, s, bills(3), base.Add(2*time.Minute)), payment.Succeeded, 5, base.Add(2*time.Minute))
	finishPayment(t, s, startPayment(t, s, bills(55), base.Add(time.Minute)), payment.Failed, 5, base.Add(time.Minute))
	second := finishPayment(t, s, startPayment(t, s, bills(55), base.Add(2*time.Minute)), payment.Failed, 5, base.Add(2*time.Minute))
	shown, err := s.ShownPayments(ctx, refs)
	must(t, "ShownPayments", err)
	got := map[string]string{}
	for ref, p := range shown {
		got[ref] = p.ID
	}
	equal(t, "shown attempts", got, map[string]string{refs[3]: paid.ID, refs[55]: second.ID})
	equal(t, "the paid attempt's transaction reference", shown[refs[3]].NetworkRef, paid.NetworkRef)
	none, err := s.ShownPayments(ctx, nil)
	must(t, "ShownPayments(none)", err)
	equal(t, "no bills", len(none), 0)
}

func testPaymentTotals(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := addMerchant(t, s, base)
	// base is 09:26:53: the first three fall in the quarter from 09:15, the
	// fourth in the one from 09:45.
	for i, at := range []time.Duration{0, time.Second, 2 * time.Second, 20 * time.Minute} {
		st := payment.Succeeded
		if i == 1 {
			st = payment.Failed
		}
		b := addBill(t, s, f.m.Code, merchant.Test, base)
		p := startPayment(t, s, b, base.Add(at))
		done, ev := finish(p, st, base.Add(at))
		must(t, "FinishPayment", s.FinishPayment(ctx, done, 5, ev))
	}
	totals, err := s.PaymentTotals(ctx, f.m.Code, string(merchant.Test), base.Add(-time.Hour))
	must(t, "PaymentTotals", err)
	got := map[string][2]int64{}
	for _, tt := range totals {
		got[tt.Start.UTC().Format("15:04")+" "+string(tt.Status)] = [2]int64{tt.Count, tt.SumMinor}
	}
	equal(t, "quarters", got, map[string][2]int64{
		"09:15 succeeded": {2, 2 * 150_075}, "09:15 failed": {1, 150_075}, "09:45 succeeded": {1, 150_075},
	})
}

// newer reports whether bill a sorts before b in a newest-first list.
func newer(t *testing.T, s store.Store, a, b, code string) bool {
	t.Helper()
	ba, err := s.BillByReference(t.Context(), code, merchant.Test, a)
	must(t, "BillByReference", err)
	bb, err := s.BillByReference(t.Context(), code, merchant.Test, b)
	must(t, "BillByReference", err)
	return ba.CreatedAt.After(bb.CreatedAt) || (ba.CreatedAt.Equal(bb.CreatedAt) && a > b)
}
