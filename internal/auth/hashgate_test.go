package auth

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestHashGate(t *testing.T) {
	ctx := context.Background()
	g := NewHashGate(2, 1, time.Minute)
	r1, err1 := g.acquire(ctx)
	r2, err2 := g.acquire(ctx)
	if err1 != nil || err2 != nil {
		t.Fatalf("free slots refused: %v, %v", err1, err2)
	}

	// One may wait in line; it gets the slot a release frees.
	got := make(chan error, 1)
	go func() {
		r, err := g.acquire(ctx)
		if err == nil {
			defer r()
		}
		got <- err
	}()
	for g.waiting.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	// The line is full: the next is turned away at once, not after the wait.
	start := time.Now()
	if _, err := g.acquire(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("beyond the line: %v, want ErrBusy", err)
	}
	if waited := time.Since(start); waited >= 30*time.Second {
		t.Errorf("a request beyond the line waited %v", waited)
	}
	r1()
	if err := <-got; err != nil {
		t.Fatalf("waiter after a release: %v", err)
	}

	r2()

	// With every slot held for longer than the wait, the waiter gives up.
	g = NewHashGate(1, 1, 10*time.Millisecond)
	r, _ := g.acquire(ctx)
	defer r()
	if _, err := g.acquire(ctx); !errors.Is(err, ErrBusy) {
		t.Fatalf("after the wait: %v, want ErrBusy", err)
	}

	// A caller that goes away stops waiting.
	g.maxWait = time.Minute
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := g.acquire(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	if _, err := (*HashGate)(nil).acquire(ctx); err != nil {
		t.Fatalf("nil gate: %v", err)
	}
}
