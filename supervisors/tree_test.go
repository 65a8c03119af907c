package supervisors

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/messages"
)

// counter is a test actor: it counts "inc" messages, can block, and reports its
// incarnation so tests can tell a restart from a survivor.
type counter struct {
	incarnations *atomic.Int32
	count        int
	block        chan struct{}
}

type inc struct{}
type get struct{ reply chan<- int }
type blockNow struct{}

func (c *counter) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.incarnations.Add(1)
	case inc:
		c.count++
	case get:
		m.reply <- c.count
	case blockNow:
		<-c.block
	}
}

func (c *counter) Describe() (string, int) { return "counting", c.count }

func newTestTree(t *testing.T, opts Options) *Tree {
	t.Helper()
	opts.Logger = zerolog.Nop()
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	tree, err := Start(opts)
	if err != nil {
		t.Fatalf("start tree: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tree.Stop(ctx)
	})
	return tree
}

// specs wraps fixed child specs in the Options.Children builder.
func specs(s ...Spec) func(*Tree) []Spec { return func(*Tree) []Spec { return s } }

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func askCount(t *testing.T, tree *Tree, path messages.Address) int {
	t.Helper()
	n, err := Ask(context.Background(), tree, path, 5*time.Second, func(r chan<- int) any { return get{reply: r} })
	if err != nil {
		t.Fatalf("ask %s: %v", path, err)
	}
	return n
}

func TestBackoff_DelayDoublesFromBaseAndCaps(t *testing.T) {
	b := DefaultBackoff()
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}
	for i, w := range want {
		if got := b.Delay(i + 1); got != w {
			t.Errorf("Delay(%d) = %s, want %s", i+1, got, w)
		}
	}
	if got := b.Delay(20); got != 30*time.Second {
		t.Errorf("Delay(20) = %s, want the 30s cap", got)
	}
}

func TestChaosCrash_ActorRestartsWithSamePIDAndCountsRestart(t *testing.T) {
	var inc1 atomic.Int32
	tree := newTestTree(t, Options{Chaos: true, Children: specs(Spec{
		Name: "worker", Kind: "worker",
		Producer: func() actor.Actor { return &counter{incarnations: &inc1, block: make(chan struct{})} },
	})})
	const path = "root/worker"
	waitFor(t, "worker started", func() bool { return inc1.Load() == 1 })
	before := tree.PID(path)
	tree.Send(path, inc{})
	if got := askCount(t, tree, path); got != 1 {
		t.Fatalf("count before crash = %d, want 1", got)
	}

	tree.Send(path, &messages.Crash{})
	waitFor(t, "second incarnation", func() bool { return inc1.Load() == 2 })

	// Same PID, fresh (in-memory) state: persistence is what brings state back, and
	// the registry's tests prove that; here the point is PID identity and accounting.
	if got := askCount(t, tree, messages.Address(before.Id)); got != 0 {
		t.Fatalf("count after restart = %d, want 0 (fresh instance)", got)
	}
	n, _ := tree.Dir.Get(path)
	if n.Restarts() != 1 {
		t.Fatalf("restarts = %d, want 1", n.Restarts())
	}
	if got := testutil.ToFloat64(tree.Metrics.restarts.WithLabelValues("worker", "restart")); got != 1 {
		t.Fatalf("restart metric = %v, want 1", got)
	}
	if got := testutil.ToFloat64(tree.Metrics.panics.WithLabelValues("worker")); got != 1 {
		t.Fatalf("panic metric = %v, want 1", got)
	}
}

func TestCrash_WithoutChaos_IsIgnored(t *testing.T) {
	var incs atomic.Int32
	tree := newTestTree(t, Options{Children: specs(Spec{
		Name: "worker", Kind: "worker",
		Producer: func() actor.Actor { return &counter{incarnations: &incs} },
	})})
	waitFor(t, "worker started", func() bool { return incs.Load() == 1 })
	tree.Send("root/worker", &messages.Crash{})
	tree.Send("root/worker", inc{})
	if got := askCount(t, tree, "root/worker"); got != 1 {
		t.Fatalf("count = %d, want 1 (no restart)", got)
	}
	if incs.Load() != 1 {
		t.Fatalf("incarnations = %d, want 1", incs.Load())
	}
}

