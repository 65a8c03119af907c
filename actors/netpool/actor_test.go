package netpool

// The network pool in a real supervision tree, against the fake engine, a stub
// registry answering ListLeases with a configurable live set, and a real store:
// it fills the pool at start, binds a claim in its journal (stable across
// claims and restarts), never binds without Bind, releases a gone lease's
// network only once nothing of that lease is left on it, trims the surplus of a
// mass release, adopts a restart's unbound networks instead of creating more,
// forgets dropped and abandoned bindings, and refuses a journal that does not
// fold.

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

const (
	installation = "inst-netpool-test"
	backend      = "berth-test"
	regPath      = supervisors.RootPath + "/registry"
	poolPath     = supervisors.RootPath + "/netpool"

	leaseA = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
	leaseB = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
	leaseC = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
	leaseD = "dddddddd-dddd-4ddd-8ddd-dddddddddddd"
	leaseX = "eeeeeeee-eeee-4eee-8eee-eeeeeeeeeeee"
)

// waitFor bounds every asynchronous wait; a healthy test takes far less.
const waitFor = 5 * time.Second

// stubRegistry answers ListLeases with the live set, which tests change.
type stubRegistry struct {
	mu   sync.Mutex
	live []string
}

func (s *stubRegistry) Receive(c actor.Context) {
	if m, ok := c.Message().(*messages.ListLeases); ok {
		s.mu.Lock()
		live := slices.Clone(s.live)
		s.mu.Unlock()
		m.Reply <- messages.LeasesReply{Leases: live}
	}
}

func (s *stubRegistry) setLive(leases ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live = slices.Clone(leases)
}

type harness struct {
	t      *testing.T
	store  *persistence.Store
	faulty *supervisors.FaultyStore // the pool's store: fails commits on demand
	eng    *fake.Engine
	reg    *stubRegistry
	set    Settings
	tree   *supervisors.Tree // nil while stopped
	m      *Metrics          // of the running tree's pool
	busy   *atomic.Int64     // non-nil: the engine reports this many requests in flight
	wrap   func(Docker) Docker
}

// busyEngine is the fake engine reporting berthd's requests in flight.
type busyEngine struct {
	*fake.Engine
	busy *atomic.Int64
}

func (e busyEngine) InFlight() int { return int(e.busy.Load()) }

// newHarness opens a store and a fake engine; start runs the pool on them.
func newHarness(t *testing.T, size int) *harness {
	t.Helper()
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h := &harness{t: t, store: store, faulty: &supervisors.FaultyStore{Store: store}, reg: &stubRegistry{},
		eng: fake.New(fake.Options{InstallationID: installation, BackendName: backend}),
		set: Settings{Size: size, Interval: time.Hour, Quiet: 2 * time.Millisecond, Budget: 2 * time.Second, StopBudget: 2 * time.Second,
			RegistryPath: regPath, BackendName: backend, InstallationID: installation, SnapshotEvery: 2}}
	t.Cleanup(h.stop) // before the store closes
	return h
}

// start runs a fresh tree with the pool (new metrics) and waits for the pass at start.
func (h *harness) start() {
	h.t.Helper()
	h.startNoWait()
	h.waitPasses(1)
}

func (h *harness) startNoWait() {
	h.t.Helper()
	if h.tree != nil {
		h.t.Fatal("pool already running")
	}
	set := h.set
	m := NewMetrics(prometheus.NewRegistry())
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
		Chaos:      true, // a test may crash an actor (messages.Crash)
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			var eng Docker = h.eng
			if h.busy != nil {
				eng = busyEngine{h.eng, h.busy}
			}
			if h.wrap != nil {
				eng = h.wrap(eng)
			}
			deps := &Deps{Env: supervisors.Env{Tree: tree, Log: zerolog.Nop(), Now: time.Now}, Store: h.faulty, Engine: eng, Settings: &set, Metrics: m}
			return []supervisors.Spec{
				{Name: "registry", Kind: "stub", Producer: func() actor.Actor { return h.reg }},
				{Name: "netpool", Kind: "netpool", Producer: New(deps)},
			}
		},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.tree, h.m = tree, m
	h.eventually("the pool spawned", func() bool { _, ok := tree.Dir.Get(poolPath); return ok })
}

func (h *harness) stop() {
	if h.tree == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.tree.Stop(ctx); err != nil {
		h.t.Errorf("stop tree: %v", err)
	}
	h.tree = nil
}

func (h *harness) restart() {
	h.t.Helper()
	h.stop()
	h.start()
}

func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) report() messages.PassReport {
	h.t.Helper()
	rep, err := h.tryReport(waitFor)
	if err != nil {
		h.t.Fatal(err)
	}
	return rep
}

func (h *harness) tryReport(timeout time.Duration) (messages.PassReport, error) {
	return supervisors.Ask(context.Background(), h.tree, poolPath, timeout, func(r chan<- messages.PassReport) any {
		return &messages.GetPass{Reply: r}
	})
}

