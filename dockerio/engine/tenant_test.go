package engine

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// Stock images on a read-only rootfs, against the real engine: writable-path
// detection and seeding, the launch they make possible, the hostile images
// refused or confined, and the tenant seccomp profile.

// stockImage resolves a stock Debian image of the local registry
// (.ci/stock-images.sh; env BERTH_TEST_NGINX_IMAGE, BERTH_TEST_REDIS_IMAGE).
func stockImage(t *testing.T, e *Engine, env string) (string, dockerio.ImageInfo) {
	t.Helper()
	ref := os.Getenv(env)
	if ref == "" {
		mustRun(t, env+" is not set (make test builds the stock images)")
	}
	info, err := e.ResolveImage(testCtx(t, 3*time.Minute), ref)
	if err != nil {
		t.Fatalf("ResolveImage(%s): %v", ref, err)
	}
	return ref, info
}

// detect runs DetectWritablePaths and says how long it took.
func detect(t *testing.T, e *Engine, q dockerio.WritableQuery) (dockerio.Writable, time.Duration) {
	t.Helper()
	start := time.Now()
	w, err := e.DetectWritablePaths(testCtx(t, 2*time.Minute), q)
	if err != nil {
		t.Fatalf("DetectWritablePaths(%+v): %v", q, err)
	}
	return w, time.Since(start)
}

func TestDetectWritablePaths_StockImagesAndTheTestWorkload(t *testing.T) {
	e := newTestEngine(t)
	_, nginx := stockImage(t, e, "BERTH_TEST_NGINX_IMAGE")
	_, redis := stockImage(t, e, "BERTH_TEST_REDIS_IMAGE")
	for _, c := range []struct {
		name, imageID, user string
		want                []string
		uid, gid            int
	}{
		// nginx's directories are root's: the program rule finds them.
		{"nginx as www-data", nginx.ID, "www-data", []string{"/var/lib/nginx", "/var/log/nginx"}, 33, 33},
		// redis's belong to redis: the owner rule (and the name rule) find them.
		{"redis as redis", redis.ID, "redis", []string{"/var/lib/redis", "/var/log/redis"}, 100, 101},
		{"redis as root", redis.ID, "", []string{"/var/lib/redis", "/var/log/redis"}, 0, 0},
		{"the test workload", ensurePulled(t, e).ID, "", nil, 0, 0},
	} {
		first, took := detect(t, e, dockerio.WritableQuery{Service: manifest.Service{User: c.user}, ImageID: c.imageID})
		again, cached := detect(t, e, dockerio.WritableQuery{Service: manifest.Service{User: c.user}, ImageID: c.imageID})
		t.Logf("%s: %v (program %q, refused %q, cut %v); detection %v, then %v cached", c.name, first.Paths, first.Program, first.Refused, first.Cut, took, cached)
		if !slices.Equal(first.Paths, c.want) || first.UID != c.uid || first.GID != c.gid || len(first.Cut) != 0 {
			t.Errorf("%s: %+v, want paths %v as %d:%d", c.name, first, c.want, c.uid, c.gid)
		}
		if !slices.Equal(again.Paths, first.Paths) {
			t.Errorf("%s: cached answer %v", c.name, again.Paths)
		}
	}
	// A tenant tmpfs over a detected path takes it out; so does an entrypoint
	// override naming another program.
	w, _ := detect(t, e, dockerio.WritableQuery{Service: manifest.Service{User: "www-data", Tmpfs: []string{"/var/log/nginx"}}, ImageID: nginx.ID})
	if !slices.Equal(w.Paths, []string{"/var/lib/nginx"}) || len(w.Refused) != 1 {
		t.Errorf("with a tmpfs over /var/log/nginx: %+v", w)
	}
	if w, _ := detect(t, e, dockerio.WritableQuery{Service: manifest.Service{User: "www-data", Command: []string{"/bin/true"}}, ImageID: nginx.ID}); len(w.Paths) != 0 {
		t.Errorf("running /bin/true as www-data: %v", w.Paths)
	}
}

// seedInto seeds paths of imageID into dir and says how long it took.
func seedInto(t *testing.T, e *Engine, imageID string, w dockerio.Writable, dirs ...string) time.Duration {
	t.Helper()
	start := time.Now()
	err := e.SeedWritablePaths(testCtx(t, 2*time.Minute), dockerio.SeedRequest{ImageID: imageID, Paths: w.Paths, Dirs: dirs,
		UID: w.UID, GID: w.GID, MaxEntries: 16 << 20 / 1024, MaxBytes: 16 << 20})
	if err != nil {
		t.Fatalf("SeedWritablePaths: %v", err)
	}
	return time.Since(start)
}

