package supervisors

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// kitActor runs its goroutines under Tasks and reports every message it handles.
type kitActor struct {
	tasks   *Tasks
	drain   time.Duration
	seen    chan<- any
	onStart func(a *kitActor, c actor.Context)
}

func (a *kitActor) Tasks() *Tasks { return a.tasks }

type (
	runTask struct {
		name   string
		block  chan struct{}
		result any
	}
	runAfter struct {
		d   time.Duration
		msg any
	}
	result struct{ epoch int }
)

func (a *kitActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.tasks = NewTasks(c, a.drain)
		if a.onStart != nil {
			a.onStart(a, c)
		}
	case runTask:
		a.tasks.Go(m.name, func(ctx context.Context) any {
			select {
			case <-m.block:
			case <-ctx.Done():
			}
			return m.result
		})
	case runAfter:
		a.tasks.After("later", m.d, m.msg)
	case *actor.Restarting, *actor.Stopping, *actor.Stopped, actor.SystemMessage:
	default:
		a.seen <- m
	}
}

func spawnKit(t *testing.T, a func() *kitActor) (*Tree, messages.Address) {
	t.Helper()
	tree := newTestTree(t, Options{Chaos: true, Children: specs(Spec{Name: "kit", Kind: "kit",
		Producer: func() actor.Actor { return a() }})})
	path := RootPath + "/kit"
	waitFor(t, "kit spawned", func() bool { _, ok := tree.Dir.Get(path); return ok })
	return tree, path
}

func describe(t *testing.T, tree *Tree, path messages.Address) messages.NodeInfo {
	t.Helper()
	info, err := Ask(context.Background(), tree, path, time.Second, func(r chan<- messages.NodeInfo) any {
		return &messages.Describe{Reply: r}
	})
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestTasks_NamedInDescribe_ResultsOfAnEarlierInstanceDropped(t *testing.T) {
	seen := make(chan any, 16)
	var incarnation atomic.Int32
	tree, path := spawnKit(t, func() *kitActor {
		incarnation.Add(1)
		return &kitActor{seen: seen, drain: 50 * time.Millisecond}
	})
	block := make(chan struct{})
	tree.Send(path, runTask{name: "slow", block: block, result: result{epoch: 1}})
	tree.Send(path, runAfter{d: time.Hour, msg: "never"})
	waitFor(t, "the task and the timer named", func() bool {
		n := describe(t, tree, path).Tasks
		return n["slow"] == 1 && n["timer:later"] == 1
	})

	// A restart stops the first instance's tasks (canceling the slow one, whose
	// result then arrives stamped for the old instance) and cancels its timer.
	tree.Send(path, &messages.Crash{})
	waitFor(t, "the restart", func() bool { return incarnation.Load() == 2 })
	tree.Send(path, runTask{name: "quick", block: closedChan(), result: result{epoch: 2}})
	select {
	case m := <-seen:
		if m != (result{epoch: 2}) {
			t.Fatalf("the restarted instance saw %#v: an earlier instance's result", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the restarted instance's own task result never arrived")
	}
	if n := describe(t, tree, path).Tasks; len(n) != 0 {
		t.Fatalf("tasks left after the restart: %v", n)
	}
	waitFor(t, "the old instance's result counted dropped", func() bool {
		return testutil.ToFloat64(tree.Metrics.stale.WithLabelValues("kit")) == 1
	})
}

func closedChan() chan struct{} { c := make(chan struct{}); close(c); return c }

func TestTasks_StopRefusesNewTasks_AndNamesWhatDidNotDrain(t *testing.T) {
	tree := newTestTree(t, Options{})
	var tasks *Tasks
	ready := make(chan struct{})
	props := actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(*actor.Started); ok {
			tasks = NewTasks(c, 30*time.Millisecond)
			close(ready)
		}
	})
	tree.System.Root.Spawn(props)
	<-ready
	stuck := make(chan struct{})
	defer close(stuck)
	tasks.Go("deaf", func(context.Context) any { <-stuck; return nil }) // ignores its context
	tasks.Go("polite", func(ctx context.Context) any { <-ctx.Done(); return nil })
	left := tasks.Stop()
	if !slices.Equal(left, []string{"deaf"}) {
		t.Fatalf("Stop left %v, want [deaf]", left)
	}
	if tasks.Go("late", func(context.Context) any { return nil }) {
		t.Fatal("a stopped Tasks took a new task")
	}
	var none *Tasks
	if none.Go("x", nil) || none.Stop() != nil || none.Running() != 0 {
		t.Fatal("a nil Tasks must refuse everything")
	}
}

func TestRetry_JitterOnlyLengthens_ByAtMostAFifth(t *testing.T) {
	r := Retry{Base: 100 * time.Millisecond, Cap: 2 * time.Second}
	for n := 1; n <= 8; n++ {
		nominal := r.Delay(n)
		for range 50 {
			if d := r.Jittered(n); d < nominal || d > nominal+nominal/5 {
				t.Fatalf("Jittered(%d) = %v, want within [%v, %v]", n, d, nominal, nominal+nominal/5)
			}
		}
	}
	if r.Delay(10) != 2*time.Second {
		t.Fatalf("Delay(10) = %v, want the cap", r.Delay(10))
	}
}

// passActor is a periodic actor whose pass reports what the test scripts.
type passActor struct {
	tasks    *Tasks
	loop     *Periodic
	spec     PassSpec
	outcomes chan Outcome
	ended    chan<- Outcome
}

func (a *passActor) Tasks() *Tasks { return a.tasks }

type passNow struct{}

func (a *passActor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.tasks = NewTasks(c, time.Second)
		spec := a.spec
		spec.Begin = func() func(context.Context) Outcome {
			return func(ctx context.Context) Outcome {
				select {
				case o := <-a.outcomes:
					return o
				case <-ctx.Done():
					return Outcome{Err: ctx.Err()}
				}
			}
		}
		spec.End = func(o *Outcome) { a.ended <- *o }
		a.loop = StartPeriodic(a.tasks, spec)
	case passNow:
		a.loop.Now()
	default:
		a.loop.Receive(m)
	}
}

