package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// testImageRepo is a fresh repository of the local registry for one test's images.
func testImageRepo(what string) string {
	return "127.0.0.1:5000/berth-test/" + what + "-" + strings.ReplaceAll(uuid.NewString(), "-", "")[:10]
}

// makeImage imports the workload rootfs as ref with extra Dockerfile changes,
// pushes it when push is set, and removes it (locally, and its manifest from the
// registry) when the test ends. Returns its ID and, when pushed, repo@digest.
func makeImage(t *testing.T, ref string, push bool, changes ...string) (id, pinned string) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	if err := importImage(ctx, ref, changes); err != nil {
		t.Fatalf("import %s: %v", ref, err)
	}
	resp, err := fx.docker.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	id = resp.ID
	t.Cleanup(func() { removeImage(t, id) })
	if !push {
		return id, ""
	}
	if err := pushImage(ctx, ref); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
	if resp, err = fx.docker.ImageInspect(ctx, id); err != nil {
		t.Fatalf("inspect %s after push: %v", ref, err)
	}
	repo := repoOf(ref)
	for _, d := range resp.RepoDigests {
		if strings.HasPrefix(d, repo+"@") {
			pinned = d
		}
	}
	if pinned == "" {
		t.Fatalf("no repo digest for %s in %v", repo, resp.RepoDigests)
	}
	t.Cleanup(func() { deleteManifest(pinned) })
	return id, pinned
}

// repoOf is ref without its tag.
func repoOf(ref string) string {
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[:i]
	}
	return ref
}

// removeImage removes a test image by ID with every tag it has.
func removeImage(t *testing.T, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := fx.docker.ImageRemove(ctx, id, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil && !isNotFound(err) {
		t.Logf("remove test image %s: %v", trimID(id), err)
	}
}

// deleteManifest removes a pushed test manifest from the local registry (its
// delete API is enabled); best effort.
func deleteManifest(pinned string) {
	repo, digest, ok := strings.Cut(strings.TrimPrefix(pinned, "127.0.0.1:5000/"), "@")
	if !ok {
		return
	}
	req, err := http.NewRequest(http.MethodDelete, "http://127.0.0.1:5000/v2/"+repo+"/manifests/"+digest, nil)
	if err != nil {
		return
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
}

// counting is an engine option registering its request counter on reg.
func counting(reg *prometheus.Registry) func(*Options) {
	return func(o *Options) { o.Registerer = reg }
}

// requests reads berth_docker_requests_total{op}.
func requests(e *Engine, op string) int {
	return int(testutil.ToFloat64(e.requests.WithLabelValues(op)))
}

func TestResolveImage_Tag_ResolvedThroughRegistryPulledByDigestAndAdmitted(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 2*time.Minute)
	// Make sure there is something to fetch.
	if _, err := fx.docker.ImageRemove(ctx, fx.imageID, image.RemoveOptions{Force: true}); err != nil && !isNotFound(err) {
		t.Fatalf("remove local copy: %v", err)
	}
	start := time.Now()
	info, err := e.ResolveImage(ctx, fx.image)
	if err != nil {
		t.Fatalf("ResolveImage: %v", err)
	}
	t.Logf("ResolveImage of an absent image (resolve + pull + inspect): %s", time.Since(start).Round(time.Millisecond))
	if info.ID != fx.imageID || !strings.HasPrefix(info.Digest, testRepo+"@sha256:") ||
		!slices.Equal(info.Volumes, []string{"/data"}) || info.User != "" || len(info.MaskLabels) != 0 {
		t.Errorf("ResolveImage = %+v, want ID %s, %s@sha256:…, volumes [/data], no user, no masks", info, fx.imageID, testRepo)
	}
	// Only the exact content was pulled: the tag itself was never created locally.
	if _, err := fx.docker.ImageInspect(ctx, fx.image); !isNotFound(err) {
		t.Errorf("after ResolveImage the tag %s exists locally (%v): it must be fetched by digest only", fx.image, err)
	}
	if got, err := fx.docker.ImageInspect(ctx, info.Digest); err != nil || got.ID != info.ID {
		t.Errorf("inspect %s = %v, %v", info.Digest, got.ID, err)
	}

	// Present now: one registry round trip, no pull.
	resolves, pulls := requests(e, opDistributionInspect), requests(e, opImagePull)
	const rounds = 5
	start = time.Now()
	for range rounds {
		again, err := e.ResolveImage(ctx, fx.image)
		if err != nil || again.ID != info.ID || again.Digest != info.Digest {
			t.Fatalf("ResolveImage (present) = %+v, %v", again, err)
		}
	}
	t.Logf("ResolveImage of a present image against the local registry: %s each (mean of %d)",
		(time.Since(start) / rounds).Round(100*time.Microsecond), rounds)
	if n, p := requests(e, opDistributionInspect)-resolves, requests(e, opImagePull)-pulls; n != rounds || p != 0 {
		t.Errorf("present image: %d registry resolutions and %d pulls for %d calls, want %d and 0", n, p, rounds, rounds)
	}

	// Digest-pinned and present: no registry round trip at all.
	resolves = requests(e, opDistributionInspect)
	byDigest, err := e.ResolveImage(ctx, info.Digest)
	if err != nil || byDigest.ID != info.ID || byDigest.Digest != info.Digest {
		t.Errorf("ResolveImage(%s) = %+v, %v", info.Digest, byDigest, err)
	}
	if n := requests(e, opDistributionInspect) - resolves; n != 0 {
		t.Errorf("a present digest-pinned reference asked the registry %d times", n)
	}
	if _, err := e.ResolveImage(ctx, info.ID); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("ResolveImage(image ID) = %v, want ErrImagePull (not a registry reference)", err)
	}
}