// reported is a condition for eventually: an ask that found the pool between
// incarnations (a supervisor's restart drops what is sent to the stopped one)
// is "not yet", never a failure.
func (h *harness) reported(cond func(messages.PassReport) bool) func() bool {
	return func() bool {
		rep, err := h.tryReport(500 * time.Millisecond)
		return err == nil && cond(rep)
	}
}

func (h *harness) waitPasses(n int) {
	h.t.Helper()
	h.eventually("a finished pass", h.reported(func(r messages.PassReport) bool { return r.Passes >= n }))
}

// idle waits until no pass runs and the pool holds Size free networks.
func (h *harness) idle() {
	h.t.Helper()
	idle := h.reported(func(r messages.PassReport) bool { return !r.Running })
	h.eventually("the pool refilled and idle", func() bool { return h.free() == h.set.Size && idle() })
}

// claim asks as a lease worker does (netpool.Client).
func (h *harness) claim(lease string, bind bool) string {
	h.t.Helper()
	cl := &Client{Tree: h.tree, Path: poolPath, Timeout: waitFor}
	n, err := cl.Claim(context.Background(), lease, bind, false)
	if err != nil {
		h.t.Fatalf("claim %s (bind %t): %v", lease, bind, err)
	}
	return n.ID
}

// claimFull sends ClaimNetwork itself, for the name.
func (h *harness) claimFull(lease string, bind bool) messages.NetworkClaim {
	h.t.Helper()
	rep, err := supervisors.Ask(context.Background(), h.tree, poolPath, waitFor, func(r chan<- messages.NetworkClaim) any {
		return &messages.ClaimNetwork{Lease: lease, Bind: bind, Reply: r}
	})
	if err != nil || rep.Err != nil {
		h.t.Fatalf("claim %s: %v %v", lease, err, rep.Err)
	}
	return rep
}

// claimWarm binds a free network to lease, waiting for a refill if the pool is empty.
func (h *harness) claimWarm(lease string) string {
	h.t.Helper()
	var id string
	h.eventually("a free network for "+lease, func() bool {
		if h.free() == 0 { // do not claim meanwhile: a claim postpones the refill by Quiet
			return false
		}
		id = h.claim(lease, true)
		return id != ""
	})
	return id
}

func (h *harness) free() int  { return int(testutil.ToFloat64(h.m.networks.WithLabelValues("free"))) }
func (h *harness) bound() int { return int(testutil.ToFloat64(h.m.networks.WithLabelValues("bound"))) }
func (h *harness) op(name string) int {
	return int(testutil.ToFloat64(h.m.ops.WithLabelValues(name)))
}
func (h *harness) claims(outcome string) int {
	return int(testutil.ToFloat64(h.m.claims.WithLabelValues(outcome)))
}