// statOf is a host path's mode and owner.
func statOf(t *testing.T, p string) (fs.FileMode, int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fi.Mode(), int(st.Uid), int(st.Gid)
}

// Seeding copies the image's content with its owners, gives the mount point
// to the container's user, and a reseed replaces the _wp tree whole while the
// volume's other directories keep their data.
func TestSeedWritablePaths_ImageContentAndOwnersReseedKeepsData(t *testing.T) {
	requireRoot(t)
	e := newTestEngine(t)
	_, nginx := stockImage(t, e, "BERTH_TEST_NGINX_IMAGE")
	_, redis := stockImage(t, e, "BERTH_TEST_REDIS_IMAGE")
	v := dirVolumes(t)
	lease := "11111111-2222-3333-4444-555555555555"
	dir, err := v.Ensure(testCtx(t, time.Minute), messages.VolumeName(lease, "db", 0), 64, []string{"data"}, 100, 101)
	if err != nil {
		t.Fatal(err)
	}
	wr, _ := detect(t, e, dockerio.WritableQuery{Service: manifest.Service{User: "redis"}, ImageID: redis.ID})
	took := seedInto(t, e, redis.ID, wr, dir)
	if mode, uid, gid := statOf(t, filepath.Join(dir, "_wp", "var%2Flog%2Fredis")); mode != fs.ModeDir|fs.ModeSetgid|0o750 || uid != 100 || gid != 101 {
		t.Errorf("/var/log/redis seeded %v %d:%d, want the image's setgid 0750, given to 100:101", mode, uid, gid)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "dump.rdb"), []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "_wp", "var%2Flib%2Fredis", "stale"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	again := seedInto(t, e, redis.ID, wr, dir)
	if _, err := os.Stat(filepath.Join(dir, "_wp", "var%2Flib%2Fredis", "stale")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a reseed kept what the container wrote into the old tree: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "data", "dump.rdb")); err != nil || string(b) != "data" {
		t.Errorf("a reseed touched the VOLUME's data: %q, %v", b, err)
	}
	t.Logf("redis %v seeded in %v, reseeded in %v", wr.Paths, took, again)

	scratch, err := v.Ensure(testCtx(t, time.Minute), messages.ScratchVolumeName(lease, "web", 0), 16, nil, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	wn, _ := detect(t, e, dockerio.WritableQuery{Service: manifest.Service{User: "www-data"}, ImageID: nginx.ID})
	took = seedInto(t, e, nginx.ID, wn, scratch)
	t.Logf("nginx %v seeded in %v, reseeded in %v", wn.Paths, took, seedInto(t, e, nginx.ID, wn, scratch))
	if l, err := os.Readlink(filepath.Join(scratch, "_wp", "var%2Flog%2Fnginx", "access.log")); err != nil || l != "/dev/stdout" {
		t.Errorf("access.log: %q, %v; want the image's symlink to /dev/stdout", l, err)
	}
	if mode, uid, gid := statOf(t, filepath.Join(scratch, "_wp", "var%2Flib%2Fnginx")); mode != fs.ModeDir|0o755 || uid != 33 || gid != 33 {
		t.Errorf("/var/lib/nginx seeded %v %d:%d, want 0755 given to 33:33", mode, uid, gid)
	}
	entries, _ := os.ReadDir(scratch)
	if len(entries) != 1 || entries[0].Name() != "_wp" {
		t.Errorf("scratch volume holds %v, want only _wp", entries)
	}
}

// launchAndWait launches svc on a read-only rootfs and waits until its one
// container runs (returning it inspected) or exits (ok false).
func launchAndWait(t *testing.T, e *Engine, l testLease, svc dockerio.ServicePlan) (messages.Container, bool) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	if _, err := e.Launch(ctx, l.plan(svc)); err != nil {
		t.Fatalf("Launch: %v", err)
	}
	var c messages.Container
	eventually(t, 30*time.Second, "the container runs a while or exits", func() bool {
		cohort, err := e.Cohort(ctx, l.Lease)
		if err != nil || len(cohort) != 1 {
			return false
		}
		c = cohort[0]
		return c.State == "exited" || c.State == "running" && time.Since(c.StartedAt) > 2*time.Second
	})
	return c, c.State == "running"
}

