package netpool

// The pool's trim at stop: with no lease bound it leaves no pool network
// behind (a restart refills), with a lease bound it keeps everything, the
// networks of leases closed just before the stop are released and removed
// unless something is left on them, and a refill cut by the stop makes
// nothing more.

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
)

func TestNetpoolStop_NoLeaseBound_RemovesEveryPoolNetwork_RestartRefills(t *testing.T) {
	h := newHarness(t, 3)
	h.start()
	h.idle()
	h.stop()
	if nets := h.poolNets(); len(nets) != 0 {
		t.Fatalf("%d pool networks left after a stop with no lease bound", len(nets))
	}
	if n := h.eng.Calls(fake.OpRemoveNetwork); n != 3 {
		t.Fatalf("%d network removals at stop, want the 3 free", n)
	}
	h.start()
	h.idle()
	if nets := h.poolNets(); len(nets) != 3 {
		t.Fatalf("%d pool networks after the restart, want it refilled to 3", len(nets))
	}
}

func TestNetpoolStop_LeaseBound_KeepsThePool(t *testing.T) {
	h := newHarness(t, 2)
	h.reg.setLive(leaseA)
	h.start()
	a := h.claimWarm(leaseA)
	h.idle()
	before := h.poolNets()
	h.stop()
	if after := h.poolNets(); len(after) != 3 || !slices.Contains(after, a) {
		t.Fatalf("pool networks %v after a stop with A bound (was %v): want all 3 kept", after, before)
	}
	if n := h.eng.Calls(fake.OpRemoveNetwork); n != 0 {
		t.Fatalf("%d network removals at a stop with a lease bound", n)
	}
	if j := h.journal(); j[a] != leaseA {
		t.Fatalf("journal %v: A's binding changed at stop", j)
	}
}

// Leases closed moments before the stop (no pass since): the idle network of
// one is released and removed; the other's still has a container on it, so it
// stays bound (the next start's pass settles it) and only it is left.
func TestNetpoolStop_LeasesClosedJustBefore_IdleNetworkReleasedAndRemoved_BusyOneKept(t *testing.T) {
	h := newHarness(t, 2)
	h.set.Quiet = time.Hour // no pass between the closes and the stop
	h.reg.setLive(leaseA, leaseB)
	h.start()
	a, b := h.claim(leaseA, true), h.claim(leaseB, true)
	if a == "" || b == "" {
		t.Fatalf("claims A %q B %q", a, b)
	}
	h.up(leaseA, a)
	h.reg.setLive()
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseA})
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseB})
	h.report() // answered behind the two: a stop is not queued behind user messages
	h.stop()
	if nets := h.poolNets(); !slices.Equal(nets, []string{a}) {
		t.Fatalf("pool networks %v after the stop, want only A's %s (a container on it)", nets, a)
	}
	if j := h.journal(); len(j) != 1 || j[a] != leaseA {
		t.Fatalf("journal %v, want A's binding kept and B's released", j)
	}
}

func TestNetpoolStop_DuringARefillWaitingForDocker_MakesNothingMore(t *testing.T) {
	h := newHarness(t, 3)
	h.busy = new(atomic.Int64)
	h.busy.Store(1) // the refill waits for Docker to be idle
	h.set.IdleWait = time.Minute
	h.startNoWait()
	h.eventually("the refill waiting", func() bool { return h.report().Running })
	start := time.Now()
	h.stop()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the stop took %s: it waited for the refill's idle wait", took)
	}
	if n := h.eng.Calls(fake.OpCreatePool); n != 0 || len(h.poolNets()) != 0 {
		t.Fatalf("%d creates, %d pool networks after a stop mid-refill", n, len(h.poolNets()))
	}
}

func TestNetpoolStop_SupervisorRestart_IsNoStop_PoolKept(t *testing.T) {
	h := newHarness(t, 2)
	h.start()
	h.idle()
	before := h.poolNets()
	root, _ := h.tree.Dir.Get("root")
	h.tree.Send("root", &messages.Crash{}) // root restarts: its children stop and come back
	h.eventually("root restarted", func() bool { return root.Restarts() == 1 })
	h.eventually("the pool back", func() bool { _, ok := h.tree.Dir.Get(poolPath); return ok })
	h.idle()
	if n := h.eng.Calls(fake.OpRemoveNetwork); n != 0 {
		t.Fatalf("%d network removals across a supervisor's restart, want none", n)
	}
	if after := h.poolNets(); !slices.Equal(after, before) {
		t.Fatalf("pool networks %v after the restart, want the same %v", after, before)
	}
}
