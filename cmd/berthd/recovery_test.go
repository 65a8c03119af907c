package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// offsetClock is the lease clock of a test daemon: real time plus an offset the
// test advances, so the terminal budget's 10- and 30-minute rules run in seconds.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }

func withClock(t *testing.T) *offsetClock {
	c := &offsetClock{}
	testHooks.now = c.now
	t.Cleanup(func() { testHooks.now = nil })
	return c
}

// readyLease provisions a flat workload lease and waits for its success callback.
func readyLease(t *testing.T, d *daemonProc, cb *callbackReceiver, lease string) messages.LeaseInfo {
	t.Helper()
	n := len(cb.forLease(lease))
	if r := d.provision(lease, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision %s: %d %s", lease, r.Status, r.Body)
	}
	got := cb.waitFor(lease, n+1, 2*time.Minute)
	if got[n].Body.Status != messages.CallbackSuccess {
		t.Fatalf("provision %s: callback %+v; info %+v", lease, got[n].Body, d.provisionInfo(lease))
	}
	var info messages.LeaseInfo
	d.get("/info/"+lease).json(t, &info)
	return info
}

// exitOnItsOwn makes the workload exit with code through its own API: a death the
// live event stream sees from start to exit, with no kill.
func exitOnItsOwn(t *testing.T, info messages.LeaseInfo, code int) {
	t.Helper()
	hp := info.Instances[0].Ports["8080/tcp"].HostPort
	resp, err := postNoBody(fmt.Sprintf("http://127.0.0.1:%s/exit?code=%d", hp, code))
	if err != nil || resp.StatusCode >= 300 {
		t.Fatalf("ask workload to exit: %v %v", resp, err)
	}
}

func fullID(t *testing.T, dc *client.Client, lease string) string {
	t.Helper()
	cs := leaseContainers(t, dc, lease)
	if len(cs) != 1 {
		t.Fatalf("lease %s has %d containers, want 1", lease, len(cs))
	}
	return cs[0].ID
}

func TestRuntimeDeath_DockerKill_OneFailedCallbackWithDiagnostics(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := uuid.NewString()
	readyLease(t, d, cb, lease)
	id := fullID(t, dc, lease)
	if err := dc.ContainerKill(context.Background(), id, "KILL"); err != nil {
		t.Fatal(err)
	}
	got := cb.waitFor(lease, 2, time.Minute)
	if got[1].Body.Status != messages.CallbackFailed || !strings.HasPrefix(got[1].Body.Error, messages.ReasonContainerExited) ||
		!strings.Contains(got[1].Path, "lifecycle_id=") {
		t.Fatalf("death callback = %+v", got[1])
	}
	info := d.waitStatus(lease, "failed", 10*time.Second)
	if info.FailCount != 1 || info.Reason != messages.ReasonContainerExited || info.Message == "" {
		t.Fatalf("provision info = %+v", info)
	}
	// docker kill is a disruption, not the tenant's crash: the budget does not count it.
	if info.TerminalBudget == nil || info.TerminalBudget.ConsecutiveFailures != 0 || info.TerminalBudget.Verdict != "retry" {
		t.Fatalf("terminal budget = %+v", info.TerminalBudget)
	}
	if r := d.get("/logs/" + lease); r.Status != 200 || !strings.Contains(string(r.Body), `"app/0"`) {
		t.Fatalf("logs: %d %s", r.Status, r.Body)
	}
	time.Sleep(4 * time.Second) // a reconcile pass must not report it again
	if n := len(cb.forLease(lease)); n != 2 {
		t.Fatalf("%d callbacks, want 2 (success, one failed)", n)
	}
	d.closeAll(dc, lease)
}

