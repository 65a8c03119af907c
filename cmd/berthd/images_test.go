package main

// Run only what was asked: every tag is resolved to a digest through its
// registry (never a locally cached copy of a mutable tag), and every later launch
// of a lease — restart, an update that keeps the reference, compensation — runs
// the exact image ID it recorded, never the tag resolved again.

import (
	"context"
	"encoding/base64"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// pushAs tags the local image src as ref and pushes it to the local registry.
func pushAs(t *testing.T, dc *client.Client, src, ref string) {
	t.Helper()
	ctx := context.Background()
	if err := dc.ImageTag(ctx, src, ref); err != nil {
		t.Fatalf("tag %s as %s: %v", src, ref, err)
	}
	rc, err := dc.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: base64.StdEncoding.EncodeToString([]byte("{}"))})
	if err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	out, _ := io.ReadAll(rc)
	rc.Close()
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("push %s: %s", ref, out)
	}
}

func imageID(t *testing.T, dc *client.Client, ref string) string {
	t.Helper()
	img, err := dc.ImageInspect(context.Background(), ref)
	if err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	return img.ID
}

// runningImage is the image ID the lease's one container runs.
func runningImage(t *testing.T, dc *client.Client, lease string) string {
	t.Helper()
	cs := leaseContainers(t, dc, lease)
	if len(cs) != 1 {
		t.Fatalf("lease %s has %d containers, want 1", lease, len(cs))
	}
	return cs[0].ImageID
}

func TestProvision_RegistryUnreachable_CachedTagNeverLaunched(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	dead := freePort(t) // nothing listens: the registry cannot be reached
	d := newDaemonDir(t, `allowed_registries: ["`+dead+`", "127.0.0.1:5000"]`).startInProcess()
	ref := dead + "/berth/cached:" + uuid.NewString()[:8]
	if err := dc.ImageTag(context.Background(), testImage(), ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = dc.ImageRemove(context.Background(), ref, image.RemoveOptions{}) })

	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(map[string]any{"image": ref})); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	got := cb.waitFor(lease, 1, 2*time.Minute)
	if got[0].Body.Status != messages.CallbackFailed || !strings.HasPrefix(got[0].Body.Error, "ImagePullFailed") {
		t.Fatalf("callback %+v: a tag the registry cannot confirm must fail ImagePullFailed", got[0].Body)
	}
	if n := len(leaseContainers(t, dc, lease)); n != 0 {
		t.Fatalf("%d containers created from the cached tag", n)
	}
	if pi := d.provisionInfo(lease); pi.Reason != messages.ReasonImagePullFailed {
		t.Fatalf("provision info %+v", pi)
	}
	d.closeAll(dc, lease)
}

func TestRestartAndUpdate_RunTheRecordedImage_AfterTheTagMoved(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	ref := "127.0.0.1:5000/berth-test/moving-" + uuid.NewString()[:8] + ":v1"
	pushAs(t, dc, testImage(), ref)
	t.Cleanup(func() { _, _ = dc.ImageRemove(context.Background(), ref, image.RemoveOptions{}) })
	first := imageID(t, dc, testImage())

	lease := provisionReady(t, d, cb, flatManifest(map[string]any{"image": ref}))
	if got := runningImage(t, dc, lease); got != first {
		t.Fatalf("provision runs %s, want %s", got, first)
	}
	// The tag moves to other content in the registry.
	pushAs(t, dc, novolumeImage(), ref)
	moved := imageID(t, dc, novolumeImage())
	if moved == first {
		t.Fatal("fixture: the two test images are the same")
	}

	restart := uuid.NewString()
	if r := d.maintain(lease, restart, nil); r.Status != 202 {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 2, restart, messages.CallbackSuccess)
	if got := runningImage(t, dc, lease); got != first {
		t.Fatalf("restart runs %s, want the recorded %s (never the moved tag %s)", got, first, moved)
	}
	update := uuid.NewString()
	if r := d.maintain(lease, update, flatManifest(map[string]any{"image": ref, "env": map[string]string{"V": "2"}})); r.Status != 202 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 3, update, messages.CallbackSuccess)
	if got := runningImage(t, dc, lease); got != first {
		t.Fatalf("an update keeping the reference runs %s, want the recorded %s", got, first)
	}
	// A new lease asks for the tag afresh: it gets what the registry says now.
	other := provisionReady(t, d, cb, flatManifest(map[string]any{"image": ref}))
	if got := runningImage(t, dc, other); got != moved {
		t.Fatalf("a new provision runs %s, want the registry's current %s", got, moved)
	}
	d.closeAll(dc, lease, other)
}
