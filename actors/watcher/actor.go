// Package watcher follows Docker's event stream for this installation's managed
// containers and forwards every death, with the container's lease and generation,
// to that lease through the registry. The stream reader never blocks: deaths go
// through a bounded queue (4096) to a dispatcher, and a full queue drops — counted,
// never silently. A reconnect (backoff 1 s doubling to 30 s, jittered) forgets what the last
// session saw, so a death whose start it did not see is attributed unknown.
package watcher

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Actor owns the stream reader and the dispatcher goroutines.
type Actor struct {
	*Deps
	tasks     *supervisors.Tasks
	connected atomic.Bool
	sessions  atomic.Int64
}

// Tasks are the watcher's reader, dispatcher and health pings.
func (a *Actor) Tasks() *supervisors.Tasks { return a.tasks }

// New returns the producer of the watcher.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		return &Actor{Deps: deps}
	}
}

// death is one observed death on its way to its lease.
type death struct {
	lease string
	msg   *messages.ContainerDied
}

// Receive starts the goroutines with the actor's life (the kit stops them).
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.GetDockerHealth:
		a.dockerHealth(m)
	case *actor.Started:
		a.tasks = supervisors.NewTasks(c, 0)
		queue := make(chan death, a.Settings.QueueSize)
		a.tasks.Go("event-reader", func(ctx context.Context) any { a.read(ctx, queue); return nil })
		a.tasks.Go("death-dispatcher", func(ctx context.Context) any { a.dispatch(ctx, queue); return nil })
	}
}

// dockerHealth answers whether Docker is reachable: at once while the event stream
// is connected, else from a short ping off the actor (the asker's reply channel is
// buffered, so the ping goroutine never blocks).
func (a *Actor) dockerHealth(m *messages.GetDockerHealth) {
	if a.connected.Load() {
		m.Reply <- messages.DockerHealthReply{Reachable: true}
		return
	}
	a.tasks.Go("docker-ping", func(ctx context.Context) any {
		// The ping runs its 2 s even while the watcher stops: a stop is no
		// reason to tell an asker Docker is unreachable.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := a.Engine.Ping(ctx); err != nil {
			a.Log.Warn().Err(err).Msg("health: docker")
			m.Reply <- messages.DockerHealthReply{Reason: "docker engine unreachable"}
			return nil
		}
		m.Reply <- messages.DockerHealthReply{Reachable: true}
		return nil
	})
}

// Describe summarises the watcher for /debug/actors.
func (a *Actor) Describe() (string, int) {
	return fmt.Sprintf("connected=%t sessions=%d", a.connected.Load(), a.sessions.Load()), 0
}

// read keeps one subscription at a time and tracks, per session, which runs it saw
// start and whether they were killed.
func (a *Actor) read(ctx context.Context, queue chan<- death) {
	backoff, failed := supervisors.Retry{Base: a.Settings.BackoffBase, Cap: a.Settings.BackoffCap}, 0
	for ctx.Err() == nil {
		a.Metrics.stream.WithLabelValues("connected").Inc()
		events, errs := a.Engine.Events(ctx)
		a.connected.Store(true)
		a.sessions.Add(1)
		// Deaths before this session (a reconnect gap, or a restart of the watcher)
		// were missed: have the reconciler look now — it attributes them unknown —
		// instead of at its next interval.
		a.Tree.Send(a.Settings.ReconcilerPath, messages.RecoverNow{})
		began := time.Now()
		type run struct{ started, killed bool }
		runs := make(map[string]*run) // this session only: a reconnect forgets
		healthy := false
	session:
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-events:
				if !ok {
					break session
				}
				healthy = true
				a.Metrics.events.WithLabelValues(ev.Action).Inc()
				r := runs[ev.ContainerID]
				if r == nil {
					r = &run{}
					runs[ev.ContainerID] = r
				}
				switch ev.Action {
				case "start":
					*r = run{started: true}
				case "kill":
					r.killed = true
				case "die":
					d := death{lease: ev.Lease, msg: &messages.ContainerDied{ContainerID: ev.ContainerID,
						Generation: ev.Generation, ExitCode: ev.ExitCode, Counted: r.started && !r.killed}}
					delete(runs, ev.ContainerID)
					select {
					case queue <- d:
						a.Metrics.depth.Set(float64(len(queue)))
					default:
						a.Metrics.dropped.WithLabelValues("queue_full").Inc()
					}
				}
			case err := <-errs:
				if err != nil && ctx.Err() == nil {
					a.Log.Warn().Err(err).Msg("docker event stream ended; reconnecting")
				}
				break session
			}
		}
		a.connected.Store(false)
		a.Metrics.stream.WithLabelValues("reconnect").Inc()
		if healthy || time.Since(began) > a.Settings.BackoffCap {
			failed = 0 // the session worked: start over
		}
		failed++
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff.Jittered(failed)):
		}
	}
}

// dispatch routes deaths to their leases through the registry. Send never waits,
// and the registry drops (and counts, via the callback) what a busy lease cannot
// take, so a slow lease never stalls the stream.
func (a *Actor) dispatch(ctx context.Context, queue <-chan death) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-queue:
			a.Metrics.depth.Set(float64(len(queue)))
			a.Tree.Send(a.Settings.RegistryPath, &messages.Deliver{Lease: d.lease, Msg: d.msg,
				Dropped: func() { a.Metrics.dropped.WithLabelValues("undeliverable").Inc() }})
		}
	}
}
