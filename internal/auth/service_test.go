package auth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/audit"
	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

const (
	codeA     = "4000000001"
	codeB     = "4000000002"
	passwordA = "kadi test pass 01"
	passwordB = "another pass 02"
	keyATest  = "kadi_test_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	keyALive  = "kadi_live_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	keyBTest  = "kadi_test_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
	ipA       = "203.0.113.7"
)

// passwordHashes are computed once: argon2id is slow on purpose.
var passwordHashes = sync.OnceValues(func() (string, string) {
	return secret.HashPassword(passwordA), secret.HashPassword(passwordB)
})

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newTestService(t testing.TB) (*Service, *fakeRepo, *clock) {
	t.Helper()
	hashA, hashB := passwordHashes()
	repo := newFakeRepo()
	repo.addMerchant(merchant.Merchant{Code: codeA, PasswordHash: hashA})
	repo.addMerchant(merchant.Merchant{Code: codeB, PasswordHash: hashB})
	repo.addKey("key_a_test", codeA, merchant.Test, keyATest, "whsec_a_test")
	repo.addKey("key_a_live", codeA, merchant.Live, keyALive, "whsec_a_live")
	repo.addKey("key_b_test", codeB, merchant.Test, keyBTest, "whsec_b_test")
	c := &clock{now: tokenNow}
	return &Service{
		Repo:        repo,
		Signer:      NewSigner(signingKey),
		Revocations: NewRevocations(),
		TTL:         time.Hour,
		Lockout:     DefaultLockout,
		Throttle:    DefaultThrottle,
		Now:         c.Now,
		Log:         slog.New(slog.DiscardHandler),
	}, repo, c
}

func grantA() Grant {
	return Grant{APIKey: keyATest, Username: codeA, Password: passwordA, ClientIP: ipA}
}

func TestIssue(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Grant)
		err     error  // a sentinel, or nil
		reqCode string // a *RequestError code
		key     string // on success, the key ID the token carries
		secret  string // on success, the notification secret
	}{
		{"test key", func(*Grant) {}, nil, "", "key_a_test", "whsec_a_test"},
		{"live key", func(g *Grant) { g.APIKey = keyALive }, nil, "", "key_a_live", "whsec_a_live"},
		{"no API key", func(g *Grant) { g.APIKey = "" }, ErrNoAPIKey, "", "", ""},
		{"wrong API key", func(g *Grant) { g.APIKey = keyATest + "x" }, ErrInvalidClient, "", "", ""},
		{"API key hash instead of the key", func(g *Grant) { g.APIKey = secret.HashAPIKey(keyATest) }, ErrInvalidClient, "", "", ""},
		{"wrong password", func(g *Grant) { g.Password = passwordA + "x" }, ErrInvalidGrant, "", "", ""},
		{"password in another case", func(g *Grant) { g.Password = strings.ToUpper(passwordA) }, ErrInvalidGrant, "", "", ""},
		{"username of another merchant, with its password", func(g *Grant) { g.Username, g.Password = codeB, passwordB }, ErrKeyElsewhere, "", "", ""},
		{"username of another merchant, with this one's password", func(g *Grant) { g.Username = codeB }, ErrKeyElsewhere, "", "", ""},
		{"unknown username", func(g *Grant) { g.Username = "4999999999" }, ErrKeyElsewhere, "", "", ""},
		{"no username", func(g *Grant) { g.Username = "" }, nil, "invalid_request", "", ""},
		{"no password", func(g *Grant) { g.Password = "" }, nil, "invalid_request", "", ""},
		{"API key as password, not allowed here", func(g *Grant) { g.Password = keyATest }, ErrInvalidGrant, "", "", ""},
		{"API key as password, allowed", func(g *Grant) { g.Password, g.KeyAsPassword = keyATest, true }, nil, "", "key_a_test", "whsec_a_test"},
		{"account password where the key is also allowed", func(g *Grant) { g.KeyAsPassword = true }, nil, "", "key_a_test", "whsec_a_test"},
		{"another merchant's key as password", func(g *Grant) { g.Password, g.KeyAsPassword = keyBTest, true }, ErrInvalidGrant, "", "", ""},
		{"this merchant's other key as password", func(g *Grant) { g.Password, g.KeyAsPassword = keyALive, true }, ErrInvalidGrant, "", "", ""},
		{"API key as password for another merchant's username", func(g *Grant) { g.Username, g.Password, g.KeyAsPassword = codeB, keyATest, true }, ErrKeyElsewhere, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := newTestService(t)
			g := grantA()
			tt.edit(&g)
			got, err := s.Issue(context.Background(), g)
			switch {
			case tt.err != nil:
				// The same value, hence the same message, whichever of
				// the password or the key's merchant was wrong, and
				// whether or not the code named exists.
				if err != tt.err {
					t.Fatalf("Issue = %+v, %v; want %v", got, err, tt.err)
				}
				return
			case tt.reqCode != "":
				var re *RequestError
				if !errors.As(err, &re) || re.Code != tt.reqCode || re.Message == "" {
					t.Fatalf("Issue error = %#v, want RequestError %s", err, tt.reqCode)
				}
				return
			case err != nil:
				t.Fatalf("Issue: %v", err)
			}
			want := Claims{MerchantCode: codeA, KeyID: tt.key, Mode: merchant.Test, IssuedAt: tokenNow, ExpiresAt: tokenNow.Add(time.Hour)}
			if strings.HasSuffix(tt.key, "live") {
				want.Mode = merchant.Live
			}
			if !sameClaims(got.Claims, want) {
				t.Errorf("Claims = %+v, want %+v", got.Claims, want)
			}
			if got.NotificationSecret != tt.secret {
				t.Errorf("NotificationSecret = %q, want %q", got.NotificationSecret, tt.secret)
			}
			verified, err := s.Verify(got.Token)
			if err != nil || !sameClaims(verified, want) {
				t.Errorf("Verify(issued token) = %+v, %v; want %+v", verified, err, want)
			}
		})
	}
}