// Concurrent resolutions of one tag share one registry round trip (sequential
// ones, above, each ask the registry), and every caller gets the same answer.
func TestResolveImage_ConcurrentSameTag_OneRegistryRoundTrip(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 2*time.Minute)
	want, err := e.ResolveImage(ctx, fx.image) // present, so the round below only resolves
	if err != nil {
		t.Fatal(err)
	}
	const callers = 12
	before := requests(e, opDistributionInspect)
	start := make(chan struct{})
	errs := make(chan error, callers)
	for range callers {
		go func() {
			<-start
			got, err := e.ResolveImage(ctx, fx.image)
			if err == nil && (got.ID != want.ID || got.Digest != want.Digest) {
				err = fmt.Errorf("got %s %s, want %s %s", got.ID, got.Digest, want.ID, want.Digest)
			}
			errs <- err
		}()
	}
	close(start)
	for range callers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := requests(e, opDistributionInspect) - before; n < 1 || n > callers/3 {
		t.Fatalf("%d concurrent resolutions of one tag made %d registry round trips, want 1 (a few at most)", callers, n)
	}
}

func TestResolveImage_MissingTagOrRepositoryOrInvalid_IsErrImagePull(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 2*time.Minute)
	for _, ref := range []string{
		testRepo + ":missing-" + uuid.NewString()[:8],
		testImageRepo("no-such-repo") + ":v1",
		testRepo + "@sha256:" + strings.Repeat("0", 64),
		"Invalid Reference!",
	} {
		if _, err := e.ResolveImage(ctx, ref); !errors.Is(err, dockerio.ErrImagePull) {
			t.Errorf("ResolveImage(%q) = %v, want ErrImagePull", ref, err)
		}
	}
}