// parent spawns one child under OneForOne and records the Terminated it sees.
type parent struct {
	tree       *atomic.Pointer[Tree]
	incs       *atomic.Int32
	terminated chan string
}

func (p *parent) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		if _, err := p.tree.Load().Spawn(c, Spec{Name: "child", Kind: "lease",
			Producer: func() actor.Actor { return &counter{incarnations: p.incs} }}); err != nil {
			panic(err)
		}
	case *actor.Terminated:
		p.terminated <- m.Who.Id
	}
}

func TestOneForOne_ChildPastRestartLimit_IsStoppedAndReported(t *testing.T) {
	var incs atomic.Int32
	terminated := make(chan string, 1)
	var ref atomic.Pointer[Tree]
	ready := make(chan struct{})
	tree := newTestTree(t, Options{Chaos: true, Children: specs(Spec{
		Name: "registry", Kind: "registry", Supervisor: LeaseStrategy(),
		Producer: func() actor.Actor {
			<-ready
			return &parent{tree: &ref, incs: &incs, terminated: terminated}
		},
	})})
	ref.Store(tree)
	close(ready)
	const child = "root/registry/child"
	waitFor(t, "child started", func() bool { return incs.Load() == 1 })
	for i := 1; i <= 5; i++ {
		tree.Send(child, &messages.Crash{})
		want := int32(i + 1)
		waitFor(t, "restart", func() bool { return incs.Load() == want })
	}
	tree.Send(child, &messages.Crash{}) // the sixth failure within a minute
	select {
	case who := <-terminated:
		if who != child {
			t.Fatalf("terminated %q, want %q", who, child)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("parent was not told its child stopped")
	}
	if _, ok := tree.Dir.Get(child); ok {
		t.Fatal("stopped child still in the directory")
	}
	if got := testutil.ToFloat64(tree.Metrics.restarts.WithLabelValues("lease", "stop")); got != 1 {
		t.Fatalf("stop metric = %v, want 1", got)
	}
}

func TestGuardian_RootGivesUpAfterMaxFailures_DeliversFatalAndStops(t *testing.T) {
	var incs atomic.Int32
	fast := Backoff{Base: time.Millisecond, Cap: 4 * time.Millisecond, MaxFailures: 3, Window: time.Minute}
	tree := newTestTree(t, Options{Chaos: true, Guardian: fast, Children: specs(Spec{
		Name: "worker", Kind: "worker",
		Producer: func() actor.Actor { return &counter{incarnations: &incs} },
	})})
	waitFor(t, "started", func() bool { return incs.Load() == 1 })
	for i := 1; i <= 3; i++ {
		tree.Send(RootPath, &messages.Crash{})
		want := int32(i + 1) // a root restart rebuilds its children
		waitFor(t, "tree rebuilt", func() bool { return incs.Load() == want })
	}
	select {
	case err := <-tree.Fatal():
		t.Fatalf("fatal before the limit: %v", err)
	default:
	}
	tree.Send(RootPath, &messages.Crash{}) // the fourth failure within the window
	select {
	case err := <-tree.Fatal():
		if err == nil {
			t.Fatal("nil fatal cause")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("guardian never gave up")
	}
	select {
	case <-tree.Stopped():
	case <-time.After(10 * time.Second):
		t.Fatal("root not stopped after give-up")
	}
	waitFor(t, "root unlisted after give-up", func() bool { _, ok := tree.Dir.Get(RootPath); return !ok })
}

func TestMiddleware_CountsMessagesAndMailboxDepth(t *testing.T) {
	var incs atomic.Int32
	release := make(chan struct{})
	tree := newTestTree(t, Options{Children: specs(Spec{
		Name: "worker", Kind: "worker", MailboxLimit: 3,
		Producer: func() actor.Actor { return &counter{incarnations: &incs, block: release} },
	})})
	const path = "root/worker"
	waitFor(t, "started", func() bool { return incs.Load() == 1 })
	tree.Send(path, blockNow{})
	for i := 0; i < 3; i++ {
		tree.Send(path, inc{})
	}
	n, _ := tree.Dir.Get(path)
	waitFor(t, "depth 3", func() bool { return n.Depth() == 3 })
	// The blocked handler is the kind's stuck one (berth_actor_stuck_seconds).
	time.Sleep(20 * time.Millisecond)
	if s := tree.Dir.ByKind()["worker"].Stuck; s < 20*time.Millisecond {
		t.Fatalf("stuck %s while a handler blocks, want its age", s)
	}
	if !n.Overloaded() {
		t.Fatal("node with depth at its limit is not overloaded")
	}
	_, err := Ask(context.Background(), tree, path, time.Second, func(r chan<- int) any { return get{reply: r} })
	if !errors.Is(err, messages.ErrBusy) {
		t.Fatalf("ask over the backlog limit: %v, want ErrBusy", err)
	}
	close(release)
	waitFor(t, "drained", func() bool { return n.Depth() == 0 })
	if got := askCount(t, tree, path); got != 3 {
		t.Fatalf("count = %d, want 3", got)
	}
	if got := testutil.ToFloat64(tree.Metrics.messages.WithLabelValues("worker", "supervisors.inc")); got != 3 {
		t.Fatalf("messages{worker,inc} = %v, want 3", got)
	}
	stats := tree.Dir.ByKind()
	if stats["worker"].Live != 1 || stats["root"].Live != 1 || stats["worker"].Stuck != 0 {
		t.Fatalf("live by kind = %+v (stuck must be 0 once drained)", stats)
	}
}

func TestDescribeTree_ListsChildrenAndMarksUnresponsive(t *testing.T) {
	var incA, incB atomic.Int32
	release := make(chan struct{})
	tree := newTestTree(t, Options{Children: specs(
		Spec{Name: "a", Kind: "alpha", Producer: func() actor.Actor { return &counter{incarnations: &incA} }},
		Spec{Name: "b", Kind: "beta", Producer: func() actor.Actor { return &counter{incarnations: &incB, block: release} }},
	)})
	defer close(release)
	waitFor(t, "started", func() bool { return incA.Load() == 1 && incB.Load() == 1 })
	tree.Send("root/b", blockNow{})

	start := time.Now()
	info := tree.DescribeTree(context.Background())
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("describe took %s; an unresponsive actor must not stall it", took)
	}
	if info.Path != string(RootPath) || info.Kind != "root" || info.Status != "ok" {
		t.Fatalf("root node = %+v", info)
	}
	if len(info.Children) != 2 {
		t.Fatalf("children = %+v", info.Children)
	}
	a, b := info.Children[0], info.Children[1]
	if a.Path != "root/a" || a.Kind != "alpha" || a.Status != "ok" || a.State != "counting" {
		t.Fatalf("a = %+v", a)
	}
	if b.Path != "root/b" || b.Kind != "beta" || b.Status != "unresponsive" {
		t.Fatalf("b = %+v", b)
	}
}

// recordingProcess is a bare process that records what it is sent.
type recordingProcess struct {
	mu   sync.Mutex
	msgs []any
}

func (p *recordingProcess) SendUserMessage(_ *actor.PID, m any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.msgs = append(p.msgs, m)
}
func (p *recordingProcess) SendSystemMessage(*actor.PID, any) {}
func (p *recordingProcess) Stop(*actor.PID)                   {}

func (p *recordingProcess) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.msgs)
}