// A missing credential is named as the request named it: /token calls
// the username merchantCode.
func TestIssueNamesTheMissingField(t *testing.T) {
	s, _, _ := newTestService(t)
	for _, tt := range []struct{ field, want string }{
		{"", "username and password are required"},
		{"merchantCode", "merchantCode and password are required"},
	} {
		g := grantA()
		g.Username, g.UsernameField = "", tt.field
		var re *RequestError
		if _, err := s.Issue(context.Background(), g); !errors.As(err, &re) || re.Message != tt.want {
			t.Errorf("UsernameField %q: %v, want %q", tt.field, err, tt.want)
		}
	}
}

func TestLockoutAfterTenFailures(t *testing.T) {
	s, repo, c := newTestService(t)
	ctx := context.Background()
	wrong := grantA()
	wrong.Password = "wrong password 1"

	for i := 1; i <= 9; i++ {
		if _, err := s.Issue(ctx, wrong); err != ErrInvalidGrant {
			t.Fatalf("failure %d: %v, want ErrInvalidGrant", i, err)
		}
	}
	if n := len(repo.auditEvents()); n != 0 {
		t.Fatalf("%d audit events after 9 failures, want none", n)
	}
	// The tenth failure itself may answer either way; from then on the
	// credential is refused.
	_, err := s.Issue(ctx, wrong)
	var locked *LockedError
	if err != ErrInvalidGrant && !errors.As(err, &locked) {
		t.Fatalf("failure 10: %v", err)
	}

	// The merchant's credential is locked and audit-logged once; the
	// address is only throttled, which is no audit event.
	events := repo.auditEvents()
	if len(events) != 1 || events[0].Action != audit.LockedOut || events[0].ID == "" || !events[0].At.Equal(tokenNow) ||
		!strings.Contains(events[0].Detail, "merchant:"+codeA) {
		t.Fatalf("audit events %+v, want exactly the merchant's lockout, now", events)
	}

	wantLocked := func(step string, g Grant, retry time.Duration) {
		t.Helper()
		_, err := s.Issue(ctx, g)
		var le *LockedError
		if !errors.As(err, &le) {
			t.Fatalf("%s: %v, want LockedError", step, err)
		}
		if le.RetryAfter != retry {
			t.Errorf("%s: RetryAfter = %v, want %v", step, le.RetryAfter, retry)
		}
		if !strings.Contains(le.Error(), fmt.Sprint(int((retry+time.Minute-1)/time.Minute))) {
			t.Errorf("%s: message %q does not give the minutes", step, le.Error())
		}
	}
	wantLocked("correct password while locked", grantA(), 30*time.Minute)
	wantLocked("wrong password while locked", wrong, 30*time.Minute)
	c.advance(10 * time.Minute)
	// Attempts while locked neither extend the lock nor log it again.
	wantLocked("correct password 10 minutes later", grantA(), 20*time.Minute)
	c.advance(20*time.Minute - time.Second)
	wantLocked("a second before the end", grantA(), time.Second)
	if n := len(repo.auditEvents()); n != 1 {
		t.Errorf("%d audit events, want still 1", n)
	}

	c.advance(time.Second)
	if _, err := s.Issue(ctx, grantA()); err != nil {
		t.Fatalf("correct password after 30 minutes: %v", err)
	}
}