func (a *passActor) Describe() (string, int) { return a.loop.Describe() }

func TestPeriodic_OnePassAtATime_AskedMeanwhileCollapse_FailureRetriedWithBackoff(t *testing.T) {
	outcomes, ended := make(chan Outcome, 16), make(chan Outcome, 16)
	tree := newTestTree(t, Options{Children: specs(Spec{Name: "pass", Kind: "pass", Producer: func() actor.Actor {
		return &passActor{outcomes: outcomes, ended: ended, spec: PassSpec{Name: "test", Interval: time.Hour,
			Retry: Retry{Base: 20 * time.Millisecond, Cap: 40 * time.Millisecond}}}
	}})})
	path := RootPath + "/pass"
	waitFor(t, "spawned", func() bool { _, ok := tree.Dir.Get(path); return ok })
	next := func(what string) Outcome {
		t.Helper()
		select {
		case o := <-ended:
			return o
		case <-time.After(5 * time.Second):
			t.Fatalf("no pass ended: %s", what)
		}
		return Outcome{}
	}
	// The first pass runs at start; three asks while it runs collapse into one.
	for range 3 {
		tree.Send(path, passNow{})
	}
	waitFor(t, "the pass running", func() bool { return describe(t, tree, path).InFlight == 1 })
	outcomes <- Outcome{Detail: "first"}
	next("first")
	outcomes <- Outcome{Detail: "collapsed"}
	if o := next("collapsed"); o.Detail != "collapsed" {
		t.Fatalf("second pass = %+v", o)
	}
	// A failed pass is retried soon (20–24 ms), far sooner than the hour's interval.
	tree.Send(path, passNow{})
	outcomes <- Outcome{Err: errors.New("docker down")}
	next("failed")
	began := time.Now()
	outcomes <- Outcome{Detail: "recovered"}
	if o := next("retry"); o.Detail != "recovered" || time.Since(began) > 3*time.Second {
		t.Fatalf("retry = %+v after %v", o, time.Since(began))
	}
	rep, err := Ask(context.Background(), tree, path, time.Second, func(r chan<- messages.PassReport) any {
		return &messages.GetPass{Reply: r}
	})
	if err != nil || rep.Passes != 4 || rep.Detail != "recovered" || rep.Err != "" || rep.Name != "test" {
		t.Fatalf("report %+v, %v", rep, err)
	}
	select {
	case o := <-ended:
		t.Fatalf("an extra pass ran: %+v", o)
	case <-time.After(100 * time.Millisecond):
	}
	if s, _ := (&passActor{loop: &Periodic{finished: 4, last: Outcome{Detail: "x"}}}).Describe(); s != "4 passes, last ok: x" {
		t.Fatalf("Describe = %q", s)
	}
}

// groupActor queues "add" messages in a Group; "peek" does not commute.
type groupActor struct {
	tasks   *Tasks
	group   *Group[int]
	batches chan<- []int
	peeked  chan<- int
	dropped chan<- []int
}

