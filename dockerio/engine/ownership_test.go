package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
	"github.com/berth-dev/berth/messages/manifest"
)

// createForeignContainer makes, by hand, a running container labelled exactly as
// another installation's berth labels one of lease's instances (Compose labels
// included), removed when the test ends.
func createForeignContainer(t *testing.T, lease, service string, index int, installation string) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	plan := dockerio.Plan{Lease: lease, Tenant: "foreign-tenant", BackendName: "docker", InstallationID: installation,
		OperationID: "foreign-op", Generation: 1}
	l := labels.Container(plan, dockerio.ServicePlan{Service: manifest.Service{Image: fx.image}, Name: service, ImageID: fx.imageID}, index, time.Now())
	key := service
	if index > 0 {
		key = fmt.Sprintf("%s-%d", service, index)
	}
	l["com.docker.compose.project"] = dockerio.ProjectName(lease)
	l["com.docker.compose.service"] = key
	l["com.docker.compose.oneoff"] = "False"
	l[testMarker] = fx.tag
	resp, err := fx.docker.ContainerCreate(ctx, &container.Config{Image: fx.imageID, Labels: l},
		&container.HostConfig{NetworkMode: "none"}, nil, nil, "")
	if err != nil {
		t.Fatalf("create foreign container: %v", err)
	}
	t.Cleanup(func() {
		_ = fx.docker.ContainerRemove(testCtx(t, time.Minute), resp.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
	if err := fx.docker.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
		t.Fatalf("start foreign container: %v", err)
	}
	return resp.ID
}

// snapshot is what Docker holds of one installation's lease, read with the raw
// client: container IDs with their states, network IDs, volume names.
type snapshot struct {
	containers map[string]string // ID → state
	networks   []string
	volumes    []string
}

func installationSnapshot(t *testing.T, lease, installation string) snapshot {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	f := filters.NewArgs(filters.Arg("label", dockerio.LabelLease+"="+lease), filters.Arg("label", dockerio.LabelInstallation+"="+installation))
	s := snapshot{containers: map[string]string{}}
	cs, err := fx.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs {
		s.containers[c.ID] = c.State
	}
	ns, err := fx.docker.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		s.networks = append(s.networks, n.ID)
	}
	vs, err := fx.docker.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Volumes {
		s.volumes = append(s.volumes, v.Name)
	}
	slices.Sort(s.networks)
	slices.Sort(s.volumes)
	return s
}

func (s snapshot) String() string {
	return fmt.Sprintf("containers %v networks %d volumes %v", s.containers, len(s.networks), s.volumes)
}

func sameSnapshot(a, b snapshot) bool {
	if len(a.containers) != len(b.containers) {
		return false
	}
	for id, st := range a.containers {
		if b.containers[id] != st {
			return false
		}
	}
	return slices.Equal(a.networks, b.networks) && slices.Equal(a.volumes, b.volumes)
}