// poolNets is what Docker holds: this installation's pool network IDs.
func (h *harness) poolNets() []string {
	h.t.Helper()
	nets, err := h.eng.PoolNetworks(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	ids := make([]string, len(nets))
	for i, n := range nets {
		ids[i] = n.ID
	}
	return ids
}

// journal is the bindings as the store holds them.
func (h *harness) journal() map[string]string {
	h.t.Helper()
	return h.loaded().Bound
}

// loaded is the pool's state as the store holds it.
func (h *harness) loaded() *State {
	h.t.Helper()
	st, _, err := Load(h.store)
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func leaseOf(bound map[string]string, lease string) (string, bool) {
	for n, l := range bound {
		if l == lease {
			return n, true
		}
	}
	return "", false
}

// up runs a one-service stack of lease on the pool network id.
func (h *harness) up(lease, id string) {
	h.t.Helper()
	img := h.eng.AddImage("registry.example/app:1", dockerio.ImageInfo{})
	plan := dockerio.Plan{Lease: lease, Tenant: "t", BackendName: backend, InstallationID: installation, OperationID: "op1",
		Generation: 1, NetworkID: id, NetworkPooled: true, HostBindIP: "127.0.0.1",
		Services: []dockerio.ServicePlan{{Name: "web", SKU: "s", Quantity: 1, CPUCores: 1, MemoryMB: 64,
			Service: manifest.Service{Image: "registry.example/app:1"}, ImageID: img.ID}}}
	if err := h.eng.Up(context.Background(), plan); err != nil {
		h.t.Fatal(err)
	}
	n, err := h.eng.InspectNetwork(context.Background(), id)
	if err != nil || n.Containers != 1 {
		h.t.Fatalf("pool network %s after up: %+v %v, want one container attached", id, n, err)
	}
}

func TestNetpool_StartFillsPoolToSize_ClaimBindsJournaledAndStable(t *testing.T) {
	h := newHarness(t, 3)
	h.reg.setLive(leaseA, leaseB, leaseD)
	h.start()
	initial := h.poolNets()
	if len(initial) != 3 || h.free() != 3 {
		t.Fatalf("after the first pass: %d pool networks, %d free; want 3 and 3", len(initial), h.free())
	}

	a := h.claimFull(leaseA, true)
	if !slices.Contains(initial, a.ID) {
		t.Fatalf("A got %q, want one of the pool's %v", a.ID, initial)
	}
	if n, err := h.eng.InspectNetwork(context.Background(), a.ID); err != nil || a.Name != n.Name {
		t.Fatalf("A's claim names %q, Docker %q (%v)", a.Name, n.Name, err)
	}
	if again := h.claim(leaseA, false); again != a.ID {
		t.Fatalf("A asked again (no bind): %q, want %q", again, a.ID)
	}
	if again := h.claim(leaseA, true); again != a.ID {
		t.Fatalf("A asked again (bind): %q, want %q", again, a.ID)
	}
	b := h.claim(leaseB, true)
	if b == "" || b == a.ID || !slices.Contains(initial, b) {
		t.Fatalf("B got %q, want another of %v than A's %s", b, initial, a.ID)
	}
	if got := h.journal(); len(got) != 2 || got[a.ID] != leaseA || got[b] != leaseB {
		t.Fatalf("journal %v, want %s→A and %s→B", got, a.ID, b)
	}
	// A warm claim is counted just after its answer.
	h.eventually("two warm claims counted", func() bool { return h.claims("warm") == 2 })
	if h.claims("rebound") != 2 {
		t.Fatalf("claims rebound %d, want 2", h.claims("rebound"))
	}

	// A new pool on the same store: the bindings come back from the journal
	// (through a snapshot: SnapshotEvery 2), and the pool is full again.
	h.restart()
	if got := h.claim(leaseA, false); got != a.ID {
		t.Fatalf("A after restart: %q, want %q", got, a.ID)
	}
	if got := h.claim(leaseB, false); got != b {
		t.Fatalf("B after restart: %q, want %q", got, b)
	}
	h.idle()
	if h.bound() != 2 {
		t.Fatalf("bound gauge %d, want 2", h.bound())
	}
	if nets := h.poolNets(); len(nets) != 5 {
		t.Fatalf("Docker holds %d pool networks, want 2 bound + 3 free", len(nets))
	}
	d := h.claim(leaseD, true)
	if d == "" || d == a.ID || d == b {
		t.Fatalf("D got %q: a bound network (A %s, B %s) was handed out again", d, a.ID, b)
	}
}

func TestNetpool_ClaimWithoutBind_NeverTakesAFreeNetwork(t *testing.T) {
	h := newHarness(t, 3)
	h.reg.setLive(leaseA)
	h.start()
	if got := h.claim(leaseA, false); got != "" {
		t.Fatalf("a claim without bind for an unbound lease got %q", got)
	}
	if h.free() != 3 || h.claims("warm") != 0 {
		t.Fatalf("free %d warm %d after a claim without bind; want 3 and 0", h.free(), h.claims("warm"))
	}
	if got := h.journal(); len(got) != 0 {
		t.Fatalf("journal %v after a claim without bind", got)
	}
	// It did take nothing: the three are still handed out, one each.
	seen := map[string]bool{}
	for _, l := range []string{leaseB, leaseC, leaseD} {
		id := h.claim(l, true)
		if id == "" || seen[id] {
			t.Fatalf("%s got %q (already handed out: %v)", l, id, seen)
		}
		seen[id] = true
	}
}

func TestNetpool_EmptyPool_AnswersEmpty(t *testing.T) {
	h := newHarness(t, 0)
	h.reg.setLive(leaseA)
	h.start()
	if got := h.claim(leaseA, true); got != "" {
		t.Fatalf("a pool of size 0 handed out %q", got)
	}
	if h.claims("empty") != 1 {
		t.Fatalf("empty claims %d, want 1", h.claims("empty"))
	}
	// No pool: nothing to refill, so the claim asks for no pass (every lease
	// asks the pool, which holds the bridge's bindings, and a pass per burst
	// would list Docker's networks for nothing).
	time.Sleep(20 * h.set.Quiet)
	if rep := h.report(); rep.Passes != 1 {
		t.Fatalf("%d passes, want the one at start", rep.Passes)
	}
	if n := h.eng.Calls(fake.OpCreatePool); n != 0 || len(h.poolNets()) != 0 {
		t.Fatalf("size 0: %d creates, %d pool networks", n, len(h.poolNets()))
	}
}

func TestNetpool_ReleasesOnlyWhenLeaseGoneAndNothingAttached(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, 1)
	h.reg.setLive(leaseA)
	h.start()
	id := h.claim(leaseA, true)
	if id == "" {
		t.Fatal("A got no network")
	}
	h.idle() // refilled: one other network free
	h.up(leaseA, id)

	// A is gone, its container runs on the network: kept.
	h.reg.setLive()
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseA})
	h.eventually("a pass to find A's network in use", func() bool { return h.op("in_use") >= 1 })
	h.eventually("the pass done", func() bool { return !h.report().Running })
	if got := h.journal(); got[id] != leaseA || h.op("released") != 0 {
		t.Fatalf("journal %v, released %d: A's network went with a container running on it", got, h.op("released"))
	}

	// Stopped: no endpoint, but a container of A that would rejoin it: kept.
	cohort, err := h.eng.Cohort(ctx, leaseA)
	if err != nil || len(cohort) != 1 {
		t.Fatalf("cohort of A %+v %v", cohort, err)
	}
	if err := h.eng.Kill(cohort[0].ID, 137); err != nil {
		t.Fatal(err)
	}
	if n, _ := h.eng.InspectNetwork(ctx, id); n.Containers != 0 {
		t.Fatalf("%d endpoints after the kill", n.Containers)
	}
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseA})
	h.eventually("a pass to find A's stopped container", func() bool { return h.op("in_use") >= 2 })
	h.eventually("the pass done", func() bool { return !h.report().Running })
	if got := h.journal(); got[id] != leaseA || h.op("released") != 0 {
		t.Fatalf("journal %v, released %d: A's network went while a container of A exists", got, h.op("released"))
	}

	// No container of A left, but another's endpoint on the network: kept.
	if err := h.eng.Down(ctx, leaseA, dockerio.DownOptions{}); err != nil {
		t.Fatal(err)
	}
	h.up(leaseD, id)
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseA})
	h.eventually("a pass to find the endpoint", func() bool { return h.op("in_use") >= 3 })
	h.eventually("the pass done", func() bool { return !h.report().Running })
	if got := h.journal(); got[id] != leaseA || h.op("released") != 0 {
		t.Fatalf("journal %v, released %d: A's network went with an endpoint on it", got, h.op("released"))
	}

	// Nothing left on it: released. The other free network vanishes meanwhile,
	// so the released one is what the pool holds free and C gets it.
	others := slices.DeleteFunc(h.poolNets(), func(n string) bool { return n == id })
	for _, n := range others {
		if err := h.eng.RemoveNetwork(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.eng.Down(ctx, leaseD, dockerio.DownOptions{}); err != nil {
		t.Fatal(err)
	}
	h.reg.setLive(leaseC)
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseA})
	h.eventually("A's network released", func() bool { return h.op("released") == 1 })
	h.eventually("the release folded in", func() bool { return h.free() == 1 && !h.report().Running })
	if _, ok := leaseOf(h.journal(), leaseA); ok {
		t.Fatalf("journal %v still binds A", h.journal())
	}
	if got := h.claim(leaseC, true); got != id {
		t.Fatalf("C got %q, want the released %s", got, id)
	}

	h.restart()
	if got := h.claim(leaseA, false); got != "" {
		t.Fatalf("A after restart: %q, want none (released)", got)
	}
	if got := h.claim(leaseC, false); got != id {
		t.Fatalf("C after restart: %q, want %s", got, id)
	}
}

