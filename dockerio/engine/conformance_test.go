package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// TestConformance_FakeBehavesLikeTheRealEngine drives the same scenario through
// the real engine and through dockerio/dockertest/fake and requires identical transcripts,
// so actor tests written against the fake see what production will see.
func TestConformance_FakeBehavesLikeTheRealEngine(t *testing.T) {
	requireDocker(t)
	installation := "inst-conf-" + uuid.NewString()[:8]
	real := newTestEngineFor(t, installation)
	realInfo := ensurePulled(t, real)

	f := fake.New(fake.Options{InstallationID: installation})
	fakeInfo := f.AddImage(fx.image, dockerio.ImageInfo{Volumes: realInfo.Volumes, User: realInfo.User})

	// Both launch the stateful db on real directories of one dir-driver root;
	// the fake only checks the plan carries them.
	vols := dirVolumes(t)
	realT := conformanceScenario(t, real, realInfo, installation, vols, foreigner{
		network: func(name string) string { return createForeignNetwork(t, name) },
		container: func(lease, service string, index int, inst string) string {
			return createForeignContainer(t, lease, service, index, inst)
		},
	})
	fakeT := conformanceScenario(t, f, fakeInfo, installation, vols, foreigner{
		network: f.AddForeignNetwork, container: f.AddForeignContainer,
	})
	if !slices.Equal(realT, fakeT) {
		for i := range max(len(realT), len(fakeT)) {
			r, k := at(realT, i), at(fakeT, i)
			mark := "  "
			if r != k {
				mark = "≠ "
			}
			t.Logf("%sreal: %-60s fake: %s", mark, r, k)
		}
		t.Fatal("the fake's transcript differs from the real engine's")
	}
	t.Logf("%d identical observations:\n%s", len(realT), strings.Join(realT, "\n"))
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<none>"
}

// foreigner places objects the engine under test must treat as not its own.
type foreigner struct {
	network   func(name string) string                                           // unlabelled network
	container func(lease, service string, index int, installation string) string // running, in the lease's project
}

// conformer is what the scenario asks of both engines.
type conformer interface {
	steps.ImagesAPI
	ResolveImage(ctx context.Context, ref string) (dockerio.ImageInfo, error)
	PinnedImage(ctx context.Context, pin messages.ImagePin) (dockerio.ImageInfo, error)
	steps.NetworksAPI
	steps.ContainersAPI
	Up(ctx context.Context, plan dockerio.Plan) error
	Launched(ctx context.Context, lease string) ([]messages.Container, error)
	Events(ctx context.Context) (<-chan dockerio.Event, <-chan error)
	InspectNetwork(ctx context.Context, id string) (dockerio.Network, error)
	LeaseNetworks(ctx context.Context) ([]dockerio.Network, error)
	RemoveNetwork(ctx context.Context, id string) error
	SeccompEnabled(ctx context.Context) (bool, error)
}

