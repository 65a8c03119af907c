package engine

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// fredHost is what fred v0.13's docker backend left on Docker under a backend
// name of the test's own, made with the raw client exactly as fred labels and
// names its objects: no fred.installation_id, fred.generation or
// fred.operation_id. Everything it makes is removed when the test ends.
type fredHost struct {
	t       *testing.T
	backend string
	imageID string
	volumes []string // the image's VOLUMEs, each given a tmpfs (no anonymous volume to leak)
}

// newFredHost resolves $BERTH_TEST_IMAGE (through a plain engine) for fred's
// containers to run.
func newFredHost(t *testing.T) *fredHost {
	t.Helper()
	_, info := testWorkloadImage(t, newTestEngine(t))
	return &fredHost{t: t, backend: "fredtest-" + uuid.NewString()[:8], imageID: info.ID, volumes: info.Volumes}
}

// tenantNetwork makes fred's per-tenant network fred-tenant-<16 hex of
// sha256(tenant)> and returns its ID.
func (h *fredHost) tenantNetwork(tenant string) string {
	h.t.Helper()
	return h.network(dockerio.FredTenantNetwork(tenant), tenant)
}

// network makes a network named name labelled as fred's network of tenant.
func (h *fredHost) network(name, tenant string) string {
	h.t.Helper()
	resp, err := fx.docker.NetworkCreate(testCtx(h.t, time.Minute), name, network.CreateOptions{Driver: "bridge", Labels: map[string]string{
		dockerio.LabelManaged: "true", dockerio.LabelTenant: tenant, dockerio.LabelBackend: h.backend, testMarker: fx.tag,
	}})
	if err != nil {
		h.t.Fatalf("create fred network %s: %v", name, err)
	}
	h.t.Cleanup(func() {
		if err := fx.docker.NetworkRemove(testCtx(h.t, time.Minute), resp.ID); err != nil && !isNotFound(err) {
			h.t.Errorf("cleanup: remove fred network %s: %v", name, err)
		}
	})
	return resp.ID
}

// fredContainer is one of fred's instances as fred ran it.
type fredContainer struct {
	lease, tenant, service string
	index, quantity        int
	network                string   // its tenant network's ID
	args                   []string // the workload's mode and flags
	start                  bool
}

// container makes c as fred did — named fred-<lease>-<svc>-<i>, in Compose
// project fred-<lease> under key <svc> (quantity 1) or <svc>-<i> — and returns its ID.
func (h *fredHost) container(c fredContainer) string {
	h.t.Helper()
	ctx := testCtx(h.t, time.Minute)
	key := c.service
	if c.quantity > 1 {
		key += "-" + strconv.Itoa(c.index)
	}
	l := map[string]string{
		dockerio.LabelManaged: "true", dockerio.LabelBackend: h.backend, dockerio.LabelLease: c.lease,
		dockerio.LabelService: c.service, dockerio.LabelInstance: strconv.Itoa(c.index), dockerio.LabelTenant: c.tenant,
		dockerio.LabelSKU: "small", dockerio.LabelFailCount: "0", dockerio.LabelCallbackURL: "http://127.0.0.1:1/callback",
		dockerio.LabelProvider: "prov-fred", dockerio.LabelCreatedAt: time.Now().UTC().Format(time.RFC3339),
		"com.docker.compose.project": dockerio.ProjectName(c.lease), "com.docker.compose.service": key,
		"com.docker.compose.oneoff": "False", testMarker: fx.tag,
	}
	tmpfs := map[string]string{}
	for _, v := range h.volumes {
		tmpfs[v] = ""
	}
	name := dockerio.ProjectName(c.lease) + "-" + c.service + "-" + strconv.Itoa(c.index)
	resp, err := fx.docker.ContainerCreate(ctx, &container.Config{Image: h.imageID, Cmd: c.args, Labels: l},
		&container.HostConfig{NetworkMode: container.NetworkMode(c.network), Tmpfs: tmpfs}, nil, nil, name)
	if err != nil {
		h.t.Fatalf("create fred container %s: %v", name, err)
	}
	h.t.Cleanup(func() {
		err := fx.docker.ContainerRemove(testCtx(h.t, time.Minute), resp.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !isNotFound(err) {
			h.t.Errorf("cleanup: remove fred container %s: %v", name, err)
		}
	})
	if c.start {
		if err := fx.docker.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
			h.t.Fatalf("start fred container %s: %v", name, err)
		}
	}
	return resp.ID
}

