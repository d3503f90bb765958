// Package logging builds the gateway's structured logger: JSON (or, for a
// terminal, text) lines that carry the request id and never a card number.
package logging

import (
	"context"
	"io"
	"log/slog"

	"github.com/kadipay/kadi/internal/card"
)

type ctxKey struct{}

// request is what a request's context carries for its log lines: its id,
// and what its handler noted for the one access line the request gets.
type request struct {
	id    string
	notes []any
}

// WithRequestID returns ctx carrying id, which every log line made with
// that context will show.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, &request{id: id})
}

// RequestID returns the id WithRequestID stored, or "".
func RequestID(ctx context.Context) string {
	if r, ok := ctx.Value(ctxKey{}).(*request); ok {
		return r.id
	}
	return ""
}

// Refused records why a request was refused (a 4xx: the client's doing,
// not an incident). Inside a request it goes on the request's access line
// (Notes), so a refusal costs one log line, not two; elsewhere it is a line
// of its own.
func Refused(ctx context.Context, log *slog.Logger, what string, args ...any) {
	if r, ok := ctx.Value(ctxKey{}).(*request); ok {
		r.notes = append(append(r.notes, "refused", what), args...)
		return
	}
	log.InfoContext(ctx, what, args...)
}

// Notes returns what Refused recorded for the request in ctx, as
// key-value pairs for its access line.
func Notes(ctx context.Context) []any {
	if r, ok := ctx.Value(ctxKey{}).(*request); ok {
		return r.notes
	}
	return nil
}

// New returns a JSON logger writing to w: one object a line, for log
// collectors.
func New(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(&redactor{next: slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})})
}

// NewText returns a logger writing key=value lines to w, for people at a
// terminal. It redacts exactly as New does.
func NewText(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(&redactor{next: slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})})
}

// redactor masks anything that looks like a card number in the message and
// in every string attribute, and adds the request id. It is the last line of
// defence: code should never log card data in the first place.
type redactor struct{ next slog.Handler }

func (h *redactor) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *redactor) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, card.Redact(r.Message), r.PC)
	// Gathered, then added at once: a record's attributes past its first
	// five live in a slice that each AddAttrs would otherwise regrow.
	var buf [10]slog.Attr
	attrs := buf[:0]
	if id := RequestID(ctx); id != "" {
		attrs = append(attrs, slog.String("request_id", id))
	}
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, redactAttr(a))
		return true
	})
	out.AddAttrs(attrs...)
	return h.next.Handle(ctx, out)
}

func (h *redactor) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = redactAttr(a)
	}
	return &redactor{next: h.next.WithAttrs(clean)}
}

func (h *redactor) WithGroup(name string) slog.Handler {
	return &redactor{next: h.next.WithGroup(name)}
}

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, card.Redact(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = redactAttr(g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, card.Redact(err.Error()))
		}
		return slog.String(a.Key, card.Redact(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