// TestSend_OnlyToRegisteredActors: protoactor makes a process reachable a moment
// before its mailbox is wired, so Send delivers only to what the tree has
// registered — a process protoactor knows but the directory does not is not
// sent to; once registered (AddProcess, or a finished Spawn) it is.
func TestSend_OnlyToRegisteredActors(t *testing.T) {
	tree := newTestTree(t, Options{})
	early := &recordingProcess{}
	if _, ok := tree.System.ProcessRegistry.Add(early, "root/half-spawned"); !ok {
		t.Fatal("path taken")
	}
	tree.Send(RootPath+"/half-spawned", "hello")
	registered := &recordingProcess{}
	if _, ok := tree.AddProcess(RootPath+"/stand-in", "probe", registered); !ok {
		t.Fatal("path taken")
	}
	tree.Send(RootPath+"/stand-in", "hello")
	if early.count() != 0 || registered.count() != 1 {
		t.Fatalf("delivered %d to the unregistered process and %d to the registered one, want 0 and 1", early.count(), registered.count())
	}
}

func TestBackoff_IsolatedFailureRestartsAtOnce_ACrashLoopBacksOff(t *testing.T) {
	b := DefaultBackoff()
	t0 := time.Unix(1000, 0)
	cases := []struct {
		name    string
		loop    CrashLoop
		at      time.Time
		wantN   int
		minWait time.Duration
		maxWait time.Duration
	}{
		{"first failure ever", CrashLoop{}, t0, 1, 0, 0},
		{"ran Stable since its restart: isolated", CrashLoop{N: 9, Until: t0}, t0, 1, 0, 0},
		{"long after a loop: isolated", CrashLoop{N: 9, Until: t0}, t0.Add(time.Hour), 1, 0, 0},
		{"second failure soon after a restart", CrashLoop{N: 1, Until: t0.Add(time.Second)}, t0, 2, 100 * time.Millisecond, 120 * time.Millisecond},
		{"third in the loop", CrashLoop{N: 2, Until: t0.Add(time.Second)}, t0, 3, 200 * time.Millisecond, 240 * time.Millisecond},
		{"a long loop is capped", CrashLoop{N: 30, Until: t0.Add(time.Second)}, t0, 31, 30 * time.Second, 36 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wait, loop := b.Next(c.loop, c.at)
			if loop.N != c.wantN || wait < c.minWait || wait > c.maxWait {
				t.Fatalf("Next = %s, run %d; want run %d, wait in [%s, %s]", wait, loop.N, c.wantN, c.minWait, c.maxWait)
			}
			if want := c.at.Add(wait + b.Stable); !loop.Until.Equal(want) {
				t.Fatalf("run until %s, want %s (restart + Stable)", loop.Until, want)
			}
		})
	}
}