// unreachableRegistry is a registry address on this machine nothing listens on.
func unreachableRegistry(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A tag whose registry cannot be reached fails, even though an image with
// exactly that tag is present locally: the cached copy is never launched.
func TestResolveImage_RegistryUnreachable_FailsAndNeverUsesTheCachedTag(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	ctx := testCtx(t, 2*time.Minute)
	cached := unreachableRegistry(t) + "/berth-test/workload:" + fx.tag
	if err := fx.docker.ImageTag(ctx, info.ID, cached); err != nil {
		t.Fatalf("tag: %v", err)
	}
	t.Cleanup(func() { _, _ = fx.docker.ImageRemove(testCtx(t, time.Minute), cached, image.RemoveOptions{}) })
	if _, err := fx.docker.ImageInspect(ctx, cached); err != nil {
		t.Fatalf("setup: %s not present locally: %v", cached, err)
	}
	pulls := requests(e, opImagePull)
	start := time.Now()
	got, err := e.ResolveImage(ctx, cached)
	if !errors.Is(err, dockerio.ErrImagePull) || got.ID != "" {
		t.Fatalf("ResolveImage(%s, registry down, tag cached) = %+v, %v; want ErrImagePull and nothing", cached, got, err)
	}
	t.Logf("registry down: refused in %s: %v", time.Since(start).Round(time.Millisecond), err)
	if n := requests(e, opImagePull) - pulls; n != 0 {
		t.Errorf("%d pulls attempted after the registry could not resolve the tag", n)
	}
}

// Re-pushing other content under a tag: ResolveImage follows the registry (even
// while the local tag still names the old content), PinnedImage keeps the old
// content, fetching it again by digest when it is gone locally, and refuses a
// digest whose content is not the pinned ID.
func TestResolveImage_TagMoved_NewContent_PinnedImageKeepsTheOld(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 3*time.Minute)
	ref := testImageRepo("moving") + ":v1"
	oldID, oldDigest := makeImage(t, ref, true, "LABEL variant=old", "VOLUME /data")
	first, err := e.ResolveImage(ctx, ref)
	if err != nil || first.ID != oldID || first.Digest != oldDigest {
		t.Fatalf("ResolveImage(first push) = %+v, %v; want %s %s", first, err, trimID(oldID), oldDigest)
	}
	pin := first.Pin(ref)

	newID, newDigest := makeImage(t, ref, true, "LABEL variant=new", "VOLUME /srv")
	if newID == oldID || newDigest == oldDigest {
		t.Fatal("setup: the second push is the same content")
	}
	// The local tag goes back to the old content: only the registry knows better.
	if err := fx.docker.ImageTag(ctx, oldID, ref); err != nil {
		t.Fatal(err)
	}
	moved, err := e.ResolveImage(ctx, ref)
	if err != nil || moved.ID != newID || moved.Digest != newDigest || !slices.Equal(moved.Volumes, []string{"/srv"}) {
		t.Fatalf("ResolveImage(after re-push) = %+v, %v; want the new content %s %s", moved, err, trimID(newID), newDigest)
	}

	kept, err := e.PinnedImage(ctx, pin)
	if err != nil || kept.ID != oldID || kept.Digest != oldDigest || !slices.Equal(kept.Volumes, []string{"/data"}) {
		t.Fatalf("PinnedImage(old pin, present) = %+v, %v; want the old content", kept, err)
	}
	// Gone locally: fetched again by its digest, never by the tag.
	if _, err := fx.docker.ImageRemove(ctx, oldID, image.RemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	pulls := requests(e, opImagePull)
	refetched, err := e.PinnedImage(ctx, pin)
	if err != nil || refetched.ID != oldID {
		t.Fatalf("PinnedImage(old pin, absent) = %+v, %v; want %s fetched by digest", refetched, err, trimID(oldID))
	}
	if n := requests(e, opImagePull) - pulls; n != 1 {
		t.Errorf("PinnedImage of an absent pin pulled %d times, want 1", n)
	}

	wrong := messages.ImagePin{Ref: ref, ID: "sha256:" + strings.Repeat("1", 64), Digest: oldDigest}
	if _, err := e.PinnedImage(ctx, wrong); !errors.Is(err, dockerio.ErrImagePull) || !strings.Contains(err.Error(), "not the recorded one") {
		t.Errorf("PinnedImage(digest of other content) = %v, want ErrImagePull", err)
	}
	if _, err := e.PinnedImage(ctx, messages.ImagePin{Ref: ref, ID: wrong.ID}); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("PinnedImage(absent, no digest) = %v, want ErrImagePull", err)
	}
	// A present pin needs no registry: served even with the registry unreachable.
	offline := messages.ImagePin{Ref: ref, ID: oldID, Digest: unreachableRegistry(t) + "/berth-test/moving@" + strings.Split(oldDigest, "@")[1]}
	if got, err := e.PinnedImage(ctx, offline); err != nil || got.ID != oldID {
		t.Errorf("PinnedImage(present, registry down) = %+v, %v", got, err)
	}
	absentOffline := messages.ImagePin{Ref: ref, ID: "sha256:" + strings.Repeat("2", 64), Digest: offline.Digest}
	if _, err := e.PinnedImage(ctx, absentOffline); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("PinnedImage(absent, registry down) = %v, want ErrImagePull", err)
	}
}

