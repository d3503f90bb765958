package auth

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kadipay/kadi/internal/outage"
)

func TestRevocations(t *testing.T) {
	ctx := context.Background()
	r := NewRevocations()
	if r.Revoked("key_1") {
		t.Fatal("empty set reports key_1 revoked")
	}
	r.Add("key_1")
	if !r.Revoked("key_1") || r.Revoked("key_2") {
		t.Fatal("Add revoked the wrong keys")
	}

	repo := newFakeRepo()
	repo.revoked = []string{"key_2", "key_3"}
	if err := r.Refresh(ctx, repo, tokenNow); err != nil {
		t.Fatal(err)
	}
	// Revocations are kept longer than any token can live, whatever the
	// configured TTL: a restart with a shorter one must forget nothing.
	if since := tokenNow.Add(-RevocationWindow); !repo.since.Equal(since) || RevocationWindow <= MaxTokenTTL {
		t.Errorf("RevokedKeys asked since %v, want %v (beyond MaxTokenTTL %v)", repo.since, since, MaxTokenTTL)
	}
	// The database is the truth: a local Add older than the window goes.
	for key, want := range map[string]bool{"key_1": false, "key_2": true, "key_3": true} {
		if got := r.Revoked(key); got != want {
			t.Errorf("after Refresh, Revoked(%s) = %v, want %v", key, got, want)
		}
	}

	repo.revokedErr = errors.New("database down")
	repo.revoked = nil
	if err := r.Refresh(ctx, repo, tokenNow); !errors.Is(err, repo.revokedErr) {
		t.Fatalf("Refresh error = %v, want %v", err, repo.revokedErr)
	}
	if !r.Revoked("key_2") {
		t.Error("a failed Refresh forgot revoked keys")
	}
}

func TestRevocationsWatch(t *testing.T) {
	repo := newFakeRepo()
	repo.revoked = []string{"key_rotated"}
	r := NewRevocations()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Watch(ctx, repo, time.Millisecond, func() time.Time { return tokenNow }, slog.New(slog.DiscardHandler))
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !r.Revoked("key_rotated") {
		if time.Now().After(deadline) {
			t.Fatal("Watch never refreshed")
		}
		time.Sleep(time.Millisecond)
	}
	repo.mu.Lock()
	since := repo.since
	repo.mu.Unlock()
	// Watch reads the clock it is given: keys revoked within the longest
	// token lifetime before it must be fetched.
	if want := tokenNow.Add(-RevocationWindow); !since.Equal(want) {
		t.Errorf("Watch asked for keys revoked since %v, want %v", since, want)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Watch did not stop when its context ended")
	}
}

// A refresh that hangs ends, and the next one brings the revocations in.
func TestRevocationsWatchOutlastsAHungRefresh(t *testing.T) {
	repo := newFakeRepo()
	repo.revoked, repo.revokedHangs = []string{"key_rotated"}, 1
	r := NewRevocations()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Watch(ctx, repo, time.Millisecond, func() time.Time { return tokenNow }, slog.New(slog.DiscardHandler))
	deadline := time.Now().Add(30 * time.Second)
	for !r.Revoked("key_rotated") {
		if time.Now().After(deadline) {
			t.Fatal("Watch never refreshed after a refresh that hung")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRevocationsConcurrent(t *testing.T) {
	r := NewRevocations()
	repo := newFakeRepo()
	repo.revoked = []string{"a", "b"}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for range 200 {
				switch i {
				case 0:
					r.Add("c")
				case 1:
					_ = r.Refresh(context.Background(), repo, time.Time{})
				default:
					r.Revoked("a")
				}
			}
		})
	}
	wg.Wait()
	if !r.Revoked("a") {
		t.Error("key a lost")
	}
}

// A node that cannot read the revoked keys for a while refuses tokens as
// in an outage (503, not 401): a key rotated on another node meanwhile
// must not keep working here. A node that reads them again takes tokens
// again; a set nobody watches (tests, tools) is always known.
func TestVerifyRefusesTokensWhileRevocationsAreUnread(t *testing.T) {
	s, repo, _ := newTestService(t)
	issued, err := s.Issue(context.Background(), grantA())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Verify(issued.Token); err != nil {
		t.Fatalf("never watched: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Revocations.Watch(ctx, repo, time.Millisecond, func() time.Time { return tokenNow }, slog.New(slog.DiscardHandler))
	until := func(what string, ok func(error) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := s.Verify(issued.Token)
			if ok(err) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Verify still says %v", what, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	until("watched, read", func(err error) bool { return err == nil && s.Revocations.staleAfter.Load() != 0 })
	s.Revocations.staleAfter.Store(int64(50 * time.Millisecond)) // Watch's is 5 s at least
	setErr := func(err error) {
		repo.mu.Lock()
		repo.revokedErr = err
		repo.mu.Unlock()
	}
	setErr(errors.New("database down"))
	until("unread for longer than allowed", func(err error) bool {
		return errors.Is(err, ErrRevocationsUnknown) && outage.Is(err) && !errors.Is(err, ErrInvalidToken)
	})
	setErr(nil)
	until("read again", func(err error) bool { return err == nil })
}

func TestStaleAfterOutlastsSlowReads(t *testing.T) {
	for _, interval := range []time.Duration{time.Millisecond, time.Second, 10 * time.Second} {
		// Each refresh may take twice the interval, a second at least
		// (Watch): one that hangs and the next one's wait fit in.
		if got := staleAfter(interval); got < interval+2*max(2*interval, time.Second) {
			t.Errorf("staleAfter(%v) = %v: a slow read and a failed one would turn tokens away", interval, got)
		}
	}
}
