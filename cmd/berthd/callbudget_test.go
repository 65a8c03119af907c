package main

// The per-lease Docker call budget, measured on the real engine: the requests
// berthd's adapter makes (berth_docker_requests_total{op}, counted in its
// transport) for one flat single-container lease from POST /provision to its
// success callback. ARCHITECTURE.md's "Docker calls per lease" table is this
// test's budget; a change that adds calls must change both.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// provisionCallBudget is the most Engine API requests one flat lease may cost
// (a tag another lease resolved before it, the image present, startup_verify
// 1s), by op and in all, with the warm network pool off. Measured 22 before the
// launch-facts work (ARCHITECTURE.md).
var provisionCallBudget = map[string]int{
	"distribution_inspect": 1, // the tag, confirmed with its registry (never the local copy)
	"image_inspect":        1, // is that digest's content present? (by ID after: cached)
	"network_create":       1, // the create comes first; only a 409 lists
	"network_inspect":      1, // the lease network verified by its exact ID before compose
	"network_list":         0, // compose's external-network look-up is answered from that
	"container_list":       2, // foreign-container check (answers compose's first), compose's start (it is the launched cohort)
	"container_create":     1,
	"container_inspect":    2, // compose's after create, the verification's
	"container_start":      1,
	"ping":                 0,
	"other":                0,
}

const provisionCallBudgetTotal = 10

// pooledCallBudget is the same lease with the warm pool on, counted until the
// pool has refilled: the provision itself neither creates nor inspects a
// network (the pool's is known by ID; a launch finds it gone only by failing);
// the pool's refill pass, off the critical path, lists the pool once and
// creates one network. The provision's own path is 8.
var pooledCallBudget = map[string]int{
	"distribution_inspect": 1,
	"image_inspect":        1,
	"network_create":       1, // the refill, after the lease's claim
	"network_inspect":      0, // the bound network is not asked about
	"network_list":         1, // the refill pass's listing of the pool
	"container_list":       2,
	"container_create":     1,
	"container_inspect":    2,
	"container_start":      1,
	"ping":                 0,
	"other":                0,
}

const pooledCallBudgetTotal = 10

func TestProvision_DockerCallBudget_FlatLeaseWithinBudget(t *testing.T) {
	// Sequential: counts one lease's Docker requests; parallel load adds retries and polls.
	checkCallBudget(t, []string{"network_pool_size: 0", ownNetworks}, provisionCallBudget, provisionCallBudgetTotal, nil)
}

func TestProvision_DockerCallBudget_PooledLeaseCreatesNoNetworkOnItsPath(t *testing.T) {
	// Sequential: counts one lease's Docker requests; parallel load adds retries and polls.
	d := checkCallBudget(t, []string{"network_pool_size: 2", ownNetworks}, pooledCallBudget, pooledCallBudgetTotal, func(d *daemonProc) {
		// Quiet: the pool full and no pass running, so a lease's window holds
		// its own requests and the one refill it causes.
		deadline := time.Now().Add(30 * time.Second)
		for d.metricValue(`berth_network_pool_networks{state="free"}`) != 2 || d.poolPassRunning() {
			if time.Now().After(deadline) {
				t.Fatal("the network pool never settled at 2 free")
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	// Both leases ran on a warm network: the create counted is the refill's.
	if n := d.metricValue(`berth_network_pool_claims_total{outcome="warm"}`); n != 2 {
		t.Errorf("warm claims %v, want 2 (a lease created its own network)", n)
	}
}

// poolPassRunning reports whether the network pool's pass is in flight (its
// Describe on /debug/actors).
func (d *daemonProc) poolPassRunning() bool {
	d.t.Helper()
	var root messages.NodeInfo
	r := d.debugGet("/debug/actors")
	if r.Status != 200 || json.Unmarshal(r.Body, &root) != nil {
		return true
	}
	n := find(root, "root/netpool")
	return n == nil || n.InFlight > 0
}

func checkCallBudget(t *testing.T, config []string, budget map[string]int, budgetTotal int, settle func(*daemonProc)) *daemonProc {
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, append([]string{"reconcile_interval: 1h", "startup_verify_duration: 1s"}, config...)...).startInProcess()
	manifest := flatManifest(map[string]any{"args": []string{"serve"}})
	provision := func() map[string]float64 {
		lease := uuid.NewString()
		if settle != nil {
			settle(d)
		}
		before := d.dockerRequests()
		if r := d.provision(lease, cb.callbackURL(), manifest); r.Status != 202 {
			t.Fatalf("provision: %d %s", r.Status, r.Body)
		}
		if got := cb.waitFor(lease, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
			t.Fatalf("callback = %+v", got[0])
		}
		if settle != nil {
			settle(d) // the refill this lease caused is its cost too
		}
		after := d.dockerRequests()
		delta := map[string]float64{}
		for op, v := range after {
			if v-before[op] > 0 {
				delta[op] = v - before[op]
			}
		}
		t.Cleanup(func() { d.deprovisionUntilGone(lease) })
		return delta
	}
	// Let the start-up passes (reconciler, reclaimer, reaper, pool) finish first.
	time.Sleep(2 * time.Second)
	first := provision()
	t.Logf("first lease of its tag:\n%s", formatCalls(first))
	second := provision()
	t.Logf("second lease:\n%s", formatCalls(second))
	total := 0.0
	for op, n := range second {
		total += n
		if limit := budget[op]; n > float64(limit) {
			t.Errorf("%s: %v requests, budget %d", op, n, limit)
		}
	}
	if total > float64(budgetTotal) {
		t.Errorf("%v Engine API requests for one lease, budget %d", total, budgetTotal)
	}
	// Where the time went: every phase of both attempts is in the histogram.
	m := string(d.get("/metrics").Body)
	for _, phase := range []string{"images", "network", "volumes", "compose_up", "verify"} {
		if !strings.Contains(m, `berth_provision_phase_seconds_count{phase="`+phase+`"} 2`) {
			t.Errorf("berth_provision_phase_seconds lacks two %s observations:\n%s", phase, grepLines(m, "berth_provision_phase_seconds_count"))
		}
	}
	return d
}

// dockerRequests reads berth_docker_requests_total by op from /metrics.
func (d *daemonProc) dockerRequests() map[string]float64 {
	d.t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(string(d.get("/metrics").Body), "\n") {
		rest, ok := strings.CutPrefix(line, `berth_docker_requests_total{op="`)
		if !ok {
			continue
		}
		op, val, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(val, 64); err == nil {
			out[op] = v
		}
	}
	return out
}

func formatCalls(m map[string]float64) string {
	var ops []string
	total := 0.0
	for op, n := range m {
		ops = append(ops, op)
		total += n
	}
	sort.Strings(ops)
	var sb strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&sb, "  %-22s %3.0f\n", op, m[op])
	}
	fmt.Fprintf(&sb, "  %-22s %3.0f\n", "total", total)
	return sb.String()
}