func TestResolveImage_MetadataBreakingAdmission_IsErrImageNotAdmissible(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 3*time.Minute)
	repo := testImageRepo("admission")
	volumes := func(n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("VOLUME /v%02d", i))
		}
		return out
	}
	manyLabels := func(n int) string {
		var b strings.Builder
		b.WriteString("LABEL")
		for i := range n {
			fmt.Fprintf(&b, " l%03d=x", i)
		}
		return b.String()
	}
	for _, c := range []struct {
		tag     string
		changes []string
		want    string
	}{
		{"seventeen-volumes", volumes(17), "17 VOLUMEs"},
		{"masks-proc", []string{"VOLUME /proc/sys"}, "the /proc tree"},
		{"masks-run", []string{"VOLUME /run"}, "mask /run"},
		{"nested", []string{"VOLUME /data", "VOLUME /data/sub"}, "overlap"},
		{"labels-128", []string{manyLabels(128)}, "129 labels"}, // + the test marker label
		// A Dockerfile line holds at most 64 KiB: two labels make the total.
		{"labels-64k", []string{"LABEL big1=" + strings.Repeat("x", 40<<10), "LABEL big2=" + strings.Repeat("y", 25<<10)}, "at most 65536"},
	} {
		t.Run(c.tag, func(t *testing.T) {
			ref := repo + ":" + c.tag
			makeImage(t, ref, true, c.changes...)
			_, err := e.ResolveImage(ctx, ref)
			if !errors.Is(err, dockerio.ErrImageNotAdmissible) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ResolveImage(%s) = %v, want ErrImageNotAdmissible mentioning %q", c.tag, err, c.want)
			}
		})
	}
	// Sixteen volumes and 127 labels of our own are within the limits.
	ref := repo + ":at-the-limits"
	makeImage(t, ref, true, append(volumes(16), manyLabels(127))...)
	if info, err := e.ResolveImage(ctx, ref); err != nil || len(info.Volumes) != 16 {
		t.Errorf("ResolveImage(16 volumes, 128 labels) = %+v, %v", info, err)
	}
}

