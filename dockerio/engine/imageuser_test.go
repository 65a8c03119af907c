package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages/policy"
)

func TestResolveUser_LikeDockersRuntime(t *testing.T) {
	passwd := []byte("root:x:0:0:root:/:/sbin/nologin\n# comment\nbroken line\napp:x:1000:1001:app:/:/bin/sh\nsvc:x:2000:2000::/:\n")
	group := []byte("root:x:0:\napp:x:1001:\nstaff:x:50:app\n")
	for user, want := range map[string]userIDs{
		"":           {0, 0},
		"app":        {1000, 1001},
		"app:staff":  {1000, 50},
		"app:7":      {1000, 7},
		"1000":       {1000, 1001}, // a listed uid takes its primary group
		"4242":       {4242, 0},    // an unlisted one runs with gid 0
		"4242:staff": {4242, 50},
		"svc":        {2000, 2000},
	} {
		u, err := policy.ParseUser(user)
		if err != nil {
			t.Fatalf("ParseUser(%q): %v", user, err)
		}
		got, err := resolveUser(u, passwd, group)
		if err != nil || got != want {
			t.Errorf("%q → %+v, %v; want %+v", user, got, err, want)
		}
	}
	for user, why := range map[string][]byte{"nobody": passwd, "app:wheel": passwd, "app": nil} {
		u, _ := policy.ParseUser(user)
		pw := why
		if _, err := resolveUser(u, pw, group); err == nil {
			t.Errorf("%q resolved, want an error", user)
		}
	}
	for _, bad := range []string{":", "app:", ":app", "a b", "../x"} {
		if _, err := policy.ParseUser(bad); err == nil {
			t.Errorf("ParseUser(%q) accepted", bad)
		}
	}
}

// helpers lists this installation's image-user helper containers, any state.
func helpers(t *testing.T, e *Engine) []container.Summary {
	t.Helper()
	list, err := fx.docker.ContainerList(testCtx(t, time.Minute), container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", labelHelper+"="+helperImageUser),
		filters.Arg("label", dockerio.LabelInstallation+"="+e.opts.InstallationID))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// The image user is resolved through the image's own /etc/passwd and
// /etc/group (root; app 1000:1000 in the test rootfs), by ResolveImage and
// PinnedImage alike; the helper container is gone afterwards; the answer is
// cached per image.
func TestResolveImage_ImageUser_NumericDirectNamesThroughTheImagesOwnFiles(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 3*time.Minute)
	root := ensurePulled(t, e)
	if root.UID != 0 || root.GID != 0 {
		t.Errorf("no USER: %d:%d, want 0:0", root.UID, root.GID)
	}
	repo := testImageRepo("user")
	for tag, c := range map[string]struct {
		user     string
		uid, gid int
	}{
		"named":        {"app", 1000, 1000},
		"named-group":  {"app:root", 1000, 0},
		"uid-listed":   {"1000", 1000, 1000},
		"uid-unlisted": {"4242", 4242, 0},
		"numeric":      {"4242:7", 4242, 7},
	} {
		ref := repo + ":" + tag
		makeImage(t, ref, true, "USER "+c.user, "VOLUME /data")
		creates := requests(e, opContainerCreate)
		info, err := e.ResolveImage(ctx, ref)
		if err != nil {
			t.Fatalf("%s: ResolveImage: %v", tag, err)
		}
		if info.User != c.user || info.UID != c.uid || info.GID != c.gid {
			t.Errorf("%s: USER %q → %d:%d, want %d:%d", tag, info.User, info.UID, info.GID, c.uid, c.gid)
		}
		helpersMade := requests(e, opContainerCreate) - creates
		if tag == "numeric" && helpersMade != 0 {
			t.Errorf("numeric uid:gid made %d helper containers, want none", helpersMade)
		}
		pinned, err := e.PinnedImage(ctx, info.Pin(ref))
		if err != nil || pinned.UID != c.uid || pinned.GID != c.gid {
			t.Errorf("%s: PinnedImage = %d:%d, %v", tag, pinned.UID, pinned.GID, err)
		}
		if again := requests(e, opContainerCreate) - creates; again != helpersMade {
			t.Errorf("%s: the second lookup made another helper (cached per image ID)", tag)
		}
	}
	if left := helpers(t, e); len(left) != 0 {
		t.Errorf("%d image-user helpers left behind", len(left))
	}
	if uid, gid, err := e.ImageUser(ctx, root.ID, "app"); err != nil || uid != 1000 || gid != 1000 {
		t.Errorf("ImageUser(app) of the root image = %d:%d, %v (a manifest user override)", uid, gid, err)
	}

	ref := repo + ":unknown"
	makeImage(t, ref, true, "USER nobody")
	if _, err := e.ResolveImage(ctx, ref); !errors.Is(err, dockerio.ErrImageNotAdmissible) {
		t.Errorf("USER nobody (not in the image's passwd) = %v, want ErrImageNotAdmissible", err)
	}
	if left := helpers(t, e); len(left) != 0 {
		t.Errorf("%d image-user helpers left behind after a refusal", len(left))
	}
}

// A helper a killed daemon left (another Engine's incarnation of the same
// installation) is swept at once, however young; this Engine's own helper,
// still being read, is not.
func TestSweepHelpers_RemovesADeadIncarnationsHelperAtOnce_KeepsItsOwnInUse(t *testing.T) {
	installation := newInstallation()
	dead, live := newTestEngineFor(t, installation), newTestEngineFor(t, installation)
	ctx := testCtx(t, 2*time.Minute)
	info := ensurePulled(t, live)
	err := dead.withHelper(ctx, info.ID, nil, func(id string) error {
		n, err := live.SweepHelpers(ctx)
		if err != nil || n != 1 {
			t.Errorf("sweep of a dead incarnation's helper removed %d, %v; want 1", n, err)
		}
		if _, err := fx.docker.ContainerInspect(ctx, id); err == nil {
			t.Errorf("the dead incarnation's helper %s is still there", id[:12])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = live.withHelper(ctx, info.ID, nil, func(id string) error {
		if n, err := live.SweepHelpers(ctx); err != nil || n != 0 {
			t.Errorf("sweep during its own read removed %d, %v; want 0", n, err)
		}
		if _, err := fx.docker.ContainerInspect(ctx, id); err != nil {
			t.Errorf("its own helper in use was removed: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if left := helpers(t, live); len(left) != 0 {
		t.Errorf("%d helpers left", len(left))
	}
}
