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

// Events streams start/die/kill/oom events of installationID's managed
// containers. Exactly one error is delivered on the error channel when the stream
// ends (Docker closed it, the engine went away, or ctx ended: then ctx.Err()),
// and the event channel is closed at the same time; the caller reconnects with
// backoff. Events Docker sent before the end are delivered first.
func (e *Engine) Events(ctx context.Context) (<-chan dockerio.Event, <-chan error) {
	out := make(chan dockerio.Event, eventBuffer)
	errc := make(chan error, 1)
	msgs, derrs := e.docker.Events(ctx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)),
		filters.Arg("label", dockerio.LabelManaged+"=true"),
		filters.Arg("label", dockerio.LabelInstallation+"="+e.opts.InstallationID),
		filters.Arg("event", string(events.ActionStart)),
		filters.Arg("event", string(events.ActionDie)),
		filters.Arg("event", string(events.ActionKill)),
		filters.Arg("event", string(events.ActionOOM)),
	)})
	go func() {
		defer close(errc)
		defer close(out)
		for {
			select {
			case m := <-msgs:
				select {
				case out <- toEvent(m):
				case <-ctx.Done():
					errc <- ctx.Err()
					return
				}
			case err := <-derrs:
				if ctx.Err() != nil {
					errc <- ctx.Err()
				} else {
					errc <- dockerErr("docker event stream", fmt.Errorf("ended: %w", err))
				}
				return
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
