package lease_test

// Placement of a lease on Docker's isolated default bridge (the pool decides
// who is bound to it; a stub here): a release of one container runs there; a
// stack, or any lease the bridge has no room for, runs on a pool network; a
// bridged lease updated to a stack runs on fred-<lease>, and updated back to
// one container on the bridge again; a launch onto a bridge that no longer
// isolates is refused, definitely.

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

const stubBridgeID = "b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1b1"

// bridgePool binds a single-container lease's first claim to the bridge while
// it has room, any other first claim to a pool network, and answers every
// later claim with the lease's binding, as actors/netpool does.
type bridgePool struct {
	mu       sync.Mutex
	capacity int
	poolNet  string
	bridged  map[string]bool
	pooled   map[string]bool
	singles  []bool // every claim's single
}

func newBridgePool(capacity int, poolNet string) *bridgePool {
	return &bridgePool{capacity: capacity, poolNet: poolNet, bridged: map[string]bool{}, pooled: map[string]bool{}}
}

func (p *bridgePool) Claim(_ context.Context, l string, bind, single bool) (dockerio.Network, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.singles = append(p.singles, single)
	switch {
	case p.bridged[l]:
	case p.pooled[l]:
		return dockerio.Network{ID: p.poolNet}, nil
	case !bind:
		return dockerio.Network{}, nil
	case single && len(p.bridged) < p.capacity:
		p.bridged[l] = true
	default:
		p.pooled[l] = true
		return dockerio.Network{ID: p.poolNet}, nil
	}
	return dockerio.Network{ID: stubBridgeID, Name: dockerio.DefaultBridgeName, Bridged: true}, nil
}

func (p *bridgePool) Bind(_ context.Context, _ string, made dockerio.Network) (dockerio.Network, error) {
	return made, nil
}

func (p *bridgePool) Drop(string, string) {}

func (p *bridgePool) claimsSingle() []bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.singles)
}

// bridgeHarness is a harness whose leases claim from a bridgePool with room
// for capacity, beside one pool network.
func bridgeHarness(t *testing.T, capacity int) (*harness, *bridgePool) {
	h := newHarness(t, nil)
	n, err := h.eng.CreatePoolNetwork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	pool := newBridgePool(capacity, n.ID)
	h.deps.Networks = pool
	return h, pool
}

// networksOf is every container of the lease of generation gen with the
// networks it is on as the engine lists them (the default bridge is listed as
// none: it shares nothing).
func networksOf(t *testing.T, h *harness, l string, gen uint64) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, c := range leaseContainers(t, h, l) {
		if c.Generation == gen && c.State == "running" {
			out[c.Service] = c.Networks
		}
	}
	return out
}

func TestLease_SingleContainerRelease_RunsOnTheBridge_NoNetworkCreated(t *testing.T) {
	h, pool := bridgeHarness(t, 10)
	l := h.start(newSpec(1))
	h.awaitReport("ready", isReady)
	nets := networksOf(t, h, l.id, 1)
	if len(nets) != 1 || len(nets[dockerioDefaultService()]) != 0 {
		t.Fatalf("containers' networks %v: want the one container on the bridge (listed on none)", nets)
	}
	if own, _ := h.eng.LeaseNetworks(context.Background()); len(own) != 0 {
		t.Fatalf("lease networks %+v: none wanted", own)
	}
	if got, _ := h.eng.InspectNetwork(context.Background(), pool.poolNet); got.Containers != 0 {
		t.Fatalf("the pool network carries %d containers", got.Containers)
	}
	if s := pool.claimsSingle(); len(s) != 1 || !s[0] {
		t.Fatalf("claims %v: want one, single", s)
	}
}

func dockerioDefaultService() string { return newSpec(1).Services[0].Name }

func TestLease_StackAndFannedOutRelease_RunOnThePoolNetwork(t *testing.T) {
	for name, services := range map[string][]lease.ServiceSpec{
		"two services": {plainService("web", 1), plainService("db", 1)},
		"quantity 2":   {plainService("web", 2)},
	} {
		t.Run(name, func(t *testing.T) {
			h, pool := bridgeHarness(t, 10)
			l := h.start(newSpec(1, services...))
			h.awaitReport("ready", isReady)
			for svc, nets := range networksOf(t, h, l.id, 1) {
				if !slices.Equal(nets, []string{pool.poolNet}) {
					t.Fatalf("%s on %v, want the pool network %s", svc, nets, pool.poolNet)
				}
			}
			if s := pool.claimsSingle(); len(s) != 1 || s[0] {
				t.Fatalf("claims %v: want one, not single", s)
			}
		})
	}
}

