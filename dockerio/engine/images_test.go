package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
)

func TestPullImage_TagInRegistry_PullsItAndInspectReportsVolumesAndUser(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 2*time.Minute)
	// Make sure the pull has something to do.
	if _, err := fx.docker.ImageRemove(ctx, fx.image, image.RemoveOptions{Force: true}); err != nil && !isNotFound(err) {
		t.Fatalf("remove local copy: %v", err)
	}
	if _, err := e.InspectImage(ctx, fx.image); !errors.Is(err, dockerio.ErrNotFound) {
		t.Fatalf("InspectImage before pull: %v, want ErrNotFound", err)
	}
	if err := e.PullImage(ctx, fx.image); err != nil {
		t.Fatalf("PullImage: %v", err)
	}
	info, err := e.InspectImage(ctx, fx.image)
	if err != nil {
		t.Fatalf("InspectImage: %v", err)
	}
	if info.ID != fx.imageID || !slices.Equal(info.Volumes, []string{"/data"}) || info.User != "" {
		t.Errorf("InspectImage = %+v, want ID %s, volumes [/data], no user", info, fx.imageID)
	}
	byID, err := e.InspectImage(ctx, info.ID)
	if err != nil || byID.ID != info.ID {
		t.Errorf("InspectImage(by ID) = %+v, %v", byID, err)
	}
	if err := e.PullImage(ctx, info.ID); err != nil {
		t.Errorf("PullImage(present ID) = %v", err)
	}
	if err := e.PullImage(ctx, "sha256:"+strings.Repeat("0", 64)); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("PullImage(absent ID) = %v, want ErrImagePull", err)
	}
}

func TestPullImage_MissingTagOrRepository_IsErrImagePull(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 2*time.Minute)
	for _, ref := range []string{
		testRepo + ":missing-" + uuid.NewString()[:8],
		"127.0.0.1:5000/berth-enginetest/no-such-repo-" + uuid.NewString()[:8] + ":v1",
		"Invalid Reference!",
	} {
		err := e.PullImage(ctx, ref)
		if !errors.Is(err, dockerio.ErrImagePull) {
			t.Errorf("PullImage(%q) = %v, want ErrImagePull", ref, err)
		}
	}
}

// A registry that cannot be reached at all falls back to a locally present copy
// of the tag; without a local copy the pull fails.
func TestPullImage_RegistryUnreachable_UsesLocalTagOnlyWhenPresent(t *testing.T) {
	e := newTestEngine(t)
	ensurePulled(t, e)
	ctx := testCtx(t, 2*time.Minute)
	unreachable := "127.0.0.1:1/berth-enginetest/workload:" + fx.tag // nothing listens on port 1
	if err := fx.docker.ImageTag(ctx, fx.image, unreachable); err != nil {
		t.Fatalf("tag: %v", err)
	}
	t.Cleanup(func() { _, _ = fx.docker.ImageRemove(testCtx(t, time.Minute), unreachable, image.RemoveOptions{}) })

	if err := e.PullImage(ctx, unreachable); err != nil {
		t.Errorf("PullImage(locally present, registry down) = %v, want nil", err)
	}
	absent := "127.0.0.1:1/berth-enginetest/workload:absent-" + fx.tag
	if err := e.PullImage(ctx, absent); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("PullImage(absent, registry down) = %v, want ErrImagePull", err)
	}
}

// A digest-pinned reference already present is not pulled: proven with a pull
// timeout so small that any pull would fail.
func TestPullImage_DigestPinnedAndPresent_SkipsThePull(t *testing.T) {
	e := newTestEngine(t)
	ensurePulled(t, e)
	ctx := testCtx(t, time.Minute)
	inspect, err := fx.docker.ImageInspect(ctx, fx.image)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var pinned string
	for _, d := range inspect.RepoDigests {
		if strings.HasPrefix(d, testRepo+"@") {
			pinned = d
		}
	}
	if pinned == "" {
		t.Fatalf("no repo digest for %s in %v", testRepo, inspect.RepoDigests)
	}
	impatient, err := New(Options{Host: "unix://" + dockerSocket, PullTimeout: time.Nanosecond, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	if err := impatient.PullImage(ctx, pinned); err != nil {
		t.Errorf("PullImage(%s) = %v, want nil without pulling", pinned, err)
	}
	if err := impatient.PullImage(ctx, fx.image); !errors.Is(err, dockerio.ErrImagePull) {
		t.Errorf("PullImage(tag) with a 1ns pull timeout = %v, want ErrImagePull (a tag is always pulled)", err)
	}
}

func TestInspectImage_MoreThan16Volumes_Refused(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, time.Minute)
	ref := "berth-enginetest/manyvolumes:" + fx.tag
	var changes []string
	for i := range 17 {
		changes = append(changes, fmt.Sprintf("VOLUME /v%02d", i))
	}
	if err := importImage(ctx, ref, changes); err != nil {
		t.Fatalf("import: %v", err)
	}
	t.Cleanup(func() { _, _ = fx.docker.ImageRemove(testCtx(t, time.Minute), ref, image.RemoveOptions{Force: true}) })
	_, err := e.InspectImage(ctx, ref)
	if !errors.Is(err, dockerio.ErrImagePull) || !strings.Contains(err.Error(), "17 VOLUMEs") {
		t.Errorf("InspectImage(17 volumes) = %v, want a refusal wrapping ErrImagePull", err)
	}
}

func TestEngine_Unreachable_IsErrUnavailable(t *testing.T) {
	e, err := New(Options{Host: "unix:///nonexistent/berth-test.sock", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := testCtx(t, time.Minute)
	lease := uuid.NewString()
	checks := map[string]error{
		"Ping":          e.Ping(ctx),
		"PullImage":     e.PullImage(ctx, fx.image+"x"),
		"EnsureNetwork": func() error { _, err := e.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: lease}); return err }(),
		"Down":          e.Down(ctx, lease, dockerio.DownOptions{}),
		"Cohort":        func() error { _, err := e.Cohort(ctx, lease); return err }(),
		"ListManaged":   func() error { _, err := e.ListManaged(ctx, "x"); return err }(),
	}
	for name, err := range checks {
		if !errors.Is(err, dockerio.ErrUnavailable) {
			t.Errorf("%s against a missing engine = %v, want ErrUnavailable", name, err)
		}
	}
}