// nginx, a stock image whose program writes /var/lib/nginx and /run at start,
// runs as www-data on a read-only rootfs once its writable paths are seeded
// (or are a tmpfs given to www-data), and serves on its published port; the
// same launch without them exits, as it does under berthd before issue 17.
func TestLaunch_StockNginxAsWwwDataOnAReadOnlyRootfs(t *testing.T) {
	e := newTestEngine(t)
	ref, info := stockImage(t, e, "BERTH_TEST_NGINX_IMAGE")
	w, _ := detect(t, e, dockerio.WritableQuery{Service: manifest.Service{User: "www-data"}, ImageID: info.ID})
	v := dirVolumes(t)
	web := dockerio.ServicePlan{Service: manifest.Service{Image: ref, User: "www-data", Ports: map[string]manifest.Port{"80/tcp": {}}},
		Name: "web", SKU: "small", Quantity: 1, CPUCores: 0.5, MemoryMB: 64, ImageID: info.ID, ImageVolumes: info.Volumes}
	serves := func(t *testing.T, c messages.Container) {
		t.Helper()
		body, err := httpGet("http://127.0.0.1:" + c.Ports["80/tcp"].HostPort + "/")
		if err != nil || !strings.Contains(body, "nginx") {
			t.Errorf("GET / = %.80q, %v", body, err)
		}
		if got := c.Labels[dockerio.LabelRuntimeContract]; got != "2" {
			t.Errorf("runtime contract label %q, want 2", got)
		}
	}
	t.Run("seeded", func(t *testing.T) {
		l := newTestLease(t, e)
		dir, err := v.Ensure(testCtx(t, time.Minute), messages.ScratchVolumeName(l.Lease, "web", 0), 16, nil, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		seedInto(t, e, info.ID, w, dir)
		svc := web
		svc.WritablePaths, svc.WritableDirs = w.Paths, []string{dir}
		c, running := launchAndWait(t, e, l, svc)
		if !running {
			logs, _, _ := e.Logs(testCtx(t, time.Minute), c.ID, 20, 4096)
			t.Fatalf("nginx exited (%d): %s", c.ExitCode, logs)
		}
		serves(t, c)
	})
	t.Run("tmpfs", func(t *testing.T) {
		l := newTestLease(t, e)
		svc := web
		svc.WritablePaths = w.Paths
		c, running := launchAndWait(t, e, l, svc)
		if !running {
			t.Fatalf("nginx on tmpfs writable paths exited (%d)", c.ExitCode)
		}
		serves(t, c)
	})
	t.Run("without writable paths it exits", func(t *testing.T) {
		l := newTestLease(t, e)
		c, running := launchAndWait(t, e, l, web)
		logs, _, _ := e.Logs(testCtx(t, time.Minute), c.ID, 20, 4096)
		if running || !strings.Contains(logs, "Read-only file system") {
			t.Errorf("state %s, logs %q; want exited on a read-only /var/lib/nginx", c.State, logs)
		}
	})
}

// hostileRootfs is an image tree built to mislead detection and seeding.
func hostileRootfs(t *testing.T) []byte {
	return tarOf(t,
		tar.Header{Name: "etc/", Typeflag: tar.TypeDir},
		tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Linkname: "root:x:0:0::/:/x\napp:x:1000:1000::/:/x\n", Mode: 0o644},
		tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Linkname: "root:x:0:\napp:x:1000:\n", Mode: 0o644},
		tar.Header{Name: "var/lib/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/lib/app/", Typeflag: tar.TypeDir, Uid: 1000, Gid: 1000},
		tar.Header{Name: "var/lib/app/etc", Typeflag: tar.TypeSymlink, Linkname: "/etc", Uid: 1000},
		tar.Header{Name: "var/lib/app/up", Typeflag: tar.TypeSymlink, Linkname: "../../..", Uid: 1000},
		// Docker's import keeps this inside the image: it lands at /escape.
		tar.Header{Name: "var/lib/app/../../../escape", Typeflag: tar.TypeReg, Linkname: "x"},
		tar.Header{Name: "var/lib/evil", Typeflag: tar.TypeSymlink, Linkname: "/etc", Uid: 1000},
		tar.Header{Name: "var/lib/vol/", Typeflag: tar.TypeDir, Uid: 1000},
		tar.Header{Name: "var/log/app/", Typeflag: tar.TypeDir, Uid: 1000},
	)
}

