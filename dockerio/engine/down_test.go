package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages/manifest"
)

// leaseContainers lists every container (any state) labelled with the lease.
func leaseContainers(t *testing.T, lease string) []container.Summary {
	t.Helper()
	list, err := fx.docker.ContainerList(testCtx(t, time.Minute), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", dockerio.LabelLease+"="+lease))})
	if err != nil {
		t.Fatalf("container list: %v", err)
	}
	return list
}

// createStraggler makes a container by hand that only carries the ownership
// labels of the lease and of e's installation (no Compose labels), as a crashed
// earlier launch could leave. Extra label pairs are added (or override).
func createStraggler(t *testing.T, e *Engine, lease string, start bool, extra ...string) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	l := map[string]string{dockerio.LabelManaged: "true", dockerio.LabelLease: lease,
		dockerio.LabelInstallation: e.opts.InstallationID, testMarker: fx.tag}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	resp, err := fx.docker.ContainerCreate(ctx, &container.Config{
		Image:  fx.imageID,
		Labels: l,
	}, &container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create straggler: %v", err)
	}
	// The image's VOLUME gives it an anonymous volume at create; a test that
	// removes the container gently (StopRemove keeps volumes) would leave it,
	// so the cleanup removes the container, then its volumes.
	var vols []string
	if c, err := fx.docker.ContainerInspect(ctx, resp.ID); err == nil {
		for _, m := range c.Mounts {
			if m.Type == "volume" && m.Name != "" {
				vols = append(vols, m.Name)
			}
		}
	}
	t.Cleanup(func() {
		cctx := testCtx(t, time.Minute)
		_ = fx.docker.ContainerRemove(cctx, resp.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		for _, v := range vols {
			_ = fx.docker.VolumeRemove(cctx, v, true)
		}
	})
	if start {
		if err := fx.docker.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
			t.Fatalf("start straggler: %v", err)
		}
	}
	return resp.ID
}

func TestDown_RemovesContainersAndStragglers_KeepsNetworkAndVolumeData_Idempotent(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	l := newTestLease(t, e)
	ctx := testCtx(t, 3*time.Minute)

	db := stateful(t, dirVolumes(t), l.Lease, workloadService("db", 1, info), 64, 0, 0)
	if err := e.Up(ctx, l.plan(db, workloadService("web", 2, info))); err != nil {
		t.Fatalf("Up: %v", err)
	}
	dbC, _ := e.Cohort(ctx, l.Lease)
	if code, out := execIn(t, dbC[0].ID, "/workload", "write", "/data/kept"); code != 0 {
		t.Fatalf("write into the volume: %s", out)
	}
	straggler := createStraggler(t, e, l.Lease, true)
	if n := len(leaseContainers(t, l.Lease)); n != 4 {
		t.Fatalf("setup: %d lease containers, want 3 + straggler", n)
	}

	// RemoveVolumes is a no-op: tenant data lives in host volumes, which only
	// Volumes.Destroy removes.
	if err := e.Down(ctx, l.Lease, dockerio.DownOptions{StopTimeout: 2 * time.Second, RemoveVolumes: true}); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if left := leaseContainers(t, l.Lease); len(left) != 0 {
		t.Errorf("after Down: %d containers left (straggler %s)", len(left), straggler[:12])
	}
	if _, err := os.Stat(filepath.Join(db.VolumeDirs[0], "data", "kept")); err != nil {
		t.Errorf("Down touched the volume's data: %v", err)
	}
	if vols := leaseVolumes(t, l.Lease); len(vols) != 0 {
		t.Errorf("Docker volumes of the lease = %v, want none ever created", vols)
	}
	if _, err := e.InspectNetwork(ctx, l.NetworkID); err != nil {
		t.Errorf("lease network after Down: %v (Down must never remove it)", err)
	}
	if err := e.Down(ctx, l.Lease, dockerio.DownOptions{StopTimeout: time.Second}); err != nil {
		t.Fatalf("second Down: %v", err)
	}
	if err := e.Down(ctx, uuid.NewString(), dockerio.DownOptions{}); err != nil {
		t.Errorf("Down of a lease with nothing = %v, want nil", err)
	}
}

