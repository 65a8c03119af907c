package main

// Single-container leases on Docker's isolated default bridge ("icc": false,
// .ci/docker-up.sh), on real Docker: they land there, cannot reach each other
// by any address, and answer on their published ports; a stack reaches its own
// db by name and no bridged lease; leases on their own networks — one on a
// pool network that served an earlier lease — cannot reach each other either.

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"

	"github.com/berth-dev/berth/messages"
)

// ownNetworks is the config line of the per-lease-network tests: every lease on
// a network of its own (or the pool's), as before the default bridge.
const ownNetworks = "single_container_network: own"

// bridgedCallBudget is a flat lease on the default bridge: that of a lease on
// its own network but for the network's create (no network is created,
// claimed from the pool or refilled); the bridge is listed once, right before
// compose, to prove it still isolates (a list, not an inspect: an inspect
// carries every attached container's endpoint, a quarter of a megabyte at a
// thousand leases).
var bridgedCallBudget = func() map[string]int {
	b := maps.Clone(provisionCallBudget)
	b["network_create"], b["network_inspect"], b["network_list"] = 0, 0, 1
	return b
}()

const bridgedCallBudgetTotal = 9

// requireIsolatedBridge skips (fails under BERTH_REQUIRE_DOCKER) unless the
// shared dockerd isolates its default bridge.
func requireIsolatedBridge(t *testing.T, dc *client.Client) {
	t.Helper()
	n, err := dc.NetworkInspect(context.Background(), "bridge", network.InspectOptions{})
	if err != nil {
		t.Fatalf("inspect the default bridge: %v", err)
	}
	if n.Options["com.docker.network.bridge.enable_icc"] != "false" {
		skipOrFail(t, `dockerd does not isolate its default bridge ("icc": false; .ci/docker-up.sh sets it)`)
	}
}

// containerOf is the lease's one container's networks (name → IP).
func containerOf(t *testing.T, dc *client.Client, lease string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, ep := range endpointsOf(t, dc, lease) {
		out[name] = ep.IPAddress
	}
	return out
}

// bridgeDaemon is a daemon with the default config (single-container leases
// on the bridge) on a dockerd that isolates its default bridge.
func bridgeDaemon(t *testing.T) (*client.Client, *callbackReceiver, *daemonProc) {
	t.Helper()
	dc := dockerClient(t)
	requireIsolatedBridge(t, dc)
	return dc, newCallbackReceiver(t), newDaemonDir(t).startInProcess()
}

// assertCannotReach fails when from (a workload's host port) gets an answer
// from ip:8080 by real TCP, after proving from's /fetch works at all.
func assertCannotReach(t *testing.T, what, from, ip string) {
	t.Helper()
	if code, body, err := httpGetHostPort(from, "/fetch?url=http://127.0.0.1:8080/healthz"); err != nil || code != 200 {
		t.Fatalf("%s: the workload's own /fetch does not work: %d %q %v", what, code, body, err)
	}
	code, body, err := httpGetHostPort(from, "/fetch?url=http://"+ip+":8080/healthz")
	if err != nil || (code != 502 && code != 504) {
		t.Fatalf("%s: fetch of %s answered %d %q (%v): want it unreachable (502/504)", what, ip, code, body, err)
	}
}

