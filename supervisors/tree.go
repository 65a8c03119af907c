// Package supervisors builds berth's actor tree: the root actor under a guardian
// with capped exponential backoff, the strategies below it, the receiver middleware
// every actor runs (metrics, Describe, chaos), restart accounting, and the way out
// (guardian give-up → drain → exit 1).
package supervisors

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/berth-dev/berth/messages"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// RootPath is the PID id of the root actor.
const RootPath = messages.Root

// Options configure a tree.
type Options struct {
	Logger     zerolog.Logger
	Registerer prometheus.Registerer // nil: metrics are kept but not registered
	Chaos      bool                  // debug.chaos: Crash messages panic their target
	Guardian   Backoff               // zero value = DefaultBackoff()
	Below      Backoff               // the root's children's; zero value = DefaultBackoff()
	// Children builds root's children (given the tree, which they usually need);
	// they are spawned in order on every (re)start of the root.
	Children func(t *Tree) []Spec
}

// Tree is a running actor system with berth's bookkeeping.
type Tree struct {
	System  *actor.ActorSystem
	Dir     *Directory
	Metrics *Metrics
	Awaits  *Awaits // the open waits on actors (berth_actor_awaiting_seconds)

	log           zerolog.Logger
	chaos         bool
	childStrategy actor.SupervisorStrategy
	root          *actor.PID

	fatalOnce sync.Once
	fatal     chan error
	stopped   chan struct{}
	draining  atomic.Bool // Stop was called: an actor stopping now is not restarted
	sub       *subscriptionHandle
}

type subscriptionHandle struct{ stop func() }

// Start creates the actor system and spawns the root with its children.
func Start(opts Options) (*Tree, error) {
	t := &Tree{
		Dir:     NewDirectory(),
		log:     opts.Logger,
		chaos:   opts.Chaos,
		fatal:   make(chan error, 1),
		stopped: make(chan struct{}),
	}
	t.Metrics, t.Awaits = NewMetrics(opts.Registerer, t.Dir), &Awaits{}
	if opts.Registerer != nil {
		opts.Registerer.MustRegister(t.Awaits)
	}
	t.System = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(NewSlogHandler(opts.Logger, zerolog.WarnLevel))
	}))
	sub := t.System.EventStream.Subscribe(t.onSystemEvent)
	t.sub = &subscriptionHandle{stop: func() { t.System.EventStream.Unsubscribe(sub) }}

	// Below the root: backoff, then escalate, so a child that keeps failing takes the
	// root (and with it the whole tree) through the guardian's own backoff.
	below := opts.Below
	if below.Base == 0 {
		below = DefaultBackoff()
	}
	t.childStrategy = below.tracked()

	policy := opts.Guardian
	if policy.Base == 0 {
		policy = DefaultBackoff()
	}
	guardian := policy.tracked()
	guardian.GiveUp = func(_ *actor.PID, reason any) {
		t.Fail(fmt.Errorf("root gave up after %d failures within %s: %v", guardian.MaxFailures, guardian.Window, reason))
	}

	var children []Spec
	if opts.Children != nil {
		children = opts.Children(t)
	}
	node := &Node{Path: string(RootPath), Kind: "root"}
	props := actor.PropsFromProducer(func() actor.Actor { return &rootActor{tree: t, children: children} },
		actor.WithMailbox(actor.Unbounded(mailboxCounter{node})),
		actor.WithReceiverMiddleware(t.middleware(node)),
		actor.WithSupervisor(t.childStrategy),
		actor.WithGuardian(guardian), // a pointer: protoactor keys guardians by strategy value
	)
	pid, err := t.System.Root.SpawnNamed(props, string(RootPath))
	if err != nil {
		return nil, fmt.Errorf("spawn root: %w", err)
	}
	t.Dir.put(node)
	t.root = pid
	return t, nil
}

