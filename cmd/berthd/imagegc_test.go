package main

// The image lifecycle on real Docker (actors/imagegc): an image berthd pulled
// for a lease that no pin needs any more is collected once the installation's
// image store is over image_store_budget_mb; never while a live lease, a
// retention record or an admission in flight needs it; never an image the
// operator pulled or tagged.

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// distinctImage builds a new image (the test workload plus a unique label: no
// new layer), pushes it to the local registry as 127.0.0.1:5000/berth/gc-<id>:v1
// and removes it locally, so the next berthd that runs it pulls it. Every local
// copy is removed when the test ends.
func distinctImage(t *testing.T, dc *client.Client) string {
	t.Helper()
	ctx := context.Background()
	ref := "127.0.0.1:5000/berth/gc-" + uuid.NewString()[:8] + ":v1"
	dockerfile := fmt.Sprintf("FROM %s\nLABEL berth.test.gc=%q\n", testImage(), ref)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(dockerfile))}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte(dockerfile))
	_ = tw.Close()
	res, err := dc.ImageBuild(ctx, &buf, types.ImageBuildOptions{Tags: []string{ref}, Remove: true, Version: types.BuilderV1})
	if err != nil {
		t.Fatalf("build %s: %v", ref, err)
	}
	out, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("build %s: %s", ref, out)
	}
	id := imageID(t, dc, ref)
	t.Cleanup(func() { _, _ = dc.ImageRemove(context.Background(), id, image.RemoveOptions{Force: true}) })
	pushAs(t, dc, ref, ref)
	if _, err := dc.ImageRemove(ctx, ref, image.RemoveOptions{}); err != nil {
		t.Fatalf("remove the local %s: %v", ref, err)
	}
	if present(t, dc, id) {
		t.Fatalf("%s is still present locally: berthd would not pull it", ref)
	}
	return ref
}

// present reports whether Docker holds the image id.
func present(t *testing.T, dc *client.Client, id string) bool {
	t.Helper()
	_, err := dc.ImageInspect(context.Background(), id)
	if err != nil && !client.IsErrNotFound(err) {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return err == nil
}

// gcProvision provisions lease on ref and waits for its success callback;
// it returns the image ID its container runs.
func gcProvision(t *testing.T, d *daemonProc, dc *client.Client, cb *callbackReceiver, lease, ref string, items ...messages.LeaseItem) string {
	t.Helper()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(map[string]any{"image": ref}), items...); r.Status != 202 {
		t.Fatalf("provision %s: %d %s", lease, r.Status, r.Body)
	}
	if got := cb.waitFor(lease, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("provision %s: %+v", lease, got[0].Body)
	}
	return runningImage(t, dc, lease)
}

// metric is the value of one series of /metrics ("" labels: the bare name).
func (d *daemonProc) metric(series string) float64 {
	d.t.Helper()
	r := d.get("/metrics")
	for _, l := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			var f float64
			_, _ = fmt.Sscan(v, &f)
			return f
		}
	}
	return 0
}

// imageGCConfig makes every pass over budget: any image of the installation
// no pin needs goes at the next pass.
var imageGCConfig = []string{"image_store_budget_mb: 1", "image_store_min_free_mb: 0", "image_gc_interval: 300ms"}