// adopting is an engine option: the fred host's backend name and this allow-list.
func (h *fredHost) adopting(a *dockerio.Adopted) func(*Options) {
	return func(o *Options) { o.BackendName, o.Adopted = h.backend, a }
}

// exists reports whether Docker still holds the container id.
func exists(t *testing.T, id string) bool {
	t.Helper()
	_, err := fx.docker.ContainerInspect(testCtx(t, time.Minute), id)
	if err != nil && !isNotFound(err) {
		t.Fatalf("inspect %s: %v", trimID(id), err)
	}
	return err == nil
}

func ids(cs []messages.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.ID)
	}
	slices.Sort(out)
	return out
}

func sortedIDs(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// The allow-listed containers of a fred lease are listed, attributed to their
// lease (generation 0, no operation ID), inspectable, their logs readable and
// removable by exact ID; a fred container that is not allow-listed, and an
// allow-listed ID whose labels no longer say what the record says, are neither
// listed nor removable; an engine of the same backend without the allow-list
// sees none of them.
func TestAdopted_ListedAttributedInspectableLogsRemovable_OthersUntouched(t *testing.T) {
	h := newFredHost(t)
	tenant := "tenant-" + uuid.NewString()[:8]
	net := h.tenantNetwork(tenant)
	lease, strayLease, movedLease := uuid.NewString(), uuid.NewString(), uuid.NewString()
	run := func(lease, service string, index, quantity int) string {
		return h.container(fredContainer{lease: lease, tenant: tenant, service: service, index: index, quantity: quantity,
			network: net, args: []string{"logs", "-n", "3"}, start: true})
	}
	web0, web1, db := run(lease, "web", 0, 2), run(lease, "web", 1, 2), run(lease, "db", 0, 1)
	stray, moved := run(strayLease, "app", 0, 1), run(movedLease, "app", 0, 1)
	e := newTestEngineFor(t, newInstallation(), h.adopting(&dockerio.Adopted{
		Containers: map[string]dockerio.AdoptedContainer{
			web0: {Lease: lease, Service: "web", Index: 0}, web1: {Lease: lease, Service: "web", Index: 1},
			db: {Lease: lease, Service: "db", Index: 0},
			// Recorded as another service than its labels say.
			moved: {Lease: movedLease, Service: "worker", Index: 0},
		},
		Networks: map[string]dockerio.AdoptedNetwork{net: {Tenant: tenant}},
	}))
	ctx := testCtx(t, 3*time.Minute)

	managed, err := e.ListManaged(ctx)
	if err != nil {
		t.Fatalf("ListManaged: %v", err)
	}
	if got, want := ids(managed), sortedIDs(web0, web1, db); !slices.Equal(got, want) {
		t.Fatalf("ListManaged = %v, want exactly the adopted %v", got, want)
	}
	type instance struct {
		service string
		index   int
	}
	want := map[string]instance{web0: {"web", 0}, web1: {"web", 1}, db: {"db", 0}}
	for _, c := range managed {
		if c.Lease != lease || c.Service != want[c.ID].service || c.Index != want[c.ID].index || c.Generation != 0 ||
			c.OperationID != "" || c.State != "running" || c.ImageID != h.imageID || !slices.Contains(c.Networks, net) {
			t.Errorf("ListManaged: %+v, want %v of lease %s, generation 0, running on %s", c, want[c.ID], lease, trimID(net))
		}
	}
	cohort, err := e.Cohort(ctx, lease)
	if err != nil {
		t.Fatalf("Cohort: %v", err)
	}
	if got := ids(cohort); !slices.Equal(got, sortedIDs(web0, web1, db)) {
		t.Fatalf("Cohort = %v, want the adopted three", got)
	}
	if c := cohort[0]; c.Service != "db" || c.Index != 0 || c.Generation != 0 || c.StartedAt.IsZero() || c.State != "running" {
		t.Errorf("Cohort[0] = %+v, want db/0 inspected", c)
	}
	launched, err := e.Launched(ctx, lease)
	if err != nil || !slices.Equal(ids(launched), sortedIDs(web0, web1, db)) {
		t.Errorf("Launched = %v, %v; want the adopted three", ids(launched), err)
	}
	for _, other := range []string{strayLease, movedLease} {
		if c, err := e.Cohort(ctx, other); err != nil || len(c) != 0 {
			t.Errorf("Cohort(%s) = %v, %v; want nothing (not adopted)", other, ids(c), err)
		}
	}
	if c, err := e.Inspect(ctx, web1); err != nil || c.Lease != lease || c.Service != "web" || c.Index != 1 || c.Generation != 0 {
		t.Errorf("Inspect(web-1) = %+v, %v", c, err)
	}
	eventually(t, 30*time.Second, "the adopted container's log lines", func() bool {
		text, _, err := e.Logs(ctx, web0, 10, 1<<10)
		return err == nil && strings.Count(text, "\n") == 3
	})

	for name, id := range map[string]string{"not allow-listed": stray, "labels changed": moved} {
		if _, _, err := e.Logs(ctx, id, 10, 1<<10); !errors.Is(err, dockerio.ErrForeignObject) {
			t.Errorf("Logs(%s) = %v, want ErrForeignObject", name, err)
		}
		if err := e.RemoveContainers(ctx, []string{id}); !errors.Is(err, dockerio.ErrForeignObject) {
			t.Errorf("RemoveContainers(%s) = %v, want ErrForeignObject", name, err)
		}
		if err := e.StopRemove(ctx, id, time.Second); !errors.Is(err, dockerio.ErrForeignObject) {
			t.Errorf("StopRemove(%s) = %v, want ErrForeignObject", name, err)
		}
		if c, err := e.Inspect(ctx, id); err != nil || c.State != "running" {
			t.Errorf("%s: %+v, %v after the refusals; want it untouched, running", name, c, err)
		}
	}
	unadopted := newTestEngineFor(t, newInstallation(), h.adopting(nil))
	if c, err := unadopted.ListManaged(ctx); err != nil || len(c) != 0 {
		t.Errorf("ListManaged without the allow-list = %v, %v; want nothing", ids(c), err)
	}
	if err := unadopted.RemoveContainers(ctx, []string{web0}); !errors.Is(err, dockerio.ErrForeignObject) {
		t.Errorf("RemoveContainers without the allow-list = %v, want ErrForeignObject", err)
	}

	if err := e.StopRemove(ctx, web1, time.Second); err != nil {
		t.Fatalf("StopRemove(adopted web-1): %v", err)
	}
	if err := e.RemoveContainers(ctx, []string{db, web0}); err != nil {
		t.Fatalf("RemoveContainers(adopted db, web-0): %v", err)
	}
	for _, id := range []string{web0, web1, db} {
		if exists(t, id) {
			t.Errorf("adopted %s still there after its removal", trimID(id))
		}
	}
	if !exists(t, stray) || !exists(t, moved) {
		t.Error("a fred container that is not adopted was removed")
	}
}

// An adopted container's death arrives on the event stream at once, with its
// lease's attribution, among berthd's own containers' events; a fred container
// that is not adopted sends nothing.
func TestAdopted_DeathEventArrivesWithOwnEvents(t *testing.T) {
	h := newFredHost(t)
	tenant := "tenant-" + uuid.NewString()[:8]
	net := h.tenantNetwork(tenant)
	lease := uuid.NewString()
	job := func(lease, code string) string {
		return h.container(fredContainer{lease: lease, tenant: tenant, service: "job", quantity: 1, network: net,
			args: []string{"exit", "-code", code, "-after", "1s"}})
	}
	adopted, stray := job(lease, "3"), job(uuid.NewString(), "5")
	e := newTestEngineFor(t, newInstallation(), h.adopting(&dockerio.Adopted{
		Containers: map[string]dockerio.AdoptedContainer{adopted: {Lease: lease, Service: "job"}},
	}))
	info := ensurePulled(t, e)
	own := newTestLease(t, e)
	ctx := testCtx(t, 3*time.Minute)

	streamCtx, stop := context.WithCancel(ctx)
	defer stop()
	events, errc := e.Events(streamCtx)
	for _, id := range []string{stray, adopted} {
		if err := fx.docker.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
			t.Fatalf("start fred container: %v", err)
		}
	}
	if err := e.Up(ctx, own.plan(workloadService("own", 1, info, "exit", "4", "1s"))); err != nil {
		t.Fatalf("Up own: %v", err)
	}
	died := map[string]dockerio.Event{}
	deadline := time.After(time.Minute)
	for len(died) < 2 {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("event stream closed early: %v", <-errc)
			}
			if ev.ContainerID == stray {
				t.Fatalf("an event of a fred container that is not adopted: %+v", ev)
			}
			if ev.Action == "die" {
				died[ev.Lease] = ev
			}
		case <-deadline:
			t.Fatalf("within a minute only these died: %+v", died)
		}
	}
	if ev := died[lease]; ev.ContainerID != adopted || ev.Service != "job" || ev.Index != 0 || ev.Generation != 0 || ev.ExitCode != 3 {
		t.Errorf("adopted die = %+v, want job/0 generation 0 exit 3", ev)
	}
	if ev := died[own.Lease]; ev.Service != "own" || ev.Generation != 1 || ev.ExitCode != 4 {
		t.Errorf("own die = %+v, want own/0 generation 1 exit 4", ev)
	}
	stop()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("stream end = %v, want context.Canceled", err)
	}
	for range events {
	}
}

