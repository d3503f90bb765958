package bill

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/merchant"
	"github.com/kadipay/kadi/internal/secret"
)

// memRepo keeps bills in memory. It honours the Repo contract only as far
// as the service relies on it; the real store has its own suite.
type memRepo struct {
	mu      sync.Mutex
	bills   []Bill
	collide int      // the next collide inserts fail as reference collisions
	tried   []string // every bill reference offered to InsertBill
	err     error    // returned by every call when set
}

func (r *memRepo) InsertBill(_ context.Context, b Bill) (Bill, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tried = append(r.tried, b.Reference)
	if r.err != nil {
		return Bill{}, false, r.err
	}
	if r.collide > 0 {
		r.collide--
		return Bill{}, false, ErrDuplicateReference
	}
	for _, x := range r.bills {
		if x.MerchantCode == b.MerchantCode && x.Mode == b.Mode && x.OrderReference == b.OrderReference {
			return x, false, nil
		}
	}
	for _, x := range r.bills {
		if x.Reference == b.Reference {
			return Bill{}, false, ErrDuplicateReference
		}
	}
	r.bills = append(r.bills, b)
	return b, true, nil
}

func (r *memRepo) find(match func(Bill) bool) (Bill, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return Bill{}, r.err
	}
	for _, x := range r.bills {
		if match(x) {
			return x, nil
		}
	}
	return Bill{}, ErrNotFound
}

func (r *memRepo) BillByReference(_ context.Context, code string, mode merchant.Mode, ref string) (Bill, error) {
	return r.find(func(b Bill) bool { return b.MerchantCode == code && b.Mode == mode && b.Reference == ref })
}

func (r *memRepo) BillByOrderReference(_ context.Context, code string, mode merchant.Mode, ref string) (Bill, error) {
	return r.find(func(b Bill) bool { return b.MerchantCode == code && b.Mode == mode && b.OrderReference == ref })
}

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newService() (*Service, *memRepo, *clock) {
	repo := &memRepo{}
	c := &clock{now: testNow}
	return &Service{Repo: repo, Policy: DefaultPolicy(), Now: c.Now}, repo, c
}

