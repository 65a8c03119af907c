package supervisors

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Tasks names and tracks every goroutine and timer one actor instance starts
// (after CockroachDB's Stopper): Describe counts them by name, a stopped Tasks
// refuses new ones, and Stop cancels them and waits, naming whatever did not
// finish in time. What a task or timer sends its actor is stamped with the
// instance's epoch; the tree's middleware drops a stamp of an earlier instance,
// so a restarted actor never acts on its predecessor's results. The middleware
// also stops an actor's Tasks once the actor has handled its Restarting or
// Stopping (the actor exposes them as Tasked).
//
// Every method runs on the actor's goroutine except the senders the tasks use;
// a nil *Tasks refuses everything (an actor that failed before it started).
type Tasks struct {
	self  *actor.PID
	sys   *actor.ActorSystem
	epoch uint64
	ctx   context.Context
	stop  context.CancelFunc
	drain time.Duration

	mu      sync.Mutex
	running map[string]int    // goroutines by name
	timers  map[*timer]string // pending timers and intervals by name
	stopped bool
	wg      sync.WaitGroup
}

// Tasked is an actor whose goroutines and timers run under Tasks.
type Tasked interface{ Tasks() *Tasks }

// DefaultDrain is how long Stop waits for an actor's goroutines by default.
const DefaultDrain = time.Minute

var epochs atomic.Uint64

// NewTasks starts the task set of the actor instance handling c (call it in
// Started). drain bounds Stop's wait (0: DefaultDrain).
func NewTasks(c actor.Context, drain time.Duration) *Tasks {
	if drain <= 0 {
		drain = DefaultDrain
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Tasks{self: c.Self(), sys: c.ActorSystem(), epoch: epochs.Add(1), ctx: ctx, stop: cancel, drain: drain}
}

// stamped is a message from an actor's tasks, valid for one instance.
type stamped struct {
	epoch uint64
	msg   any
}

// Send delivers msg to the actor, stamped for this instance.
func (t *Tasks) Send(msg any) {
	if t != nil && msg != nil {
		t.sys.Root.Send(t.self, stamped{epoch: t.epoch, msg: msg})
	}
}

// Task is a handle on one running goroutine.
type Task struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// Cancel cancels the task's context (it still reports back, if it returns a message).
func (k *Task) Cancel() {
	if k != nil {
		k.cancel()
	}
}

// Done is closed when the task's function has returned.
func (k *Task) Done() <-chan struct{} { return k.done }

// Go runs fn on a named goroutine with a context that Stop cancels; a non-nil
// result is sent to the actor. It reports false once the Tasks are stopped.
func (t *Tasks) Go(name string, fn func(ctx context.Context) any) bool {
	return t.Start(name, fn) != nil
}

// Start is Go that returns a handle on the task (nil when refused).
func (t *Tasks) Start(name string, fn func(ctx context.Context) any) *Task {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return nil
	}
	if t.running == nil {
		t.running = map[string]int{}
	}
	t.running[name]++
	ctx, cancel := context.WithCancel(t.ctx)
	k := &Task{cancel: cancel, done: make(chan struct{})}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer t.finished(name)
		defer close(k.done)
		defer cancel()
		t.Send(fn(ctx))
	}()
	return k
}

func (t *Tasks) finished(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.running[name]--; t.running[name] <= 0 {
		delete(t.running, name)
	}
}

// After sends msg to the actor once d has passed; Stop cancels it. It returns a
// cancel func (a no-op once fired or refused).
func (t *Tasks) After(name string, d time.Duration, msg any) (cancel func()) {
	tm := &timer{}
	if !t.addTimer(name, tm) {
		return func() {}
	}
	t.mu.Lock() // the timer may fire before stop is set: the lock holds it off
	defer t.mu.Unlock()
	at := time.AfterFunc(d, func() {
		if t.forget(tm) {
			t.Send(msg)
		}
	})
	tm.stop = func() { at.Stop() }
	return func() {
		if t.forget(tm) {
			tm.stop()
		}
	}
}

// Every sends msg to the actor every d until Stop.
func (t *Tasks) Every(name string, d time.Duration, msg any) {
	tk := time.NewTicker(max(d, time.Millisecond))
	if d <= 0 || !t.addTimer(name, &timer{stop: tk.Stop}) {
		tk.Stop()
		return
	}
	t.wg.Go(func() {
		for {
			select {
			case <-t.ctx.Done():
				return
			case <-tk.C:
				t.Send(msg)
			}
		}
	})
}

// timer is a pending After or an Every, keyed before its clock exists.
type timer struct{ stop func() }

func (t *Tasks) addTimer(name string, tm *timer) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	if t.timers == nil {
		t.timers = map[*timer]string{}
	}
	t.timers[tm] = name
	return true
}

// forget drops a pending timer; false when it was already gone (fired,
// canceled or stopped).
func (t *Tasks) forget(tm *timer) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.timers[tm]
	delete(t.timers, tm)
	return ok
}

// Running is how many goroutines run now (timers not counted).
func (t *Tasks) Running() int {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, c := range t.running {
		n += c
	}
	return n
}

// Names counts the running goroutines and pending timers by name (timers as
// "timer:<name>"), for Describe.
func (t *Tasks) Names() map[string]int {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.running)+len(t.timers) == 0 {
		return nil
	}
	out := make(map[string]int, len(t.running)+len(t.timers))
	for n, c := range t.running {
		out[n] += c
	}
	for _, n := range t.timers {
		out["timer:"+n]++
	}
	return out
}

// Stop refuses new tasks, cancels the running ones and their timers, and waits
// for them up to the drain bound. It returns the names still running then
// (nil: all drained). Stopping twice is harmless.
func (t *Tasks) Stop() []string {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	t.stopped = true
	for tm := range t.timers {
		tm.stop()
	}
	t.timers = nil
	t.mu.Unlock()
	t.stop()
	done := make(chan struct{})
	go func() { t.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-time.After(t.drain):
	}
	return describeNames(t.Names())
}

// describeNames renders a name count as sorted "name×n" strings.
func describeNames(names map[string]int) []string {
	out := make([]string, 0, len(names))
	for n, c := range names {
		if c > 1 {
			n = fmt.Sprintf("%s×%d", n, c)
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Summary is the running tasks as one short phrase for Describe ("" when none).
func (t *Tasks) Summary() string { return strings.Join(describeNames(t.Names()), ", ") }