// A lease whose Compose project holds adopted containers launches (they are not
// foreign) and its Down removes them with berthd's own; a fred container of
// another lease is left alone.
func TestAdopted_LaunchNotForeign_DownRemovesThem(t *testing.T) {
	h := newFredHost(t)
	tenant := "tenant-" + uuid.NewString()[:8]
	net := h.tenantNetwork(tenant)
	lease := uuid.NewString()
	serve := func(lease string) string {
		return h.container(fredContainer{lease: lease, tenant: tenant, service: "web", quantity: 1, network: net,
			args: []string{"serve"}, start: true})
	}
	web, stray := serve(lease), serve(uuid.NewString())
	e := newTestEngineFor(t, newInstallation(), h.adopting(&dockerio.Adopted{
		Containers: map[string]dockerio.AdoptedContainer{web: {Lease: lease, Service: "web"}},
	}))
	info := ensurePulled(t, e)
	l := newTestLeaseAs(t, e, lease)
	ctx := testCtx(t, 3*time.Minute)

	launched, err := e.Launch(ctx, l.plan(workloadService("api", 1, info)))
	if err != nil {
		t.Fatalf("Launch beside adopted containers: %v", err)
	}
	if len(launched) != 2 || !slices.Contains(ids(launched), web) {
		t.Fatalf("launched cohort = %+v, want api and the adopted web", launched)
	}
	if err := e.Down(ctx, lease, dockerio.DownOptions{StopTimeout: time.Second}); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if left := leaseContainers(t, lease); len(left) != 0 {
		t.Errorf("%d containers of the lease left after Down", len(left))
	}
	if !exists(t, stray) {
		t.Error("Down removed a fred container of another lease")
	}
}