// Two installations' engines on one Docker with the same lease UUID: nothing
// either does to the lease touches the other's containers or networks (and
// neither creates a Docker volume: data is in host volumes);
// B's launch fails with ErrForeignObject while A's lease runs, and A's
// containers keep running under the same IDs.
func TestTwoInstallations_SameLease_NeitherTouchesTheOthersObjects(t *testing.T) {
	a, b := newTestEngine(t), newTestEngine(t)
	info := ensurePulled(t, a)
	ctx := testCtx(t, 5*time.Minute)
	lease := uuid.NewString()

	la := newTestLeaseAs(t, a, lease)
	db := stateful(t, dirVolumes(t), lease, workloadService("db", 1, info), 64, 0, 0)
	web := workloadService("web", 1, info)
	web.DependsOn = map[string]manifest.Dependency{"db": {Condition: "service_started"}}
	planA := la.plan(db, web)
	if err := a.Up(ctx, planA); err != nil {
		t.Fatalf("A Up: %v", err)
	}
	before := installationSnapshot(t, lease, a.opts.InstallationID)
	if len(before.containers) != 2 || len(before.networks) != 1 || len(before.volumes) != 0 {
		t.Fatalf("A's lease: %s, want 2 containers, 1 network, no Docker volume", before)
	}
	for id, st := range before.containers {
		if st != "running" {
			t.Fatalf("A's container %s is %s", trimID(id), st)
		}
	}
	intact := func(step string) {
		t.Helper()
		if now := installationSnapshot(t, lease, a.opts.InstallationID); !sameSnapshot(before, now) {
			t.Fatalf("after %s, A's lease changed:\nbefore %s\nnow    %s", step, before, now)
		}
	}
	aIDs := make([]string, 0, 2)
	for id := range before.containers {
		aIDs = append(aIDs, id)
	}

	// B's network: the name is A's, so EnsureNetwork refuses it.
	if _, err := b.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: lease, Tenant: "t-b", BackendName: "docker"}); !errors.Is(err, dockerio.ErrForeignNetwork) || !errors.Is(err, dockerio.ErrForeignObject) {
		t.Fatalf("B EnsureNetwork = %v, want ErrForeignNetwork, an ErrForeignObject", err)
	}
	intact("B's EnsureNetwork")
	// A network of B's own under the same name (Docker allows duplicates; another
	// B process could have made it), so B's Up reaches its container check.
	bNet := createDuplicateNetwork(t, ctx, dockerio.ProjectName(lease), labels.Network(dockerio.NetworkSpec{
		Lease: lease, Tenant: "t-b", BackendName: "docker", InstallationID: b.opts.InstallationID}))
	t.Cleanup(func() { _ = fx.docker.NetworkRemove(context.Background(), bNet) })
	lb := testLease{Lease: lease, Installation: b.opts.InstallationID, NetworkID: bNet}
	planB := lb.plan(db, web)
	planB.OperationID = "op-b"
	err := b.Up(ctx, planB)
	if !errors.Is(err, dockerio.ErrForeignObject) {
		t.Fatalf("B Up while A's lease runs = %v, want ErrForeignObject", err)
	}
	t.Logf("B's Up refused: %v", err)
	intact("B's Up")

	if c, err := b.Cohort(ctx, lease); err != nil || len(c) != 0 {
		t.Errorf("B Cohort = %d containers, %v; want none of A's", len(c), err)
	}
	if list, err := b.ListManaged(ctx); err != nil || len(list) != 0 {
		t.Errorf("B ListManaged = %d, %v; want none", len(list), err)
	}
	if nets, err := b.LeaseNetworks(ctx); err != nil || len(nets) != 1 || nets[0].ID != bNet {
		t.Errorf("B LeaseNetworks = %+v, %v; want only B's own", nets, err)
	}
	if err := b.Down(ctx, lease, dockerio.DownOptions{StopTimeout: time.Second}); err != nil {
		t.Errorf("B Down = %v", err)
	}
	intact("B's Down")
	if err := b.Down(ctx, lease, dockerio.DownOptions{StopTimeout: time.Second, RemoveVolumes: true}); err != nil {
		t.Errorf("B Down with volumes = %v", err)
	}
	intact("B's Down with RemoveVolumes")
	if err := b.RemoveContainers(ctx, aIDs); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("B RemoveContainers(A's) = %v, want ErrForeignObject", err)
	}
	intact("B's RemoveContainers")
	for _, id := range aIDs {
		if err := b.StopRemove(ctx, id, time.Second); !errors.Is(err, dockerio.ErrForeignObject) {
			t.Errorf("B StopRemove(A's %s) = %v, want ErrForeignObject", trimID(id), err)
		}
		if _, _, err := b.Logs(ctx, id, 10, 100); !errors.Is(err, dockerio.ErrForeignObject) {
			t.Errorf("B Logs(A's %s) = %v, want ErrForeignObject", trimID(id), err)
		}
	}
	intact("B's StopRemove")
	if err := b.RemoveNetwork(ctx, la.NetworkID); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("B RemoveNetwork(A's) = %v, want ErrForeignObject", err)
	}
	intact("B's RemoveNetwork")

	// A still sees exactly its own cohort.
	cohort, err := a.Cohort(ctx, lease)
	if err != nil || len(cohort) != 2 {
		t.Fatalf("A Cohort = %+v, %v", cohort, err)
	}
	for _, c := range cohort {
		if before.containers[c.ID] != "running" {
			t.Errorf("A's cohort has %s, not one of its running containers", trimID(c.ID))
		}
	}

	if err := a.Down(ctx, lease, dockerio.DownOptions{StopTimeout: time.Second}); err != nil {
		t.Fatalf("A Down: %v", err)
	}
	if now := installationSnapshot(t, lease, a.opts.InstallationID); len(now.containers) != 0 {
		t.Fatalf("A Down left %s", now)
	}

	// The other way round: B's straggler in the project stops A's re-launch, and
	// A's Down leaves it alone.
	bStraggler := createForeignContainer(t, lease, "web", 0, b.opts.InstallationID)
	if err := a.Up(ctx, planA); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Fatalf("A Up over B's container = %v, want ErrForeignObject", err)
	}
	if err := a.Down(ctx, lease, dockerio.DownOptions{StopTimeout: time.Second, RemoveVolumes: true}); err != nil {
		t.Fatalf("A Down with volumes: %v", err)
	}
	if c, err := fx.docker.ContainerInspect(ctx, bStraggler); err != nil || !c.State.Running {
		t.Fatalf("B's container after A's Down: %v running=%v", err, c.State != nil && c.State.Running)
	}
	if now := installationSnapshot(t, lease, a.opts.InstallationID); len(now.volumes) != 0 || len(now.containers) != 0 {
		t.Errorf("A's Down with volumes left %s", now)
	}
	if err := b.RemoveContainers(ctx, []string{bStraggler}); err != nil {
		t.Fatalf("B RemoveContainers(own) = %v", err)
	}
	// Docker 20.10 resolves a container's networks by name again at start: while
	// B's same-named network exists, A's start would be "ambiguous".
	if err := b.RemoveNetwork(ctx, bNet); err != nil {
		t.Fatalf("B RemoveNetwork(own) = %v", err)
	}
	if err := a.Up(ctx, planA); err != nil {
		t.Fatalf("A Up once the project is its own again: %v", err)
	}
}

