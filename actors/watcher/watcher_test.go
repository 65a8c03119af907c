package watcher_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/watcher"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
)

const (
	streamTotal = "berth_container_event_stream_total"
	eventsTotal = "berth_container_events_total"
	dropped     = "berth_death_events_dropped_total"
)

func fastSettings() watcher.Settings {
	return watcher.Settings{QueueSize: 64, BackoffBase: 20 * time.Millisecond, BackoffCap: 200 * time.Millisecond}
}

func TestWatcher_DeathAfterSeenStart_CountedOnlyWithoutKill(t *testing.T) {
	h := newWatcherHarness(t, options{settings: fastSettings()})
	h.subscribed(1)
	l := uuid.NewString()
	cs := h.startContainers(l, 7, 3)

	// The process exits on its own: start … die, no kill.
	h.crashing.crash(t, cs[0].ID, 3)
	h.expectDeath(l, messages.ContainerDied{ContainerID: cs[0].ID, Generation: 7, ExitCode: 3, Counted: true})

	// docker kill (the fake's Kill): kill, die.
	if err := h.fake.Kill(cs[1].ID, 137); err != nil {
		t.Fatal(err)
	}
	h.expectDeath(l, messages.ContainerDied{ContainerID: cs[1].ID, Generation: 7, ExitCode: 137})

	// Out of memory: oom, kill, die.
	if err := h.fake.OOMKill(cs[2].ID); err != nil {
		t.Fatal(err)
	}
	h.expectDeath(l, messages.ContainerDied{ContainerID: cs[2].ID, Generation: 7, ExitCode: 137})

	// compose down of a running container: kill, die (143).
	l2 := uuid.NewString()
	down := h.startContainers(l2, 1, 1)
	if err := h.fake.Down(context.Background(), l2, dockerio.DownOptions{}); err != nil {
		t.Fatal(err)
	}
	h.expectDeath(l2, messages.ContainerDied{ContainerID: down[0].ID, Generation: 1, ExitCode: 143})

	// A new run of a killed container starts clean: its own crash is counted.
	netID, err := h.fake.EnsureNetwork(context.Background(), dockerio.NetworkSpec{Lease: l, Tenant: "t",
		BackendName: "berth-test", InstallationID: installation})
	if err != nil {
		t.Fatal(err)
	}
	restart := h.plan(l, 7, 3, netID)
	restart.Services[0].ImageID = cs[0].ImageID // same identity: compose starts the stopped containers again
	if err := h.fake.Up(context.Background(), restart); err != nil {
		t.Fatal(err)
	}
	h.crashing.crash(t, cs[1].ID, 2)
	h.expectDeath(l, messages.ContainerDied{ContainerID: cs[1].ID, Generation: 7, ExitCode: 2, Counted: true})

	// Each death was delivered once: the deliveries above came in order with nothing
	// between them, and the die count matches.
	h.waitMetric(eventsTotal, "action", "die", 5)
	h.waitMetric(eventsTotal, "action", "kill", 3)
	h.waitMetric(eventsTotal, "action", "oom", 1)
	if n := len(h.deliveries); n != 0 {
		t.Fatalf("%d extra deliveries", n)
	}
	// One session: the reconciler was asked once, when it connected (the gap
	// before a first session — a start or a watcher restart — is a gap too).
	// The ask is a message to another actor: on a loaded machine its mailbox
	// may not have run yet when the deaths above were delivered.
	h.eventually("the reconciler asked when the session began", func() bool { return h.recovers.Load() >= 1 })
	if got := h.recovers.Load(); got != 1 {
		t.Fatalf("reconciler asked %d times in one session, want 1", got)
	}
}