// An adopted per-tenant network is listed with every container Docker lists on
// it, a stopped one included (an inspect of the network counts none), and is
// removed by its exact ID only once nothing is attached; fred's networks that are
// not adopted, whose labels no longer say what the record says, or not named as
// fred names its tenant's network, are neither listed nor removable.
func TestAdopted_TenantNetworkRemovedOnlyOnceNothingIsAttached(t *testing.T) {
	h := newFredHost(t)
	newTenant := func() string { return "tenant-" + uuid.NewString()[:8] }
	tenant, strayTenant, movedTenant, misnamedTenant := newTenant(), newTenant(), newTenant(), newTenant()
	net, strayNet, movedNet := h.tenantNetwork(tenant), h.tenantNetwork(strayTenant), h.tenantNetwork(movedTenant)
	misnamedNet := h.network(dockerio.FredTenantNetwork(newTenant()), misnamedTenant)
	lease := uuid.NewString()
	job := h.container(fredContainer{lease: lease, tenant: tenant, service: "job", quantity: 1, network: net,
		args: []string{"exit", "-code", "0", "-after", "0s"}, start: true})
	e := newTestEngineFor(t, newInstallation(), h.adopting(&dockerio.Adopted{
		Containers: map[string]dockerio.AdoptedContainer{job: {Lease: lease, Service: "job"}},
		Networks: map[string]dockerio.AdoptedNetwork{
			net:         {Tenant: tenant},
			movedNet:    {Tenant: "another-tenant"}, // recorded as another tenant's than its labels say
			misnamedNet: {Tenant: misnamedTenant},
		},
	}))
	ctx := testCtx(t, 2*time.Minute)
	eventually(t, 30*time.Second, "the adopted job exited", func() bool {
		c, err := e.Inspect(ctx, job)
		return err == nil && c.State == "exited"
	})

	nets, err := e.AdoptedNetworks(ctx)
	if err != nil {
		t.Fatalf("AdoptedNetworks: %v", err)
	}
	if len(nets) != 1 || nets[0].ID != net || nets[0].Containers != 1 || nets[0].Labels[dockerio.LabelTenant] != tenant {
		t.Fatalf("AdoptedNetworks = %+v, want only %s with its stopped container", nets, trimID(net))
	}
	if n, err := e.InspectNetwork(ctx, net); err != nil || n.Containers != 0 {
		t.Errorf("InspectNetwork = %+v, %v; want no endpoint (the container is stopped)", n, err)
	}
	if err := e.RemoveNetwork(ctx, net); err == nil {
		t.Fatal("RemoveNetwork removed an adopted network a stopped container is on")
	}
	for name, id := range map[string]string{"not allow-listed": strayNet, "labels changed": movedNet, "misnamed": misnamedNet} {
		if err := e.RemoveNetwork(ctx, id); !errors.Is(err, dockerio.ErrForeignObject) {
			t.Errorf("RemoveNetwork(%s) = %v, want ErrForeignObject", name, err)
		}
	}

	if err := e.RemoveContainers(ctx, []string{job}); err != nil {
		t.Fatalf("RemoveContainers(adopted job): %v", err)
	}
	if nets, err := e.AdoptedNetworks(ctx); err != nil || len(nets) != 1 || nets[0].Containers != 0 {
		t.Fatalf("AdoptedNetworks = %+v, %v; want it with nothing attached", nets, err)
	}
	if err := e.RemoveNetwork(ctx, net); err != nil {
		t.Fatalf("RemoveNetwork(adopted, nothing attached): %v", err)
	}
	if nets, err := e.AdoptedNetworks(ctx); err != nil || len(nets) != 0 {
		t.Errorf("AdoptedNetworks after its removal = %+v, %v", nets, err)
	}
	if err := e.RemoveNetwork(ctx, net); err != nil {
		t.Errorf("RemoveNetwork again = %v, want nil (gone)", err)
	}
	for _, id := range []string{strayNet, movedNet, misnamedNet} {
		if _, err := fx.docker.NetworkInspect(ctx, id, network.InspectOptions{}); err != nil {
			t.Errorf("fred network %s that is not adopted: %v", trimID(id), err)
		}
	}
}