// StopRemove stops by exact ID and removes without force and without volumes:
// the container is gone, its anonymous volume stays; absent is success; a name
// or ID prefix is not an exact ID.
func TestStopRemove_ExactIDGentle_KeepsVolumes_AbsentIsSuccess(t *testing.T) {
	e := newTestEngine(t)
	ensurePulled(t, e)
	ctx := testCtx(t, 2*time.Minute)
	lease := uuid.NewString()
	id := createStraggler(t, e, lease, true) // the image's VOLUME /data: an anonymous volume
	r, err := fx.docker.ContainerInspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var anon string
	for _, m := range r.Mounts {
		if m.Destination == "/data" {
			anon = m.Name
		}
	}
	if anon == "" {
		t.Fatalf("setup: no anonymous volume at /data: %+v", r.Mounts)
	}
	t.Cleanup(func() { _ = fx.docker.VolumeRemove(context.Background(), anon, true) })

	if err := e.StopRemove(ctx, id[:12], 5*time.Second); err == nil {
		t.Errorf("StopRemove(ID prefix) succeeded; only exact IDs may be removed")
	}
	stops := requests(e, opContainerStop)
	start := time.Now()
	if err := e.StopRemove(ctx, id, 5*time.Second); err != nil {
		t.Fatalf("StopRemove: %v", err)
	}
	t.Logf("StopRemove of a running container took %s", time.Since(start).Round(time.Millisecond))
	if n := requests(e, opContainerStop) - stops; n != 1 {
		t.Errorf("StopRemove sent %d stops, want 1", n)
	}
	if _, err := fx.docker.ContainerInspect(ctx, id); !isNotFound(err) {
		t.Errorf("container after StopRemove: %v, want gone", err)
	}
	if _, err := fx.docker.VolumeInspect(ctx, anon); err != nil {
		t.Errorf("StopRemove removed the container's volume: %v", err)
	}
	if err := e.StopRemove(ctx, id, time.Second); err != nil {
		t.Errorf("StopRemove of an absent container = %v, want nil", err)
	}
	// A stopped container: stop is a no-op, removal still gentle.
	stopped := createStraggler(t, e, lease, false)
	if err := e.StopRemove(ctx, stopped, time.Second); err != nil {
		t.Errorf("StopRemove(created, never started) = %v", err)
	}
	// Unlabelled: not ours, left alone.
	bare := createStraggler(t, e, lease, true, dockerio.LabelInstallation, "")
	if err := e.StopRemove(ctx, bare, time.Second); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("StopRemove(container without our installation label) = %v, want ErrForeignObject", err)
	}
	if c, err := fx.docker.ContainerInspect(ctx, bare); err != nil || !c.State.Running {
		t.Errorf("refused container: %v", err)
	}
}