func decode(tb testing.TB, b body) Request {
	tb.Helper()
	req, err := DecodeRequest(b.bytes(tb))
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

// Bill references are read aloud and typed from receipts: no I, 1, O or 0.
var billReference = regexp.MustCompile(`^[A-HJ-NP-Z2-9]{12}$`)

func TestCreateStoresOpenBill(t *testing.T) {
	s, repo, _ := newService()
	b, replay, err := s.Create(context.Background(), testMerchant, merchant.Live, decode(t, validBody()))
	if err != nil {
		t.Fatal(err)
	}
	if replay {
		t.Error("first create reported as a replay")
	}
	if !billReference.MatchString(b.Reference) {
		t.Errorf("Reference = %q, want 12 of A-Z and 2-9 without I and O", b.Reference)
	}
	if b.Mode != merchant.Live || b.State != Open || !b.CreatedAt.Equal(testNow) || !b.ExpiresAt.Equal(testNow.Add(24*time.Hour)) {
		t.Errorf("bill = %+v, want live, open, created now, expiring in 24 h", b)
	}
	if b.MerchantCode != testMerchant.Code || b.OrderReference != "ORD1001" || b.Amount.Minor != 150000 {
		t.Errorf("bill = %+v, want the request's fields", b)
	}
	if len(repo.bills) != 1 || repo.bills[0] != b {
		t.Errorf("stored %+v, want exactly the returned bill", repo.bills)
	}
}

func TestCreateReferencesAreRandomAndWellFormed(t *testing.T) {
	s, _, _ := newService()
	seen := map[string]bool{}
	for i := range 300 {
		req := decode(t, validBody().with("order.reference", "R"+strconv.Itoa(i)))
		b, _, err := s.Create(context.Background(), testMerchant, merchant.Test, req)
		if err != nil {
			t.Fatal(err)
		}
		if !billReference.MatchString(b.Reference) {
			t.Fatalf("Reference = %q, want 12 of A-Z and 2-9 without I and O", b.Reference)
		}
		if seen[b.Reference] {
			t.Fatalf("Reference %q drawn twice", b.Reference)
		}
		seen[b.Reference] = true
	}
}

// createThenRetry creates a bill from first, then, after, sends retry: the
// first bill, the retry's answer, and how many bills are stored.
func createThenRetry(t *testing.T, first, retry body, after time.Duration) (Bill, Bill, bool, int, error) {
	t.Helper()
	s, repo, c := newService()
	ctx := context.Background()
	original, _, err := s.Create(ctx, testMerchant, merchant.Test, decode(t, first))
	if err != nil {
		t.Fatal(err)
	}
	c.now = c.now.Add(after)
	got, replay, err := s.Create(ctx, testMerchant, merchant.Test, decode(t, retry))
	return original, got, replay, len(repo.bills), err
}

func TestCreateIdempotency(t *testing.T) {
	original := validBody().with("order.amount", "1500.00")
	tests := []struct {
		name   string
		after  time.Duration
		retry  body
		replay bool  // the original bill comes back
		err    error // or this error
		differ string
	}{
		{"identical retry at once", 0, original, true, nil, ""},
		{"identical retry an hour later", time.Hour, original, true, nil, ""},
		{"identical retry just inside 24 h", 24*time.Hour - time.Millisecond, original, true, nil, ""},
		{"same meaning: 1500 for 1500.00", time.Minute, original.with("order.amount", "1500"), true, nil, ""},
		{"same meaning: JSON number", time.Minute, original.with("order.amount", raw("1500")), true, nil, ""},
		{"same meaning: unknown field added", time.Minute, original.with("customer.customerid", "C-17"), true, nil, ""},
		{"identical retry after exactly 24 h", 24 * time.Hour, original, false, ErrReferenceReused, ""},
		{"identical retry after 25 h", 25 * time.Hour, original, false, ErrReferenceReused, ""},
		{"different amount", time.Minute, original.with("order.amount", "1600.00"), false, ErrReferenceReused, "order.amount"},
		{"different name", time.Minute, original.with("customer.name", "Amina Otieno"), false, ErrReferenceReused, "customer.name"},
		{"different name and amount", time.Minute, original.with("customer.name", "Amina Otieno").with("order.amount", "1"), false, ErrReferenceReused, "customer.name order.amount"},
		{"different description", time.Minute, original.with("order.description", "Order 2"), false, ErrReferenceReused, "order.description"},
		{"different currency", time.Minute, original.with("order.currency", "USD"), false, ErrReferenceReused, "order.currency"},
		{"different outlet", time.Minute, original.with("order.outlet", "80010002"), false, ErrReferenceReused, "order.outlet"},
		{"expiry added", time.Minute, original.with("order.expiry", "2026-03-16T18:00:00Z"), false, ErrReferenceReused, "order.expiry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			first, got, replay, stored, err := createThenRetry(t, original, tt.retry, tt.after)
			if tt.err != nil {
				if !errors.Is(err, tt.err) || replay {
					t.Fatalf("retry = %+v, replay %v, err %v; want %v", got, replay, err, tt.err)
				}
				// What differs is named, so the integrator knows what to
				// fix (none: the bill is older than the retry window).
				var reused *ReusedError
				if !errors.As(err, &reused) || strings.Join(reused.Differ, " ") != tt.differ {
					t.Errorf("the refusal names %v as different, want %q", reused, tt.differ)
				}
				return
			}
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if replay != tt.replay || got.Reference != first.Reference || got.RequestHash != first.RequestHash {
				t.Errorf("retry = %s (replay %v), want the original %s (replay %v)", got.Reference, replay, first.Reference, tt.replay)
			}
			if stored != 1 {
				t.Errorf("%d bills stored, want 1", stored)
			}
		})
	}
}

