package logging

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A failure every second for three minutes is four lines, not 180: the
// first, one a minute on and two minutes on with the count since, and one
// when it works again.
func TestRepeatedFailuresAreSaidOnceAMinute(t *testing.T) {
	var out bytes.Buffer
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	r := &Repeated{Log: slog.New(slog.NewTextHandler(&out, nil)), Now: func() time.Time { return now }}
	ctx := context.Background()
	r.OK(ctx, "claim IPN events") // working all along: nothing to say
	for range 180 {
		r.Fail(ctx, "claim IPN events", "err", errors.New("connection refused"))
		now = now.Add(time.Second)
	}
	r.OK(ctx, "claim IPN events")
	r.OK(ctx, "claim IPN events")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4 (the first, a minute on, two minutes on, the recovery):\n%s", len(lines), out.String())
	}
	if !strings.Contains(lines[0], "connection refused") || strings.Contains(lines[0], "not_logged") {
		t.Errorf("the first failure: %s", lines[0])
	}
	if !strings.Contains(lines[1], "not_logged=59") || !strings.Contains(lines[1], "failing_since=2026-11-27T10:00:00") {
		t.Errorf("a minute on: %s", lines[1])
	}
	if !strings.Contains(lines[3], "claim IPN events: working again") || !strings.Contains(lines[3], "level=INFO") || !strings.Contains(lines[3], "not_logged=59") {
		t.Errorf("the recovery: %s", lines[3])
	}
	// A new outage is said at once again.
	out.Reset()
	r.Fail(ctx, "claim IPN events", "err", errors.New("again"))
	if !strings.Contains(out.String(), "again") {
		t.Errorf("a new outage's first failure was not said: %q", out.String())
	}
}