// Failures from one address slow it down with growing delays instead of
// locking it: a merchant sharing the address (an office, a carrier's NAT,
// a proxy) waits seconds, never half an hour. The merchants it named are
// not locked.
func TestThrottlePerClientAddress(t *testing.T) {
	s, repo, c := newTestService(t)
	ctx := context.Background()
	guess := func(i int) error {
		g := grantA()
		g.APIKey = "kadi_test_guess" + fmt.Sprint(i)
		g.Username = fmt.Sprintf("49000000%02d", i%100)
		_, err := s.Issue(ctx, g)
		return err
	}
	for i := range DefaultThrottle.Free {
		if err := guess(i); err != ErrInvalidClient {
			t.Fatalf("guess %d: %v, want ErrInvalidClient", i+1, err)
		}
	}
	wantWait := func(step string, g Grant, want time.Duration) {
		t.Helper()
		_, err := s.Issue(ctx, g)
		var le *LockedError
		if !errors.As(err, &le) || le.RetryAfter != want {
			t.Fatalf("%s: %v, want LockedError after %v", step, err, want)
		}
	}
	// The free failures are spent: each further one costs a growing wait.
	var waits []time.Duration
	for i := 0; i < 10; i++ {
		if err := guess(100 + i); err != ErrInvalidClient {
			t.Fatalf("throttled guess %d: %v, want ErrInvalidClient", i+1, err)
		}
		wait := DefaultThrottle.Delay(DefaultThrottle.Free + i + 1)
		wantWait("merchant A's correct login from the throttled address", grantA(), wait)
		waits = append(waits, wait)
		c.advance(wait)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60, 60}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Fatalf("delays %v, want %v seconds", waits, want)
		}
	}
	if _, err := s.Issue(ctx, grantA()); err != nil {
		t.Fatalf("merchant A from the address once its wait is over: %v", err)
	}
	other := grantA()
	other.ClientIP = "198.51.100.9"
	if _, err := s.Issue(ctx, other); err != nil {
		t.Fatalf("correct credentials from another address: %v", err)
	}
	if events := repo.auditEvents(); len(events) != 0 {
		t.Errorf("audit events %+v: a throttled address is no lockout", events)
	}
}

