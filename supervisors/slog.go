package supervisors

import (
	"context"
	"log/slog"

	"github.com/rs/zerolog"
)

// SlogHandler routes protoactor's slog output into zerolog, dropping records below
// a floor (warn for the actor system: its info lines are per-actor noise).
type SlogHandler struct {
	log   zerolog.Logger
	floor slog.Level
	attrs []slog.Attr
	group string
}

// NewSlogHandler returns a handler writing to log at floor and above.
func NewSlogHandler(log zerolog.Logger, floor zerolog.Level) *SlogHandler {
	return &SlogHandler{log: log.With().Str("component", "protoactor").Logger(), floor: slogLevel(floor)}
}

func slogLevel(l zerolog.Level) slog.Level {
	switch {
	case l <= zerolog.DebugLevel:
		return slog.LevelDebug
	case l == zerolog.InfoLevel:
		return slog.LevelInfo
	case l == zerolog.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// Enabled implements slog.Handler.
func (h *SlogHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.floor }

// Handle implements slog.Handler.
func (h *SlogHandler) Handle(_ context.Context, r slog.Record) error {
	var ev *zerolog.Event
	switch {
	case r.Level >= slog.LevelError:
		ev = h.log.Error()
	case r.Level >= slog.LevelWarn:
		ev = h.log.Warn()
	case r.Level >= slog.LevelInfo:
		ev = h.log.Info()
	default:
		ev = h.log.Debug()
	}
	for _, a := range h.attrs {
		ev = addAttr(ev, h.group, a)
	}
	r.Attrs(func(a slog.Attr) bool {
		ev = addAttr(ev, h.group, a)
		return true
	})
	ev.Msg(r.Message)
	return nil
}

func addAttr(ev *zerolog.Event, group string, a slog.Attr) *zerolog.Event {
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	return ev.Interface(key, a.Value.Resolve().Any())
}

// WithAttrs implements slog.Handler.
func (h *SlogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr{}, h.attrs...), attrs...)
	return &c
}

// WithGroup implements slog.Handler.
func (h *SlogHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}
