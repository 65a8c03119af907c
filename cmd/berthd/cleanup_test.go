package main

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// GET /cleanup/{lease} is one fresh observation of what Docker holds of a
// lease: its own containers while it runs (not_closed), nothing once closed
// (observed_clear), and a container someone else labelled with it counted as
// unattributed and never touched.
func TestCleanup_ObservedLiveThenClear_UnattributedCountedNotTouched(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	defer dc.Close()
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := uuid.NewString()
	readyLease(t, d, cb, lease)

	// Another installation's container under the same lease label.
	foreign, err := dc.ContainerCreate(context.Background(), &container.Config{Image: testImage(),
		Labels: map[string]string{"fred.managed": "true", "fred.lease_uuid": lease, "fred.installation_id": uuid.NewString()}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dc.ContainerRemove(context.Background(), foreign.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})

	observe := func() messages.CleanupObservation {
		t.Helper()
		var o messages.CleanupObservation
		r := d.get("/cleanup/" + lease)
		if r.Status != http.StatusOK {
			t.Fatalf("GET /cleanup: %d %s", r.Status, r.Body)
		}
		r.json(t, &o)
		if !o.Complete || time.Since(o.ObservedAt) > 90*time.Second || o.LeaseUUID != lease || o.Scope != "containers,networks" {
			t.Fatalf("observation %+v: want complete, fresh, of %s", o, lease)
		}
		return o
	}
	o := observe()
	if o.State != messages.CleanupNotClosed || !slices.Contains(o.Remaining, "fred-"+lease+"-app-1") || o.Unattributed != 1 {
		t.Fatalf("a ready lease: %+v, want not_closed with its container and 1 unattributed", o)
	}
	// (deprovisionUntilGone would wait for every container labelled with the lease.)
	if r := d.deprovision(lease); r.Status != http.StatusOK {
		t.Fatalf("deprovision: %d %s", r.Status, r.Body)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if o = observe(); o.State == messages.CleanupObservedClear {
			break
		}
		if o.State != messages.CleanupPending || time.Now().After(deadline) {
			t.Fatalf("the closing lease: %+v, want pending until observed_clear", o)
		}
	}
	if len(o.Remaining) != 0 || o.Unattributed != 1 {
		t.Fatalf("the closed lease: %+v, want nothing remaining, 1 unattributed", o)
	}
	if _, err := dc.ContainerInspect(context.Background(), foreign.ID); err != nil {
		t.Fatalf("the unattributed container was touched: %v", err)
	}
	if r := d.get("/cleanup/NOT-A-UUID"); r.Status != http.StatusNotFound {
		t.Fatalf("a non-UUID lease: %d, want 404", r.Status)
	}
}
