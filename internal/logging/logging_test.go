package logging_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/kadipay/kadi/internal/logging"
)

const pan = "4242424242424242"

// Every way a card number can reach a log line comes out masked: message,
// string attributes, errors, groups, With attributes, fmt.Stringer values.
func TestRedactsCardNumbersEverywhere(t *testing.T) {
	cases := []struct {
		name string
		log  func(l *slog.Logger, ctx context.Context)
	}{
		{"message", func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "charging "+pan) }},
		{"spaced in message", func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "card 4242 4242 4242 4242 declined") }},
		{"string attr", func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "x", "body", "cardNumber="+pan+"&cvv=1") }},
		{"error attr", func(l *slog.Logger, ctx context.Context) {
			l.ErrorContext(ctx, "x", "err", fmt.Errorf("acquirer said: bad card %s", pan))
		}},
		{"group", func(l *slog.Logger, ctx context.Context) {
			l.InfoContext(ctx, "x", slog.Group("req", slog.String("form", "n="+pan)))
		}},
		{"with attrs", func(l *slog.Logger, ctx context.Context) { l.With("card", pan).InfoContext(ctx, "x") }},
		{"stringer", func(l *slog.Logger, ctx context.Context) { l.InfoContext(ctx, "x", "v", stringer(pan)) }},
		{"wrapped error chain", func(l *slog.Logger, ctx context.Context) {
			l.WarnContext(ctx, "x", "err", errors.Join(errors.New("a"), errors.New(pan)))
		}},
	}
	formats := []struct {
		name string
		new  func(io.Writer, slog.Level) *slog.Logger
	}{{"json", logging.New}, {"text", logging.NewText}}
	for _, tc := range cases {
		for _, f := range formats {
			t.Run(f.name+" "+tc.name, func(t *testing.T) {
				var buf bytes.Buffer
				tc.log(f.new(&buf, slog.LevelDebug), context.Background())
				out := buf.String()
				if out == "" {
					t.Fatal("nothing logged")
				}
				if strings.Contains(strings.ReplaceAll(out, " ", ""), pan) {
					t.Errorf("card number in clear: %s", out)
				}
				if !strings.Contains(out, "424242******4242") {
					t.Errorf("masked form missing, so the redactor was not applied: %s", out)
				}
			})
		}
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// The request id travels in the context into every line, and other text
// (amounts, references) is left alone.
func TestRequestIDAndOtherTextKept(t *testing.T) {
	var buf bytes.Buffer
	l := logging.New(&buf, slog.LevelInfo)
	ctx := logging.WithRequestID(context.Background(), "req_abc123")
	l.InfoContext(ctx, "bill created", "amount", "1500.00", "order", "ORD1001", "count", 3)
	out := buf.String()
	for _, want := range []string{`"request_id":"req_abc123"`, `"amount":"1500.00"`, `"order":"ORD1001"`, `"count":3`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in %s", want, out)
		}
	}
	if got := logging.RequestID(ctx); got != "req_abc123" {
		t.Errorf("RequestID = %q", got)
	}
	buf.Reset()
	l.DebugContext(ctx, "hidden")
	if buf.Len() != 0 {
		t.Errorf("debug line logged at info level: %s", buf.String())
	}
}
