package main

import (
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// TestLingering_ClosedBeforeRestart_LateContainerHoldsThePoolUntilRemoved: a
// lease closes, then a container of it appears (a late create) whose removal
// Docker refuses, and berthd restarts. From its first /stats answer the new
// berthd counts the closed lease's resources as allocated and lingering — what
// the lease held is journaled, not only known to the process that closed it —
// for as long as the container runs, and frees them once the reconciler's
// removal goes through.
func TestLingering_ClosedBeforeRestart_LateContainerHoldsThePoolUntilRemoved(t *testing.T) {
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	fault := startRemoveFaultProxy(t)
	d := newDaemonDir(t, "docker_host: unix://"+fault.sock).startInProcess()
	free := d.stats()
	id := uuid.NewString()
	if r := d.provision(id, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	d.waitStatus(id, "ready", 2*time.Minute)
	used := d.stats()
	cs := leaseContainers(t, dc, id)
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	ctx := context.Background()
	orig, err := dc.ContainerInspect(ctx, cs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	d.deprovisionUntilGone(id)

	fault.failing.Store(true)
	late, err := dc.ContainerCreate(ctx, &container.Config{Image: orig.Config.Image, Labels: orig.Config.Labels}, nil, nil, nil,
		"berth-late-"+id[:8])
	if err != nil {
		t.Fatalf("create the late container: %v", err)
	}
	t.Cleanup(func() { _ = dc.ContainerRemove(ctx, late.ID, container.RemoveOptions{Force: true}) })
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
	wantHeld(waitStats(t, d, 45*time.Second, func(s messages.Stats) bool { return s.LingeringMemoryMB > 0 }), "before the restart")

	if code := d.stop(); code != 0 {
		t.Fatalf("berthd exited %d\n%s", code, tail(d.log.String(), 3000))
	}
	d.startInProcess()
	wantHeld(d.stats(), "the first answer after the restart")
	time.Sleep(8 * time.Second) // passes keep failing to remove it: still held
	wantHeld(d.stats(), "while its removal keeps failing after the restart")
	if fault.refused.Load() == 0 {
		t.Fatal("no removal was refused: the fault was never injected")
	}

	fault.failing.Store(false)
	got := waitStats(t, d, 45*time.Second, func(s messages.Stats) bool { return s.LingeringMemoryMB == 0 })
	if got.AllocatedMemoryMB != free.AllocatedMemoryMB || got.AvailableMemoryMB != free.AvailableMemoryMB {
		t.Fatalf("after the removal %+v, want %+v", got, free)
	}
	if n := len(leaseContainers(t, dc, id)); n != 0 {
		t.Fatalf("%d containers of the closed lease left", n)
	}
}
