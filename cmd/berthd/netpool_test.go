package main

// The warm network pool on the real engine: a lease runs on a pre-created pool
// network (no fred-<lease> is created), no two leases ever share one, a closed
// lease's network goes back to the pool (or, surplus, away) once nothing of it
// is attached, the bindings survive a restart, and with the pool off a lease
// creates its own network and a pool left from before is removed.

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// poolNetworks lists the installation's pool networks by ID, each with the
// lease UUIDs of the containers attached to it.
func poolNetworks(t testing.TB, dc *client.Client, installation string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	ns, err := dc.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", "fred.installation_id="+installation), filters.Arg("label", "fred.network_scope=pool"))})
	if err != nil {
		t.Fatalf("list pool networks: %v", err)
	}
	out := map[string][]string{}
	for _, n := range ns {
		if !strings.HasPrefix(n.Name, "berth-pool-") || n.Labels["fred.lease_uuid"] != "" {
			t.Fatalf("pool network %s (%s) is not shaped as one: %v", n.Name, n.ID, n.Labels)
		}
		in, err := dc.NetworkInspect(ctx, n.ID, network.InspectOptions{})
		if err != nil {
			continue // removed since the list
		}
		out[n.ID] = []string{}
		for id := range in.Containers {
			c, err := dc.ContainerInspect(ctx, id)
			if err != nil {
				continue
			}
			out[n.ID] = append(out[n.ID], c.Config.Labels["fred.lease_uuid"])
		}
	}
	return out
}

// waitPool waits until the installation holds want pool networks, and returns them.
func waitPool(t testing.TB, dc *client.Client, installation string, want int, timeout time.Duration) map[string][]string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := poolNetworks(t, dc, installation)
		if len(got) == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pool networks, want %d: %v", len(got), want, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// networkOf returns the one network the lease's container is attached to.
func networkOf(t testing.TB, dc *client.Client, lease string) (id, name string) {
	t.Helper()
	nets := endpointsOf(t, dc, lease)
	if len(nets) != 1 {
		t.Fatalf("lease %s's container is on %d networks, want 1", lease, len(nets))
	}
	for name, ep := range nets {
		return ep.NetworkID, name
	}
	return "", ""
}