func TestLease_SingleContainer_BridgeFull_FirstAttemptGetsThePoolNetwork(t *testing.T) {
	h, pool := bridgeHarness(t, 0)
	l := h.start(newSpec(1))
	h.awaitReport("ready", isReady)
	if nets := networksOf(t, h, l.id, 1); !slices.Equal(nets[dockerioDefaultService()], []string{pool.poolNet}) {
		t.Fatalf("networks %v, want the pool network %s", nets, pool.poolNet)
	}
}

// update sends the registry's validated update to services and waits until
// the lease has done n maintenances.
func (l *leaseUnderTest) update(id string, n int, services ...lease.ServiceSpec) {
	l.h.t.Helper()
	l.deliverOutbox() // a maintenance waits for an earlier one's completion to be delivered
	reply := make(chan error, 1)
	l.send(&lease.MaintainCommand{Maintain: lease.Maintain{Kind: lease.KindUpdate, ID: id, AdmittedAt: time.Now(),
		Target: updateTarget(services...)}, Reply: reply})
	if err := awaitReply(l.h.t, "the update's answer", reply, unitWait); err != nil {
		l.h.t.Fatalf("update %s: %v", id, err)
	}
	l.h.waitFor("maintenance "+id+" done", func() bool { return count(l.events(), lease.EvMaintenanceDone) >= n })
}

// deliverOutbox removes the lease's outbox rows, as the outbox does once
// their callbacks are delivered.
func (l *leaseUnderTest) deliverOutbox() {
	l.h.t.Helper()
	rows, err := l.h.store.OutboxOf(l.id)
	if err != nil {
		l.h.t.Fatal(err)
	}
	var keys []persistence.OutboxKey
	for _, r := range rows {
		keys = append(keys, r.Key)
	}
	if _, err := l.h.store.Commit(persistence.Write{DeleteOutbox: keys}); err != nil {
		l.h.t.Fatal(err)
	}
}

// A bridged lease updated to a stack runs it on fred-<lease> (the bridge has no
// DNS for web to find db by), and updated back to one container, on the bridge
// again: the placement follows from the lease's binding and the release.
func TestLease_BridgedLease_UpdatedToAStackRunsOnItsOwnNetwork_BackToOneOnTheBridge(t *testing.T) {
	h, _ := bridgeHarness(t, 10)
	l := h.start(newSpec(1, plainService("web", 1)))
	h.awaitReport("ready", isReady)
	if nets := networksOf(t, h, l.id, 1); len(nets) != 1 || len(nets["web"]) != 0 {
		t.Fatalf("provisioned on %v, want the bridge", nets)
	}

	l.update("to-stack", 1, plainService("web", 1), plainService("db", 1))
	own, err := h.eng.LeaseNetworks(context.Background())
	if err != nil || len(own) != 1 || own[0].Name != dockerio.ProjectName(l.id) {
		t.Fatalf("lease networks %+v (%v): want fred-<lease>", own, err)
	}
	gen := l.state().Generation
	nets := networksOf(t, h, l.id, gen)
	if len(nets) != 2 || !slices.Equal(nets["web"], []string{own[0].ID}) || !slices.Equal(nets["db"], []string{own[0].ID}) {
		t.Fatalf("stack of generation %d on %v, want both on fred-<lease> %s", gen, nets, own[0].ID)
	}

	l.update("to-single", 2, plainService("web", 1))
	gen = l.state().Generation
	if nets := networksOf(t, h, l.id, gen); len(nets) != 1 || len(nets["web"]) != 0 {
		t.Fatalf("back to one container (generation %d) on %v, want the bridge", gen, nets)
	}
}

// The daemon no longer isolates its default bridge (icc turned back on): the
// launch is refused and the lease fails saying why; nothing runs.
func TestLease_BridgeNoLongerIsolated_LaunchRefused_LeaseFails(t *testing.T) {
	h, _ := bridgeHarness(t, 10)
	h.eng.SetBridge(dockerio.BridgeFacts{ID: stubBridgeID, Reason: "inter-container communication is on"})
	l := h.start(newSpec(1))
	r := h.awaitReport("failed", func(r messages.LeaseReport) bool { return r.Status == string(lease.Failed) })
	if !strings.Contains(r.Info.Message, "no longer isolates") {
		t.Fatalf("failure %+v", r.Info)
	}
	for _, c := range l.containers() {
		if c.State == "running" {
			t.Fatalf("a container runs: %+v", c)
		}
	}
}
