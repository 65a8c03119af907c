package netpool

// Single-container leases on Docker's isolated default bridge: the pool hands
// out the bridge's slots, journaled like its networks, up to the capacity found
// at start and only while the daemon isolates it; a bridged lease is answered
// the bridge again on every claim and across restarts; its slot comes back once
// the lease is gone and nothing of it is left, with no Docker removal; a failed
// commit binds nothing.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/supervisors"
)

const bridgeID = "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"

// bridgedHarness is a pool of size whose settings put up to capacity
// single-container leases on an isolated default bridge.
func bridgedHarness(t *testing.T, size, capacity int) *harness {
	h := newHarness(t, size)
	h.set.Bridged = true
	h.set.Bridge = dockerio.BridgeFacts{ID: bridgeID, Subnet: "10.200.0.0/20", Isolated: true, Capacity: capacity}
	return h
}

// claimSingle claims as the first attempt (bind) or a later one of a lease
// whose release runs one container.
func (h *harness) claimSingle(lease string, bind bool) dockerio.Network {
	h.t.Helper()
	cl := &Client{Tree: h.tree, Path: poolPath, Timeout: waitFor}
	n, err := cl.Claim(context.Background(), lease, bind, true)
	if err != nil {
		h.t.Fatalf("claim %s (single, bind %t): %v", lease, bind, err)
	}
	return n
}

func isBridge(n dockerio.Network) bool {
	return n.Bridged && n.ID == bridgeID && n.Name == dockerio.DefaultBridgeName
}

func (h *harness) bridged() int {
	return int(testutil.ToFloat64(h.m.networks.WithLabelValues("bridged")))
}

// journaledBridged is the bridged leases as the store holds them.
func (h *harness) journaledBridged() map[string]bool {
	h.t.Helper()
	return h.loaded().Bridged
}

// upBridged runs lease's one container on the default bridge.
func (h *harness) upBridged(lease string) {
	h.t.Helper()
	img := h.eng.AddImage("registry.example/app:1", dockerio.ImageInfo{})
	plan := dockerio.Plan{Lease: lease, Tenant: "t", BackendName: backend, InstallationID: installation, OperationID: "op1",
		Generation: 1, NetworkID: bridgeID, NetworkName: dockerio.DefaultBridgeName, NetworkBridged: true, HostBindIP: "127.0.0.1",
		Services: []dockerio.ServicePlan{{Name: "web", SKU: "s", Quantity: 1, CPUCores: 1, MemoryMB: 64,
			Service: manifest.Service{Image: "registry.example/app:1"}, ImageID: img.ID}}}
	if err := h.eng.Up(context.Background(), plan); err != nil {
		h.t.Fatal(err)
	}
}

func TestNetpool_SingleClaims_BridgedUpToCapacity_StacksAndTheRestGetPoolNetworks(t *testing.T) {
	h := bridgedHarness(t, 2, 2)
	h.reg.setLive(leaseA, leaseB, leaseC, leaseD)
	h.start()
	for _, l := range []string{leaseA, leaseB} {
		if n := h.claimSingle(l, true); !isBridge(n) {
			t.Fatalf("%s (single) got %+v, want the default bridge", l, n)
		}
	}
	// The bridge is full: a third single-container lease gets a pool network.
	if n := h.claimSingle(leaseC, true); n.Bridged || n.ID == "" || n.ID == bridgeID {
		t.Fatalf("C (single, bridge full) got %+v, want a pool network", n)
	}
	// A stack never goes on the bridge.
	if id := h.claim(leaseD, true); id == "" || id == bridgeID {
		t.Fatalf("D (stack) got %q, want a pool network", id)
	}
	// Every later claim answers the bridge again, bound or not.
	for _, bind := range []bool{false, true} {
		if n := h.claimSingle(leaseA, bind); !isBridge(n) {
			t.Fatalf("A again (bind %t) got %+v", bind, n)
		}
	}
	cl := &Client{Tree: h.tree, Path: poolPath, Timeout: waitFor}
	if n, err := cl.Claim(context.Background(), leaseB, false, false); err != nil || !isBridge(n) {
		t.Fatalf("B claimed for a stack release got %+v %v: the binding is the lease's, whatever its release", n, err)
	}
	if got := h.journaledBridged(); len(got) != 2 || !got[leaseA] || !got[leaseB] {
		t.Fatalf("journal bridged %v, want A and B", got)
	}
	if h.bridged() != 2 || h.bound() != 2 || h.claims("bridged") != 2 || h.claims("rebound") != 3 {
		t.Fatalf("gauges bridged %d bound %d, claims bridged %d rebound %d", h.bridged(), h.bound(), h.claims("bridged"), h.claims("rebound"))
	}
}

// With the daemon not isolating its default bridge (or
// single_container_network: own), a single-container lease is placed as
// before: a pool network.
func TestNetpool_BridgeNotIsolated_SingleClaimGetsAPoolNetwork(t *testing.T) {
	h := bridgedHarness(t, 1, 100)
	h.set.Bridged = false
	h.set.Bridge.Isolated, h.set.Bridge.Reason = false, "inter-container communication is on"
	h.reg.setLive(leaseA)
	h.start()
	if n := h.claimSingle(leaseA, true); n.Bridged || n.ID == "" || n.ID == bridgeID {
		t.Fatalf("A got %+v, want a pool network", n)
	}
	if len(h.journaledBridged()) != 0 || h.claims("bridged") != 0 {
		t.Fatalf("journal bridged %v, claims bridged %d", h.journaledBridged(), h.claims("bridged"))
	}
}

