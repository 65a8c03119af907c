package main

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// refreshStatus is GET /runtime_refresh.
func (d *daemonProc) refreshStatus() messages.RuntimeRefreshStatus {
	d.t.Helper()
	var st messages.RuntimeRefreshStatus
	r := d.get("/runtime_refresh")
	if r.Status != http.StatusOK {
		d.t.Fatalf("GET /runtime_refresh: %d %s", r.Status, r.Body)
	}
	r.json(d.t, &st)
	return st
}

// contracts are the fred.runtime_contract labels of the lease's containers.
func contracts(t *testing.T, dc *client.Client, lease string) []string {
	t.Helper()
	var out []string
	for _, c := range leaseContainers(t, dc, lease) {
		out = append(out, c.Labels[dockerio.LabelRuntimeContract])
	}
	return out
}

// TestRuntimeRefresh_LeasesUnderThePreviousContract_RefreshedAcrossAKill9:
// three stateful leases created under the contract before the tenant seccomp
// profile are counted stale after berthd moves to the current one; one POST
// starts a run (a second is 409) that refreshes them one at a time, and berthd
// is killed -9 mid-run. The restarted berthd resumes the run from its
// journal: every lease ends refreshed with exactly one maintenance completion,
// new container IDs under the current contract, its data, and a published
// port that answers.
func TestRuntimeRefresh_LeasesUnderThePreviousContract_RefreshedAcrossAKill9(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "sku_profiles: {stateful: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 64}}",
		"runtime_refresh_max_concurrency: 1")
	old := strconv.Itoa(dockerio.ContractSeccomp - 1)
	d.startChild(true, "BERTH_TEST_CONTRACT="+old)
	leases := make([]string, 3)
	before := map[string]map[string]bool{}
	for i := range leases {
		leases[i] = provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "stateful", Quantity: 1})
		if code, body := putFile(t, hostPort(t, d, leases[i], "app", 0), "/data/marker", []byte(leases[i])); code >= 300 {
			t.Fatalf("write marker: %d %s", code, body)
		}
		if got := contracts(t, dc, leases[i]); !slices.Equal(got, []string{old}) {
			t.Fatalf("lease %s created under contracts %v, want %s", leases[i], got, old)
		}
		before[leases[i]] = containerIDs(t, dc, leases[i])
	}
	defer d.closeAll(dc, leases...)
	slices.Sort(leases)

	d.kill9() // berthd moves to the current contract
	d.startChild(true)
	st := d.refreshStatus()
	if st.Contract != dockerio.RuntimeContract || st.Active || st.Stale != 3 || !slices.Equal(st.StaleLeases, leases) {
		t.Fatalf("before the run: %+v, want the three leases stale", st)
	}
	if m := d.get("/metrics"); !strings.Contains(string(m.Body), "berth_runtime_stale_leases 3") {
		t.Errorf("berth_runtime_stale_leases is not 3")
	}
	// The shared-network gauge is the same read's (single-container leases share the default bridge).
	if got := d.metricValue("berth_runtime_shared_network_leases"); got != float64(len(st.SharedNetworkLeases)) {
		t.Errorf("berth_runtime_shared_network_leases %v, the read listed %d: %v", got, len(st.SharedNetworkLeases), st.SharedNetworkLeases)
	}
	if got := d.metricValue(`berth_runtime_inventory_total{outcome="ok"}`); got < 1 {
		t.Errorf(`berth_runtime_inventory_total{outcome="ok"} %v after a read`, got)
	}
	if r := d.call(http.MethodPost, "/runtime_refresh", []byte(`{"concurrency": 9}`)); r.Status != http.StatusBadRequest {
		t.Fatalf("POST with a body: %d %s, want 400", r.Status, r.Body)
	}
	if r := d.call(http.MethodPost, "/runtime_refresh", nil); r.Status != http.StatusAccepted {
		t.Fatalf("POST /runtime_refresh: %d %s", r.Status, r.Body)
	}
	if r := d.call(http.MethodPost, "/runtime_refresh", []byte("{}")); r.Status != http.StatusConflict {
		t.Fatalf("a second POST while the run is active: %d %s, want 409", r.Status, r.Body)
	}

	// Kill -9 once the first lease has its completion, somewhere in the second.
	waitFirst := time.Now().Add(3 * time.Minute)
	for maintained(cb, leases) == 0 {
		if time.Now().After(waitFirst) {
			t.Fatalf("no refresh completed within 3 minutes: %+v\n%s", d.refreshStatus(), tail(d.log.String(), 40))
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
	d.kill9()
	d.startChild(true)

	st = d.runFinished(t)
	// Each lease settled with exactly one completion. The lease the kill cut
	// may have been rolled back by its own recovery: failed, restored, and
	// still stale unless the rollback recreated its release.
	var restored []string
	for i, row := range st.Leases {
		l, want := leases[i], messages.CallbackSuccess
		if row.Outcome == messages.RefreshFailed && row.Restored != nil {
			want = messages.CallbackFailed
			restored = append(restored, l)
		}
		if row.LeaseUUID != l || row.MaintenanceID == "" || (row.Outcome != messages.RefreshRefreshed && want == messages.CallbackSuccess) {
			t.Fatalf("row %d: %+v", i, row)
		}
		if done := oneCompletion(cb, l, 1); done.MaintenanceID != row.MaintenanceID || done.Status != want {
			t.Errorf("lease %s: completion %+v, want %s for %s", l, done, want, row.MaintenanceID)
		}
	}
	if len(st.Leases) != 3 || st.Skipped != 0 || st.Failed != len(restored) || len(st.StaleLeases) > len(restored) {
		t.Fatalf("after the run: %+v, want every lease refreshed or restored, only a restored one stale", st)
	}
	if st.Stale > 0 { // a new POST starts a new run for what is left
		left := st.StaleLeases[0]
		if r := d.call(http.MethodPost, "/runtime_refresh", nil); r.Status != http.StatusAccepted {
			t.Fatalf("a new POST after the run: %d %s", r.Status, r.Body)
		}
		if st = d.runFinished(t); st.Stale != 0 {
			t.Fatalf("after the second run: %+v", st)
		}
		if done := oneCompletion(cb, left, 2); done.Status != messages.CallbackSuccess {
			t.Errorf("lease %s: the second run's completion %+v", left, done)
		}
	}
	for _, l := range leases {
		for id := range containerIDs(t, dc, l) {
			if before[l][id] {
				t.Errorf("lease %s still runs container %s", l, id)
			}
		}
		if got := contracts(t, dc, l); !slices.Equal(got, []string{strconv.Itoa(dockerio.RuntimeContract)}) {
			t.Errorf("lease %s: contracts %v after the refresh", l, got)
		}
		code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, l, "app", 0), "/file?path=/data/marker")
		if err != nil || code != 200 || body != l {
			t.Errorf("lease %s: /data/marker after the refresh: %d %q %v", l, code, body, err)
		}
		if info := d.provisionInfo(l); info.Status != messages.StatusReady || info.FailCount != 0 || info.Reason != "" {
			t.Errorf("lease %s: %+v, want ready with fail_count 0 and no error", l, info)
		}
	}
}

