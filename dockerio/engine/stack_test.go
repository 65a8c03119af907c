package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// TestUp_StackWithFanOutAndHealthyDependency_HardenedAttributedAndIsolated launches
// web×2 (depends_on db service_healthy) + db×1 (active health check, stateful),
// then proves attribution, hardening, mounts, published ports, in-lease DNS and
// cross-lease isolation against real Docker.
func TestUp_StackWithFanOutAndHealthyDependency_HardenedAttributedAndIsolated(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	l := newTestLease(t, e)

	web := workloadService("web", 2, info)
	web.DependsOn = map[string]manifest.Dependency{"db": {Condition: "service_healthy"}}
	web.Env = map[string]string{"GREETING": "hello"}
	web.Labels = map[string]string{"tenant.example/tier": "front"}
	withInit := true
	web.Init = &withInit
	web.StopGracePeriod = manifest.Duration(3 * time.Second)
	db := workloadService("db", 1, info)
	db.User = "1000:1000"
	// Stateful: the image VOLUME is a bind mount of the instance's host volume,
	// whose mount point belongs to the user the service runs as.
	db = stateful(t, dirVolumes(t), l.Lease, db, 128, 1000, 1000)
	db.HealthCheck = &manifest.HealthCheck{
		Test:     []string{"CMD", "/workload", "get", "http://127.0.0.1:8080/"},
		Interval: manifest.Duration(time.Second), Timeout: manifest.Duration(2 * time.Second), Retries: 5,
	}
	plan := l.plan(db, web)
	ctx := testCtx(t, 3*time.Minute)
	start := time.Now()
	if err := e.Up(ctx, plan); err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Logf("Up of 3 containers took %s", time.Since(start).Round(time.Millisecond))

	cohort, err := e.Cohort(ctx, l.Lease)
	if err != nil {
		t.Fatalf("Cohort: %v", err)
	}
	var got []string
	for _, c := range cohort {
		got = append(got, c.Service+"/"+itoa(c.Index))
	}
	if want := []string{"db/0", "web/0", "web/1"}; !slices.Equal(got, want) {
		t.Fatalf("cohort = %v, want %v", got, want)
	}
	for _, c := range cohort {
		if c.State != "running" || c.Lease != l.Lease || c.Generation != 1 || c.OperationID != plan.OperationID || c.ImageID != info.ID {
			t.Errorf("%s/%d: state %q lease %q gen %d op %q image %q", c.Service, c.Index, c.State, c.Lease, c.Generation, c.OperationID, c.ImageID)
		}
		if c.Service == "db" && c.Health != "healthy" {
			t.Errorf("db health = %q; web depends on it being healthy", c.Health)
		}
		b, ok := c.Ports["8080/tcp"]
		if !ok || b.HostIP != "127.0.0.1" || b.HostPort == "" || b.HostPort == "0" {
			t.Fatalf("%s/%d ports = %v, want 8080/tcp on 127.0.0.1 with an ephemeral port", c.Service, c.Index, c.Ports)
		}
		body, err := httpGet("http://127.0.0.1:" + b.HostPort + "/")
		if err != nil || !strings.HasPrefix(body, "ok ") {
			t.Errorf("GET published port of %s/%d: %q, %v", c.Service, c.Index, body, err)
		}
	}

	for _, c := range cohort {
		assertHardened(t, c, plan)
	}
	dbC, web0 := cohort[0], cohort[1]
	assertMount(t, dbC.ID, "/data", mount.TypeBind, filepath.Join(db.VolumeDirs[0], "data"))
	assertMount(t, web0.ID, "/data", mount.TypeTmpfs, "")
	if code, out := execIn(t, dbC.ID, "/workload", "write", "/data/probe"); code != 0 {
		t.Errorf("stateful /data (bind mount owned by 1000:1000) not writable by its user 1000: %s", out)
	}
	if _, err := os.Stat(filepath.Join(db.VolumeDirs[0], "data", "probe")); err != nil {
		t.Errorf("the write did not land in the host volume: %v", err)
	}
	if code, out := execIn(t, web0.ID, "/workload", "write", "/data/probe"); code != 0 {
		t.Errorf("diskless /data (tmpfs) not writable: %s", out)
	}
	if code, _ := execIn(t, web0.ID, "/workload", "write", "/probe"); code == 0 {
		t.Errorf("root filesystem is writable; want read-only")
	}
	if vols := leaseVolumes(t, l.Lease); len(vols) != 0 {
		t.Errorf("Docker volumes of the lease = %v, want none (data is in host volumes)", vols)
	}

	// In-lease DNS: web reaches db by its bare service name, and "web" answers.
	if code, out := execIn(t, web0.ID, "/workload", "get", "http://db:8080/"); code != 0 {
		t.Errorf("web/0 cannot reach db by name: %s", out)
	}
	if code, out := execIn(t, dbC.ID, "/workload", "get", "http://web:8080/"); code != 0 {
		t.Errorf("db cannot reach web by name: %s", out)
	}

	// Another lease (same installation, same tenant even) can neither resolve nor reach db.
	other := newTestLease(t, e)
	if err := e.Up(ctx, other.plan(workloadService("app", 1, info))); err != nil {
		t.Fatalf("Up other lease: %v", err)
	}
	otherCohort, err := e.Cohort(ctx, other.Lease)
	if err != nil || len(otherCohort) != 1 {
		t.Fatalf("other cohort = %v, %v", otherCohort, err)
	}
	if code, out := execIn(t, otherCohort[0].ID, "/workload", "get", "http://db:8080/"); code == 0 {
		t.Errorf("a container of another lease resolved and reached db: %s", out)
	}
	dbIP := containerIP(t, dbC.ID, l.NetworkID)
	if code, out := execIn(t, otherCohort[0].ID, "/workload", "get", "http://"+dbIP+":8080/"); code == 0 {
		t.Errorf("a container of another lease reached db by address %s: %s", dbIP, out)
	}

	// A repeated Up of the same plan converges without recreating anything.
	if err := e.Up(ctx, plan); err != nil {
		t.Fatalf("second Up: %v", err)
	}
	again, err := e.Cohort(ctx, l.Lease)
	if err != nil {
		t.Fatalf("Cohort after second Up: %v", err)
	}
	for i := range again {
		if again[i].ID != cohort[i].ID {
			t.Errorf("second Up of the same plan recreated %s/%d", again[i].Service, again[i].Index)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// assertHardened checks every hardening setting in Docker's own view of the container.
func assertHardened(t *testing.T, c messages.Container, plan dockerio.Plan) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	r, err := fx.docker.ContainerInspect(ctx, c.ID)
	if err != nil {
		t.Fatalf("inspect %s: %v", c.ID, err)
	}
	hc := r.HostConfig
	name := c.Service + "/" + itoa(c.Index)
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || len(hc.CapAdd) != 0 {
		t.Errorf("%s: CapDrop %v CapAdd %v", name, hc.CapDrop, hc.CapAdd)
	}
	if !slices.Contains(hc.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("%s: SecurityOpt %v lacks no-new-privileges", name, hc.SecurityOpt)
	}
	if !slices.Contains(hc.SecurityOpt, "seccomp="+tenantSeccomp().json) || len(hc.SecurityOpt) != 2 {
		t.Errorf("%s: SecurityOpt holds %d options, want no-new-privileges and the tenant seccomp profile inline", name, len(hc.SecurityOpt))
	}
	if !hc.ReadonlyRootfs || hc.Privileged {
		t.Errorf("%s: ReadonlyRootfs %v Privileged %v", name, hc.ReadonlyRootfs, hc.Privileged)
	}
	if hc.PidsLimit == nil || *hc.PidsLimit != plan.PidsLimit {
		t.Errorf("%s: PidsLimit %v, want %d", name, hc.PidsLimit, plan.PidsLimit)
	}
	if hc.Memory != 64<<20 || hc.MemorySwap != hc.Memory {
		t.Errorf("%s: Memory %d MemorySwap %d, want both %d", name, hc.Memory, hc.MemorySwap, 64<<20)
	}
	if hc.NanoCPUs != 500_000_000 {
		t.Errorf("%s: NanoCPUs %d, want 0.5 CPU", name, hc.NanoCPUs)
	}
	if hc.RestartPolicy.Name != container.RestartPolicyDisabled {
		t.Errorf("%s: RestartPolicy %q", name, hc.RestartPolicy.Name)
	}
	if hc.NetworkMode.NetworkName() != plan.NetworkID || len(r.NetworkSettings.Networks) != 1 {
		t.Errorf("%s: NetworkMode %q networks %v, want only %s", name, hc.NetworkMode, keysOf(r.NetworkSettings.Networks), plan.NetworkID)
	}
	for _, target := range []string{"/tmp", "/run"} {
		assertMount(t, c.ID, target, mount.TypeTmpfs, "")
	}
	l := r.Config.Labels
	for k, want := range map[string]string{
		dockerio.LabelManaged: "true", dockerio.LabelLease: plan.Lease, dockerio.LabelInstallation: plan.InstallationID,
		dockerio.LabelService: c.Service, dockerio.LabelInstance: itoa(c.Index), dockerio.LabelBackend: "docker",
		dockerio.LabelTenant: plan.Tenant, dockerio.LabelProvider: plan.ProviderUUID, dockerio.LabelSKU: "small",
		dockerio.LabelRuntimeContract: "2", dockerio.LabelMaintenanceID: "", dockerio.LabelGeneration: "1",
		dockerio.LabelOperationID: plan.OperationID, dockerio.LabelImageRef: fx.image, dockerio.LabelImageID: c.ImageID,
		dockerio.LabelCallbackURL: plan.CallbackURL, dockerio.LabelLifecycleURL: plan.LifecycleURL, dockerio.LabelFailCount: "0",
		"com.docker.compose.project": dockerio.ProjectName(plan.Lease),
	} {
		if got, ok := l[k]; !ok || got != want {
			t.Errorf("%s: label %s = %q (present %v), want %q", name, k, got, ok, want)
		}
	}
	if _, err := time.Parse(time.RFC3339, l[dockerio.LabelCreatedAt]); err != nil {
		t.Errorf("%s: fred.created_at %q: %v", name, l[dockerio.LabelCreatedAt], err)
	}
	switch c.Service {
	case "web":
		if l["tenant.example/tier"] != "front" || !slices.Contains(r.Config.Env, "GREETING=hello") {
			t.Errorf("%s: tenant label/env missing: %v %v", name, l["tenant.example/tier"], r.Config.Env)
		}
		if hc.Init == nil || !*hc.Init || r.Config.StopTimeout == nil || *r.Config.StopTimeout != 3 {
			t.Errorf("%s: init %v stop timeout %v, want init and 3 s", name, hc.Init, r.Config.StopTimeout)
		}
	case "db":
		if r.Config.User != "1000:1000" {
			t.Errorf("%s: user %q, want 1000:1000", name, r.Config.User)
		}
	}
	if r.Config.Image != c.ImageID {
		t.Errorf("%s: runs image %q, want the resolved ID %q", name, r.Config.Image, c.ImageID)
	}
}

func keysOf[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// assertMount checks the container has exactly one mount at target, of type typ
// (and, when source is set, from that named volume or host path).
func assertMount(t *testing.T, id, target string, typ mount.Type, source string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	r, err := fx.docker.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	var found []string
	for _, m := range r.Mounts {
		if m.Destination != target {
			continue
		}
		got := m.Name
		if m.Type == mount.TypeBind {
			got = m.Source
			if !m.RW || m.Propagation != mount.PropagationRPrivate {
				t.Errorf("bind mount %s: rw=%v propagation=%q, want read-write rprivate", target, m.RW, m.Propagation)
			}
		}
		found = append(found, string(m.Type)+":"+got)
		if m.Type != typ || (source != "" && got != source) {
			t.Errorf("mount %s is %s %q, want %s %q", target, m.Type, got, typ, source)
		}
	}
	// berth's tmpfs mounts are HostConfig.Tmpfs (uid/gid options), not Mounts.
	if _, ok := r.HostConfig.Tmpfs[target]; ok {
		found = append(found, "tmpfs:")
		if typ != mount.TypeTmpfs {
			t.Errorf("mount %s is tmpfs, want %s %q", target, typ, source)
		}
	}
	if len(found) != 1 {
		t.Errorf("mounts at %s = %v, want exactly one %s", target, found, typ)
	}
}

func containerIP(t *testing.T, id, networkID string) string {
	t.Helper()
	r, err := fx.docker.ContainerInspect(context.Background(), id)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	for _, ep := range r.NetworkSettings.Networks {
		if ep.NetworkID == networkID {
			return ep.IPAddress
		}
	}
	t.Fatalf("container %s not on network %s", id[:12], networkID[:12])
	return ""
}

// TestLaunch_OnPoolNetwork_ReportsItsCohort_GoneNetworkFailsWithNothingCreated:
// Launch on a warm-pool network (not inspected first) answers the cohort that
// Launched lists, with one listing fewer; on a pool network removed under it,
// it fails with ErrPoolNetworkGone, leaves no container, and a launch on the
// lease's own network then runs.
func TestLaunch_OnPoolNetwork_ReportsItsCohort_GoneNetworkFailsWithNothingCreated(t *testing.T) {
	e := newTestEngine(t)
	info := ensurePulled(t, e)
	ctx := testCtx(t, 3*time.Minute)
	pool := func() dockerio.Network {
		n, err := e.CreatePoolNetwork(ctx)
		if err != nil {
			t.Fatalf("CreatePoolNetwork: %v", err)
		}
		t.Cleanup(func() {
			if err := e.RemoveNetwork(context.Background(), n.ID); err != nil {
				t.Errorf("cleanup: remove pool network %s: %v", n.Name, err)
			}
		})
		return n
	}
	// Made before the leases: cleanups run last-first, so each pool network is
	// removed after its lease's containers.
	warm, removed := pool(), pool()
	l := newTestLease(t, e)
	l.NetworkID = warm.ID
	p := l.plan(workloadService("app", 2, info))
	p.NetworkPooled = true

	inspects, lists := requests(e, "network_inspect"), requests(e, "container_list")
	cohort, err := e.Launch(ctx, p)
	if err != nil {
		t.Fatalf("Launch: %v", err)
	}
	if d := requests(e, "network_inspect") - inspects; d != 0 {
		t.Errorf("Launch inspected the pool network %d times", d)
	}
	if d := requests(e, "container_list") - lists; d != 2 {
		t.Errorf("Launch listed containers %d times, want 2 (the foreign check, compose's start)", d)
	}
	listed, err := e.Launched(ctx, l.Lease)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(cs []messages.Container) (out []string) {
		for _, c := range cs {
			out = append(out, c.ID+"/"+c.Service+"/"+itoa(c.Index)+"/"+c.ImageID)
		}
		return out
	}
	if len(cohort) != 2 || !slices.Equal(ids(cohort), ids(listed)) {
		t.Fatalf("Launch's cohort %v, Launched %v", ids(cohort), ids(listed))
	}
	for _, c := range cohort {
		if c.Lease != l.Lease || c.Generation != 1 || c.OperationID != p.OperationID {
			t.Errorf("cohort member %+v not attributed to the launch", c)
		}
	}

	// A second lease on a pool network an operator removed.
	gone := newTestLease(t, e)
	if err := e.RemoveNetwork(ctx, removed.ID); err != nil {
		t.Fatal(err)
	}
	gone.NetworkID = removed.ID
	gp := gone.plan(workloadService("app", 1, info))
	gp.NetworkPooled = true
	if _, err := e.Launch(ctx, gp); !errors.Is(err, dockerio.ErrPoolNetworkGone) {
		t.Fatalf("Launch on a removed pool network: %v, want ErrPoolNetworkGone", err)
	}
	// Docker creates a container on a missing network (it fails at start):
	// the refused launch removes what it created, so the launch on the lease's
	// own network creates afresh (compose would try to start the same ones).
	if left, err := e.Cohort(ctx, gone.Lease); err != nil || len(left) != 0 {
		t.Fatalf("after the refused launch: %d containers left (%v)", len(left), err)
	}
	own, err := e.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: gone.Lease, Tenant: gp.Tenant, BackendName: "docker", InstallationID: gone.Installation})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.RemoveNetwork(context.Background(), own) })
	gp.NetworkID, gp.NetworkPooled = own, false
	if _, err := e.Launch(ctx, gp); err != nil {
		t.Fatalf("Launch on the lease's own network: %v", err)
	}
	after, err := e.Cohort(ctx, gone.Lease)
	if err != nil || len(after) != 1 || after[0].State != "running" {
		t.Fatalf("after the launch on its own network: %+v (%v), want one running", after, err)
	}
	if got, err := fx.docker.ContainerInspect(ctx, after[0].ID); err != nil || len(got.NetworkSettings.Networks) != 1 ||
		got.NetworkSettings.Networks[dockerio.ProjectName(gone.Lease)] == nil {
		t.Fatalf("the relaunched container is not on fred-<lease> only: %v", err)
	}
}