func TestThrottleDelay(t *testing.T) {
	p := ThrottlePolicy{Free: 3, BaseDelay: time.Second, MaxDelay: 5 * time.Second}
	want := []time.Duration{0, 0, 0, 0, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for n, w := range want {
		if got := p.Delay(n); got != w {
			t.Errorf("Delay(%d) = %v, want %v", n, got, w)
		}
	}
	if got := p.Delay(1 << 20); got != p.MaxDelay {
		t.Errorf("Delay of a huge count = %v, want the cap", got)
	}
}

// Parallel wrong passwords are counted before they are hashed: of 40 at
// once, at most the lockout's 10 reach argon2id, the rest are refused
// without a hash (busy while those are checked, locked once they failed),
// and no more hashes run at once than the gate allows.
func TestParallelGuessesAreCountedBeforeHashing(t *testing.T) {
	s, _, _ := newTestService(t)
	s.Hashes = NewHashGate(2, 64, time.Minute)
	var mu sync.Mutex
	hashes, running, peak := 0, 0, 0
	s.CheckPassword = func(hash, password string) (bool, error) {
		mu.Lock()
		hashes++
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // long enough for the others to pile up
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		return secret.CheckPassword(hash, password)
	}
	const n = 40
	errs := make(chan error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			g := grantA()
			g.Password = "wrong password 1"
			g.ClientIP = fmt.Sprintf("192.0.2.%d", i+1)
			_, err := s.Issue(context.Background(), g)
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	grants, locked := 0, 0
	for err := range errs {
		var le *LockedError
		switch {
		case err == ErrInvalidGrant:
			grants++
		case errors.As(err, &le), errors.Is(err, ErrBusy):
			locked++
		default:
			t.Errorf("unexpected answer: %v", err)
		}
	}
	if hashes > DefaultLockout.MaxFailures || grants > DefaultLockout.MaxFailures || grants+locked != n {
		t.Errorf("%d hashes, %d wrong-password answers, %d refusals; want at most %d hashes", hashes, grants, locked, DefaultLockout.MaxFailures)
	}
	if peak > 2 {
		t.Errorf("%d hashes ran at once through a gate of 2", peak)
	}
	var le *LockedError
	if _, err := s.Issue(context.Background(), grantA()); !errors.As(err, &le) {
		t.Errorf("correct password after the storm: %v, want the merchant locked", err)
	}
}

// Right passwords in parallel (a merchant's workers all asking for a
// token at once) are never locked out: past the allowance they are told
// to come back in a moment, and every one gets its token on the next try.
func TestParallelRightPasswordsAreNotLockedOut(t *testing.T) {
	s, _, _ := newTestService(t)
	s.Hashes = NewHashGate(2, 64, time.Minute)
	s.CheckPassword = func(hash, password string) (bool, error) {
		time.Sleep(20 * time.Millisecond) // long enough for the others to pile up
		return secret.CheckPassword(hash, password)
	}
	const n = 16
	errs := make(chan error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			_, err := s.Issue(context.Background(), grantA())
			errs <- err
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	busy := 0
	for err := range errs {
		var le *LockedError
		switch {
		case errors.As(err, &le):
			t.Errorf("a right password refused as locked for %s", le.RetryAfter)
		case errors.Is(err, ErrBusy):
			busy++
		case err != nil:
			t.Errorf("unexpected answer: %v", err)
		}
	}
	for range busy {
		if _, err := s.Issue(context.Background(), grantA()); err != nil {
			t.Errorf("asked again after busy: %v", err)
		}
	}
}

// A password check that fails for a reason other than the password (the
// gate is full) gives its reserved attempt back, and only that one: a busy
// gateway must not lock merchants out, and must not wipe the failures
// already counted either (or flooding the gate would reset the lockout).
func TestBusyGateReleasesOnlyItsAttempt(t *testing.T) {
	s, _, _ := newTestService(t)
	wrong := grantA()
	wrong.Password = "wrong password 1"
	for i := range DefaultLockout.MaxFailures - 1 {
		if _, err := s.Issue(context.Background(), wrong); err != ErrInvalidGrant {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	s.Hashes = NewHashGate(1, 0, time.Millisecond)
	release, err := s.Hashes.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 * DefaultLockout.MaxFailures {
		if _, err := s.Issue(context.Background(), grantA()); !errors.Is(err, ErrBusy) {
			t.Fatalf("attempt %d with the gate full: %v, want ErrBusy", i+1, err)
		}
	}
	release()
	// Nine failures are still counted: the tenth locks.
	if _, err := s.Issue(context.Background(), wrong); err != ErrInvalidGrant {
		t.Fatalf("tenth failure: %v", err)
	}
	var le *LockedError
	if _, err := s.Issue(context.Background(), grantA()); !errors.As(err, &le) {
		t.Fatalf("right password after ten failures around a busy spell: %v, want locked", err)
	}
}

func TestVerify(t *testing.T) {
	s, _, c := newTestService(t)
	issued, err := s.Issue(context.Background(), grantA())
	if err != nil {
		t.Fatal(err)
	}
	live, err := s.Issue(context.Background(), Grant{APIKey: keyALive, Username: codeA, Password: passwordA, ClientIP: ipA})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(issued.Token); err != nil {
		t.Fatalf("fresh token: %v", err)
	}
	s.Revocations.Add("key_a_test")
	if _, err := s.Verify(issued.Token); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("token of a revoked key: %v, want ErrInvalidToken", err)
	}
	if _, err := s.Verify(live.Token); err != nil {
		t.Errorf("token of the other, unrevoked key: %v", err)
	}
	c.advance(time.Hour)
	if _, err := s.Verify(live.Token); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("token at its expiry: %v, want ErrInvalidToken", err)
	}

	// A token issued under a long TTL is honoured only for the current
	// one: shortening --token-ttl shortens the tokens already out.
	s.TTL = 24 * time.Hour
	long, err := s.Issue(context.Background(), Grant{APIKey: keyALive, Username: codeA, Password: passwordA, ClientIP: ipA})
	if err != nil {
		t.Fatal(err)
	}
	s.TTL = time.Hour
	c.advance(time.Hour - time.Millisecond)
	if _, err := s.Verify(long.Token); err != nil {
		t.Errorf("24 h token within the current 1 h TTL: %v", err)
	}
	c.advance(time.Millisecond)
	if _, err := s.Verify(long.Token); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("24 h token past the current 1 h TTL: %v, want ErrInvalidToken", err)
	}
	if _, err := s.Verify(""); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("empty token: %v, want ErrInvalidToken", err)
	}
}

// Verify runs on every bearer request on every node: docs/operations.md wants it
// free of database round trips.
func TestVerifyDoesNotTouchTheRepo(t *testing.T) {
	s, _, _ := newTestService(t)
	issued, err := s.Issue(context.Background(), grantA())
	if err != nil {
		t.Fatal(err)
	}
	s.Repo = untouchableRepo{t}
	if _, err := s.Verify(issued.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(issued.Token + "x"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("bad token: %v", err)
	}
}

func BenchmarkVerify(b *testing.B) {
	s, _, _ := newTestService(b)
	issued, err := s.Issue(context.Background(), grantA())
	if err != nil {
		b.Fatal(err)
	}
	s.Repo = untouchableRepo{b}
	s.Revocations.Add("key_of_someone_else")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Verify(issued.Token); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkIssue(b *testing.B) {
	s, _, _ := newTestService(b)
	ctx := context.Background()
	g := grantA()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Issue(ctx, g); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifyBaseline is the floor BenchmarkVerify is read against: one
// HMAC-SHA256 over a token-sized message, the cryptography a verification
// cannot avoid.
func BenchmarkVerifyBaseline(b *testing.B) {
	key := make([]byte, 32)
	msg := make([]byte, 60)
	b.ReportAllocs()
	for b.Loop() {
		m := hmac.New(sha256.New, key)
		m.Write(msg)
		_ = m.Sum(nil)
	}
}

// A genuine key beside another code counts against the client address
// only (docs/api.md): however many come, from however many addresses, the
// key's own merchant is not locked out of its right grant.
func TestKeyElsewhereDoesNotLockTheMerchant(t *testing.T) {
	s, _, _ := newTestService(t)
	for i := range 2 * 10 {
		g := grantA()
		g.Username, g.ClientIP = codeB, fmt.Sprintf("192.0.2.%d", i+1)
		if _, err := s.Issue(context.Background(), g); err != ErrKeyElsewhere {
			t.Fatalf("mismatch %d: %v", i, err)
		}
	}
	if _, err := s.Issue(context.Background(), grantA()); err != nil {
		t.Errorf("the key's merchant after %d mismatches: %v", 20, err)
	}
}

// An IPv6 client's failures are counted by its /64: a subscriber's
// network holds at least that many addresses, one for every guess. IPv4
// addresses stay apart.
func TestThrottleGroupsIPv6By64(t *testing.T) {
	s, _, _ := newTestService(t)
	ctx := context.Background()
	fail := func(ip string) error {
		g := grantA()
		g.APIKey, g.ClientIP = "kadi_test_guess", ip
		_, err := s.Issue(ctx, g)
		return err
	}
	for i := range DefaultThrottle.Free + 1 {
		if err := fail(fmt.Sprintf("2001:db8:1:2::%x", i+1)); err != ErrInvalidClient {
			t.Fatalf("guess %d: %v", i+1, err)
		}
	}
	var le *LockedError
	for _, ip := range []string{"2001:db8:1:2::ffff", "2001:db8:1:2:aaaa:bbbb:cccc:dddd"} {
		if err := fail(ip); !errors.As(err, &le) {
			t.Errorf("a fresh address in the same /64, %s: %v, want throttled", ip, err)
		}
	}
	for _, ip := range []string{"2001:db8:1:3::1", "203.0.113.8"} {
		if err := fail(ip); err != ErrInvalidClient {
			t.Errorf("an address elsewhere, %s: %v, want only refused", ip, err)
		}
	}
	for i := range DefaultThrottle.Free + 1 {
		if err := fail(fmt.Sprintf("198.51.100.%d", i+1)); errors.As(err, &le) {
			t.Fatalf("IPv4 address %d of a /24: %v; IPv4 addresses are counted apart", i+1, err)
		}
	}
}

// Sign-ins with a merchant code no merchant has are locked after as many
// failures as a real one's: a lock only real codes could reach would say
// which codes exist. Nothing is audit-logged for a merchant that is not.
func TestSignInLocksUnknownCodesAlike(t *testing.T) {
	s, repo, _ := newTestService(t)
	ctx := context.Background()
	lockedAfter := func(code string) int {
		for i := 1; i <= DefaultLockout.MaxFailures+1; i++ {
			ip := fmt.Sprintf("198.51.100.%d", i) // apart from the address throttle
			_, err := s.SignIn(ctx, code, "wrong password 1", ip)
			var le *LockedError
			if errors.As(err, &le) {
				return i
			}
			if err != ErrInvalidGrant {
				t.Fatalf("%s, attempt %d: %v", code, i, err)
			}
		}
		return 0
	}
	known, unknown := lockedAfter(codeB), lockedAfter("4999999999")
	if known == 0 || known != unknown {
		t.Errorf("locked after %d failures for a real code and %d for an unknown one; want the same", known, unknown)
	}
	for _, e := range repo.auditEvents() {
		if e.MerchantCode != codeB {
			t.Errorf("audit event %+v for no merchant", e)
		}
	}
	if _, err := s.SignIn(ctx, codeA, passwordA, "198.51.100.200"); err != nil {
		t.Errorf("another merchant's sign-in: %v", err)
	}
}

func TestLockedErrorSaysWhenInWords(t *testing.T) {
	for _, tt := range []struct {
		after time.Duration
		want  string
	}{
		{time.Second, "try again in 1 second"},
		{300 * time.Millisecond, "try again in 1 second"},
		{1500 * time.Millisecond, "try again in 2 seconds"},
		{1000*time.Millisecond + 500*time.Microsecond, "try again in 1 second"},
		{30 * time.Second, "try again in 30 seconds"},
		{30 * time.Minute, "try again in 30 minutes"},
		{59*time.Second + 500*time.Millisecond, "try again in 1 minute"},
		{60*time.Second + 30*time.Millisecond, "try again in 2 minutes"},
		{time.Minute, "try again in 1 minute"},
	} {
		if got := (&LockedError{RetryAfter: tt.after}).Error(); !strings.HasSuffix(got, tt.want) {
			t.Errorf("locked for %s: %q, want it to end %q", tt.after, got, tt.want)
		}
	}
}
