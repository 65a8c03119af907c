package debug

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// server holds what the operator's API handlers share. Handlers never touch actor
// memory: they ask actors (supervisors.Ask, buffered replies) and read the store
// in read-only transactions, so a slow debug client never holds an actor up.
type server struct {
	tree *supervisors.Tree
	opts Options
}

func newServer(tree *supervisors.Tree, opts Options) *server {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// A duration left zero (or negative) takes its default.
	opts.AskTimeout = cmp.Or(max(opts.AskTimeout, 0), 5*time.Second)
	opts.TreeEvery = cmp.Or(max(opts.TreeEvery, 0), 2*time.Second)
	opts.TransitionPoll = cmp.Or(max(opts.TransitionPoll, 0), 500*time.Millisecond)
	opts.StreamLifetime = cmp.Or(max(opts.StreamLifetime, 0), 30*time.Minute)
	opts.StreamWriteGrace = cmp.Or(max(opts.StreamWriteGrace, 0), 10*time.Second)
	return &server{tree: tree, opts: opts}
}

// routes adds the operator's API and the console to mux.
func (s *server) routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /debug/leases", s.leases)
	mux.HandleFunc("GET /debug/leases/{lease}", s.leaseHistory)
	mux.HandleFunc("GET /debug/outbox", s.outbox)
	mux.HandleFunc("GET /debug/freshness", s.freshness)
	mux.HandleFunc("GET /debug/transitions", s.transitions)
	mux.HandleFunc("GET /debug/domains", s.domains)
	mux.HandleFunc("GET /debug/events", s.events)
	mux.HandleFunc("GET /{$}", s.console)
}

// ask asks the actor at path, bounded by the request and AskTimeout.
func ask[R any](s *server, ctx context.Context, path messages.Address, build func(chan<- R) any) (R, error) {
	return supervisors.Ask(ctx, s.tree, path, s.opts.AskTimeout, build)
}

// writeError answers err as {"error": …}: 404 for ErrNotFound, 400 for
// ErrBadRequest, 503 for an actor that is busy, missing or did not answer, else 500.
func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, messages.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, messages.ErrBadRequest):
		status = http.StatusBadRequest
	case errors.Is(err, messages.ErrBusy), errors.Is(err, messages.ErrUnavailable),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// seconds is d in seconds, never negative (clocks of different actors).
func seconds(d time.Duration) float64 { return max(d.Seconds(), 0) }