func conformanceScenario(t *testing.T, e conformer, info dockerio.ImageInfo, installation string, vols dockerio.Volumes, foreign foreigner) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out []string
	note := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	kind := func(err error) string {
		for _, s := range []error{dockerio.ErrImagePull, dockerio.ErrForeignNetwork, dockerio.ErrForeignObject,
			dockerio.ErrImageNotAdmissible, dockerio.ErrUnavailable, dockerio.ErrAddressPoolExhausted} {
			if errors.Is(err, s) {
				return s.Error()
			}
		}
		if cerrdefs.IsNotFound(err) {
			return cerrdefs.ErrNotFound.Error()
		}
		if err != nil {
			return "other error"
		}
		return "ok"
	}
	lease, lease2, lease3 := uuid.NewString(), uuid.NewString(), uuid.NewString()
	spec := dockerio.NetworkSpec{Lease: lease, Tenant: "t", BackendName: "docker", InstallationID: installation}
	defer func() { // real engine: leave nothing behind even when the scenario fails half-way
		for _, l := range []string{lease, lease2, lease3} {
			_ = e.Down(context.Background(), l, dockerio.DownOptions{StopTimeout: time.Second, RemoveVolumes: true})
		}
		if nets, err := e.LeaseNetworks(context.Background()); err == nil {
			for _, n := range nets {
				_ = e.RemoveNetwork(context.Background(), n.ID)
			}
		}
	}()

	_, err := e.ResolveImage(ctx, testRepo+":absent-"+uuid.NewString()[:8])
	note("resolve missing: %s", kind(err))
	resolved, err := e.ResolveImage(ctx, fx.image)
	note("resolve: %s same-id=%v digest=%v volumes=%v masks=%d", kind(err), resolved.ID == info.ID, resolved.Digest != "", resolved.Volumes, len(resolved.MaskLabels))
	pinned, err := e.PinnedImage(ctx, resolved.Pin(fx.image))
	note("pinned: %s same-id=%v same-digest=%v", kind(err), pinned.ID == info.ID, pinned.Digest == resolved.Digest)
	_, err = e.PinnedImage(ctx, messages.ImagePin{Ref: fx.image, ID: "sha256:" + strings.Repeat("0", 64)})
	note("pinned absent without digest: %s", kind(err))
	_, err = e.ResolveImage(ctx, info.ID)
	note("resolve an image ID: %s", kind(err))
	w, err := e.DetectWritablePaths(ctx, dockerio.WritableQuery{Service: manifest.Service{User: "1000:1000"}, ImageID: info.ID})
	note("detect writable paths: %s paths=%v uid=%d gid=%d", kind(err), w.Paths, w.UID, w.GID)
	_, err = e.DetectWritablePaths(ctx, dockerio.WritableQuery{ImageID: "sha256:" + strings.Repeat("0", 64)})
	note("detect writable paths of an absent image: %s", kind(err))
	err = e.SeedWritablePaths(ctx, dockerio.SeedRequest{ImageID: info.ID, Paths: []string{"/run/x"}, Dirs: []string{"/nonexistent"}, MaxEntries: 1, MaxBytes: 1})
	note("seed a path under /run: %s", kind(err))
	on, err := e.SeccompEnabled(ctx)
	note("seccomp enabled: %s %v", kind(err), on)
	netID, err := e.EnsureNetwork(ctx, spec)
	again, err2 := e.EnsureNetwork(ctx, spec)
	note("ensure network twice: %s %s same=%v", kind(err), kind(err2), netID == again)
	other := spec
	other.Lease = uuid.NewString()
	foreign.network(dockerio.ProjectName(other.Lease))
	_, err = e.EnsureNetwork(ctx, other)
	note("ensure over foreign: %s", kind(err))
	_, err = e.InspectNetwork(ctx, strings.Repeat("0", 64))
	note("inspect unknown network: %s", kind(err))

	svc := func(name string, q int) dockerio.ServicePlan {
		return dockerio.ServicePlan{Service: manifest.Service{Image: fx.image, Ports: map[string]manifest.Port{"8080/tcp": {}}},
			Name: name, SKU: "s", Quantity: q, CPUCores: 0.5, MemoryMB: 64, ImageID: info.ID, ImageVolumes: info.Volumes}
	}
	db := stateful(t, vols, lease, svc("db", 1), 10, info.UID, info.GID)
	web := svc("web", 2)
	web.DependsOn = map[string]manifest.Dependency{"db": {Condition: "service_started"}}
	plan := dockerio.Plan{Lease: lease, Tenant: "t", ProviderUUID: "p", BackendName: "docker", InstallationID: installation,
		OperationID: "op-1", Generation: 1, NetworkID: netID, HostBindIP: "127.0.0.1", ReadonlyRootfs: true,
		PidsLimit: 64, TmpfsSizeMB: 8, Services: []dockerio.ServicePlan{db, web}}
	note("up: %s", kind(e.Up(ctx, plan)))

	cohort, err := e.Cohort(ctx, lease)
	note("cohort: %s %d", kind(err), len(cohort))
	for _, c := range cohort {
		var keys []string
		for k := range c.Labels {
			if strings.HasPrefix(k, "fred.") || k == "com.docker.compose.project" || k == "com.docker.compose.service" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		b := c.Ports["8080/tcp"]
		note("  %s/%d %s gen=%d op=%s image=%v port-on=%s has-port=%v labels=%s", c.Service, c.Index, c.State, c.Generation,
			c.OperationID, c.ImageID == info.ID, b.HostIP, b.HostPort != "", strings.Join(keys, ","))
		note("  compose service label %s", c.Labels["com.docker.compose.service"])
	}
	launched, err := e.Launched(ctx, lease)
	note("launched: %s %d", kind(err), len(launched))
	for i, c := range launched {
		same := i < len(cohort) && c.ID == cohort[i].ID && c.Generation == cohort[i].Generation && c.ImageID == cohort[i].ImageID
		note("  %s/%d %s health=%q as-in-cohort=%v started-known=%v ports-known=%v", c.Service, c.Index, c.State, c.Health, same,
			!c.StartedAt.IsZero(), len(c.Ports) > 0)
	}
	list, err := e.ListManaged(ctx)
	note("list managed: %s %d", kind(err), len(list))
	nets, err := e.LeaseNetworks(ctx)
	note("lease networks: %s %d", kind(err), len(nets))
	_, err = e.Inspect(ctx, strings.Repeat("f", 64))
	note("inspect unknown container: %s", kind(err))
	_, _, err = e.Logs(ctx, strings.Repeat("f", 64), 10, 100)
	note("logs unknown container: %s", kind(err))

	if len(cohort) == 3 {
		evCtx, stop := context.WithCancel(ctx)
		events, _ := e.Events(evCtx)
		time.Sleep(200 * time.Millisecond) // let the real stream subscribe before acting
		note("remove web/1 + unknown: %s", kind(e.RemoveContainers(ctx, []string{cohort[2].ID, strings.Repeat("e", 64)})))
		var got []string
		timeout := time.After(30 * time.Second)
		for len(got) < 2 {
			select {
			case ev := <-events:
				if ev.ContainerID == cohort[2].ID {
					got = append(got, fmt.Sprintf("%s(%s/%d exit %d)", ev.Action, ev.Service, ev.Index, ev.ExitCode))
				}
			case <-timeout:
				got = append(got, "timeout")
			}
		}
		note("events of the removal: %s", strings.Join(got, " "))
		note("stop-remove web/0: %s", kind(e.StopRemove(ctx, cohort[1].ID, 5*time.Second)))
		got = nil
		timeout = time.After(30 * time.Second)
		for len(got) < 2 {
			select {
			case ev := <-events:
				if ev.ContainerID == cohort[1].ID {
					got = append(got, fmt.Sprintf("%s(%s/%d exit %d)", ev.Action, ev.Service, ev.Index, ev.ExitCode))
				}
			case <-timeout:
				got = append(got, "timeout")
			}
		}
		stop()
		note("events of the gentle removal: %s", strings.Join(got, " "))
		note("stop-remove again: %s", kind(e.StopRemove(ctx, cohort[1].ID, time.Second)))
		after, _ := e.Cohort(ctx, lease)
		note("cohort after removals: %d", len(after))
	}

	// Another installation's container in a lease's project: refused, untouched.
	other2 := dockerio.NetworkSpec{Lease: lease2, Tenant: "t", BackendName: "docker", InstallationID: installation}
	net2, err := e.EnsureNetwork(ctx, other2)
	note("ensure network 2: %s", kind(err))
	theirs := foreign.container(lease2, "web", 0, "inst-conf-other")
	plan2 := plan
	plan2.Lease, plan2.NetworkID, plan2.Services = lease2, net2, []dockerio.ServicePlan{svc("web", 1)}
	note("up over a foreign container: %s", kind(e.Up(ctx, plan2)))
	c2, err := e.Cohort(ctx, lease2)
	note("cohort with a foreign container: %s %d", kind(err), len(c2))
	note("down with a foreign container: %s", kind(e.Down(ctx, lease2, dockerio.DownOptions{StopTimeout: time.Second, RemoveVolumes: true})))
	note("remove foreign container: %s", kind(e.RemoveContainers(ctx, []string{theirs})))
	note("stop-remove foreign container: %s", kind(e.StopRemove(ctx, theirs, time.Second)))
	_, _, err = e.Logs(ctx, theirs, 10, 100)
	note("logs of foreign container: %s", kind(err))
	fc, err := e.Inspect(ctx, theirs)
	note("foreign container afterwards: %s %s", kind(err), fc.State)

	// A stateful plan without its volume directories: refused, nothing created.
	net3, err := e.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: lease3, Tenant: "t", BackendName: "docker", InstallationID: installation})
	note("ensure network 3: %s", kind(err))
	noDirs := db
	noDirs.VolumeDirs = nil
	plan3 := plan
	plan3.Lease, plan3.NetworkID, plan3.Services = lease3, net3, []dockerio.ServicePlan{noDirs}
	err = e.Up(ctx, plan3)
	note("up stateful without volume dirs: %s mentions-dirs=%v", kind(err), err != nil && strings.Contains(err.Error(), "volume directories"))
	c3, _ := e.Cohort(ctx, lease3)
	note("cohort after refused up: %d", len(c3))
	note("down 3 with volumes: %s", kind(e.Down(ctx, lease3, dockerio.DownOptions{RemoveVolumes: true})))
	for _, n := range []string{net2, net3} {
		note("remove network: %s", kind(e.RemoveNetwork(ctx, n)))
	}
	note("remove network in use: %s", kind(e.RemoveNetwork(ctx, netID)))
	note("down: %s", kind(e.Down(ctx, lease, dockerio.DownOptions{StopTimeout: time.Second, RemoveVolumes: true})))
	cohort, err = e.Cohort(ctx, lease)
	note("cohort after down: %s %d", kind(err), len(cohort))
	n, err := e.InspectNetwork(ctx, netID)
	note("network after down: %s containers=%d", kind(err), n.Containers)
	note("down again: %s", kind(e.Down(ctx, lease, dockerio.DownOptions{})))
	note("remove network: %s", kind(e.RemoveNetwork(ctx, netID)))
	note("remove network again: %s", kind(e.RemoveNetwork(ctx, netID)))
	_, err = e.InspectNetwork(ctx, netID)
	note("inspect removed network: %s", kind(err))
	note("up on removed network: %s", kind(e.Up(ctx, plan)))
	return out
}