func TestTerminalBudget_QuickDeathsWithReprovisions_ExhaustOnlyPerRule(t *testing.T) {
	// Sequential: sets testHooks.now (withClock), which every in-process daemon reads.
	dc := dockerClient(t)
	clock := withClock(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := uuid.NewString()

	die := func(wantStreak int, wantVerdict string) {
		t.Helper()
		info := readyLease(t, d, cb, lease)
		n := len(cb.forLease(lease))
		exitOnItsOwn(t, info, 1)
		got := cb.waitFor(lease, n+1, time.Minute)
		if got[n].Body.Status != messages.CallbackFailed {
			t.Fatalf("death callback = %+v", got[n].Body)
		}
		pi := d.waitStatus(lease, "failed", 10*time.Second)
		if b := pi.TerminalBudget; b == nil || b.ConsecutiveFailures != wantStreak || b.Verdict != wantVerdict {
			t.Fatalf("after a counted death: budget %+v, want %d/%s (%+v)", pi.TerminalBudget, wantStreak, wantVerdict, pi)
		}
	}
	die(1, "retry")
	clock.advance(time.Minute)
	die(2, "retry")
	clock.advance(time.Minute)
	die(3, "retry") // third in a row, but only 2 minutes after the first
	clock.advance(30 * time.Minute)
	die(4, "exhausted") // fourth, 32 minutes after the streak's first
	if pi := d.provisionInfo(lease); pi.FailCount != 4 {
		t.Fatalf("fail_count = %d, want 4", pi.FailCount)
	}
	// A re-provision clears the verdict; ten minutes of Ready reset the streak.
	info := readyLease(t, d, cb, lease)
	if pi := d.provisionInfo(lease); pi.TerminalBudget.Verdict != "retry" {
		t.Fatalf("ready lease shows %+v", pi.TerminalBudget)
	}
	clock.advance(11 * time.Minute)
	n := len(cb.forLease(lease))
	exitOnItsOwn(t, info, 1)
	cb.waitFor(lease, n+1, time.Minute)
	if pi := d.waitStatus(lease, "failed", 10*time.Second); pi.TerminalBudget.ConsecutiveFailures != 1 || pi.TerminalBudget.Verdict != "retry" {
		t.Fatalf("after ten minutes of Ready: %+v", pi.TerminalBudget)
	}
	d.closeAll(dc, lease)
}

func TestRestart_ReadyLeaseStaysReady_DeathWhileDownFails(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	alive, dead := uuid.NewString(), uuid.NewString()
	readyLease(t, d, cb, alive)
	readyLease(t, d, cb, dead)
	before := d.stats()
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	// Normal shutdown leaves workloads running.
	if cs := leaseContainers(t, dc, alive); len(cs) != 1 || cs[0].State != "running" {
		t.Fatalf("shutdown stopped the workload: %+v", cs)
	}
	if err := dc.ContainerKill(context.Background(), fullID(t, dc, dead), "KILL"); err != nil {
		t.Fatal(err)
	}

	d.startInProcess()
	got := cb.waitFor(dead, 2, time.Minute)
	if got[1].Body.Status != messages.CallbackFailed {
		t.Fatalf("death while down: %+v", got[1].Body)
	}
	if pi := d.waitStatus(dead, "failed", 10*time.Second); pi.TerminalBudget.ConsecutiveFailures != 0 || pi.FailCount != 1 {
		t.Fatalf("unknown attribution must not count: %+v", pi)
	}
	if pi := d.provisionInfo(alive); pi.Status != "ready" {
		t.Fatalf("surviving lease after restart: %+v", pi)
	}
	if after := d.stats(); after.AllocatedMemoryMB != before.AllocatedMemoryMB || after.AllocatedCPUCores != before.AllocatedCPUCores {
		t.Fatalf("pool after restart %+v, before %+v", after, before)
	}
	// Restart never relaunches a dead workload.
	if cs := leaseContainers(t, dc, dead); len(cs) != 1 || cs[0].State == "running" {
		t.Fatalf("dead workload relaunched: %+v", cs)
	}
	time.Sleep(3 * time.Second)
	if n := len(cb.forLease(alive)); n != 1 {
		t.Fatalf("surviving lease got %d callbacks, want only its success", n)
	}
	d.closeAll(dc, alive, dead)
}

func TestKill9_DuringProvision_ResumesAndCallsBackOnce(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "startup_verify_duration: 6s").startChild(true)
	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	// Kill berthd while it waits out the verification of a started container (a
	// cohort still being created is left pending until provision_timeout instead;
	// the crash suite covers those moments).
	deadline := time.Now().Add(time.Minute)
	for {
		cs := leaseContainers(t, dc, lease)
		if len(cs) == 1 && cs[0].State == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no running container appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.kill9()
	d.startChild(true)
	got := cb.waitFor(lease, 1, 2*time.Minute)
	if got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("resumed provision: %+v", got[0].Body)
	}
	time.Sleep(3 * time.Second)
	if n := len(cb.forLease(lease)); n != 1 {
		t.Fatalf("%d callbacks after resume, want 1", n)
	}
	if cs := leaseContainers(t, dc, lease); len(cs) != 1 {
		t.Fatalf("%d containers for one instance", len(cs))
	}
	d.closeAll(dc, lease)
}