func TestIsolation_SingleContainerLeases_OnTheIsolatedBridge_CannotReachEachOther_AnswerOnTheirPorts(t *testing.T) {
	t.Parallel()
	dc, cb, d := bridgeDaemon(t)
	a, b := provisionReady(t, d, cb, flatManifest(nil)), provisionReady(t, d, cb, flatManifest(nil))
	ips := map[string]string{}
	for _, l := range []string{a, b} {
		nets := containerOf(t, dc, l)
		if len(nets) != 1 || nets["bridge"] == "" {
			t.Fatalf("lease %s is on %v, want the default bridge alone", l, nets)
		}
		ips[l] = nets["bridge"]
		if ns := leaseNetworks(t, dc, l); len(ns) != 0 {
			t.Fatalf("lease %s has a network of its own: %s", l, ns[0].Name)
		}
		if code, _, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, l, "app", 0), "/healthz"); err != nil || code != 200 {
			t.Fatalf("lease %s on its published port: %d %v", l, code, err)
		}
	}
	assertCannotReach(t, "a → b", "127.0.0.1:"+hostPort(t, d, a, "app", 0), ips[b])
	assertCannotReach(t, "b → a", "127.0.0.1:"+hostPort(t, d, b, "app", 0), ips[a])
	// The host's network namespace (where Traefik runs) reaches both by their
	// bridge address: icc=false drops forwarding between containers only.
	for l, ip := range ips {
		if code, _, err := httpGetHostPort(ip+":8080", "/healthz"); err != nil || code != 200 {
			t.Fatalf("host → lease %s at %s:8080: %d %v", l, ip, code, err)
		}
	}
	if n := d.metricValue(`berth_network_pool_claims_total{outcome="bridged"}`); n != 2 {
		t.Fatalf("bridged claims %v, want 2", n)
	}
	// The runtime inventory counts neither as sharing a network: the bridge
	// isolates them (icc=false, checked above), so being on it shares nothing.
	if st := d.refreshStatus(); slices.Contains(st.SharedNetworkLeases, a) || slices.Contains(st.SharedNetworkLeases, b) {
		t.Fatalf("GET /runtime_refresh shared_network_leases %v lists a bridged lease", st.SharedNetworkLeases)
	} else if got := d.metricValue("berth_runtime_shared_network_leases"); got != float64(len(st.SharedNetworkLeases)) {
		t.Fatalf("berth_runtime_shared_network_leases %v, the read listed %v", got, st.SharedNetworkLeases)
	}
	d.closeAll(dc, a, b)
	deadline := time.Now().Add(time.Minute)
	for d.metricValue(`berth_network_pool_networks{state="bridged"}`) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the closed leases' bridge slots were never given back")
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func TestIsolation_StackReachesItsDbByName_NotABridgedLease(t *testing.T) {
	t.Parallel()
	dc, cb, d := bridgeDaemon(t)
	stack := map[string]any{"services": map[string]any{
		"web": map[string]any{"image": testImage(), "ports": map[string]any{"8080/tcp": map[string]any{}}},
		"db":  map[string]any{"image": testImage()},
	}}
	s := provisionReady(t, d, cb, stack, messages.LeaseItem{SKU: "docker-micro", Quantity: 1, ServiceName: "web"},
		messages.LeaseItem{SKU: "docker-micro", Quantity: 1, ServiceName: "db"})
	single := provisionReady(t, d, cb, flatManifest(nil))
	web := "127.0.0.1:" + hostPort(t, d, s, "web", 0)
	if code, _, err := httpGetHostPort(web, "/fetch?url=http://db:8080/healthz"); err != nil || code != 200 {
		t.Fatalf("stack web → its db by name: %d %v", code, err)
	}
	bridged := containerOf(t, dc, single)["bridge"]
	if bridged == "" {
		t.Fatalf("the single-container lease is not on the bridge: %v", containerOf(t, dc, single))
	}
	assertCannotReach(t, "stack → bridged lease", web, bridged)
	var webIP string
	for _, c := range leaseContainers(t, dc, s) {
		if c.Labels["fred.service_name"] != "web" {
			continue
		}
		for name, ep := range c.NetworkSettings.Networks {
			if name == "bridge" {
				t.Fatalf("the stack's web is on the default bridge")
			}
			webIP = ep.IPAddress
		}
	}
	assertCannotReach(t, "bridged lease → stack", "127.0.0.1:"+hostPort(t, d, single, "app", 0), webIP)
	d.closeAll(dc, s, single)
}

// Two leases on networks of their own cannot reach each other, one of them on
// a pool network that carried an earlier lease (closed, its network released
// and handed out again). Getting a released network back takes the pool being
// short when it releases: the next lease takes the one free network first.
func TestIsolation_OwnNetworks_OneReusedFromAnEarlierLease_CannotReachEachOther(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "network_pool_size: 1", ownNetworks).startInProcess()
	served := map[string]bool{}
	var live []string
	reused := ""
	for attempt := 0; attempt < 4 && reused == ""; attempt++ {
		e := provisionReady(t, d, cb, flatManifest(nil))
		netE, _ := networkOf(t, dc, e)
		served[netE] = true
		d.deprovisionUntilGone(e)
		released := d.metricValue(`berth_network_pool_operations_total{op="released"}`)
		f := provisionReady(t, d, cb, flatManifest(nil)) // takes the free network: the pool is short
		live = append(live, f)
		deadline := time.Now().Add(time.Minute)
		for d.metricValue(`berth_network_pool_operations_total{op="released"}`) == released && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
		}
		g := provisionReady(t, d, cb, flatManifest(nil))
		live = append(live, g)
		for _, l := range []string{f, g} {
			if id, _ := networkOf(t, dc, l); served[id] && reused == "" {
				reused = l
			}
		}
	}
	if reused == "" {
		t.Fatalf("no lease got a pool network back from an earlier lease in 4 tries (served %v)", served)
	}
	idR, _ := networkOf(t, dc, reused)
	other := live[slices.IndexFunc(live, func(l string) bool { return l != reused })]
	idO, _ := networkOf(t, dc, other)
	if idR == idO {
		t.Fatalf("leases %s and %s share network %s", reused, other, idR)
	}
	ipOf := func(l string) string {
		for _, ip := range containerOf(t, dc, l) {
			return ip
		}
		return ""
	}
	assertCannotReach(t, "reused → other", "127.0.0.1:"+hostPort(t, d, reused, "app", 0), ipOf(other))
	assertCannotReach(t, "other → reused", "127.0.0.1:"+hostPort(t, d, other, "app", 0), ipOf(reused))
	d.closeAll(dc, live...)
}

func TestProvision_DockerCallBudget_BridgedLeaseCreatesNoNetwork(t *testing.T) {
	requireIsolatedBridge(t, dockerClient(t))
	// Sequential: counts one lease's Docker requests; parallel load adds retries and polls.
	d := checkCallBudget(t, []string{"network_pool_size: 2"}, bridgedCallBudget, bridgedCallBudgetTotal, nil)
	if n := d.metricValue(`berth_network_pool_claims_total{outcome="bridged"}`); n != 2 {
		t.Errorf("bridged claims %v, want 2", n)
	}
}