func TestWatcher_Reconnect_AsksReconcilerAndForgetsWhatItSaw(t *testing.T) {
	h := newWatcherHarness(t, options{settings: fastSettings()})
	h.subscribed(1)
	l := uuid.NewString()
	before := h.startContainers(l, 2, 2)
	h.waitMetric(eventsTotal, "action", "start", 2) // the first session saw both runs start
	h.eventually("reconciler asked on the first connect", func() bool { return h.recovers.Load() == 1 })

	h.fake.BreakEvents(errors.New("unexpected EOF"))
	h.subscribed(2)
	h.eventually("reconciler asked after the reconnect", func() bool { return h.recovers.Load() == 2 })
	if got := h.metric(streamTotal, "outcome", "reconnect"); got != 1 {
		t.Fatalf("reconnects = %v, want 1", got)
	}
	if got := h.metric(streamTotal, "outcome", "connected"); got != 2 {
		t.Fatalf("connects = %v, want 2", got)
	}

	// The new session never saw this run start: its crash is not attributable.
	h.crashing.crash(t, before[0].ID, 1)
	h.expectDeath(l, messages.ContainerDied{ContainerID: before[0].ID, Generation: 2, ExitCode: 1, Counted: false})

	// A run the new session saw start is counted again.
	l2 := uuid.NewString()
	after := h.startContainers(l2, 1, 1)
	h.crashing.crash(t, after[0].ID, 4)
	h.expectDeath(l2, messages.ContainerDied{ContainerID: after[0].ID, Generation: 1, ExitCode: 4, Counted: true})

	// A second break is a second pass.
	h.fake.BreakEvents(errors.New("unexpected EOF"))
	h.subscribed(3)
	h.eventually("reconciler asked again", func() bool { return h.recovers.Load() == 3 })
}

func TestWatcher_ReconnectBackoff_DoublesFromBaseToCap(t *testing.T) {
	const base, limit = 20 * time.Millisecond, 320 * time.Millisecond
	h := newWatcherHarness(t, options{
		settings: watcher.Settings{QueueSize: 64, BackoffBase: base, BackoffCap: limit},
		before:   func(h *watcherHarness) { h.fake.SetUnavailable(true) }, // every subscription fails at once
	})
	const attempts = 10
	h.eventually("reconnect attempts", func() bool { return len(h.crashing.callTimes()) >= attempts })
	calls := h.crashing.callTimes()
	for i := 1; i < attempts; i++ {
		want := min(base<<(i-1), limit)
		gap := calls[i].Sub(calls[i-1])
		// Never earlier than the backoff; the upper bound is loose (a loaded machine),
		// yet below what doubling past the cap would give (2.56 s, 5.12 s at attempts 9, 10).
		if gap < want || gap > want+1500*time.Millisecond {
			t.Errorf("wait before attempt %d = %v, want %v (then +≤1.5s of scheduling)", i+1, gap, want)
		}
	}
	h.eventually("one reconciler pass per reconnect", func() bool { return h.recovers.Load() >= attempts-1 })
	if got := h.metric(streamTotal, "outcome", "reconnect"); got < attempts-1 {
		t.Fatalf("reconnects = %v, want ≥ %d", got, attempts-1)
	}
}

func TestWatcher_HealthySession_ResetsBackoff(t *testing.T) {
	const base = 50 * time.Millisecond
	h := newWatcherHarness(t, options{
		settings: watcher.Settings{QueueSize: 64, BackoffBase: base, BackoffCap: time.Minute},
		before:   func(h *watcherHarness) { h.fake.SetUnavailable(true) },
	})
	// Failures grow the wait: 50, 100, 200, 400 ms; the next would be 800 ms.
	h.eventually("failing attempts", func() bool { return len(h.crashing.callTimes()) >= 5 })
	h.fake.SetUnavailable(false)
	h.eventually("a successful subscription", func() bool { return h.crashing.subscriptions.Load() == 1 })
	h.startContainers(uuid.NewString(), 1, 1)
	h.waitMetric(eventsTotal, "action", "start", 1) // the session is healthy: it delivered an event

	m := len(h.crashing.callTimes())
	broke := time.Now()
	h.fake.BreakEvents(errors.New("connection reset by peer"))
	h.eventually("reconnect after the healthy session", func() bool { return len(h.crashing.callTimes()) > m })
	gap := h.crashing.callTimes()[m].Sub(broke)
	// Without the reset the wait would be ≥ 1.6 s (the doubling carried on).
	if gap < base || gap > base+1100*time.Millisecond {
		t.Fatalf("wait after a healthy session = %v, want the base %v again", gap, base)
	}
}

// gateProcess stands at the registry path in place of an actor and holds whoever
// sends to it (the watcher's dispatcher, through Tree.Send) until the gate opens.
type gateProcess struct {
	gate     chan struct{}
	mu       sync.Mutex
	received []*messages.Deliver
}