func TestNetpool_SurplusTrimmedAfterMassRelease(t *testing.T) {
	h := newHarness(t, 2)
	leases := []string{leaseA, leaseB, leaseC, leaseD, leaseX}
	h.reg.setLive(leases...)
	h.start()
	held := map[string]bool{}
	for _, l := range leases {
		id := h.claimWarm(l)
		if held[id] {
			t.Fatalf("%s got %s, already bound", l, id)
		}
		held[id] = true
	}
	h.idle()
	if n := len(h.poolNets()); n != 7 || h.bound() != 5 {
		t.Fatalf("%d pool networks, %d bound; want 7 and 5", n, h.bound())
	}

	h.reg.setLive()
	for _, l := range leases {
		h.tree.Send(poolPath, &messages.LeaseGone{Lease: l})
	}
	h.eventually("all five released and the surplus removed", func() bool {
		return h.op("released") == 5 && len(h.poolNets()) == 2 && h.free() == 2 && !h.report().Running
	})
	if got := h.journal(); len(got) != 0 || h.bound() != 0 {
		t.Fatalf("journal %v, bound gauge %d after the mass release", got, h.bound())
	}
	if h.op("removed") != 5 || h.op("created") != 7 {
		t.Fatalf("removed %d created %d; want 5 and 7 (no churn)", h.op("removed"), h.op("created"))
	}
	// What is left is exactly what the pool hands out.
	left := h.poolNets()
	h.reg.setLive(leaseA, leaseB)
	for _, l := range []string{leaseA, leaseB} {
		if id := h.claim(l, true); !slices.Contains(left, id) {
			t.Fatalf("%s got %q, want one of the remaining %v", l, id, left)
		}
	}
}

