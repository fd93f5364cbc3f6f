package scrub

import (
	"context"
	"fmt"
	"log/slog"
)

// handler cleans every record before its inner handler sees it.
type handler struct {
	inner slog.Handler
	r     *Redactor
}

// NewHandler returns a handler that cleans each record's message and
// attributes with r (strings, errors, and any value whose text holds
// something to clean) and passes it to inner: the daemon's log, whoever
// writes to it, holds no secret the daemon knows.
func NewHandler(inner slog.Handler, r *Redactor) slog.Handler {
	return &handler{inner: inner, r: r}
}

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.inner.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Clean(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &handler{inner: h.inner.WithAttrs(clean), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{inner: h.inner.WithGroup(name), r: h.r}
}

// attr is a, cleaned.
func (h *handler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.Clean(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.Clean(err.Error()))
		}
		text := fmt.Sprint(v.Any())
		if c := h.r.Clean(text); c != text {
			return slog.String(a.Key, c)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// Logger returns l with its records cleaned by r; l itself when r cleans
// them already.
func Logger(l *slog.Logger, r *Redactor) *slog.Logger {
	if h, ok := l.Handler().(*handler); ok && h.r == r {
		return l
	}
	return slog.New(NewHandler(l.Handler(), r))
}
