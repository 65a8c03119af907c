package main

// Accounting tells the truth: containers of a closed lease still running hold
// the pool until they are really gone.

import (
	"context"
	"net/http"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

var removePath = regexp.MustCompile(`^(/v[0-9.]+)?/containers/[^/]+$`)

// removeFaultProxy stands between berthd and Docker and, while failing is set,
// answers every container removal 500: a removal backlog.
type removeFaultProxy struct {
	sock    string
	failing atomic.Bool
	refused atomic.Int64
}

func startRemoveFaultProxy(t *testing.T) *removeFaultProxy {
	t.Helper()
	p := &removeFaultProxy{}
	p.sock = startDockerProxy(t, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method == http.MethodDelete && removePath.MatchString(r.URL.Path) && p.failing.Load() {
			p.refused.Add(1)
			http.Error(w, `{"message":"injected: removal failed"}`, http.StatusInternalServerError)
			return
		}
		next.ServeHTTP(w, r)
	})
	return p
}

// TestAccounting_LateContainerOfClosedLease_HoldsThePoolUntilRemoved: after a
// lease closed and its reservation was freed, a container of it appears (a
// late create) and Docker refuses its removal. /stats counts the lease's
// resources as allocated (and lingering) while it runs, and frees them once the
// reconciler's removal goes through.
func TestAccounting_LateContainerOfClosedLease_HoldsThePoolUntilRemoved(t *testing.T) {
	t.Parallel()
	lateContainerHoldsThePool(t, false)
}

// TestLingering_ClosedBeforeRestart_LateContainerHoldsThePoolUntilRemoved: the
// same, with berthd restarted while the late container runs. From its first
// /stats answer the new berthd holds the closed lease's resources as lingering
// — what the lease held is journaled, not only known to the process that
// closed it — for as long as the container runs, and frees them once the
// reconciler's removal goes through.
func TestLingering_ClosedBeforeRestart_LateContainerHoldsThePoolUntilRemoved(t *testing.T) {
	t.Parallel()
	lateContainerHoldsThePool(t, true)
}

func lateContainerHoldsThePool(t *testing.T, restart bool) {
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	fault := startRemoveFaultProxy(t)
	d := newDaemonDir(t, "docker_host: unix://"+fault.sock).startInProcess()
	free := d.stats()
	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	d.waitStatus(lease, "ready", 2*time.Minute)
	used := d.stats()
	cs := leaseContainers(t, dc, lease)
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	ctx := context.Background()
	orig, err := dc.ContainerInspect(ctx, cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	d.deprovisionUntilGone(lease)
	if got := d.stats(); got.AllocatedMemoryMB != free.AllocatedMemoryMB {
		t.Fatalf("after the close %+v, want the pool freed %+v", got, free)
	}

	fault.failing.Store(true)
	// Its image's VOLUMEs covered by tmpfs, as berth covers them by bind mounts:
	// the reconciler's gentle removal keeps volumes, so an anonymous one would leak.
	late, err := dc.ContainerCreate(ctx, &container.Config{Image: orig.Config.Image, Labels: orig.Config.Labels},
		&container.HostConfig{Mounts: tmpfsOverVolumes(orig.Config.Volumes)}, nil, nil, "berth-late-"+lease[:8])
	if err != nil {
		t.Fatalf("create the late container: %v", err)
	}
	t.Cleanup(func() {
		_ = dc.ContainerRemove(ctx, late.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
	if err := dc.ContainerStart(ctx, late.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start the late container: %v", err)
	}
	wantHeld := func(s messages.Stats, when string) {
		t.Helper()
		if s.AllocatedMemoryMB != used.AllocatedMemoryMB || s.AllocatedCPUCores != used.AllocatedCPUCores ||
			s.LingeringMemoryMB != used.AllocatedMemoryMB-free.AllocatedMemoryMB {
			t.Fatalf("%s %+v, want the closed lease's use %+v held as lingering", when, s, used)
		}
	}
	wantHeld(waitStats(t, d, 45*time.Second, func(s messages.Stats) bool { return s.LingeringMemoryMB > 0 }), "with the late container running")
	if restart {
		if code := d.stop(); code != 0 {
			t.Fatalf("berthd exited %d\n%s", code, tail(d.log.String(), 3000))
		}
		d.startInProcess()
		wantHeld(d.stats(), "the first answer after the restart")
	}
	time.Sleep(8 * time.Second) // passes keep failing to remove it: still held
	wantHeld(d.stats(), "while its removal keeps failing")
	if fault.refused.Load() == 0 {
		t.Fatal("no removal was refused: the fault was never injected")
	}

	fault.failing.Store(false)
	got := waitStats(t, d, 45*time.Second, func(s messages.Stats) bool { return s.LingeringMemoryMB == 0 })
	if got.AllocatedMemoryMB != free.AllocatedMemoryMB || got.AvailableMemoryMB != free.AvailableMemoryMB {
		t.Fatalf("after the removal %+v, want %+v", got, free)
	}
	if n := len(leaseContainers(t, dc, lease)); n != 0 {
		t.Fatalf("%d containers of the closed lease left", n)
	}
}

// waitStats polls /stats until ok holds.
func waitStats(t *testing.T, d *daemonProc, timeout time.Duration, ok func(messages.Stats) bool) messages.Stats {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := d.stats()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("/stats never reached the expected state: %+v\n%s", s, tail(d.log.String(), 3000))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestAccounting_CloseWhoseRemovalFails_HoldsThePoolUntilRemoved: a close whose
// container removal Docker refuses keeps the lease's resources allocated in
// /stats for as long as the container is there, and frees them once the
// teardown's retry removed it.
func TestAccounting_CloseWhoseRemovalFails_HoldsThePoolUntilRemoved(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	fault := startRemoveFaultProxy(t)
	d := newDaemonDir(t, "docker_host: unix://"+fault.sock).startInProcess()
	free := d.stats()
	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	d.waitStatus(lease, "ready", 2*time.Minute)
	used := d.stats()
	fault.failing.Store(true)
	if r := d.deprovision(lease); r.Status != 200 && r.Status != 503 {
		t.Fatalf("deprovision: %d %s", r.Status, r.Body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if len(leaseContainers(t, dc, lease)) == 0 {
			t.Fatal("the container is gone although every removal is refused")
		}
		if s := d.stats(); s.AllocatedMemoryMB != used.AllocatedMemoryMB {
			t.Fatalf("while its removal is refused %+v, want the lease's use %+v held", s, used)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if fault.refused.Load() == 0 {
		t.Fatal("no removal was refused: the fault was never injected")
	}
	fault.failing.Store(false)
	d.deprovisionUntilGone(lease)
	got := waitStats(t, d, 45*time.Second, func(s messages.Stats) bool { return s.AllocatedMemoryMB == free.AllocatedMemoryMB })
	if got.LingeringMemoryMB != 0 || len(leaseContainers(t, dc, lease)) != 0 {
		t.Fatalf("after the removal %+v, %d containers", got, len(leaseContainers(t, dc, lease)))
	}
}