// endpointsOf is the networks of the lease's one container, by network name.
func endpointsOf(t testing.TB, dc *client.Client, lease string) map[string]*network.EndpointSettings {
	t.Helper()
	cs := leaseContainers(t, dc, lease)
	if len(cs) != 1 {
		t.Fatalf("lease %s has %d containers, want 1", lease, len(cs))
	}
	c, err := dc.ContainerInspect(context.Background(), cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	return c.NetworkSettings.Networks
}

// metricValue reads one sample of the daemon's /metrics ("" labels: unlabelled).
func (d *daemonProc) metricValue(series string) float64 {
	d.t.Helper()
	for _, line := range strings.Split(string(d.get("/metrics").Body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// waitNetworkPoolSettled waits, when the daemon runs a network pool, until it
// holds at least n free networks (or its configured size) and no pass runs, so
// a benchmark round starts on a warm pool and not beside its refill.
func (d *daemonProc) waitNetworkPoolSettled(t testing.TB, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		free := d.metricValue(`berth_network_pool_networks{state="free"}`)
		size := d.configuredPoolSize()
		if size == 0 || (free >= float64(min(n, size)) && !d.poolPassRunning()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("network pool: %v free after 5 min, want %d", free, min(n, size))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// configuredPoolSize reads network_pool_size from the daemon's config file (16,
// the default, when absent).
func (d *daemonProc) configuredPoolSize() int {
	raw, err := os.ReadFile(d.cfgPath)
	if err != nil {
		return 0
	}
	size := 16
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "network_pool_size:"); ok {
			size, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return size
}

func TestNetworkPool_LeaseRunsOnWarmNetwork_NeverShared_ReturnedAfterClose_SurvivesRestart(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "network_pool_size: 2", ownNetworks).startInProcess()
	inst := benchInstallationID(t, filepath.Join(d.dir, "data"))
	warm := waitPool(t, dc, inst, 2, 30*time.Second)
	// Docker lists a network a moment before the pool hears it was made.
	d.waitNetworkPoolSettled(t, 2)

	manifest := flatManifest(map[string]any{"args": []string{"serve"}})
	a, b := uuid.NewString(), uuid.NewString()
	for _, l := range []string{a, b} {
		if r := d.provision(l, cb.callbackURL(), manifest); r.Status != 202 {
			t.Fatalf("provision: %d %s", r.Status, r.Body)
		}
	}
	for _, l := range []string{a, b} {
		if got := cb.waitFor(l, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
			t.Fatalf("callback of %s = %+v", l, got[0])
		}
	}
	netA, nameA := networkOf(t, dc, a)
	netB, _ := networkOf(t, dc, b)
	if _, ok := warm[netA]; !ok || !strings.HasPrefix(nameA, "berth-pool-") {
		t.Fatalf("lease A runs on %s (%s), not on a warm pool network %v", nameA, netA, warm)
	}
	if _, ok := warm[netB]; !ok || netB == netA {
		t.Fatalf("lease B runs on %s: want the other warm network (A has %s)", netB, netA)
	}
	for _, l := range []string{a, b} {
		if ns := leaseNetworks(t, dc, l); len(ns) != 0 {
			t.Fatalf("lease %s has its own network %s beside the pool's", l, ns[0].Name)
		}
	}
	if n := d.metricValue(`berth_network_pool_claims_total{outcome="warm"}`); n != 2 {
		t.Fatalf("warm claims %v, want 2", n)
	}
	// The pool refills behind them: two free again, two bound.
	pool := waitPool(t, dc, inst, 4, 30*time.Second)
	for id, leases := range pool {
		if len(leases) > 1 {
			t.Fatalf("pool network %s carries %d containers: %v", id, len(leases), leases)
		}
	}

	// Restart: the bindings are journaled; A and B keep their networks, the
	// free ones are adopted, not re-created.
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	d.startInProcess()
	if got := waitPool(t, dc, inst, 4, 10*time.Second); len(got) != 4 {
		t.Fatal("pool changed over a restart")
	}
	for id := range pool {
		if _, ok := poolNetworks(t, dc, inst)[id]; !ok {
			t.Fatalf("pool network %s is gone after a restart", id)
		}
	}
	if n := d.metricValue(`berth_network_pool_networks{state="bound"}`); n != 2 {
		t.Fatalf("bound pool networks after restart %v, want 2", n)
	}

	// Close A: its network is released once nothing of A is attached; with B
	// bound and two free already, it is surplus and removed. Nothing named for
	// A is left.
	d.deprovisionUntilGone(a)
	assertGone(t, dc, a)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := poolNetworks(t, dc, inst)
		_, stillA := got[netA]
		bound := d.metricValue(`berth_network_pool_networks{state="bound"}`)
		if len(got) == 3 && bound == 1 && !stillA {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing A: pool %v (A's network %s present: %v), bound %v; want 3 networks, 1 bound, A's removed",
				got, netA, stillA, bound)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if id, _ := networkOf(t, dc, b); id != netB {
		t.Fatalf("lease B moved from %s to %s", netB, id)
	}
	d.deprovisionUntilGone(b)
	assertGone(t, dc, b)
	for id, leases := range waitPool(t, dc, inst, 2, 30*time.Second) {
		if len(leases) != 0 {
			t.Fatalf("free pool network %s still carries %v", id, leases)
		}
	}
	assertPoolEmpty(t, d)
}

// With the pool drained by a burst, the leases that found it empty create pool
// networks themselves and have them bound: every lease runs on a network of
// its own that is a pool network, and a close gives it back to the pool (or,
// surplus, the pool removes it) — the reclaimer has nothing to remove.
func TestNetworkPool_BurstBeyondThePool_LeasesMakePoolNetworks_ClosesReturnThem(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "network_pool_size: 1", ownNetworks).startInProcess()
	inst := benchInstallationID(t, filepath.Join(d.dir, "data"))
	waitPool(t, dc, inst, 1, 30*time.Second)
	d.waitNetworkPoolSettled(t, 1)

	manifest := flatManifest(map[string]any{"args": []string{"serve"}})
	leases := []string{uuid.NewString(), uuid.NewString(), uuid.NewString()}
	for _, l := range leases {
		if r := d.provision(l, cb.callbackURL(), manifest); r.Status != 202 {
			t.Fatalf("provision: %d %s", r.Status, r.Body)
		}
	}
	seen := map[string]string{}
	for _, l := range leases {
		if got := cb.waitFor(l, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
			t.Fatalf("callback of %s = %+v", l, got[0])
		}
		id, name := networkOf(t, dc, l)
		if !strings.HasPrefix(name, "berth-pool-") {
			t.Fatalf("lease %s runs on %s, not on a pool network", l, name)
		}
		if other, shared := seen[id]; shared {
			t.Fatalf("leases %s and %s share network %s", other, l, name)
		}
		seen[id] = l
		if ns := leaseNetworks(t, dc, l); len(ns) != 0 {
			t.Fatalf("lease %s has its own network %s beside the pool's", l, ns[0].Name)
		}
	}
	warm := d.metricValue(`berth_network_pool_claims_total{outcome="warm"}`)
	made := d.metricValue(`berth_network_pool_claims_total{outcome="made"}`)
	if warm+made != 3 || made < 2 {
		t.Fatalf("claims: %v warm, %v made; want 3 in all, at least 2 made (one was warm)", warm, made)
	}
	if n := d.metricValue(`berth_network_pool_networks{state="bound"}`); n != 3 {
		t.Fatalf("bound pool networks %v, want 3", n)
	}

	for _, l := range leases {
		d.deprovisionUntilGone(l)
	}
	for _, l := range leases {
		assertGone(t, dc, l)
	}
	// All three go back to the pool, which keeps one free and removes the rest.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := poolNetworks(t, dc, inst)
		bound := d.metricValue(`berth_network_pool_networks{state="bound"}`)
		released := d.metricValue(`berth_network_pool_operations_total{op="released"}`)
		if len(got) == 1 && bound == 0 && released == 3 {
			for id, on := range got {
				if len(on) != 0 {
					t.Fatalf("free pool network %s still carries %v", id, on)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after closing all: pool %v, %v bound, %v released; want 1 free network, 0 bound, 3 released", got, bound, released)
		}
		time.Sleep(250 * time.Millisecond)
	}
	if n := d.metricValue(`berth_network_reclamation_total{outcome="removed"}`); n > 0 {
		t.Fatalf("the reclaimer removed %v networks: the leases' networks were not the pool's", n)
	}
	assertPoolEmpty(t, d)
}

func TestNetworkPool_Off_LeaseCreatesItsOwnNetwork_LeftoverPoolRemoved(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "network_pool_size: 2", ownNetworks).startInProcess()
	inst := benchInstallationID(t, filepath.Join(d.dir, "data"))
	waitPool(t, dc, inst, 2, 30*time.Second)
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: exit %d", code)
	}
	// The operator turns the pool off: what it held is removed.
	if err := os.WriteFile(d.cfgPath, []byte(testConfig(filepath.Join(d.dir, "data"), d.api, d.debug, "network_pool_size: 0", ownNetworks)), 0o600); err != nil {
		t.Fatal(err)
	}
	d.startInProcess()
	waitPool(t, dc, inst, 0, 30*time.Second)

	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(map[string]any{"args": []string{"serve"}})); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	if got := cb.waitFor(lease, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("callback = %+v", got[0])
	}
	_, name := networkOf(t, dc, lease)
	if name != "fred-"+lease {
		t.Fatalf("lease runs on %s, want its own fred-%s", name, lease)
	}
	if n := len(poolNetworks(t, dc, inst)); n != 0 {
		t.Fatalf("%d pool networks with the pool off", n)
	}
	d.deprovisionUntilGone(lease)
	assertGone(t, dc, lease)
	assertPoolEmpty(t, d)
}

func TestNetworkPool_CleanStopWithNoLease_LeavesNoPoolNetwork_RestartRefills(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	d := newDaemonDir(t, "network_pool_size: 3", ownNetworks).startInProcess()
	inst := benchInstallationID(t, filepath.Join(d.dir, "data"))
	waitPool(t, dc, inst, 3, 2*time.Minute)
	d.waitNetworkPoolSettled(t, 3)
	if code := d.stop(); code != 0 {
		t.Fatalf("berthd exited %d\n%s", code, d.log.String())
	}
	if left := poolNetworks(t, dc, inst); len(left) != 0 {
		t.Fatalf("%d pool networks left after a clean stop with no lease: %v", len(left), left)
	}
	d.startInProcess()
	waitPool(t, dc, inst, 3, 2*time.Minute) // the refill waits for Docker to be idle: slow on a busy machine
}