// Without an adoption (no allow-list, or an empty one) the engine asks Docker
// nothing more than before: one container list per listing, one event
// subscription, nothing for adopted networks. An allow-list naming a container
// adds the second list.
func TestAdopted_NoAllowList_NoExtraDockerRequest(t *testing.T) {
	for name, adopted := range map[string]*dockerio.Adopted{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			e := newTestEngineFor(t, newInstallation(), func(o *Options) { o.Adopted = adopted })
			ctx := testCtx(t, time.Minute)
			lease := uuid.NewString()
			steps := []struct {
				what string
				call func() error
				op   string
			}{
				{"ListManaged", func() error { _, err := e.ListManaged(ctx); return err }, opContainerList},
				{"Cohort", func() error { _, err := e.Cohort(ctx, lease); return err }, opContainerList},
				{"Launched", func() error { _, err := e.Launched(ctx, lease); return err }, opContainerList},
				{"Down", func() error { return e.Down(ctx, lease, dockerio.DownOptions{}) }, opContainerList},
				{"AdoptedNetworks", func() error { _, err := e.AdoptedNetworks(ctx); return err }, ""},
				{"Events", func() error {
					sctx, stop := context.WithCancel(ctx)
					_, errc := e.Events(sctx)
					stop()
					if err := <-errc; !errors.Is(err, context.Canceled) {
						return err
					}
					return nil
				}, opEvents},
			}
			for _, s := range steps {
				before := totalRequests(e)
				if err := s.call(); err != nil {
					t.Fatalf("%s: %v", s.what, err)
				}
				want := 0
				if s.op != "" {
					want = 1
				}
				if n := totalRequests(e) - before; n != want || (s.op != "" && requests(e, s.op) == 0) {
					t.Errorf("%s: %d requests (%s: %d), want %d", s.what, n, s.op, requests(e, s.op), want)
				}
			}
		})
	}
	e := newTestEngineFor(t, newInstallation(), func(o *Options) {
		o.Adopted = &dockerio.Adopted{Containers: map[string]dockerio.AdoptedContainer{"c": {}}}
	})
	if _, err := e.ListManaged(testCtx(t, time.Minute)); err != nil || requests(e, opContainerList) != 2 {
		t.Errorf("ListManaged with an allow-list: %d container lists (%v), want 2", requests(e, opContainerList), err)
	}
}

// totalRequests is every Engine API request the engine counted.
func totalRequests(e *Engine) int {
	n := 0
	for _, op := range allOps {
		n += requests(e, op)
	}
	return n
}