func TestNetpool_RestartAdoptsUnboundPoolNetworks(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, 3)
	var pre []string
	for range 4 {
		n, err := h.eng.CreatePoolNetwork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pre = append(pre, n.ID)
	}
	// The fourth is X's, as a previous run journaled.
	data, _ := json.Marshal(bindEvent{Network: pre[3], Lease: leaseX})
	if _, err := h.store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: Stream,
		Events: []persistence.Event{{Type: EvBound, V: eventVersion, At: time.Now(), Data: data}}}}}); err != nil {
		t.Fatal(err)
	}
	h.reg.setLive(leaseA, leaseB, leaseC, leaseX)
	h.start()
	if h.free() != 3 || h.bound() != 1 {
		t.Fatalf("free %d bound %d after start; want the 3 unbound adopted and X's kept", h.free(), h.bound())
	}
	if n := h.eng.Calls(fake.OpCreatePool); n != 4 || h.op("created") != 0 {
		t.Fatalf("%d creates (4 by the test), %d by the pool: it created instead of adopting", n, h.op("created"))
	}
	got := map[string]bool{}
	for _, l := range []string{leaseA, leaseB, leaseC} {
		c := h.claimFull(l, true)
		if !slices.Contains(pre[:3], c.ID) || got[c.ID] {
			t.Fatalf("%s got %q, want one of the adopted %v not yet handed out", l, c.ID, pre[:3])
		}
		if n, err := h.eng.InspectNetwork(ctx, c.ID); err != nil || c.Name != n.Name {
			t.Fatalf("claim names %q, Docker %q (%v)", c.Name, n.Name, err)
		}
		got[c.ID] = true
	}
	if id := h.claim(leaseX, false); id != pre[3] {
		t.Fatalf("X got %q, want its journaled %s", id, pre[3])
	}
}

func TestNetpool_DropForgetsBindingAndVanishedNetworkNotHandedOut(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, 2)
	h.reg.setLive(leaseA, leaseB, leaseC, leaseD)
	h.start()
	dropped := h.claim(leaseA, true)
	if dropped == "" {
		t.Fatal("A got no network")
	}
	h.idle()
	if err := h.eng.RemoveNetwork(ctx, dropped); err != nil {
		t.Fatal(err)
	}
	h.tree.Send(poolPath, &messages.DropNetwork{Lease: leaseA, ID: dropped})
	// Mailbox order: the drop is handled before this claim.
	again := h.claim(leaseA, true)
	if again == dropped {
		t.Fatalf("A got the dropped %s again", dropped)
	}
	if h.op("dropped") != 1 {
		t.Fatalf("dropped %d, want 1", h.op("dropped"))
	}
	if bound := h.journal(); bound[dropped] != "" {
		t.Fatalf("journal %v still binds the dropped %s", bound, dropped)
	}
	for _, l := range []string{leaseB, leaseC, leaseD} {
		if id := h.claimWarm(l); id == dropped {
			t.Fatalf("%s got the dropped %s", l, dropped)
		}
	}
	h.idle()
	if bound := h.journal(); bound[dropped] != "" || slices.Contains(h.poolNets(), dropped) {
		t.Fatalf("the dropped %s is back: journal %v", dropped, bound)
	}
}

func TestNetpool_AbandonedFirstClaim_ReturnsNetworkToFree(t *testing.T) {
	h := newHarness(t, 1)
	h.set.Quiet = time.Hour // no refill: the abandoned network is the only free one
	h.reg.setLive(leaseA, leaseB)
	h.start()
	id := h.claim(leaseA, true)
	if id == "" || h.free() != 0 {
		t.Fatalf("A got %q, %d left free", id, h.free())
	}
	h.tree.Send(poolPath, &messages.DropNetwork{Lease: leaseA})
	if got := h.claim(leaseA, false); got != "" {
		t.Fatalf("A still holds %q after abandoning its first claim", got)
	}
	if _, ok := leaseOf(h.journal(), leaseA); ok || h.free() != 1 {
		t.Fatalf("journal %v, free %d after the abandon", h.journal(), h.free())
	}
	if got := h.claim(leaseB, true); got != id {
		t.Fatalf("B got %q, want the abandoned %s", got, id)
	}
	if n := h.eng.Calls(fake.OpCreatePool); n != 1 {
		t.Fatalf("%d creates, want the one at start", n)
	}
}

