package lease_test

// A lease and the warm network pool (lease.NetworkPool, a stub here; the pool
// itself is actors/netpool): a first attempt binds and runs on the pool's
// network, creating none of its own; a pool network gone before compose runs is
// dropped and the lease runs on its own network instead, with nothing left on
// the missing one.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/supervisors"
)

// stubPool answers every claim with id and records what it was asked; a Bind
// of a network the lease made is answered with that network unless refuse.
type stubPool struct {
	mu      sync.Mutex
	id      string
	refuse  bool
	binds   []bool
	made    []string
	dropped []string
}

func (p *stubPool) Bind(_ context.Context, _ string, made dockerio.Network) (dockerio.Network, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.made = append(p.made, made.ID)
	if p.refuse {
		return dockerio.Network{}, nil
	}
	return made, nil
}

// Claim answers the ID alone, as the pool does for a network it has not
// listed since a restart: the engine asks Docker for its name.
func (p *stubPool) Claim(_ context.Context, _ string, bind, _ bool) (dockerio.Network, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.binds = append(p.binds, bind)
	return dockerio.Network{ID: p.id}, nil
}

func (p *stubPool) Drop(_, id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropped = append(p.dropped, id)
}

// assertOnOwnNetwork checks that the lease runs on fred-<lease>, the only lease network.
func assertOnOwnNetwork(t *testing.T, h *harness, lease string) {
	t.Helper()
	own, err := h.eng.LeaseNetworks(context.Background())
	if err != nil || len(own) != 1 || own[0].Name != dockerio.ProjectName(lease) || own[0].Containers != 1 {
		t.Fatalf("lease networks %+v (%v): want fred-<lease> carrying the container", own, err)
	}
}

func (p *stubPool) seenMade() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.made...)
}

func (p *stubPool) seen() (binds []bool, dropped []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]bool(nil), p.binds...), append([]string(nil), p.dropped...)
}

func TestLease_FirstAttemptRunsOnItsPoolNetwork_CreatesNoNetwork(t *testing.T) {
	h := newHarness(t, nil)
	n, err := h.eng.CreatePoolNetwork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pool := &stubPool{id: n.ID}
	h.deps.Networks = pool
	spec := newSpec(1)
	h.start(spec)
	h.awaitReport("ready", isReady)
	if got, err := h.eng.InspectNetwork(context.Background(), n.ID); err != nil || got.Containers != 1 {
		t.Fatalf("pool network %+v (%v): want the lease's one container on it", got, err)
	}
	if own, _ := h.eng.LeaseNetworks(context.Background()); len(own) != 0 {
		t.Fatalf("lease networks %+v: the lease created its own beside the pool's", own)
	}
	if binds, dropped := pool.seen(); len(binds) != 1 || !binds[0] || len(dropped) != 0 {
		t.Fatalf("claims %v, drops %v: want one binding claim, no drop", binds, dropped)
	}
}

func TestLease_PoolNetworkGoneBeforeLaunch_DroppedAndRunsOnItsOwn(t *testing.T) {
	h := newHarness(t, nil)
	n, err := h.eng.CreatePoolNetwork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.eng.RemoveNetwork(context.Background(), n.ID); err != nil { // an operator's network prune
		t.Fatal(err)
	}
	pool := &stubPool{id: n.ID}
	h.deps.Networks = pool
	spec := newSpec(1)
	h.start(spec)
	h.awaitReport("ready", isReady)
	assertOnOwnNetwork(t, h, spec.Lease)
	if _, dropped := pool.seen(); len(dropped) != 1 || dropped[0] != n.ID {
		t.Fatalf("drops %v: want the gone %s dropped", dropped, n.ID)
	}
}

// The pool had nothing free: the first attempt creates a pool network itself
// and has it bound, so the lease's network goes back to the pool on close.
func TestLease_EmptyPool_FirstAttemptMakesAPoolNetworkAndRunsOnIt(t *testing.T) {
	h := newHarness(t, nil)
	pool := &stubPool{}
	h.deps.Networks = pool
	h.start(newSpec(1))
	h.awaitReport("ready", isReady)
	pooled, err := h.eng.PoolNetworks(context.Background())
	if err != nil || len(pooled) != 1 {
		t.Fatalf("pool networks %+v (%v): want the one the lease made", pooled, err)
	}
	if got, err := h.eng.InspectNetwork(context.Background(), pooled[0].ID); err != nil || got.Containers != 1 {
		t.Fatalf("made pool network %+v (%v): want the lease's one container on it", got, err)
	}
	if own, _ := h.eng.LeaseNetworks(context.Background()); len(own) != 0 {
		t.Fatalf("lease networks %+v: the lease created its own beside the pool's", own)
	}
	if made := pool.seenMade(); len(made) != 1 || made[0] != pooled[0].ID {
		t.Fatalf("bound %v: want the made network %s bound", made, pooled[0].ID)
	}
}

// The pool would not bind the made network: the lease runs on its own, and
// the made one is left empty for the pool to adopt.
func TestLease_EmptyPool_BindRefused_RunsOnItsOwnNetwork(t *testing.T) {
	h := newHarness(t, nil)
	pool := &stubPool{refuse: true}
	h.deps.Networks = pool
	spec := newSpec(1)
	h.start(spec)
	h.awaitReport("ready", isReady)
	assertOnOwnNetwork(t, h, spec.Lease)
	pooled, _ := h.eng.PoolNetworks(context.Background())
	if len(pooled) != 1 {
		t.Fatalf("pool networks %+v: want the made one", pooled)
	}
	if got, err := h.eng.InspectNetwork(context.Background(), pooled[0].ID); err != nil || got.Containers != 0 {
		t.Fatalf("made pool network %+v (%v): want it empty", got, err)
	}
}

// A provision's worker waits out an admission burst (Deps.Quiet) before its
// first Engine API request, and then provisions as usual.
func TestLease_ProvisionWaitsOutAnAdmissionBurst_ThenRuns(t *testing.T) {
	h := newHarness(t, nil)
	quiet := &supervisors.Quiet{Window: 300 * time.Millisecond, Max: 5 * time.Second}
	h.deps.Quiet = quiet
	quiet.Mark() // an admission was queued just now
	began := time.Now()
	h.start(newSpec(1))
	h.stayQuiet("an Engine API request inside the admission burst", 200*time.Millisecond, func() bool {
		return h.eng.Calls(fake.OpResolveImage)+h.eng.Calls(fake.OpPinnedImage)+h.eng.Calls(fake.OpEnsureNetwork) > 0
	})
	h.awaitReport("ready", isReady)
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("ready after %s: the worker did not wait for the 300ms quiet window", took)
	}
}