// TestBackoff_ChildCrashedNineTimesApart_EachRestartIsImmediate: the chaos
// drill's finding — the ninth isolated crash of a child within the window
// waited 26 s under the old policy; now each restart comes at once.
func TestBackoff_ChildCrashedNineTimesApart_EachRestartIsImmediate(t *testing.T) {
	var incs atomic.Int32
	below := DefaultBackoff()
	below.Stable, below.MaxFailures = 50*time.Millisecond, 100
	tree := newTestTree(t, Options{Chaos: true, Below: below, Children: specs(Spec{
		Name: "worker", Kind: "worker",
		Producer: func() actor.Actor { return &counter{incarnations: &incs} },
	})})
	waitFor(t, "started", func() bool { return incs.Load() == 1 })
	for i := 2; i <= 10; i++ {
		time.Sleep(100 * time.Millisecond) // longer than Stable: an isolated fault
		at := time.Now()
		tree.Send("root/worker", &messages.Crash{})
		want := int32(i)
		waitFor(t, "restarted", func() bool { return incs.Load() == want })
		// The old policy waited 100 ms × 2^(n-1): 1.6 s by the fifth, 25.6 s by
		// the ninth; a second is room for a busy machine, not for a backoff.
		if took := time.Since(at); took > time.Second {
			t.Fatalf("restart %d took %s: an isolated crash must not wait for a backoff", i-1, took)
		}
	}
	// A loop (crashes right after each restart) still backs off: the first of
	// it is isolated, the next two wait 100 and 200 ms.
	at := time.Now()
	for i := 11; i <= 13; i++ {
		tree.Send("root/worker", &messages.Crash{})
		want := int32(i)
		waitFor(t, "restarted", func() bool { return incs.Load() == want })
	}
	if took := time.Since(at); took < 300*time.Millisecond {
		t.Fatalf("three crashes in a loop restarted within %s; want the 100 + 200 ms backoff", took)
	}
}