func TestNetpool_CorruptJournal_LoadFailsAndThePoolFailsTheTree(t *testing.T) {
	h := newHarness(t, 1)
	if st, _, err := Load(h.store); err != nil || len(st.Bound) != 0 {
		t.Fatalf("empty stream: %+v %v", st, err)
	}
	data, _ := json.Marshal(bindEvent{Network: "never-bound", Lease: leaseA, Reason: ReasonReleased})
	if _, err := h.store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: Stream,
		Events: []persistence.Event{{Type: EvUnbound, V: eventVersion, At: time.Now(), Data: data}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Load(h.store); err == nil {
		t.Fatal("Load folded an unbound of a network never bound")
	}
	h.startNoWait()
	select {
	case err := <-h.tree.Fatal():
		if err == nil {
			t.Fatal("nil fatal cause")
		}
	case <-time.After(waitFor):
		t.Fatal("the pool started on a corrupt journal without failing the tree")
	}
	if n := h.eng.Calls(fake.OpCreatePool); n != 0 {
		t.Fatalf("%d creates on a journal that does not load", n)
	}
}

func TestNetpool_AbandonWhileClaimQueued_NoLateBinding(t *testing.T) {
	h := newHarness(t, 1)
	h.set.Quiet = time.Hour
	h.reg.setLive(leaseA)
	h.start()
	hold := make(chan messages.PassReport) // holds the mailbox until read
	h.tree.Send(poolPath, &messages.GetPass{Reply: hold})
	late := make(chan messages.NetworkClaim, 1)
	h.tree.Send(poolPath, &messages.ClaimNetwork{Lease: leaseA, Bind: true, Reply: late})
	h.tree.Send(poolPath, &messages.DropNetwork{Lease: leaseA}) // first attempt gave up
	<-hold
	if got := h.claim(leaseA, false); got != "" {
		t.Fatalf("A's next attempt got %q: the abandoned claim was bound after the abandon (journal %v)", got, h.journal())
	}
	if _, ok := leaseOf(h.journal(), leaseA); ok || h.free() != 1 {
		t.Fatalf("journal %v, free %d: the abandoned network is not free again", h.journal(), h.free())
	}
}

func TestNetpool_FailedLoad_PoolStaysInert(t *testing.T) {
	h := newHarness(t, 1)
	n, err := h.eng.CreatePoolNetwork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ev := func(typ string, e bindEvent) persistence.Event {
		data, _ := json.Marshal(e)
		return persistence.Event{Type: typ, V: eventVersion, At: time.Now(), Data: data}
	}
	bad := ev(EvBound, bindEvent{Network: "other", Lease: leaseB})
	bad.V = 99
	if _, err := h.store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: Stream,
		Events: []persistence.Event{ev(EvBound, bindEvent{Network: n.ID, Lease: leaseX}), bad}}}}); err != nil {
		t.Fatal(err)
	}
	h.reg.setLive(leaseX, leaseA)
	h.startNoWait()
	<-h.tree.Fatal()
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseB})
	time.Sleep(50 * time.Millisecond) // a pass, were one to run, would be scheduled by now
	if got := h.claim(leaseA, true); got != "" {
		t.Fatalf("A was handed %q by a pool whose journal did not load (it binds %s to X)", got, n.ID)
	}
	if r := h.report(); r.Passes != 0 {
		t.Fatalf("%d passes ran on a pool whose journal did not load", r.Passes)
	}
}

func TestNetpool_RefillWaitsForDockerIdle_BoundedByIdleWait(t *testing.T) {
	h := newHarness(t, 2)
	h.busy = new(atomic.Int64)
	h.busy.Store(3) // a burst of provisions in flight
	h.set.IdleWait = time.Minute
	h.startNoWait()
	time.Sleep(300 * time.Millisecond)
	if n := len(h.poolNets()); n != 0 {
		t.Fatalf("%d pool networks created while Docker was busy", n)
	}
	h.busy.Store(0)
	h.eventually("the refill after the burst", func() bool { return len(h.poolNets()) == 2 })
	h.stop()

	// Busy for good: the wait is bounded, the pool still fills.
	h2 := newHarness(t, 2)
	h2.busy = new(atomic.Int64)
	h2.busy.Store(1)
	h2.set.IdleWait = 200 * time.Millisecond
	start := time.Now()
	h2.startNoWait()
	h2.eventually("the refill past its idle wait", func() bool { return len(h2.poolNets()) == 2 })
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("filled in %s: the refill did not wait for Docker to be idle", took)
	}
}

// firstThenBusy is an engine whose first pool-network create leaves Docker
// looking busy, so the refill's next create waits.
type firstThenBusy struct {
	Docker
	busy *atomic.Int64
	n    atomic.Int64
}

func (e *firstThenBusy) CreatePoolNetwork(ctx context.Context) (dockerio.Network, error) {
	n, err := e.Docker.CreatePoolNetwork(ctx)
	if e.n.Add(1) == 1 {
		e.busy.Store(1)
	}
	return n, err
}

func (e *firstThenBusy) InFlight() int { return int(e.busy.Load()) }

func TestNetpool_NetworkMadeMidRefill_HandedOutBeforeThePassEnds(t *testing.T) {
	h := newHarness(t, 3)
	h.busy = new(atomic.Int64)
	h.set.IdleWait = time.Minute // the second create waits this long for Docker
	h.wrap = func(e Docker) Docker { return &firstThenBusy{Docker: e, busy: h.busy} }
	h.reg.setLive(leaseA, leaseB)
	h.startNoWait()
	h.eventually("the first network", func() bool { return len(h.poolNets()) == 1 })
	if !h.report().Running {
		t.Fatal("the refill ended after one network: the test needs it still waiting")
	}
	nets := h.poolNets()
	if got := h.claim(leaseA, true); got != nets[0] {
		t.Fatalf("a claim mid-refill got %q, want the network already made %s", got, nets[0])
	}
	if !h.report().Running {
		t.Fatal("the refill ended before the claim was answered")
	}
	// The pass ends (Docker idle again): the claimed network stays bound, the
	// pool fills up to its size beside it, nothing is handed out twice.
	h.busy.Store(0)
	h.idle()
	if j := h.journal(); j[nets[0]] != leaseA {
		t.Fatalf("journal %v: %s not bound to A", j, nets[0])
	}
	if got := h.claim(leaseB, true); got == "" || got == nets[0] {
		t.Fatalf("B got %q (A has %s)", got, nets[0])
	}
}