func (g *gateProcess) SendUserMessage(_ *actor.PID, msg any) {
	<-g.gate
	if d, ok := msg.(*messages.Deliver); ok {
		g.mu.Lock()
		g.received = append(g.received, d)
		g.mu.Unlock()
	}
}
func (g *gateProcess) SendSystemMessage(*actor.PID, any) {}
func (g *gateProcess) Stop(*actor.PID)                   {}

func (g *gateProcess) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.received)
}

// With the dispatcher held, the bounded queue fills and the reader drops — counted
// — rather than wait: it keeps draining Docker's stream, so the fake never ends it
// as a slow consumer, and every death is either delivered or counted as dropped.
func TestWatcher_HeldDispatcher_ReaderNeverStalls_DropsCounted(t *testing.T) {
	const queue, deaths, batch = 2, 500, 100
	plain := fake.New(fake.Options{InstallationID: installation})
	h := newWatcherHarness(t, options{
		settings:   watcher.Settings{QueueSize: queue, BackoffBase: 20 * time.Millisecond, BackoffCap: 200 * time.Millisecond},
		engine:     plain,
		noRegistry: true,
	})
	g := &gateProcess{gate: make(chan struct{})}
	if _, added := h.tree.AddProcess(registryPath, "probe", g); !added {
		t.Fatalf("registry path already taken")
	}
	var once sync.Once
	open := func() { once.Do(func() { close(g.gate) }) }
	t.Cleanup(open) // runs before the tree stops: the watcher waits for its dispatcher
	h.connected()

	l := uuid.NewString()
	cs := h.startContainers(l, 1, deaths)
	h.waitMetric(eventsTotal, "action", "start", deaths)
	for i := 0; i < deaths; i += batch {
		for _, c := range cs[i : i+batch] {
			if err := plain.Kill(c.ID, 1); err != nil {
				t.Fatal(err)
			}
		}
		// The reader keeps consuming although nothing has left the dispatcher.
		h.waitMetric(eventsTotal, "action", "die", float64(i+batch))
	}
	if got := plain.Calls(fake.OpEvents); got != 1 {
		t.Fatalf("the stream was re-subscribed %d times: the reader fell behind (ErrSlowConsumer)", got-1)
	}
	if got := h.metric(streamTotal, "outcome", "reconnect"); got != 0 {
		t.Fatalf("reconnects = %v, want 0", got)
	}
	// One death is held in the dispatcher and the queue holds two; every other was
	// dropped and counted.
	if got := h.metric(dropped, "reason", "queue_full"); got != deaths-queue-1 {
		t.Fatalf("queue_full drops = %v, want %d", got, deaths-queue-1)
	}
	if d := h.metric("berth_container_death_queue_depth", "", ""); d > queue {
		t.Fatalf("queue depth %v over its bound %d", d, queue)
	}
	open()
	h.eventually("held deaths delivered", func() bool { return g.count() == queue+1 })
	if got := h.metric(dropped, "reason", "queue_full"); int(got)+g.count() != deaths {
		t.Fatalf("delivered %d + dropped %v ≠ %d deaths", g.count(), got, deaths)
	}
	for _, d := range g.received {
		if d.Lease != l {
			t.Fatalf("delivered for lease %q", d.Lease)
		}
	}
}

// The registry's Dropped callback (busy or unknown lease) is counted as undeliverable.
func TestWatcher_UndeliverableDeaths_CountedByDroppedCallback(t *testing.T) {
	const deaths = 40
	h := newWatcherHarness(t, options{settings: fastSettings(), drop: func(n int) bool { return n%2 == 0 }})
	h.subscribed(1)
	l := uuid.NewString()
	cs := h.startContainers(l, 3, deaths)
	seen := map[string]bool{}
	for _, c := range cs {
		if err := h.fake.Kill(c.ID, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < deaths; i++ {
		d, died := h.nextDeath()
		if d.Lease != l || died.Generation != 3 || seen[died.ContainerID] {
			t.Fatalf("delivery %d: %s %+v (seen before: %t)", i, d.Lease, *died, seen[died.ContainerID])
		}
		seen[died.ContainerID] = true
	}
	h.waitMetric(dropped, "reason", "undeliverable", deaths/2)
	if got := h.metric(dropped, "reason", "queue_full"); got != 0 {
		t.Fatalf("queue_full = %v with a queue larger than the burst", got)
	}
}