func TestCreateDrawsAnotherReferenceOnCollision(t *testing.T) {
	s, repo, _ := newService()
	repo.collide = 3
	b, _, err := s.Create(context.Background(), testMerchant, merchant.Test, decode(t, validBody()))
	if err != nil {
		t.Fatalf("Create after 3 collisions: %v", err)
	}
	if len(repo.tried) != 4 {
		t.Fatalf("tried %d references, want 4", len(repo.tried))
	}
	seen := map[string]bool{}
	for _, ref := range repo.tried {
		if seen[ref] {
			t.Errorf("reference %q offered twice: %v", ref, repo.tried)
		}
		seen[ref] = true
	}
	if b.Reference != repo.tried[3] {
		t.Errorf("bill has reference %q, want the last one tried %q", b.Reference, repo.tried[3])
	}
}

func TestCreateGivesUpOnEndlessCollisions(t *testing.T) {
	s, repo, _ := newService()
	repo.collide = 1_000_000
	b, _, err := s.Create(context.Background(), testMerchant, merchant.Test, decode(t, validBody()))
	if err == nil || errors.Is(err, ErrReferenceReused) {
		t.Fatalf("Create = %+v, %v; want an internal error", b, err)
	}
	if len(repo.tried) > 100 {
		t.Errorf("tried %d references before giving up", len(repo.tried))
	}
}

func TestCreateStoreError(t *testing.T) {
	s, repo, _ := newService()
	repo.err = errors.New("disk full")
	_, _, err := s.Create(context.Background(), testMerchant, merchant.Test, decode(t, validBody()))
	if !errors.Is(err, repo.err) {
		t.Fatalf("error = %v, want it to wrap %v", err, repo.err)
	}
}

func TestCreateInvalidStoresNothing(t *testing.T) {
	s, repo, _ := newService()
	_, _, err := s.Create(context.Background(), testMerchant, merchant.Test, decode(t, validBody().with("order.amount", "0")))
	wantOnly(t, err, "order.amount", CodeNotPositive)
	if len(repo.tried) != 0 {
		t.Errorf("an invalid request reached the store")
	}
}

func TestFindEither(t *testing.T) {
	s, repo, _ := newService()
	find := func(ctx context.Context, code string, mode merchant.Mode, ref string) (Bill, error) {
		return FindEither(ref, func(byOrderReference bool) (Bill, error) {
			if byOrderReference {
				return repo.BillByOrderReference(ctx, code, mode, ref)
			}
			return repo.BillByReference(ctx, code, mode, ref)
		})
	}
	ctx := context.Background()
	mine, _, err := s.Create(ctx, testMerchant, merchant.Test, decode(t, validBody().with("order.reference", "ORD1")))
	if err != nil {
		t.Fatal(err)
	}
	// An order reference that looks like another bill's reference must
	// still find the bill whose reference it is.
	lookalike, _, err := s.Create(ctx, testMerchant, merchant.Test, decode(t, validBody().with("order.reference", mine.Reference)))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		code string
		mode merchant.Mode
		ref  string
		want string // bill reference, or "" for ErrNotFound
	}{
		{"by bill reference, before another bill's equal order reference", testMerchant.Code, merchant.Test, mine.Reference, mine.Reference},
		{"by order reference", testMerchant.Code, merchant.Test, "ORD1", mine.Reference},
		{"lookalike by its own reference", testMerchant.Code, merchant.Test, lookalike.Reference, lookalike.Reference},
		{"unknown", testMerchant.Code, merchant.Test, "NOSUCHBILL", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := find(ctx, tt.code, tt.mode, tt.ref)
			if tt.want == "" {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("Find(%q) = %+v, %v; want ErrNotFound", tt.ref, b, err)
				}
				return
			}
			if err != nil || b.Reference != tt.want {
				t.Fatalf("Find(%q) = %q, %v; want %q", tt.ref, b.Reference, err, tt.want)
			}
		})
	}

	t.Run("store error is not a miss", func(t *testing.T) {
		repo.err = errors.New("connection reset")
		defer func() { repo.err = nil }()
		if _, err := find(ctx, testMerchant.Code, merchant.Test, mine.Reference); !errors.Is(err, repo.err) {
			t.Fatalf("error = %v, want %v", err, repo.err)
		}
	})
}