func TestImageGC_UnpinnedImageCollectedOverBudget_LiveLeaseAndOperatorImagesKept(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	refLive, refClosed, refTagged, refOperator := distinctImage(t, dc), distinctImage(t, dc), distinctImage(t, dc), distinctImage(t, dc)
	d := newDaemonDir(t, imageGCConfig...).startInProcess()

	// The operator's own pull of an image: never berthd's to remove.
	rc, err := dc.ImagePull(context.Background(), refOperator, image.PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, rc)
	rc.Close()
	operatorID := imageID(t, dc, refOperator)

	live, closed, tagged := uuid.NewString(), uuid.NewString(), uuid.NewString()
	liveID := gcProvision(t, d, dc, cb, live, refLive)
	closedID := gcProvision(t, d, dc, cb, closed, refClosed)
	taggedID := gcProvision(t, d, dc, cb, tagged, refTagged)
	// berthd pulled it, but the operator tagged it since: someone else's now.
	opTag := "berth-test-operator/kept:" + uuid.NewString()[:8]
	if err := dc.ImageTag(context.Background(), taggedID, opTag); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = dc.ImageRemove(context.Background(), opTag, image.RemoveOptions{}) })

	// The collector crashes (it panics on its next message): restarted, it
	// rebuilds what this installation pulled from its journal.
	d.crash("root/imagegc")
	eventually(t, 20*time.Second, func() string {
		var root messages.NodeInfo
		if err := json.Unmarshal(d.debugGet("/debug/actors").Body, &root); err != nil {
			return err.Error()
		}
		if n := find(root, "root/imagegc"); n == nil || n.Restarts < 1 || n.Status != "ok" {
			return fmt.Sprintf("imagegc not restarted: %+v", n)
		}
		return ""
	})
	d.deprovisionUntilGone(closed)
	d.deprovisionUntilGone(tagged)
	eventually(t, 60*time.Second, func() string {
		if present(t, dc, closedID) {
			return "the closed lease's image is still present"
		}
		return ""
	})
	// Several passes later the others are all still there.
	passes := d.metric(`berth_image_collection_passes_total{outcome="ok"}`)
	eventually(t, 30*time.Second, func() string {
		if n := d.metric(`berth_image_collection_passes_total{outcome="ok"}`); n < passes+3 {
			return fmt.Sprintf("%v passes since, want 3", n-passes)
		}
		return ""
	})
	for what, id := range map[string]string{"the live lease's": liveID, "the operator-tagged": taggedID, "the operator's": operatorID} {
		if !present(t, dc, id) {
			t.Errorf("%s image %s was removed", what, id)
		}
	}
	if runningImage(t, dc, live) != liveID {
		t.Error("the live lease's container no longer runs its image")
	}
	if n := d.metric("berth_images_collected_total"); n != 1 {
		t.Errorf("berth_images_collected_total = %v, want 1", n)
	}
	if n := d.metric(`berth_image_collections_inhibited_total{reason="pinned"}`); n < 1 {
		t.Errorf("no pass counted the live lease's image as pinned")
	}
	if n := d.metric(`berth_image_collections_inhibited_total{reason="foreign_refs"}`); n < 1 {
		t.Errorf("no pass counted the operator-tagged image as someone else's")
	}
	if n := d.metric("berth_image_pins"); n < 1 {
		t.Errorf("berth_image_pins = %v, want the live lease's", n)
	}
	d.closeAll(dc, live)
	eventually(t, 60*time.Second, func() string {
		if present(t, dc, liveID) {
			return "the live lease's image is still present after its close"
		}
		return ""
	})
}

func TestImageGC_RetentionRecordPinsItsImagesUntilReaped(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	ref := distinctImage(t, dc)
	d := newDaemonDir(t, append(imageGCConfig, "retain_on_close: true", "retention_max_age: 8s", "retention_reap_interval: 1s")...).startInProcess()

	lease := uuid.NewString()
	id := gcProvision(t, d, dc, cb, lease, ref)
	d.deprovisionUntilGone(lease)
	// Retained: passes over budget leave it (pinned) while the record lasts.
	retainedAt := time.Now()
	passes := d.metric(`berth_image_collection_passes_total{outcome="ok"}`)
	eventually(t, 30*time.Second, func() string {
		if n := d.metric(`berth_image_collection_passes_total{outcome="ok"}`); n < passes+3 {
			return fmt.Sprintf("%v passes since the close, want 3", n-passes)
		}
		return ""
	})
	if time.Since(retainedAt) < 8*time.Second && !present(t, dc, id) {
		t.Fatal("the retained lease's image was collected while its retention record needs it")
	}
	if n := d.metric(`berth_image_collections_inhibited_total{reason="pinned"}`); n < 1 {
		t.Error("no pass counted the retained image as pinned")
	}
	// Reaped: the record is gone, so is the pin.
	eventually(t, 90*time.Second, func() string {
		if present(t, dc, id) {
			return "the image of a reaped retention record is still present"
		}
		return ""
	})
}