type (
	add  int
	boom int // added, then the actor panics
	peek struct{}
	hold chan struct{}
)

func (a *groupActor) Tasks() *Tasks { return a.tasks }

func (a *groupActor) Receive(c actor.Context) {
	if a.group != nil && a.group.Before(c.Message()) {
		return
	}
	switch m := c.Message().(type) {
	case *actor.Started:
		a.tasks = NewTasks(c, time.Second)
		a.group = &Group[int]{Tasks: a.tasks,
			Commutes: func(msg any) bool {
				switch msg.(type) {
				case add, boom:
					return true
				}
				return false
			},
			Commit:  func(items []int) { a.batches <- items },
			Abandon: func(items []int) { a.dropped <- items }}
	case add:
		a.group.Add(strconv.Itoa(int(m)), int(m))
	case boom:
		a.group.Add(strconv.Itoa(int(m)), int(m))
		panic("boom")
	case peek:
		a.peeked <- a.group.Len()
	case hold:
		<-m
	}
}

func TestGroup_ABurstSharesOneCommit_AnObserverFlushesFirst_ACrashAbandons(t *testing.T) {
	batches, peeked, dropped := make(chan []int, 8), make(chan int, 8), make(chan []int, 8)
	tree := newTestTree(t, Options{Children: specs(Spec{Name: "group", Kind: "group", Producer: func() actor.Actor {
		return &groupActor{batches: batches, peeked: peeked, dropped: dropped}
	}})})
	path := RootPath + "/group"
	waitFor(t, "spawned", func() bool { _, ok := tree.Dir.Get(path); return ok })
	// Hold the actor so the whole burst is in its mailbox before the first flush.
	release := make(chan struct{})
	tree.Send(path, hold(release))
	for i := 1; i <= 5; i++ {
		tree.Send(path, add(i))
	}
	tree.Send(path, peek{})
	tree.Send(path, add(6))
	close(release)
	if got := <-batches; !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("the burst committed as %v, want one batch of 1…5", got)
	}
	if n := <-peeked; n != 0 {
		t.Fatalf("peek saw %d pending items: the batch must be committed before anything observes it", n)
	}
	if got := <-batches; !slices.Equal(got, []int{6}) {
		t.Fatalf("the next batch = %v", got)
	}
	// An instance that crashes with a pending batch abandons it; its flush,
	// stamped for that instance, never reaches the restarted one.
	tree.Send(path, boom(7))
	select {
	case got := <-dropped:
		if !slices.Equal(got, []int{7}) {
			t.Fatalf("abandoned %v", got)
		}
	case got := <-batches:
		t.Fatalf("a crashed instance's batch %v was committed", got)
	case <-time.After(5 * time.Second):
		t.Fatal("nothing happened to item 7")
	}
	tree.Send(path, peek{})
	if n := <-peeked; n != 0 {
		t.Fatalf("the restarted instance holds %d items", n)
	}
	select {
	case got := <-batches:
		t.Fatalf("a stale flush committed %v", got)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestExecute_CommitThenEffects_OrFailedOnesWhenTheCommitFails(t *testing.T) {
	ev := []persistence.Event{{Type: "x"}}
	cases := []struct {
		name      string
		d         Decided[string]
		commitErr error
		want      []string
		commits   int
	}{
		{"no events: no commit, the effects", Decided[string]{Effects: []string{"a", "b"}, Failed: []string{"f"}}, nil, []string{"a", "b"}, 0},
		{"committed: the effects in order", Decided[string]{Events: ev, Effects: []string{"a", "b"}, Failed: []string{"f"}}, nil, []string{"a", "b"}, 1},
		{"commit failed: the failed ones instead", Decided[string]{Events: ev, Effects: []string{"a"}, Failed: []string{"f"}}, errors.New("latched"), []string{"f"}, 1},
		{"commit failed, nothing to do instead", Decided[string]{Events: ev, Effects: []string{"a"}}, errors.New("latched"), nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var ran []string
			commits := 0
			err := Execute(c.d, func([]persistence.Event) error { commits++; return c.commitErr }, func(e string) { ran = append(ran, e) })
			if !errors.Is(err, c.commitErr) || commits != c.commits || !slices.Equal(ran, c.want) {
				t.Fatalf("err %v, %d commits, ran %v; want %v, %d, %v", err, commits, ran, c.commitErr, c.commits, c.want)
			}
		})
	}
}