// runFinished waits until the run is over and no lease is in flight.
func (d *daemonProc) runFinished(t *testing.T) messages.RuntimeRefreshStatus {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	st := d.refreshStatus()
	for ; st.Active || st.InFlight > 0; st = d.refreshStatus() {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not finish: %+v\n%s", st, tail(d.log.String(), 40))
		}
		time.Sleep(500 * time.Millisecond)
	}
	return st
}

// oneCompletion waits for the lease's n-th maintenance completion and checks
// no other follows it.
func oneCompletion(cb *callbackReceiver, lease string, n int) messages.Callback {
	cb.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(maintenanceCallbacks(cb, lease)) < n && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // a duplicate would follow its first delivery
	done := maintenanceCallbacks(cb, lease)
	if len(done) != n {
		cb.t.Fatalf("lease %s: maintenance completions %+v, want %d", lease, done, n)
	}
	return done[n-1]
}

// maintained is how many of leases have a maintenance completion.
func maintained(cb *callbackReceiver, leases []string) int {
	n := 0
	for _, l := range leases {
		if len(maintenanceCallbacks(cb, l)) > 0 {
			n++
		}
	}
	return n
}

// maintenanceCallbacks are the lease's distinct maintenance completions.
func maintenanceCallbacks(cb *callbackReceiver, lease string) []messages.Callback {
	var out []messages.Callback
	for _, c := range cb.forLease(lease) {
		if c.Body.MaintenanceID != "" {
			out = append(out, c.Body)
		}
	}
	return out
}

// TestRuntimeRefresh_DisabledAndNewerContract: runtime_refresh_max_concurrency
// 0 refuses POST with 403 (GET still answers); a lease whose container was
// created under a newer contract than this berthd's is not counted stale.
func TestRuntimeRefresh_DisabledAndNewerContract(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "runtime_refresh_max_concurrency: 0")
	d.startChild(true, "BERTH_TEST_CONTRACT="+strconv.Itoa(dockerio.RuntimeContract+1))
	lease := provisionReady(t, d, cb, flatManifest(nil))
	defer d.closeAll(dc, lease)
	ids := containerIDs(t, dc, lease)
	d.kill9()
	d.startChild(true)
	if r := d.call(http.MethodPost, "/runtime_refresh", nil); r.Status != http.StatusForbidden {
		t.Fatalf("POST while disabled: %d %s, want 403", r.Status, r.Body)
	}
	if st := d.refreshStatus(); st.Stale != 0 || st.Active || st.StaleLeases == nil || st.Leases == nil || st.SharedNetworkLeases == nil {
		t.Fatalf("GET while disabled: %+v, want nothing stale (a newer contract is not older), lists never null", st)
	}
	if got := containerIDs(t, dc, lease); len(got) != len(ids) {
		t.Fatalf("containers changed: %v → %v", ids, got)
	}
}