// Only a value shaped like a bill reference costs a look-up as one; every
// reference ever drawn has that shape, old alphabet included.
func TestCouldBeReference(t *testing.T) {
	for ref, want := range map[string]bool{
		"ABCDEFGHJKLM": true, "23456789ABCD": true,
		"ABCDEFGHI10O": true, // drawn before the unambiguous alphabet
		"ORD1":         false, "NOSUCHBILL": false, "ABCDEFGHJKLMN": false,
		"abcdefghjklm": false, "ABCDEFGHJKL-": false, "ABCDEFGHJKLÉ": false, "": false,
	} {
		if got := CouldBeReference(ref); got != want {
			t.Errorf("CouldBeReference(%q) = %v, want %v", ref, got, want)
		}
	}
	for range 100 {
		if ref := secret.RandomString(12, secret.Unambiguous); !CouldBeReference(ref) {
			t.Fatalf("a drawn reference %q is not shaped like one", ref)
		}
	}
}

// An identical retry is judged as of the original request: its
// order.expiry having passed since does not turn the bill it names into a
// refusal (decisions.md §4: "safe to retry on a network error"). Anything
// else that differs, or a retry after the window, still fails.
func TestCreateRetryAfterItsExpiryPassed(t *testing.T) {
	original := validBody().with("order.expiry", testNow.Add(10*time.Minute).Format(time.RFC3339))
	for _, tt := range []struct {
		name   string
		after  time.Duration
		retry  body
		replay bool
	}{
		{"identical, the expiry passed", 20 * time.Minute, original, true},
		{"another amount, the expiry passed", 20 * time.Minute, original.with("order.amount", "1600.00"), false},
		{"identical, after the window", 25 * time.Hour, original, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first, got, replay, stored, err := createThenRetry(t, original, tt.retry, tt.after)
			var v *ValidationError
			switch {
			case tt.replay && (err != nil || !replay || got.Reference != first.Reference):
				t.Errorf("retry = %s, replay %v, %v; want the original %s", got.Reference, replay, err, first.Reference)
			case !tt.replay && !errors.As(err, &v):
				t.Errorf("retry = %s, replay %v, %v; want the expiry refused", got.Reference, replay, err)
			}
			if stored != 1 {
				t.Errorf("%d bills stored, want 1", stored)
			}
		})
	}
}

// A far-off expiry is capped; a retry naming it in another offset (a
// client's one time.Time formatted in UTC on the retry) gets the bill, as
// an uncapped one does, and one asking an expiry within the cap does not.
func TestCreateRetryOfACappedExpiry(t *testing.T) {
	original := validBody().with("order.expiry", "2030-01-17T00:00:00+03:00")
	for _, tt := range []struct {
		retry  body
		replay bool
	}{
		{original.with("order.expiry", "2030-01-16T21:00:00Z"), true},
		{original.with("order.expiry", "2030-01-17T00:00:00"), true}, // the operator's zone, Nairobi
		{original.with("order.expiry", "2026-03-16T18:00:00Z"), false},
	} {
		first, got, replay, stored, err := createThenRetry(t, original, tt.retry, time.Minute)
		switch {
		case tt.replay && (err != nil || !replay || got.Reference != first.Reference):
			t.Errorf("%s: %+v, replay %v, %v; want the original bill", tt.retry, got, replay, err)
		case !tt.replay && !errors.Is(err, ErrReferenceReused):
			t.Errorf("%s: %v, want %v", tt.retry, err, ErrReferenceReused)
		case stored != 1:
			t.Errorf("%s: %d bills stored", tt.retry, stored)
		}
	}
}