// A bridged binding survives restarts (replayed, and from a snapshot: every
// second event snapshots here), also one where the bridge is no longer
// offered: a lease is never moved silently.
func TestNetpool_BridgedBinding_ReplayedAfterRestart_KeptWhenNoLongerOffered(t *testing.T) {
	h := bridgedHarness(t, 1, 10)
	h.reg.setLive(leaseA, leaseB, leaseC)
	h.start()
	for _, l := range []string{leaseA, leaseB, leaseC} {
		if n := h.claimSingle(l, true); !isBridge(n) {
			t.Fatalf("%s got %+v", l, n)
		}
	}
	h.restart()
	for _, l := range []string{leaseA, leaseB, leaseC} {
		if n := h.claimSingle(l, false); !isBridge(n) {
			t.Fatalf("%s after restart got %+v", l, n)
		}
	}
	if h.bridged() != 3 {
		t.Fatalf("bridged gauge %d after restart, want 3", h.bridged())
	}
	h.stop()
	h.set.Bridged, h.set.Bridge.Isolated = false, false
	h.start()
	if n := h.claimSingle(leaseA, false); !isBridge(n) {
		t.Fatalf("A with the bridge no longer offered got %+v, want it kept on the bridge", n)
	}
	if n := h.claimSingle(leaseX, true); n.Bridged {
		t.Fatalf("a new lease got the bridge no longer offered: %+v", n)
	}
}

// A closed lease's slot comes back once no container of it is left (a stopped
// one would restart on the bridge), and nothing is removed from Docker for it.
func TestNetpool_BridgedLeaseClosed_SlotReleasedOnceNoContainerLeft_NoDockerRemoval(t *testing.T) {
	ctx := context.Background()
	h := bridgedHarness(t, 1, 1)
	h.reg.setLive(leaseA, leaseB)
	h.start()
	if n := h.claimSingle(leaseA, true); !isBridge(n) {
		t.Fatalf("A got %+v", n)
	}
	h.upBridged(leaseA)
	h.idle()
	nets := h.poolNets()
	h.reg.setLive(leaseB)
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseA})
	h.eventually("a pass to find A's container", func() bool { return h.op("in_use") >= 1 })
	h.eventually("the pass done", func() bool { return !h.report().Running })
	if !h.journaledBridged()[leaseA] || h.op("bridge_released") != 0 {
		t.Fatalf("A's slot went with its container there (journal %v)", h.journaledBridged())
	}
	if n := h.claimSingle(leaseB, true); n.Bridged {
		t.Fatalf("B got %+v while the bridge is full", n)
	}
	if err := h.eng.Down(ctx, leaseA, dockerio.DownOptions{}); err != nil {
		t.Fatal(err)
	}
	h.tree.Send(poolPath, &messages.LeaseGone{Lease: leaseA})
	h.eventually("A's slot released", func() bool { return h.op("bridge_released") == 1 })
	if h.journaledBridged()[leaseA] || h.bridged() != 0 || h.op("released") != 0 || h.op("vanished") != 0 {
		t.Fatalf("after the release: journal %v, gauge %d, released %d vanished %d", h.journaledBridged(), h.bridged(), h.op("released"), h.op("vanished"))
	}
	if n := h.eng.Calls(fake.OpRemoveNetwork); n != 0 {
		t.Fatalf("%d network removals for a bridged lease", n)
	}
	if got := h.poolNets(); len(got) < len(nets) {
		t.Fatalf("pool networks %v, before %v", got, nets)
	}
	if n := h.claimSingle(leaseC, true); !isBridge(n) {
		t.Fatalf("C got %+v, want A's slot", n)
	}
}

// A first attempt that gave up waiting for its claim gives its slot back.
func TestNetpool_AbandonedBridgedClaim_SlotFreeAgain(t *testing.T) {
	h := bridgedHarness(t, 1, 1)
	h.reg.setLive(leaseA, leaseB)
	h.start()
	if n := h.claimSingle(leaseA, true); !isBridge(n) {
		t.Fatalf("A got %+v", n)
	}
	h.tree.Send(poolPath, &messages.DropNetwork{Lease: leaseA})
	if n := h.claimSingle(leaseA, false); n.ID != "" {
		t.Fatalf("A still holds %+v after abandoning", n)
	}
	if n := h.claimSingle(leaseB, true); !isBridge(n) {
		t.Fatalf("B got %+v, want the abandoned slot", n)
	}
}

// A bridged claim whose commit fails binds nothing: every waiter gets the
// error, no slot is taken, and the lease holds nothing.
func TestNetpool_FailedBridgedClaimCommit_BindsNothing(t *testing.T) {
	h := bridgedHarness(t, 1, 1)
	h.set.Quiet = time.Hour
	h.reg.setLive(leaseA, leaseB)
	h.start()
	h.faulty.FailCommits(nil, nil)
	cl := &Client{Tree: h.tree, Path: poolPath, Timeout: waitFor}
	if n, err := cl.Claim(context.Background(), leaseA, true, true); !errors.Is(err, supervisors.ErrInjected) || n.ID != "" {
		t.Fatalf("A's claim with a failing commit: %+v %v", n, err)
	}
	h.faulty.Heal()
	if n := h.claimSingle(leaseA, false); n.ID != "" {
		t.Fatalf("A holds %+v after its failed commit", n)
	}
	if len(h.journaledBridged()) != 0 || h.bridged() != 0 || h.claims("error") != 1 {
		t.Fatalf("journal %v, gauge %d, errors %d", h.journaledBridged(), h.bridged(), h.claims("error"))
	}
	// The slot is still there (capacity 1).
	if n := h.claimSingle(leaseB, true); !isBridge(n) {
		t.Fatalf("B got %+v, want the slot the failed commit never took", n)
	}
}