// A stateful plan is refused before anything is created when a volume
// directory is missing from the plan or from the host, or is not a directory.
func TestUp_StatefulVolumeDirMissingOrNotADirectory_RefusedWithoutContainers(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	l := newTestLease(t, e)
	ctx := testCtx(t, 2*time.Minute)
	v := dirVolumes(t)

	noDirs := workloadService("db", 1, info)
	noDirs.DiskMB = 64
	if err := e.Up(ctx, l.plan(noDirs)); err == nil || !strings.Contains(err.Error(), "volume directories") {
		t.Errorf("Up without VolumeDirs = %v, want the plan refused", err)
	}
	gone := stateful(t, v, l.Lease, workloadService("db", 1, info), 64, 0, 0)
	if err := os.RemoveAll(filepath.Join(gone.VolumeDirs[0], "data")); err != nil {
		t.Fatal(err)
	}
	if err := e.Up(ctx, l.plan(gone)); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Up with a missing volume subdirectory = %v", err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(gone.VolumeDirs[0], "data")); err != nil {
		t.Fatal(err)
	}
	if err := e.Up(ctx, l.plan(gone)); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("Up with a symlinked volume subdirectory = %v", err)
	}
	if n := len(leaseContainers(t, l.Lease)); n != 0 {
		t.Errorf("refused Ups created %d containers", n)
	}
}

