package main

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

func TestProvision_FlatLease_ReachesReadyServesPortAndCallsBack(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := uuid.NewString()

	r := d.provision(lease, cb.callbackURL(), flatManifest(map[string]any{"args": []string{"serve", "-logs", "3"}}))
	if r.Status != 202 || !strings.Contains(string(r.Body), `"provision_id":"`+lease+`"`) {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	got := cb.waitFor(lease, 1, 2*time.Minute)
	if got[0].Body.Status != messages.CallbackSuccess || got[0].Body.BackendStorageID == "" || got[0].Body.Backend != "docker" {
		t.Fatalf("callback = %+v", got[0])
	}
	if !strings.Contains(got[0].Path, "operation_id=") {
		t.Fatalf("success callback went to %s, want the completion URL", got[0].Path)
	}

	var info messages.LeaseInfo
	ir := d.get("/info/" + lease)
	if ir.Status != 200 {
		t.Fatalf("info: %d %s", ir.Status, ir.Body)
	}
	ir.json(t, &info)
	if info.Host != "127.0.0.1" || len(info.Instances) != 1 || len(info.Services["app"].Instances) != 1 {
		t.Fatalf("info = %+v", info)
	}
	inst := info.Instances[0]
	binding, ok := inst.Ports["8080/tcp"]
	if !ok || binding.HostPort == "" || binding.HostIP != "127.0.0.1" || len(inst.ContainerID) != 12 || inst.Status != "running" {
		t.Fatalf("instance = %+v", inst)
	}
	code, body, err := httpGetHostPort("127.0.0.1:"+binding.HostPort, "/")
	if err != nil || code != 200 || !strings.HasPrefix(body, "ok ") {
		t.Fatalf("published port: %d %q %v", code, body, err)
	}

	lr := d.get("/logs/" + lease + "?tail=2")
	var logs map[string]string
	lr.json(t, &logs)
	if lr.Status != 200 || logs["app/0"] != "line 2\nline 3\n" {
		t.Fatalf("logs: %d %q", lr.Status, logs)
	}

	if pi := d.provisionInfo(lease); pi.Status != "ready" || pi.Quantity != 1 || pi.TerminalBudget == nil {
		t.Fatalf("provision info = %+v", pi)
	}
	if s := d.stats(); s.ActiveContainers != 1 || s.AllocatedMemoryMB != 512 {
		t.Fatalf("stats = %+v", s)
	}

	m := string(d.get("/metrics").Body)
	for _, want := range []string{
		`berth_lease_transitions_total{event="provision.started",from="reserved",to="provisioning"} 1`,
		`berth_lease_transitions_total{event="provision.succeeded",from="provisioning",to="ready"} 1`,
		`berth_callback_attempts_total{outcome="delivered"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}

	d.deprovisionUntilGone(lease)
	got = cb.waitFor(lease, 2, time.Minute)
	if got[1].Body.Status != messages.CallbackDeprovisioned || !strings.Contains(got[1].Path, "lifecycle_id=") {
		t.Fatalf("deprovision callback = %+v", got[1])
	}
	assertGone(t, dc, lease)
	assertPoolEmpty(t, d)
	if r := d.get("/info/" + lease); r.Status != 404 {
		t.Fatalf("info after close: %d", r.Status)
	}
	if cb.badSignatures() != 0 {
		t.Fatalf("%d callbacks with bad signatures", cb.badSignatures())
	}
}

// healthCheck is an active exec-form check of the workload's /healthz.
func healthCheck() map[string]any {
	return map[string]any{"test": []string{"CMD", "/workload", "probe", "http://127.0.0.1:8080/healthz"},
		"interval": "1s", "timeout": "1s", "retries": 1}
}

// healthCheckWithStart is healthCheck with a start period: failures during it do
// not count, so a slow starter is not unhealthy before it ever had a chance.
// Its probes may take 5 s and fail twice in a row: a tenant's check as tolerant
// as a real one, so a probe slowed by a loaded machine (one exceeded 1 s beside
// CPU burners) is not a definite unhealthy finding.
func healthCheckWithStart(period string) map[string]any {
	h := healthCheck()
	h["start_period"] = period
	h["timeout"], h["retries"] = "5s", 3
	return h
}

func TestProvision_StackWithHealthCheck_ReachesReadyAndCallsBack(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := uuid.NewString()
	manifest := map[string]any{"services": map[string]any{
		"db": map[string]any{"image": testImage(), "health_check": healthCheckWithStart("10s"),
			"args": []string{"serve", "-health-after", "2s"}},
		"web": map[string]any{"image": testImage(), "ports": map[string]any{"8080/tcp": map[string]any{}},
			"depends_on": map[string]any{"db": map[string]any{"condition": "service_healthy"}}},
	}}
	r := d.provision(lease, cb.callbackURL(), manifest,
		messages.LeaseItem{SKU: "docker-small", Quantity: 1, ServiceName: "web"},
		messages.LeaseItem{SKU: "docker-micro", Quantity: 1, ServiceName: "db"})
	if r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	got := cb.waitFor(lease, 1, 2*time.Minute)
	if got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("callback = %+v; provision = %+v", got[0].Body, d.provisionInfo(lease))
	}
	var info messages.LeaseInfo
	d.get("/info/"+lease).json(t, &info)
	if len(info.Instances) != 2 || info.Instances[0].Image == "" || len(info.Services) != 2 {
		t.Fatalf("info = %+v", info)
	}
	// Flattened in service-name order: db before web.
	if info.Services["db"].Instances[0].ContainerID != info.Instances[0].ContainerID {
		t.Fatalf("instances not in service-name order: %+v", info)
	}
	web := info.Services["web"].Instances[0]
	// web reaches db by its bare service name inside the lease network.
	code, body, err := httpGetHostPort("127.0.0.1:"+web.Ports["8080/tcp"].HostPort, "/fetch?url=http://db:8080/healthz")
	if err != nil || code != 200 {
		t.Fatalf("web → db: %d %q %v", code, body, err)
	}
	d.closeAll(dc, lease)
}

func TestProvision_QuantityThree_FansOutWithZeroBasedIndices(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := uuid.NewString()
	r := d.provision(lease, cb.callbackURL(), flatManifest(nil), messages.LeaseItem{SKU: "docker-micro", Quantity: 3})
	if r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	if got := cb.waitFor(lease, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("callback = %+v", got[0].Body)
	}
	var info messages.LeaseInfo
	d.get("/info/"+lease).json(t, &info)
	if len(info.Instances) != 3 {
		t.Fatalf("instances = %+v", info.Instances)
	}
	ports := map[string]bool{}
	for i, inst := range info.Instances {
		if inst.InstanceIndex != i {
			t.Fatalf("instance %d has index %d", i, inst.InstanceIndex)
		}
		hp := inst.Ports["8080/tcp"].HostPort
		if ports[hp] {
			t.Fatalf("host port %s published twice", hp)
		}
		ports[hp] = true
		if code, _, err := httpGetHostPort("127.0.0.1:"+hp, "/"); err != nil || code != 200 {
			t.Fatalf("instance %d port %s: %d %v", i, hp, code, err)
		}
	}
	if cs := leaseContainers(t, dc, lease); len(cs) != 3 {
		t.Fatalf("%d containers, want 3", len(cs))
	}
	if s := d.stats(); s.AllocatedMemoryMB != 3*256 || s.ActiveContainers != 3 {
		t.Fatalf("stats = %+v", s)
	}
	var logs map[string]string
	d.get("/logs/"+lease).json(t, &logs)
	if len(logs) != 3 || logs["app/2"] != "" && !strings.Contains(logs["app/2"], "") {
		t.Fatalf("logs keys = %v", logs)
	}
	d.closeAll(dc, lease)
}

// failedProvision provisions manifest and expects exactly one failed callback
// with reason; it returns the lease.
func failedProvision(t *testing.T, d *daemonProc, cb *callbackReceiver, manifest any, reason string) string {
	t.Helper()
	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), manifest); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	got := cb.waitFor(lease, 1, 3*time.Minute)
	if got[0].Body.Status != messages.CallbackFailed || !strings.HasPrefix(got[0].Body.Error, reason) {
		t.Fatalf("callback = %+v, want failed %s", got[0].Body, reason)
	}
	info := d.waitStatus(lease, "failed", 10*time.Second)
	if info.Reason != reason || info.FailCount != 1 {
		t.Fatalf("provision info = %+v", info)
	}
	time.Sleep(2 * time.Second) // no second terminal callback may follow
	if n := len(cb.forLease(lease)); n != 1 {
		t.Fatalf("%d callbacks for one failed provision", n)
	}
	return lease
}

func TestProvision_ContainerExitsAtStart_FailsWithContainerExited(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := failedProvision(t, d, cb, flatManifest(map[string]any{"args": []string{"exit", "-code", "3", "-after", "100ms"}}),
		messages.ReasonContainerExited)
	if cs := leaseContainers(t, dc, lease); len(cs) != 0 {
		t.Fatalf("failed attempt left %d containers", len(cs))
	}
	// The failure's diagnostics outlive the containers.
	var logs map[string]string
	if r := d.get("/logs/" + lease); r.Status != 200 {
		t.Fatalf("logs: %d %s", r.Status, r.Body)
	} else {
		r.json(t, &logs)
	}
	if _, ok := logs["app/0"]; !ok {
		t.Fatalf("logs of the failed attempt = %v", logs)
	}
	d.closeAll(dc, lease)
}

func TestProvision_HealthCheckNeverPasses_FailsWithHealthCheckFailed(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := failedProvision(t, d, cb, flatManifest(map[string]any{"health_check": healthCheck(),
		"args": []string{"serve", "-unhealthy"}}), messages.ReasonHealthCheckFailed)
	d.closeAll(dc, lease)
}

func TestProvision_ImageMissingFromRegistry_FailsWithImagePullFailed(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := failedProvision(t, d, cb, map[string]any{"image": "127.0.0.1:5000/berth/does-not-exist:" + uuid.NewString()[:8]},
		messages.ReasonImagePullFailed)
	d.closeAll(dc, lease)
}

func TestProvision_CapacityExhausted_503AndNothingAllocated(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "total_cpu_cores: 1", "total_memory_mb: 1024", "total_disk_mb: 4096").startInProcess()
	first := uuid.NewString()
	if r := d.provision(first, cb.callbackURL(), flatManifest(nil), messages.LeaseItem{SKU: "docker-small", Quantity: 2}); r.Status != 202 {
		t.Fatalf("first: %d %s", r.Status, r.Body)
	}
	before := d.stats()
	second := uuid.NewString()
	r := d.provision(second, cb.callbackURL(), flatManifest(nil))
	if r.Status != 503 || !strings.Contains(string(r.Body), `"code":"insufficient_resources"`) {
		t.Fatalf("second: %d %s", r.Status, r.Body)
	}
	if after := d.stats(); after != before {
		t.Fatalf("refused admission changed the pool: %+v → %+v", before, after)
	}
	if pr := d.get("/provisions/" + second); pr.Status != 404 {
		t.Fatalf("refused lease is known: %d %s", pr.Status, pr.Body)
	}
	cb.waitFor(first, 1, 2*time.Minute)
	d.deprovisionUntilGone(first)
	assertGone(t, dc, first)
	if cs := leaseContainers(t, dc, second); len(cs) != 0 {
		t.Fatal("refused lease has containers")
	}
	assertPoolEmpty(t, d)
}

// TestDeprovision_DuringProvisioning_WinsAndLeavesNothing: the close wins; the
// pre-empted provision's failed completion goes to its own callback_url before
// the deprovisioned one; nothing of the lease remains, no late container either.
func TestDeprovision_DuringProvisioning_WinsAndLeavesNothing(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "startup_verify_duration: 20s").startInProcess()
	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(nil), messages.LeaseItem{SKU: "docker-micro", Quantity: 2}); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	// Wait until containers exist (compose up done, verification waiting).
	deadline := time.Now().Add(time.Minute)
	for len(leaseContainers(t, dc, lease)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("containers never appeared")
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.deprovisionUntilGone(lease)
	got := cb.waitFor(lease, 2, time.Minute)
	if got[0].Body.Status != messages.CallbackFailed || !strings.Contains(got[0].Path, "operation_id=") ||
		!strings.HasPrefix(got[0].Body.Error, "Canceled:") || got[1].Body.Status != messages.CallbackDeprovisioned {
		t.Fatalf("callbacks = %+v; want the pre-empted provision's failed completion, then deprovisioned", got)
	}
	assertGone(t, dc, lease)
	time.Sleep(3 * time.Second)
	if n := len(cb.forLease(lease)); n != 2 {
		t.Fatalf("%d callbacks, want exactly the failed completion and the deprovisioned one", n)
	}
	if cs := leaseContainers(t, dc, lease); len(cs) != 0 {
		t.Fatalf("a late container survived the close: %d", len(cs))
	}
	assertPoolEmpty(t, d)
}

func TestIsolation_TwoLeasesCannotReachEachOtherByName(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	a, b := uuid.NewString(), uuid.NewString()
	stack := func() map[string]any {
		return map[string]any{"services": map[string]any{
			"web": map[string]any{"image": testImage(), "ports": map[string]any{"8080/tcp": map[string]any{}}},
			"db":  map[string]any{"image": testImage()},
		}}
	}
	items := []messages.LeaseItem{{SKU: "docker-micro", Quantity: 1, ServiceName: "web"}, {SKU: "docker-micro", Quantity: 1, ServiceName: "db"}}
	for _, l := range []string{a, b} {
		if r := d.provision(l, cb.callbackURL(), stack(), items...); r.Status != 202 {
			t.Fatalf("provision %s: %d %s", l, r.Status, r.Body)
		}
	}
	cb.waitFor(a, 1, 2*time.Minute)
	cb.waitFor(b, 1, 2*time.Minute)
	var ia, ib messages.LeaseInfo
	d.get("/info/"+a).json(t, &ia)
	d.get("/info/"+b).json(t, &ib)
	webA := "127.0.0.1:" + ia.Services["web"].Instances[0].Ports["8080/tcp"].HostPort

	// Inside lease a, "db" is a's own db.
	if code, _, err := httpGetHostPort(webA, "/fetch?url=http://db:8080/"); err != nil || code != 200 {
		t.Fatalf("a → own db: %d %v", code, err)
	}
	// b's containers cannot be reached by their Compose names or IPs from a.
	bDB := leaseContainers(t, dc, b)
	for _, c := range bDB {
		for _, n := range c.Names {
			name := strings.TrimPrefix(n, "/")
			if code, _, _ := httpGetHostPort(webA, "/fetch?url=http://"+name+":8080/"); code == 200 {
				t.Fatalf("lease a reached lease b's container %s by name", name)
			}
		}
		for _, ep := range c.NetworkSettings.Networks {
			if code, _, _ := httpGetHostPort(webA, "/fetch?url=http://"+ep.IPAddress+":8080/"); code == 200 {
				t.Fatalf("lease a reached lease b's container at %s", ep.IPAddress)
			}
		}
	}
	d.closeAll(dc, a, b)
}

func TestProvisions_KeysetPagingAndLookup(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	var leases []string
	for i := 0; i < 3; i++ {
		l := uuid.NewString()
		// An image the registry does not have: admitted, then failed quickly, no container.
		if r := d.provision(l, cb.callbackURL(), map[string]any{"image": "127.0.0.1:5000/berth/absent:x"}); r.Status != 202 {
			t.Fatalf("provision: %d %s", r.Status, r.Body)
		}
		leases = append(leases, l)
	}
	sort.Strings(leases)
	type page struct {
		Provisions []messages.ProvisionInfo `json:"provisions"`
		Continue   *string                  `json:"continue"`
	}
	var p1, p2, all page
	d.get("/provisions?limit=2").json(t, &p1)
	if len(p1.Provisions) != 2 || p1.Continue == nil || *p1.Continue != leases[1] ||
		p1.Provisions[0].LeaseUUID != leases[0] || p1.Provisions[1].LeaseUUID != leases[1] {
		t.Fatalf("page 1 = %+v", p1)
	}
	d.get("/provisions?limit=2&continue="+*p1.Continue).json(t, &p2)
	if len(p2.Provisions) != 1 || p2.Provisions[0].LeaseUUID != leases[2] || p2.Continue != nil {
		t.Fatalf("page 2 = %+v", p2)
	}
	d.get("/provisions").json(t, &all)
	if len(all.Provisions) != 3 || all.Continue != nil {
		t.Fatalf("full list = %+v", all)
	}
	var look page
	missing := uuid.NewString()
	d.get("/provisions?lease_uuid="+leases[2]+"&lease_uuid="+missing+"&lease_uuid="+leases[0]).json(t, &look)
	if len(look.Provisions) != 2 || look.Continue != nil {
		t.Fatalf("lookup = %+v", look)
	}
	for _, p := range all.Provisions {
		if p.Quantity != 1 || p.ServiceImages["app"] == "" || p.CreatedAt.IsZero() || p.TerminalBudget == nil {
			t.Fatalf("provision record = %+v", p)
		}
	}
	for _, l := range leases {
		cb.waitFor(l, 1, time.Minute)
		d.deprovisionUntilGone(l)
		assertGone(t, dc, l)
	}
	// After the lease is gone, its failure stays readable from diagnostics.
	r := d.get("/provisions/" + leases[0])
	var fallback messages.ProvisionInfo
	r.json(t, &fallback)
	if r.Status != 200 || fallback.Status != "failed" || fallback.Reason != messages.ReasonImagePullFailed || fallback.TerminalBudget != nil {
		t.Fatalf("diagnostics fallback: %d %+v", r.Status, fallback)
	}
	assertPoolEmpty(t, d)
}

func TestReprovision_StatefulVolumeKeptDisklessScratchNot(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "sku_profiles: {stateful: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 512}, diskless: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}}").startInProcess()
	for _, c := range []struct {
		sku  string
		kept bool
	}{{"stateful", true}, {"diskless", false}} {
		t.Run(c.sku, func(t *testing.T) {
			lease := uuid.NewString()
			provision := func() messages.LeaseInfo {
				n := len(cb.forLease(lease))
				if r := d.provision(lease, cb.callbackURL(), flatManifest(nil), messages.LeaseItem{SKU: c.sku, Quantity: 1}); r.Status != 202 {
					t.Fatalf("provision: %d %s", r.Status, r.Body)
				}
				if got := cb.waitFor(lease, n+1, 2*time.Minute); got[n].Body.Status != messages.CallbackSuccess {
					t.Fatalf("provision: %+v", got[n].Body)
				}
				var info messages.LeaseInfo
				d.get("/info/"+lease).json(t, &info)
				return info
			}
			hp := provision().Instances[0].Ports["8080/tcp"].HostPort
			req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:"+hp+"/file?path=/data/kept.txt", strings.NewReader("tenant data"))
			if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode >= 300 {
				t.Fatalf("write /data: %v %v", resp, err)
			}
			if err := dc.ContainerKill(context.Background(), leaseContainers(t, dc, lease)[0].ID, "KILL"); err != nil {
				t.Fatal(err)
			}
			d.waitStatus(lease, "failed", time.Minute)
			hp = provision().Instances[0].Ports["8080/tcp"].HostPort // a re-provision of the failed lease
			code, body, err := httpGetHostPort("127.0.0.1:"+hp, "/file?path=/data/kept.txt")
			if err != nil {
				t.Fatal(err)
			}
			if kept := code == 200 && body == "tenant data"; kept != c.kept {
				t.Fatalf("after re-provision /data/kept.txt: %d %q, want kept=%t", code, body, c.kept)
			}
			if pi := d.provisionInfo(lease); pi.FailCount != 1 || pi.Status != "ready" {
				t.Fatalf("re-provisioned lease = %+v", pi)
			}
			d.deprovisionUntilGone(lease)
			assertGone(t, dc, lease) // volumes included: closing destroys them
		})
	}
	assertPoolEmpty(t, d)
}