func TestKill9_CallbackQueuedBeforeCrash_DeliveredAfterWithSameDeliveryID(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startChild(true)
	lease := uuid.NewString()
	cb.failNext(lease, 1_000_000) // Fred is down
	if r := d.provision(lease, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	d.waitStatusChild(lease, "ready")
	d.kill9()
	cb.failNext(lease, 0) // Fred is back
	d.startChild(true)
	got := cb.waitFor(lease, 1, time.Minute)
	if got[0].Body.Status != messages.CallbackSuccess || got[0].DeliveryID == "" {
		t.Fatalf("callback after crash: %+v", got[0])
	}
	d.deprovisionUntilGone(lease)
	got = cb.waitFor(lease, 2, time.Minute)
	if got[1].DeliveryID == got[0].DeliveryID {
		t.Fatal("two callbacks share a delivery ID")
	}
	assertGone(t, dc, lease)
}

// waitStatusChild polls a child daemon's view of a lease.
func (d *daemonProc) waitStatusChild(lease, want string) {
	d.t.Helper()
	d.waitStatus(lease, want, 2*time.Minute)
}

func TestReconcile_ClosedLeaseLateContainerRemoved_UnknownOneCountedNotTouched(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := uuid.NewString()
	readyLease(t, d, cb, lease)
	installation := leaseContainers(t, dc, lease)[0].Labels["fred.installation_id"]
	d.deprovisionUntilGone(lease)
	assertGone(t, dc, lease)

	// A late create of the closed lease, and a container no journal explains.
	stranger := uuid.NewString()
	late := runLabelled(t, dc, lease, installation)
	unknown := runLabelled(t, dc, stranger, installation)
	t.Cleanup(func() {
		_ = dc.ContainerRemove(context.Background(), unknown, container.RemoveOptions{Force: true, RemoveVolumes: true})
		_ = dc.ContainerRemove(context.Background(), late, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
	deadline := time.Now().Add(30 * time.Second)
	for len(leaseContainers(t, dc, lease)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("late container of a closed lease not removed")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for !strings.Contains(string(d.get("/metrics").Body), `berth_unaccounted_containers{kind="berth"} 1`) {
		if time.Now().After(deadline) {
			t.Fatal("unaccounted container not counted")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if cs := leaseContainers(t, dc, stranger); len(cs) != 1 {
		t.Fatal("a container no journal explains was touched")
	}
	if r := d.get("/provisions/" + stranger); r.Status != 404 {
		t.Fatalf("unknown container adopted: %d %s", r.Status, r.Body)
	}
}

// runLabelled starts a container carrying berth's ownership labels for lease.
func runLabelled(t *testing.T, dc *client.Client, lease, installation string) string {
	t.Helper()
	ctx := context.Background()
	// Its image's VOLUMEs covered by tmpfs, as berth covers them by bind mounts:
	// berthd removes it gently (volumes kept), so an anonymous one would leak.
	img, err := dc.ImageInspect(ctx, testImage())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := dc.ContainerCreate(ctx, &container.Config{Image: testImage(), Labels: map[string]string{
		"fred.managed": "true", "fred.lease_uuid": lease, "fred.installation_id": installation,
		"fred.service_name": "app", "fred.instance_index": "0", "fred.generation": "1"}},
		&container.HostConfig{Mounts: tmpfsOverVolumes(img.Config.Volumes)}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := dc.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	return resp.ID
}

// tmpfsOverVolumes covers an image's VOLUMEs with tmpfs, as berth covers them
// with bind mounts: a test container berthd removes gently (volumes kept) then
// leaves no anonymous volume behind.
func tmpfsOverVolumes(volumes map[string]struct{}) []mount.Mount {
	var mounts []mount.Mount
	for target := range volumes {
		mounts = append(mounts, mount.Mount{Type: mount.TypeTmpfs, Target: target})
	}
	return mounts
}

// A wall clock set back an hour across a restart grants a provision no more
// than it had left: its deadline passes on time (before, the hour came on top —
// deadlines were bounded only within one process). The lease's clock floors at
// its latest journaled event (lease.FloorShift).
func TestRestart_ClockSetBackAnHour_ProvisionDeadlineNotExtended(t *testing.T) {
	// Sequential: sets testHooks.now (withClock), which every in-process daemon reads.
	dc := dockerClient(t)
	clock := withClock(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "provision_timeout: 60s").startInProcess()
	lease := uuid.NewString()
	// Never healthy within the deadline: the provision stays in verification.
	slow := flatManifest(map[string]any{"args": []string{"serve", "-health-after", "10m"}, "health_check": healthCheckWithStart("10m")})
	start := time.Now()
	if r := d.provision(lease, cb.callbackURL(), slow); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	for len(leaseContainers(t, dc, lease)) == 0 || leaseContainers(t, dc, lease)[0].State != "running" {
		if time.Since(start) > 25*time.Second {
			t.Fatal("the workload never ran")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := d.stop(); code != exitOK {
		t.Fatalf("stop: exit %d", code)
	}
	clock.advance(-time.Hour)
	d.startInProcess()
	info := d.waitStatus(lease, "failed", 90*time.Second)
	if took := time.Since(start); took > 75*time.Second {
		t.Fatalf("failed %s after the provision began, its provision_timeout 60s", took)
	}
	if info.Reason != messages.ReasonHealthCheckFailed && info.Reason != messages.ReasonInternal {
		t.Fatalf("failed provision: %+v", info)
	}
	d.closeAll(dc, lease)
}

// A closed lease's receipt is kept for releases_max_age, then its journal is
// forgotten by the reconciler's housekeeping (state.db does not grow with every
// lease the host ever ran, beyond a ~50-byte retired name that keeps its UUID
// closed); a live lease's journal is untouched.
func TestReconcile_AClosedLeasesJournalIsForgottenPastReleasesMaxAge(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "releases_max_age: 2s", "reconcile_interval: 5s", "log_level: info").startInProcess()
	closed, live := uuid.NewString(), uuid.NewString()
	readyLease(t, d, cb, closed)
	readyLease(t, d, cb, live)
	d.deprovisionUntilGone(closed)
	if r := d.debugGet("/debug/leases/" + closed); r.Status != http.StatusOK {
		t.Fatalf("the closed lease's journal right after its close: %d %s", r.Status, r.Body)
	}
	// Restarted before it is due (the closed stream must load as closed), the
	// daemon's passes (every 5 s here) forget it once its last event is past
	// releases_max_age; on a loaded machine a pass can wait its full ack timeout
	// (30 s) for a lease's answer first.
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	d.startInProcess()
	for deadline := time.Now().Add(2 * time.Minute); d.metricValue("berth_closed_leases_forgotten_total") < 1; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			dc := dockerClient(t)
			defer dc.Close()
			t.Fatalf("the closed lease was never forgotten:\n%s\nits containers: %d\nthe passes: %s\nits journal: %s\nthe log's last lines:\n%s",
				grepLines(string(d.get("/metrics").Body), "berth_closed_leases"), len(leaseContainers(t, dc, closed)),
				d.debugGet("/debug/freshness").Body, d.debugGet("/debug/leases/"+closed).Body, d.logTail(40))
		}
	}
	if r := d.debugGet("/debug/leases/" + closed); r.Status != http.StatusNotFound {
		t.Fatalf("the forgotten lease's journal: %d %s", r.Status, r.Body)
	}
	if r := d.debugGet("/debug/leases/" + live); r.Status != http.StatusOK {
		t.Fatalf("the live lease's journal: %d %s", r.Status, r.Body)
	}
	// Its UUID stays used, also after a restart: provisioned again, it is refused as before.
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	d.startInProcess()
	if r := d.provision(closed, cb.callbackURL(), flatManifest(nil)); r.Status != http.StatusConflict {
		t.Fatalf("a provision of the forgotten lease's UUID: %d %s, want 409", r.Status, r.Body)
	}
	d.waitStatus(live, messages.StatusReady, 10*time.Second)
	d.deprovisionUntilGone(live)
}