// bindMade asks as a lease worker whose claim found the pool empty does: bind
// the pool network it just created (netpool.Client.Bind).
func (h *harness) bindMade(lease string, made dockerio.Network) string {
	h.t.Helper()
	cl := &Client{Tree: h.tree, Path: poolPath, Timeout: waitFor}
	n, err := cl.Bind(context.Background(), lease, made)
	if err != nil {
		h.t.Fatalf("bind %s's made network: %v", lease, err)
	}
	return n.ID
}

// exhaustedEngine cannot create pool networks: the pool stays empty unless a
// test (standing in for a lease) makes one on the fake engine itself.
type exhaustedEngine struct{ Docker }

func (exhaustedEngine) CreatePoolNetwork(context.Context) (dockerio.Network, error) {
	return dockerio.Network{}, dockerio.ErrAddressPoolExhausted
}

// A lease that found the pool empty makes a pool network and the pool binds
// it like a warm one: journaled, stable, and released to the free list when the
// lease is gone, not removed. A lease that holds a network already keeps it
// and the made one is free; a made network bound already is not bound twice;
// one a pass adopted meanwhile is taken off the free list.
func TestNetpool_MadeByALease_BoundAndReturnedToThePoolOnClose(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, 1)
	h.wrap = func(e Docker) Docker { return exhaustedEngine{e} }
	h.reg.setLive(leaseA, leaseB, leaseC, leaseD)
	h.start()
	if got := h.claim(leaseA, true); got != "" {
		t.Fatalf("an empty pool handed out %q", got)
	}
	madeA, err := h.eng.CreatePoolNetwork(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.bindMade(leaseA, madeA); got != madeA.ID {
		t.Fatalf("A bound %q, want its made %s", got, madeA.ID)
	}
	if got := h.claim(leaseA, false); got != madeA.ID {
		t.Fatalf("A asked again: %q, want %s", got, madeA.ID)
	}
	if j := h.journal(); j[madeA.ID] != leaseA {
		t.Fatalf("journal %v: want %s bound to A", j, madeA.ID)
	}
	h.eventually("the made claim counted", func() bool { return h.claims("made") == 1 })

	// A holds a network already: it keeps it, and the made one is free.
	extra, _ := h.eng.CreatePoolNetwork(ctx)
	if got := h.bindMade(leaseA, extra); got != madeA.ID {
		t.Fatalf("A re-bound to %q, want it to keep %s", got, madeA.ID)
	}
	if h.free() != 1 {
		t.Fatalf("free %d: the made network A did not need is not free", h.free())
	}
	// B names A's network as its own made one: not bound twice; B's claim is
	// an ordinary one and gets the free network.
	if got := h.bindMade(leaseB, madeA); got != extra.ID {
		t.Fatalf("B got %q, want the free %s (A holds %s)", got, extra.ID, madeA.ID)
	}

	// C's made network is adopted by a pass before C's claim arrives.
	madeC, _ := h.eng.CreatePoolNetwork(ctx)
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseX}) // asks for a pass
	h.eventually("a pass adopted C's network", func() bool { return h.free() == 1 && !h.report().Running })
	if got := h.bindMade(leaseC, madeC); got != madeC.ID {
		t.Fatalf("C bound %q, want its made %s", got, madeC.ID)
	}
	if h.free() != 0 {
		t.Fatalf("free %d after C bound the adopted network: it is still handed out", h.free())
	}
	if got := h.claim(leaseD, true); got != "" {
		t.Fatalf("D got %q: a bound network was handed out again", got)
	}

	// A closes: its network goes back to the free list (the pool holds fewer
	// than its size), it is not removed.
	h.up(leaseA, madeA.ID)
	if err := h.eng.Down(ctx, leaseA, dockerio.DownOptions{}); err != nil {
		t.Fatal(err)
	}
	h.reg.setLive(leaseB, leaseC, leaseD)
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseA})
	h.eventually("A's network released to the free list", func() bool {
		return h.op("released") == 1 && h.free() == 1 && !h.report().Running
	})
	if _, held := h.journal()[madeA.ID]; held || !slices.Contains(h.poolNets(), madeA.ID) || h.op("removed") != 0 {
		t.Fatalf("A's network: bound %v, in Docker %v, removed %d; want unbound, kept", held, slices.Contains(h.poolNets(), madeA.ID), h.op("removed"))
	}
	if got := h.claim(leaseD, true); got != madeA.ID {
		t.Fatalf("D got %q, want A's released %s", got, madeA.ID)
	}
}