// Collections and admissions of the same image race, again and again: leases
// of one image are provisioned and closed concurrently while the collector
// passes every 50 ms over a budget any unpinned image exceeds, so the image is
// removed whenever no lease holds it and pulled again by the next admission.
// Every admission runs its lease (a removal between its look at the image and
// its containers' create would fail it: "No such image"), and a live lease's
// image is present whenever looked at.
func TestImageGC_CollectionRacingAdmissionOfTheSameImage_NeverRemovesTheAdmittedImage(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	ref := distinctImage(t, dc)
	d := newDaemonDir(t, "image_store_budget_mb: 1", "image_store_min_free_mb: 0", "image_gc_interval: 50ms").startInProcess()

	// Two workers, each closing its lease and admitting the next one after a
	// short random pause: the image is often unpinned, and collected, just as
	// the other worker's admission or this one's next looks at it.
	const workers, rounds = 2, 6
	var wg sync.WaitGroup
	errs := make(chan string, workers*rounds)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				lease := uuid.NewString()
				if r := d.provision(lease, cb.callbackURL(), flatManifest(map[string]any{"image": ref})); r.Status != 202 {
					errs <- fmt.Sprintf("provision: %d %s", r.Status, r.Body)
					return
				}
				got := cb.waitFor(lease, 1, 2*time.Minute)
				if got[0].Body.Status != messages.CallbackSuccess {
					errs <- fmt.Sprintf("lease %s (round %d) failed: %+v", lease, i, got[0].Body)
				} else {
					for _, c := range leaseContainers(t, dc, lease) {
						if _, err := dc.ImageInspect(context.Background(), c.ImageID); err != nil {
							errs <- fmt.Sprintf("lease %s runs %s, which is gone: %v", lease, c.ImageID, err)
						}
					}
				}
				d.deprovisionUntilGone(lease)
				time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	eventually(t, 30*time.Second, func() string {
		if n := d.metric("berth_images_collected_total"); n < 1 {
			return "no image collected"
		}
		return ""
	})
	t.Logf("collected %v times across %d admissions; %v removals refused for a hold",
		d.metric("berth_images_collected_total"), workers*rounds, d.metric(`berth_image_collections_inhibited_total{reason="held"}`))
}

// What this installation pulled is journaled: a daemon started later (here
// with a budget its predecessor was within) collects a closed lease's image,
// and keeps the live lease's once that lease has told the registry its pins.
func TestImageGC_PulledRecordSurvivesARestart_CollectedByTheNextDaemon(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	refClosed, refLive := distinctImage(t, dc), distinctImage(t, dc)
	d := newDaemonDir(t, "image_store_budget_mb: 100000", "image_store_min_free_mb: 0", "image_gc_interval: 300ms").startInProcess()

	closed, live := uuid.NewString(), uuid.NewString()
	closedID := gcProvision(t, d, dc, cb, closed, refClosed)
	liveID := gcProvision(t, d, dc, cb, live, refLive)
	d.deprovisionUntilGone(closed)
	passes := d.metric(`berth_image_collection_passes_total{outcome="ok"}`)
	eventually(t, 30*time.Second, func() string {
		if n := d.metric(`berth_image_collection_passes_total{outcome="ok"}`); n < passes+3 {
			return fmt.Sprintf("%v passes since the close, want 3", n-passes)
		}
		return ""
	})
	if !present(t, dc, closedID) {
		t.Fatal("an image was collected although the store is within its budget")
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("stop exit %d", code)
	}

	d.reconfigure(imageGCConfig...)
	d.startInProcess()
	eventually(t, 60*time.Second, func() string {
		if present(t, dc, closedID) {
			return "the closed lease's image, pulled by the previous daemon, is still present"
		}
		return ""
	})
	if !present(t, dc, liveID) || runningImage(t, dc, live) != liveID {
		t.Fatal("the live lease's image was removed across the restart")
	}
	d.closeAll(dc, live)
}

