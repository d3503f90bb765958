package auth

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// fakeRepo is an in-memory Repo. Its lockout bookkeeping follows the
// interface's contract (newlyLocked exactly once per lockout); the real
// store's implementation has its own suite.
type fakeRepo struct {
	mu         sync.Mutex
	keys       map[string]merchant.APIKey // by hash
	merchants  map[string]merchant.Merchant
	settings   map[string]merchant.Settings // by code + "/" + mode
	revoked    []string
	revokedErr error
	// revokedHangs is how many RevokedKeys calls hang until their context
	// ends, as a query on a connection cut by a failover does.
	revokedHangs int
	since        time.Time // last RevokedKeys argument
	locks        map[string]*lockState
	audits       []audit.Event
}

type lockState struct {
	failures int
	first    time.Time
	until    time.Time
}

func newFakeRepo() *fakeRepo {
	return &fakeRepo{
		keys:      map[string]merchant.APIKey{},
		merchants: map[string]merchant.Merchant{},
		settings:  map[string]merchant.Settings{},
		locks:     map[string]*lockState{},
	}
}

func (r *fakeRepo) addMerchant(m merchant.Merchant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.merchants[m.Code] = m
}

func (r *fakeRepo) addKey(id, code string, mode merchant.Mode, key, notificationSecret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys[secret.HashAPIKey(key)] = merchant.APIKey{ID: id, MerchantCode: code, Mode: mode, Hash: secret.HashAPIKey(key)}
	r.settings[code+"/"+string(mode)] = merchant.Settings{MerchantCode: code, Mode: mode, NotificationSecret: notificationSecret}
}

func (r *fakeRepo) APIKeyByHash(_ context.Context, hash string) (merchant.APIKey, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k, ok := r.keys[hash]
	if !ok {
		return merchant.APIKey{}, merchant.ErrNotFound
	}
	return k, nil
}

func (r *fakeRepo) MerchantByCode(_ context.Context, code string) (merchant.Merchant, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.merchants[code]
	if !ok {
		return merchant.Merchant{}, merchant.ErrNotFound
	}
	return m, nil
}

func (r *fakeRepo) Settings(_ context.Context, code string, mode merchant.Mode) (merchant.Settings, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.settings[code+"/"+string(mode)]
	if !ok {
		return merchant.Settings{}, merchant.ErrNotFound
	}
	return s, nil
}

func (r *fakeRepo) RevokedKeys(ctx context.Context, since time.Time) ([]string, error) {
	r.mu.Lock()
	hang := r.revokedHangs > 0
	if hang {
		r.revokedHangs--
	}
	r.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.since = since
	return append([]string(nil), r.revoked...), r.revokedErr
}

// row returns subject's state with an ended lock or a passed window
// forgotten, as the store does.
func (r *fakeRepo) row(subject string, now time.Time, window time.Duration) *lockState {
	l := r.locks[subject]
	if l == nil {
		l = &lockState{first: now}
		r.locks[subject] = l
	}
	if !l.until.IsZero() && !l.until.After(now) {
		l.until, l.failures, l.first = time.Time{}, 0, now
	}
	if now.Sub(l.first) > window {
		l.failures, l.first = 0, now
	}
	return l
}

func (r *fakeRepo) ReserveAuthAttempt(_ context.Context, subject string, now time.Time, p LockoutPolicy) (time.Time, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.locks[subject]; l != nil && l.until.After(now) {
		return l.until, false, nil
	}
	l := r.row(subject, now, p.Window)
	if l.failures >= p.MaxFailures {
		return time.Time{}, false, nil
	}
	l.failures++
	return time.Time{}, true, nil
}

func (r *fakeRepo) ReleaseAuthAttempt(_ context.Context, subject string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.locks[subject]; l != nil && l.failures > 0 && l.until.IsZero() {
		l.failures--
	}
	return nil
}

func (r *fakeRepo) RecordAuthFailure(_ context.Context, subject string, now time.Time, p LockoutPolicy) (time.Time, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.locks[subject]
	if l == nil || l.until.After(now) || l.failures < p.MaxFailures {
		if l == nil {
			return time.Time{}, false, nil
		}
		return l.until, false, nil
	}
	l.until, l.failures, l.first = now.Add(p.LockFor), 0, now
	return l.until, true, nil
}

func (r *fakeRepo) ThrottleAuthFailure(_ context.Context, subject string, now time.Time, p ThrottlePolicy) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := r.locks[subject]
	if l == nil || now.Sub(l.first) > p.Window {
		l = &lockState{first: now}
		r.locks[subject] = l
	}
	l.failures++
	l.until = time.Time{}
	if d := p.Delay(l.failures); d > 0 {
		l.until = now.Add(d)
	}
	return l.until, nil
}

func (r *fakeRepo) AuthLockedUntil(_ context.Context, subject string, _ time.Time) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.locks[subject]; l != nil {
		return l.until, nil
	}
	return time.Time{}, nil
}

func (r *fakeRepo) ClearAuthFailures(_ context.Context, subject string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l := r.locks[subject]; l != nil && l.until.IsZero() {
		delete(r.locks, subject)
	}
	return nil
}

func (r *fakeRepo) RecordAudit(_ context.Context, e audit.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.audits = append(r.audits, e)
	return nil
}

func (r *fakeRepo) auditEvents() []audit.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]audit.Event(nil), r.audits...)
}

// untouchableRepo fails the test on any call: Verify must never need one.
type untouchableRepo struct{ tb testing.TB }

func (r untouchableRepo) fail(method string) {
	r.tb.Helper()
	r.tb.Fatalf("Repo.%s called", method)
}

func (r untouchableRepo) APIKeyByHash(context.Context, string) (merchant.APIKey, error) {
	r.fail("APIKeyByHash")
	return merchant.APIKey{}, nil
}

func (r untouchableRepo) MerchantByCode(context.Context, string) (merchant.Merchant, error) {
	r.fail("MerchantByCode")
	return merchant.Merchant{}, nil
}

func (r untouchableRepo) Settings(context.Context, string, merchant.Mode) (merchant.Settings, error) {
	r.fail("Settings")
	return merchant.Settings{}, nil
}

func (r untouchableRepo) RevokedKeys(context.Context, time.Time) ([]string, error) {
	r.fail("RevokedKeys")
	return nil, nil
}

func (r untouchableRepo) ReserveAuthAttempt(context.Context, string, time.Time, LockoutPolicy) (time.Time, bool, error) {
	r.fail("ReserveAuthAttempt")
	return time.Time{}, false, nil
}

func (r untouchableRepo) ThrottleAuthFailure(context.Context, string, time.Time, ThrottlePolicy) (time.Time, error) {
	r.fail("ThrottleAuthFailure")
	return time.Time{}, nil
}

func (r untouchableRepo) ReleaseAuthAttempt(context.Context, string) error {
	r.fail("ReleaseAuthAttempt")
	return nil
}

func (r untouchableRepo) RecordAuthFailure(context.Context, string, time.Time, LockoutPolicy) (time.Time, bool, error) {
	r.fail("RecordAuthFailure")
	return time.Time{}, false, nil
}

func (r untouchableRepo) AuthLockedUntil(context.Context, string, time.Time) (time.Time, error) {
	r.fail("AuthLockedUntil")
	return time.Time{}, nil
}

func (r untouchableRepo) ClearAuthFailures(context.Context, string) error {
	r.fail("ClearAuthFailures")
	return nil
}

func (r untouchableRepo) RecordAudit(context.Context, audit.Event) error {
	r.fail("RecordAudit")
	return nil
}