func TestDown_AfterLeaseNetworkRemoved_StillRemovesEverything(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	l := newTestLease(t, e)
	ctx := testCtx(t, 3*time.Minute)
	if err := e.Up(ctx, l.plan(workloadService("app", 2, info))); err != nil {
		t.Fatalf("Up: %v", err)
	}
	for _, c := range leaseContainers(t, l.Lease) {
		timeout := 1
		if err := fx.docker.ContainerStop(ctx, c.ID, container.StopOptions{Timeout: &timeout}); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	if err := e.RemoveNetwork(ctx, l.NetworkID); err != nil {
		t.Fatalf("RemoveNetwork with only stopped containers: %v", err)
	}
	if _, err := e.InspectNetwork(ctx, l.NetworkID); !cerrdefs.IsNotFound(err) {
		t.Fatalf("network still there: %v", err)
	}
	if err := e.Down(ctx, l.Lease, dockerio.DownOptions{StopTimeout: time.Second, RemoveVolumes: true}); err != nil {
		t.Fatalf("Down after network removal: %v", err)
	}
	if left := leaseContainers(t, l.Lease); len(left) != 0 {
		t.Errorf("%d containers left", len(left))
	}
}

func TestRemoveContainers_ByID_NotFoundIsSuccess(t *testing.T) {
	e := newTestEngine(t)
	ensurePulled(t, e)
	lease := uuid.NewString()
	id := createStraggler(t, e, lease, true)
	ctx := testCtx(t, time.Minute)
	if err := e.RemoveContainers(ctx, []string{id, "0123456789ab" + "0123456789ab" + "0123456789ab" + "0123456789ab" + "01234567890a"}); err != nil {
		t.Fatalf("RemoveContainers: %v", err)
	}
	if _, err := e.Inspect(ctx, id); !cerrdefs.IsNotFound(err) {
		t.Errorf("Inspect after remove = %v, want ErrNotFound", err)
	}
	if err := e.RemoveContainers(ctx, []string{id}); err != nil {
		t.Errorf("RemoveContainers again = %v, want nil", err)
	}
}

func TestUp_LeaseNetworkVanishedOrForeign_FailsLaunchWithoutContainers(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	ctx := testCtx(t, 2*time.Minute)

	gone := newTestLease(t, e)
	if err := e.RemoveNetwork(ctx, gone.NetworkID); err != nil {
		t.Fatal(err)
	}
	if err := e.Up(ctx, gone.plan(workloadService("app", 1, info))); !cerrdefs.IsNotFound(err) {
		t.Errorf("Up on a removed network = %v, want ErrNotFound", err)
	}
	if n := len(leaseContainers(t, gone.Lease)); n != 0 {
		t.Errorf("Up on a removed network created %d containers", n)
	}

	foreign := newTestLease(t, e)
	foreign.NetworkID = createForeignNetwork(t, "berth-enginetest-foreign-"+foreign.Lease[:8])
	if err := e.Up(ctx, foreign.plan(workloadService("app", 1, info))); !errors.Is(err, dockerio.ErrForeignNetwork) {
		t.Errorf("Up on a foreign network = %v, want ErrForeignNetwork", err)
	}
	if n := len(leaseContainers(t, foreign.Lease)); n != 0 {
		t.Errorf("Up on a foreign network created %d containers", n)
	}
}

// web depends on db service_healthy; a db that never becomes healthy fails the launch.
func TestUp_DependencyNeverHealthy_FailsLaunch(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	l := newTestLease(t, e)
	db := workloadService("db", 1, info)
	db.HealthCheck = &manifest.HealthCheck{
		Test:     []string{"CMD", "/workload", "get", "http://127.0.0.1:9/"}, // nothing listens
		Interval: manifest.Duration(500 * time.Millisecond), Timeout: manifest.Duration(time.Second), Retries: 1,
	}
	web := workloadService("web", 1, info)
	web.DependsOn = map[string]manifest.Dependency{"db": {Condition: "service_healthy"}}
	ctx := testCtx(t, 2*time.Minute)
	err := e.Up(ctx, l.plan(db, web))
	if err == nil {
		t.Fatal("Up succeeded although db never became healthy")
	}
	cohort, cerr := e.Cohort(ctx, l.Lease)
	if cerr != nil {
		t.Fatalf("Cohort: %v", cerr)
	}
	for _, c := range cohort {
		if c.Service == "web" && c.State == "running" {
			t.Errorf("web started although its dependency is unhealthy")
		}
		if c.Service == "db" && c.Health != "unhealthy" {
			t.Errorf("db health = %q, want unhealthy", c.Health)
		}
	}
	t.Logf("launch error: %v", err)
}

// A container in the project whose fred.* labels claim another instance than its
// Compose key is not attributed to the lease (and is still removed by Down).
func TestCohort_LabelsDisagreeWithComposeKey_Excluded(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	l := newTestLease(t, e)
	ctx := testCtx(t, 2*time.Minute)
	if err := e.Up(ctx, l.plan(workloadService("web", 2, info))); err != nil {
		t.Fatalf("Up: %v", err)
	}
	project := dockerio.ProjectName(l.Lease)
	liar := createStraggler(t, e, l.Lease, false,
		"com.docker.compose.project", project, "com.docker.compose.service", "web-0",
		"com.docker.compose.config-hash", "x", "com.docker.compose.oneoff", "False",
		dockerio.LabelService, "web", dockerio.LabelInstance, "1")
	cohort, err := e.Cohort(ctx, l.Lease)
	if err != nil {
		t.Fatalf("Cohort: %v", err)
	}
	if len(cohort) != 2 {
		t.Fatalf("cohort has %d containers, want the 2 real ones", len(cohort))
	}
	for _, c := range cohort {
		if c.ID == liar {
			t.Errorf("container claiming web/1 under compose key web-0 was attributed")
		}
	}
	if err := e.Down(ctx, l.Lease, dockerio.DownOptions{StopTimeout: time.Second}); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if left := leaseContainers(t, l.Lease); len(left) != 0 {
		t.Errorf("%d containers left after Down", len(left))
	}
}