// importHostile imports the hostile tree (never pushed) and returns its ID.
func importHostile(t *testing.T, changes ...string) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	ref := "berth-enginetest/hostile:" + strings.ReplaceAll(fmt.Sprint(time.Now().UnixNano()), "-", "")
	changes = append([]string{`ENTRYPOINT ["/app"]`, "LABEL " + testMarker + "=" + fx.tag}, changes...)
	rc, err := fx.docker.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(hostileRootfs(t)), SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	defer rc.Close()
	if err := drainJSON(rc); err != nil {
		t.Fatalf("import: %v", err)
	}
	resp, err := fx.docker.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeImage(t, resp.ID) })
	return resp.ID
}

// A hostile image is refused (its metadata) or confined (its content), each
// with a reason, and nothing is created on the host outside the seeded tree.
func TestHostileImage_RefusedOrConfined(t *testing.T) {
	requireRoot(t)
	e := newTestEngine(t)
	ctx := testCtx(t, 3*time.Minute)
	vols := make([]string, 17)
	for i := range vols {
		vols[i] = fmt.Sprintf("VOLUME /v%d", i)
	}
	for what, changes := range map[string][]string{
		"17 VOLUMEs":           vols,
		"overlapping VOLUMEs":  {"VOLUME /a", "VOLUME /a/b"},
		"a VOLUME over /proc":  {"VOLUME /proc/sys"},
		"a VOLUME over /_wp":   {"VOLUME /_wp"},
		"a reserved label":     {"LABEL traefik.enable=true"},
		"a VOLUME holding ':'": {"VOLUME /a:b"},
	} {
		id := importHostile(t, changes...)
		_, err := e.PinnedImage(ctx, messages.ImagePin{Ref: "hostile", ID: id})
		_, derr := e.DetectWritablePaths(ctx, dockerio.WritableQuery{ImageID: id})
		t.Logf("%s: %v", what, err)
		if !errors.Is(err, dockerio.ErrImageNotAdmissible) || !errors.Is(derr, dockerio.ErrImageNotAdmissible) {
			t.Errorf("%s: PinnedImage %v, detection %v; want ErrImageNotAdmissible", what, err, derr)
		}
	}

	// A symlink-then-file archive never becomes an image: Docker's import
	// extracts in a chroot and fails on the link to /etc the layer lacks.
	escape := tarOf(t, tar.Header{Name: "var/lib/app/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/lib/app/link", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		tar.Header{Name: "var/lib/app/link/escape", Typeflag: tar.TypeReg, Linkname: "x"})
	rc, err := fx.docker.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(escape), SourceName: "-"}, "", image.ImportOptions{})
	if err == nil {
		err = drainJSON(rc)
		rc.Close()
	}
	if err == nil {
		t.Errorf("Docker imported a symlink-then-file archive")
	}

	id := importHostile(t, "VOLUME /var/lib/vol")
	w, _ := detect(t, e, dockerio.WritableQuery{Service: manifest.Service{User: "app"}, ImageID: id})
	t.Logf("detected %v, refused %q", w.Paths, w.Refused)
	if !slices.Equal(w.Paths, []string{"/var/lib/app", "/var/log/app"}) || w.UID != 1000 ||
		!slices.ContainsFunc(w.Refused, func(r string) bool { return strings.HasPrefix(r, `/var/lib/evil: a symlink to "/etc"`) }) ||
		!slices.ContainsFunc(w.Refused, func(r string) bool { return strings.HasPrefix(r, "/var/lib/vol: over or under /var/lib/vol") }) {
		t.Errorf("detection %+v", w)
	}
	// Asked to seed the symlink all the same, seeding refuses it.
	dir := t.TempDir()
	err = e.SeedWritablePaths(ctx, dockerio.SeedRequest{ImageID: id, Paths: []string{"/var/lib/evil"}, Dirs: []string{dir}, MaxEntries: 100, MaxBytes: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("seeding a symlink: %v", err)
	}
	seedInto(t, e, id, w, dir)
	var made []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		made = append(made, rel)
		return err
	})
	want := []string{".", "_wp", "_wp/var%2Flib%2Fapp", "_wp/var%2Flib%2Fapp/etc", "_wp/var%2Flib%2Fapp/up", "_wp/var%2Flog%2Fapp"}
	if !slices.Equal(made, want) {
		t.Errorf("seeded tree %v, want %v", made, want)
	}
	if l, err := os.Readlink(filepath.Join(dir, "_wp/var%2Flib%2Fapp/etc")); err != nil || l != "/etc" {
		t.Errorf("the image's symlink: %q, %v; want it kept as a link, never followed", l, err)
	}
}