// Free space on Docker's data root below image_store_min_free_mb collects as
// well, however far the store is within its budget (here a floor no disk
// meets: every unpinned image of the installation goes; the live lease's stays).
func TestImageGC_FreeSpaceBelowTheFloor_CollectsWithinBudget(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	refClosed, refLive := distinctImage(t, dc), distinctImage(t, dc)
	d := newDaemonDir(t, "image_store_budget_mb: 100000", "image_store_min_free_mb: 1073741824", "image_gc_interval: 300ms").startInProcess()

	closed, live := uuid.NewString(), uuid.NewString()
	closedID := gcProvision(t, d, dc, cb, closed, refClosed)
	liveID := gcProvision(t, d, dc, cb, live, refLive)
	d.deprovisionUntilGone(closed)
	eventually(t, 60*time.Second, func() string {
		if present(t, dc, closedID) {
			return "the closed lease's image is still present with the disk below the floor"
		}
		return ""
	})
	if !present(t, dc, liveID) {
		t.Fatal("the live lease's image was removed")
	}
	if n := d.metric("berth_image_store_bytes"); n <= 0 {
		t.Errorf("berth_image_store_bytes = %v, want the live lease's image", n)
	}
	d.closeAll(dc, live)
}

// Sequential: it sets testHooks (a tenant pins at most 2 images).
//
// A tenant over its image pin budget is refused at admission with a
// tenant-readable reason on the wire, and nothing changes: no lease, no pool
// reservation, no image removed. An image the tenant already pins is reused
// above the ceiling; the refusal ends once a lease closes.
func TestImageGC_TenantOverItsImagePinBudget_AdmissionRefusedNothingChanged(t *testing.T) {
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	testHooks.tenantImagePins = 2
	t.Cleanup(func() { testHooks.tenantImagePins = 0 })
	refA, refB, refC := distinctImage(t, dc), distinctImage(t, dc), distinctImage(t, dc)
	d := newDaemonDir(t).startInProcess()

	a, b := uuid.NewString(), uuid.NewString()
	idA := gcProvision(t, d, dc, cb, a, refA)
	idB := gcProvision(t, d, dc, cb, b, refB)
	before := d.stats()

	c := uuid.NewString()
	r := d.provision(c, cb.callbackURL(), flatManifest(map[string]any{"image": refC}))
	var body messages.ErrorBody
	r.json(t, &body)
	if r.Status != 503 || body.Code != "insufficient_resources" ||
		!strings.Contains(body.Error, "image pin budget exceeded: tenant tenant-test pins 2 distinct images and this request adds 1 (at most 2 per tenant)") {
		t.Fatalf("over the budget: %d %s", r.Status, r.Body)
	}
	if d.listed(c) || d.stats() != before || len(leaseContainers(t, dc, c)) != 0 {
		t.Fatal("a refused admission changed something")
	}
	for _, id := range []string{idA, idB} {
		if !present(t, dc, id) {
			t.Fatalf("a refusal removed image %s", id)
		}
	}
	// The same image as a live lease: reused, not a new pin.
	reuse := uuid.NewString()
	gcProvision(t, d, dc, cb, reuse, refA)
	// A lease closed: its image is no longer pinned, the new one fits.
	d.deprovisionUntilGone(b)
	gcProvision(t, d, dc, cb, c, refC)
	d.closeAll(dc, a, reuse, c)
}
