package fake

import (
	"context"
	"errors"
	"fmt"

	"github.com/berth-dev/berth/dockerio"
)

// eventBuffer is each stream's backlog; a consumer that falls further behind
// has its stream ended (and must reconnect), never silently loses events.
const eventBuffer = 1024

// ErrSlowConsumer ends a stream whose consumer let eventBuffer events pile up.
var ErrSlowConsumer = errors.New("fake: event consumer too slow")

type subscriber struct {
	installation string
	ch           chan dockerio.Event
	errc         chan error
	quit         chan struct{}
}

// Events streams start/kill/die/oom events of installationID's managed
// containers. Like the real engine, exactly one error arrives on the error
// channel when the stream ends (ctx.Err() when ctx ended) and both channels close.
func (e *Engine) Events(ctx context.Context) (<-chan dockerio.Event, <-chan error) {
	installationID := e.opts.InstallationID
	s := &subscriber{
		installation: installationID,
		ch:           make(chan dockerio.Event, eventBuffer),
		errc:         make(chan error, 1),
		quit:         make(chan struct{}),
	}
	if err := e.enter(ctx, OpEvents); err != nil {
		s.errc <- fmt.Errorf("docker event stream: %w", err)
		close(s.ch)
		close(s.errc)
		return s.ch, s.errc
	}
	e.mu.Lock()
	e.subs[s] = struct{}{}
	e.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
			e.mu.Lock()
			e.endStreamLocked(s, ctx.Err())
			e.mu.Unlock()
		case <-s.quit:
		}
	}()
	return s.ch, s.errc
}

func (e *Engine) endStreamLocked(s *subscriber, err error) {
	if _, open := e.subs[s]; !open {
		return
	}
	delete(e.subs, s)
	s.errc <- err
	close(s.ch)
	close(s.errc)
	close(s.quit)
}

func (e *Engine) endStreamsLocked(err error) {
	for s := range e.subs {
		e.endStreamLocked(s, err)
	}
}

// emitLocked delivers one event of c to the streams of its installation.
func (e *Engine) emitLocked(c *fakeContainer, action string) {
	ev := dockerio.Event{
		Action:      action,
		ContainerID: c.c.ID,
		Lease:       c.c.Lease,
		Service:     c.c.Service,
		Index:       c.c.Index,
		Generation:  c.c.Generation,
		At:          e.now(),
	}
	if action == "die" {
		ev.ExitCode = c.c.ExitCode
	}
	for s := range e.subs {
		if s.installation != c.installation {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			e.endStreamLocked(s, ErrSlowConsumer)
		}
	}
}