// buildTestworkloadRootfs compiles dockerio/dockertest/workload (with its ioctl mode)
// and lays it out as the test workload image does (.ci/workload-image.sh).
func buildTestworkloadRootfs(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "workload")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-o", out, "./dockerio/dockertest/workload")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testworkload: %v\n%s", err, b)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return tarOf(t,
		tar.Header{Name: "etc/", Typeflag: tar.TypeDir},
		tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Linkname: "root:x:0:0::/:/x\n", Mode: 0o644},
		tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		tar.Header{Name: "run/", Typeflag: tar.TypeDir},
		tar.Header{Name: "data/", Typeflag: tar.TypeDir, Mode: 0o777},
		tar.Header{Name: "workload", Typeflag: tar.TypeReg, Linkname: string(bin), Mode: 0o755},
	)
}

// Inside a launched tenant container, on a btrfs volume, the subvolume and
// snapshot creation ioctls fail with EPERM (also with high bits set in the
// request register) and create nothing, while ordinary ioctls work; under
// Docker's default profile the same container creates subvolumes.
func TestTenantSeccomp_BtrfsSubvolumeIoctlsRefusedOrdinaryIoctlsWork(t *testing.T) {
	v := btrfsVolumes(t)
	e := newTestEngine(t)
	if on, err := e.SeccompEnabled(testCtx(t, time.Minute)); err != nil || !on {
		t.Fatalf("SeccompEnabled = %v, %v; this engine runs with seccomp", on, err)
	}
	ctx := testCtx(t, 3*time.Minute)
	ref := "berth-enginetest/ioctl:" + fx.tag
	rc, err := fx.docker.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(buildTestworkloadRootfs(t)), SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{`ENTRYPOINT ["/workload"]`, "VOLUME /data", "LABEL " + testMarker + "=" + fx.tag}})
	if err != nil {
		t.Fatal(err)
	}
	_ = drainJSON(rc)
	rc.Close()
	info, err := e.PinnedImage(ctx, messages.ImagePin{Ref: ref, ID: imageIDOf(t, ref)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeImage(t, info.ID) })
	l := newTestLease(t, e)
	svc := stateful(t, v, l.Lease, dockerio.ServicePlan{Name: "db", SKU: "s", Quantity: 1, CPUCores: 0.5, MemoryMB: 64,
		Service: manifest.Service{Image: ref, Args: []string{"ioctl", "/data"}}, ImageID: info.ID, ImageVolumes: info.Volumes}, 8, 0, 0)
	c, _ := launchAndWait(t, e, l, svc)
	logs, _, err := e.Logs(ctx, c.ID, 20, 4096)
	if err != nil || c.State != "exited" || c.ExitCode != 0 {
		t.Fatalf("ioctl run: %s exit %d, %q, %v", c.State, c.ExitCode, logs, err)
	}
	t.Logf("under the tenant profile:\n%s", logs)
	for _, name := range []string{"SUBVOL_CREATE", "SUBVOL_CREATE_V2", "SNAP_CREATE", "SNAP_CREATE_V2", "SUBVOL_CREATE_HIGHBITS"} {
		if !strings.Contains(logs, name+" EPERM (1)\n") {
			t.Errorf("%s not refused with EPERM", name)
		}
	}
	if !strings.Contains(logs, "FIONREAD ok\n") || !strings.Contains(logs, "TCGETS ENOTTY") {
		t.Errorf("ordinary ioctls refused: %q", logs)
	}
	if entries, _ := os.ReadDir(filepath.Join(svc.VolumeDirs[0], "data")); len(entries) != 0 {
		t.Errorf("the volume holds %v after the refused ioctls", entries)
	}
	if c.Labels[dockerio.LabelRuntimeContract] != "2" {
		t.Errorf("runtime contract label %q, want 2", c.Labels[dockerio.LabelRuntimeContract])
	}
	// The same container under Docker's default profile: the escape works.
	out, err := exec.Command("docker", "run", "--rm", "--cap-drop", "ALL", "--security-opt", "no-new-privileges:true", "--user", "0",
		"-v", filepath.Join(svc.VolumeDirs[0], "data")+":/data", "--label", testMarker+"="+fx.tag, info.ID, "ioctl", "/data").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUBVOL_CREATE ok") {
		t.Errorf("under Docker's default profile: %s, %v; want the subvolume created", out, err)
	}
}

func imageIDOf(t *testing.T, ref string) string {
	t.Helper()
	resp, err := fx.docker.ImageInspect(testCtx(t, time.Minute), ref)
	if err != nil {
		t.Fatal(err)
	}
	return resp.ID
}