// Fail records a fatal cause (guardian give-up, storage latch) once; Fatal delivers it.
func (t *Tree) Fail(cause error) {
	t.fatalOnce.Do(func() {
		t.log.Error().Err(cause).Msg("actor tree failed; draining")
		t.fatal <- cause
	})
}

// Fatal delivers the first fatal cause.
func (t *Tree) Fatal() <-chan error { return t.fatal }

// Stopped is closed once the root has stopped (all children drained).
func (t *Tree) Stopped() <-chan struct{} { return t.stopped }

// Draining reports whether the tree is being stopped for good: an actor's
// Stopping is then the end, not a supervisor's restart.
func (t *Tree) Draining() bool { return t.draining.Load() }

// Stop stops the root, which stops its children last-spawned first (the facade
// before the actors it talks to), and waits for the drain or ctx.
func (t *Tree) Stop(ctx context.Context) error {
	t.draining.Store(true)
	t.System.Root.Stop(t.root)
	select {
	case <-t.stopped:
		t.sub.stop()
		t.System.Shutdown()
		return nil
	case <-ctx.Done():
		return fmt.Errorf("drain actor tree: %w", ctx.Err())
	}
}

// PID returns the PID of the actor at path (which need not exist).
func (t *Tree) PID(path messages.Address) *actor.PID { return t.System.NewLocalPID(string(path)) }

// AddProcess registers a bare protoactor process (a test's stand-in for an
// actor) at path, in protoactor's registry and in the directory, so Send and
// Ask reach it.
func (t *Tree) AddProcess(path messages.Address, kind string, p actor.Process) (*actor.PID, bool) {
	pid, added := t.System.ProcessRegistry.Add(p, string(path))
	if added {
		t.Dir.put(&Node{Path: string(path), Kind: kind})
	}
	return pid, added
}

// Send delivers msg to the actor at path, once the tree has registered it. An
// actor is reachable in protoactor's process registry a moment before its
// mailbox is wired (SpawnNamed adds it, then registers the handlers): a sibling
// sending in that window races the spawn. The directory entry is written after
// SpawnNamed returns, so a message to an actor not in it yet is dropped, as one
// to an absent actor would be (dead letters) — every recipient does at start
// what such a message asks.
func (t *Tree) Send(path messages.Address, msg any) {
	if _, ok := t.Dir.Get(path); !ok {
		return
	}
	t.System.Root.Send(t.PID(path), msg)
}

func (t *Tree) onSystemEvent(evt any) {
	ev, ok := evt.(*actor.SupervisorEvent)
	if !ok {
		return
	}
	path, kind := "", "unknown"
	if ev.Child != nil {
		path = ev.Child.Id
		if n, ok := t.Dir.Get(messages.Address(path)); ok {
			kind = n.Kind
			if ev.Directive == actor.RestartDirective {
				n.restarts.Add(1)
			}
		}
	}
	directive := directiveName(ev.Directive)
	t.Metrics.supervision(kind, directive)
	t.log.Warn().Str("actor", path).Str("kind", kind).Str("directive", directive).
		Str("reason", fmt.Sprint(ev.Reason)).Msg("supervisor decision")
}

func directiveName(d actor.Directive) string {
	switch d {
	case actor.RestartDirective:
		return "restart"
	case actor.StopDirective:
		return "stop"
	case actor.EscalateDirective:
		return "escalate"
	case actor.ResumeDirective:
		return "resume"
	}
	return "unknown"
}

// rootActor spawns the tree's top-level children; restarting it rebuilds them all.
type rootActor struct {
	tree     *Tree
	children []Spec
}

func (r *rootActor) Receive(c actor.Context) {
	switch c.Message().(type) {
	case *actor.Started:
		for _, spec := range r.children {
			if _, err := r.tree.Spawn(c, spec); err != nil {
				r.tree.Fail(fmt.Errorf("root: %w", err))
				return
			}
		}
	case *actor.Stopped:
		close(r.tree.stopped)
	}
}

func (r *rootActor) Describe() (string, int) {
	return fmt.Sprintf("%d children", len(r.children)), 0
}