// listHookEngine calls onList before each pool listing (a pass's first request).
type listHookEngine struct {
	Docker
	onList func()
}

func (e listHookEngine) PoolNetworks(ctx context.Context) ([]dockerio.Network, error) {
	e.onList()
	return e.Docker.PoolNetworks(ctx)
}

// A pass that removes surplus and also releases more networks makes new
// surplus: the next pass starts at once, not at the next interval (an hour
// here). Seen at 300 leases: the pool took 290 s to trim a mass close's surplus.
func TestNetpool_SurplusFromAPassThatAlsoTrimmed_TrimmedAtOnce(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, 1)
	var lists atomic.Int64
	armed := atomic.Bool{}
	h.wrap = func(e Docker) Docker {
		return listHookEngine{e, func() {
			if armed.Load() && lists.Add(1) == 2 { // the second pass after the closes
				for _, l := range []string{leaseC, leaseD} {
					_ = h.eng.Down(ctx, l, dockerio.DownOptions{})
				}
			}
		}}
	}
	leases := []string{leaseA, leaseB, leaseC, leaseD}
	h.reg.setLive(leases...)
	h.start()
	ids := map[string]string{}
	for _, l := range leases {
		ids[l] = h.claimWarm(l)
	}
	h.idle()
	h.up(leaseC, ids[leaseC])
	h.up(leaseD, ids[leaseD])

	// All four close; C's and D's containers are still there at the first pass
	// (which releases A's and B's: two surplus) and gone by the second (which
	// removes those two and releases C's and D's: two more).
	h.reg.setLive()
	armed.Store(true)
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseA})
	h.eventually("every release trimmed back to the pool's size", func() bool {
		return h.op("released") == 4 && len(h.poolNets()) == 1 && !h.report().Running
	})
	if h.op("removed") != 4 || h.free() != 1 {
		t.Fatalf("removed %d, free %d; want 4 and 1", h.op("removed"), h.free())
	}
}

// A claim batch whose commit fails binds nothing: every waiter of the batch
// gets the error, the networks go back on the free list, and no binding is left
// in memory or in the journal; once the store heals, claims bind as before.
func TestNetpool_FailedClaimCommit_EveryWaiterErrs_NetworksFreeAgain_NothingBound(t *testing.T) {
	h := newHarness(t, 3)
	h.set.Quiet = time.Hour // no refill meanwhile: the three free networks are all there is
	h.reg.setLive(leaseA, leaseB, leaseC)
	h.start()
	initial := h.poolNets()
	h.faulty.FailCommits(nil, nil)
	hold := make(chan messages.PassReport) // holds the mailbox until read: the claims form one batch
	h.tree.Send(poolPath, &messages.GetPass{Reply: hold})
	var replies []chan messages.NetworkClaim
	for _, l := range []string{leaseA, leaseB, leaseA} { // A twice: two waiters on one claim
		r := make(chan messages.NetworkClaim, 1)
		replies = append(replies, r)
		h.tree.Send(poolPath, &messages.ClaimNetwork{Lease: l, Bind: true, Reply: r})
	}
	<-hold
	for i, r := range replies {
		select {
		case got := <-r:
			if !errors.Is(got.Err, supervisors.ErrInjected) || got.ID != "" {
				t.Fatalf("waiter %d of the failed batch got %+v, want the commit's error and no network", i, got)
			}
		case <-time.After(waitFor):
			t.Fatalf("waiter %d of the failed batch never answered", i)
		}
	}
	if n := h.faulty.Failed(); n != 1 {
		t.Fatalf("%d failed commits, want the batch's one", n)
	}
	for _, l := range []string{leaseA, leaseB} {
		if got := h.claim(l, false); got != "" {
			t.Fatalf("%s holds %q in memory after its claim's commit failed", l, got)
		}
	}
	if got := h.journal(); len(got) != 0 {
		t.Fatalf("journal %v after a failed claim commit", got)
	}
	if h.claims("error") != 2 || h.claims("warm") != 0 {
		t.Fatalf("claims error %d warm %d, want 2 and 0", h.claims("error"), h.claims("warm"))
	}

	// Healed: the networks the batch took are free again, each handed out once.
	h.faulty.Heal()
	seen := map[string]bool{}
	for _, l := range []string{leaseA, leaseB, leaseC} {
		id := h.claim(l, true)
		if !slices.Contains(initial, id) || seen[id] {
			t.Fatalf("%s got %q after heal, want one of %v not yet handed out (%v)", l, id, initial, seen)
		}
		seen[id] = true
	}
	if got := h.journal(); len(got) != 3 {
		t.Fatalf("journal %v after heal, want the three bindings", got)
	}
}