// An image carrying a label of a reserved namespace (fred., traefik.,
// com.docker.compose., any letter case) is not admissible: Docker would copy
// it onto the tenant's container. The four Compose build stamps are the
// exception: admitted, reported as MaskLabels, their values discarded for
// berth's and Compose's own.
func TestReservedImageLabels_RefusedExceptComposeBuildStamps(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 3*time.Minute)
	for _, label := range []string{"fred.tenant=evil", "traefik.enable=true", "FRED.LEASE_UUID=other", "com.docker.compose.oneoff=True", "COM.DOCKER.COMPOSE.PROJECT=x"} {
		ref := testImageRepo("labels") + ":refused"
		makeImage(t, ref, true, "LABEL "+label+" innocent=kept")
		_, err := e.ResolveImage(ctx, ref)
		key, _, _ := strings.Cut(label, "=")
		if !errors.Is(err, dockerio.ErrImageNotAdmissible) || !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Errorf("ResolveImage(label %s) = %v, want ErrImageNotAdmissible naming %q", label, err, key)
		}
	}
	ref := testImageRepo("labels") + ":stamps"
	makeImage(t, ref, true,
		"LABEL com.docker.compose.project=stamp com.docker.compose.service=stamp com.docker.compose.version=0.0 com.docker.compose.image.builder=classic innocent=kept",
		"VOLUME /data")
	info, err := e.ResolveImage(ctx, ref)
	want := []string{"com.docker.compose.image.builder", "com.docker.compose.project", "com.docker.compose.service", "com.docker.compose.version"}
	if err != nil || !slices.Equal(info.MaskLabels, want) {
		t.Fatalf("ResolveImage(build stamps) = %+v, %v; want MaskLabels %v", info, err, want)
	}
	l := newTestLease(t, e)
	svc := workloadService("app", 1, info)
	svc.Image = ref
	svc.MaskLabels = nil // Up completes the masks from the image itself
	plan := l.plan(svc)
	if err := e.Up(ctx, plan); err != nil {
		t.Fatalf("Up: %v", err)
	}
	cohort, err := e.Cohort(ctx, l.Lease)
	if err != nil || len(cohort) != 1 {
		t.Fatalf("Cohort = %+v, %v", cohort, err)
	}
	r, err := fx.docker.ContainerInspect(ctx, cohort[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"com.docker.compose.project":       dockerio.ProjectName(l.Lease), // Compose's own wins
		"com.docker.compose.service":       "app",
		"com.docker.compose.image.builder": "",
		"innocent":                         "kept",
	} {
		if g, ok := r.Config.Labels[k]; !ok || g != v {
			t.Errorf("container label %s = %q (present %v), want %q", k, g, ok, v)
		}
	}
	if g := r.Config.Labels["com.docker.compose.version"]; g == "0.0" {
		t.Errorf("container label com.docker.compose.version = the image's stamp %q", g)
	}
	// The same plan again keeps the container: masks are part of a stable config.
	if err := e.Up(ctx, plan); err != nil {
		t.Fatal(err)
	}
	if again, _ := e.Cohort(ctx, l.Lease); len(again) != 1 || again[0].ID != cohort[0].ID {
		t.Errorf("a repeated Up recreated the container")
	}
}

func TestEngine_Unreachable_IsErrUnavailable(t *testing.T) {
	e, err := New(Options{Host: "unix:///nonexistent/berth-test.sock", InstallationID: newInstallation(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := testCtx(t, time.Minute)
	lease := uuid.NewString()
	checks := map[string]error{
		"Ping":         e.Ping(ctx),
		"ResolveImage": func() error { _, err := e.ResolveImage(ctx, fx.image+"x"); return err }(),
		"PinnedImage": func() error {
			_, err := e.PinnedImage(ctx, messages.ImagePin{ID: "sha256:" + strings.Repeat("a", 64)})
			return err
		}(),
		"EnsureNetwork": func() error { _, err := e.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: lease}); return err }(),
		"Down":          e.Down(ctx, lease, dockerio.DownOptions{}),
		"Cohort":        func() error { _, err := e.Cohort(ctx, lease); return err }(),
		"ListManaged":   func() error { _, err := e.ListManaged(ctx); return err }(),
		"StopRemove":    e.StopRemove(ctx, strings.Repeat("a", 64), time.Second),
	}
	for name, err := range checks {
		if !errors.Is(err, dockerio.ErrUnavailable) {
			t.Errorf("%s against a missing engine = %v, want ErrUnavailable", name, err)
		}
	}
	if _, err := New(Options{Host: "unix://" + dockerSocket, Logger: testLogger()}); err == nil {
		t.Error("New without an installation ID succeeded")
	}
}
