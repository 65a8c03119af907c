package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/berth-dev/berth/dockerio"
)

// eventBuffer decouples Docker's stream from a briefly busy consumer.
const eventBuffer = 256

// watchedEvents narrows an event subscription to the container events a lease
// acts on.
var watchedEvents = []filters.KeyValuePair{
	filters.Arg("type", string(events.ContainerEventType)),
	filters.Arg("event", string(events.ActionStart)),
	filters.Arg("event", string(events.ActionDie)),
	filters.Arg("event", string(events.ActionKill)),
	filters.Arg("event", string(events.ActionOOM)),
}

// Events streams start/die/kill/oom events of installationID's managed
// containers, adopted ones included. Exactly one error is delivered on the error
// channel when the stream ends (Docker closed it, the engine went away, or ctx
// ended: then ctx.Err()), and the event channel is closed at the same time; the
// caller reconnects with backoff. Events Docker sent before the end are
// delivered first.
//
// Docker's label filters cannot say "our installation label or an allow-listed
// ID": when the allow-list names containers, a second subscription by backend
// name brings the adopted ones' (an adopted container's death is then seen at
// once, not at the next reconcile pass), and the two end together.
func (e *Engine) Events(ctx context.Context) (<-chan dockerio.Event, <-chan error) {
	out := make(chan dockerio.Event, eventBuffer)
	errc := make(chan error, 1)
	streams, endStreams := context.WithCancel(ctx)
	own, ownErrs := e.docker.Events(streams, events.ListOptions{Filters: e.ownFilters(watchedEvents...)})
	var fred <-chan events.Message // nil without an adoption: never ready
	var fredErrs <-chan error
	if e.adoptsContainers() {
		fred, fredErrs = e.docker.Events(streams, events.ListOptions{Filters: e.fredFilters(watchedEvents...)})
	}
	ended := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return dockerErr("docker event stream", fmt.Errorf("ended: %w", err))
	}
	go func() {
		defer close(errc)
		defer close(out)
		defer endStreams()
		for {
			var m events.Message
			select {
			case m = <-own:
			case m = <-fred:
				if !e.opts.Adopted.OwnsContainer(m.Actor.ID, m.Actor.Attributes, e.opts.BackendName) {
					continue // berthd's own (the other stream has it) or not adopted
				}
			case err := <-ownErrs:
				errc <- ended(err)
				return
			case err := <-fredErrs:
				errc <- ended(err)
				return
			case <-ctx.Done():
				errc <- ctx.Err()
				return
			}
			select {
			case out <- toEvent(m):
			case <-ctx.Done():
				errc <- ctx.Err()
				return
			}
		}
	}()
	return out, errc
}

// toEvent maps a Docker container event; identity comes from the container's
// labels, which Docker copies into the event's attributes.
func toEvent(m events.Message) dockerio.Event {
	attrs := m.Actor.Attributes
	c := fromLabels(m.Actor.ID, attrs["name"], attrs)
	ev := dockerio.Event{
		Action:      string(m.Action),
		ContainerID: m.Actor.ID,
		Lease:       c.Lease,
		Service:     c.Service,
		Index:       c.Index,
		Generation:  c.Generation,
	}
	if code, err := strconv.Atoi(attrs["exitCode"]); err == nil {
		ev.ExitCode = code
	}
	switch {
	case m.TimeNano != 0:
		ev.At = time.Unix(0, m.TimeNano)
	case m.Time != 0:
		ev.At = time.Unix(m.Time, 0)
	}
	return ev
}
