package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
	"github.com/berth-dev/berth/messages"
)

// Up launches (or converges) the lease's Compose project from plan: verify the
// lease network by ID, refuse a project holding any container that is not this
// installation's, check that every managed volume directory a stateful instance
// bind-mounts exists, then compose up (create + start, no build, no pull, no
// wait, orphans left alone).
//
// The foreign-container check matters because compose up converges by project
// label alone: another installation's running containers of the same lease UUID
// would otherwise be recreated, i.e. stopped and replaced by ours. Docker offers
// no atomic check-and-create, so a foreign create racing this check is caught
// only by the name conflict it causes.
func (e *Engine) Up(ctx context.Context, plan dockerio.Plan) error {
	_, err := e.up(ctx, plan)
	return err
}

// Launch is Up, then the launched cohort as Launched reports it, taken from the
// listing compose made to start the project (one Engine API request fewer).
func (e *Engine) Launch(ctx context.Context, plan dockerio.Plan) ([]messages.Container, error) {
	facts, err := e.up(ctx, plan)
	if err != nil {
		return nil, err
	}
	list, ok := facts.startListing()
	if !ok { // compose did not list (nothing to start): ask
		return e.Launched(ctx, plan.Lease)
	}
	own := list[:0]
	for _, s := range list {
		if e.ownsContainer(s.ID, s.Labels) {
			own = append(own, s)
		}
	}
	return e.launchedFrom(plan.Lease, e.attributed(plan.Lease, own)), nil
}

func (e *Engine) up(ctx context.Context, plan dockerio.Plan) (*launchFacts, error) {
	name := dockerio.ProjectName(plan.Lease)
	if plan.BackendName == "" {
		plan.BackendName = e.opts.BackendName
	}
	plan.Contract = cmp.Or(plan.Contract, e.opts.Contract)
	inst, err := e.installation(plan.InstallationID)
	if err != nil {
		return nil, fmt.Errorf("compose up %s: %w", name, err)
	}
	plan.InstallationID = inst
	if err := e.ensureCompose(ctx); err != nil {
		return nil, fmt.Errorf("compose up %s: %w", name, err)
	}
	if plan.Services, err = e.admitPlanImages(ctx, plan.Services); err != nil {
		return nil, fmt.Errorf("compose up %s: %w", name, err)
	}
	if plan.Ingress != nil && plan.NetworkName == "" {
		n, err := e.docker.NetworkInspect(ctx, plan.NetworkID, network.InspectOptions{})
		if err != nil {
			return nil, fmt.Errorf("compose up %s: %w", name, dockerErr("name of network "+trimID(plan.NetworkID), err))
		}
		plan.NetworkName = n.Name
	}
	project, err := buildProject(plan, time.Now())
	if err != nil {
		return nil, fmt.Errorf("compose up %s: %w", name, err)
	}
	verified, err := e.verifyLaunchNetwork(ctx, plan)
	if err != nil {
		return nil, fmt.Errorf("compose up %s: %w", name, err)
	}
	listing, err := e.refuseForeignProjectContainers(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("compose up %s: %w", name, err)
	}
	if err := checkBindSources(bindSources(plan)); err != nil {
		return nil, fmt.Errorf("compose up %s: %w", name, err)
	}
	// Compose asks again what was just established; it is answered from these.
	facts := &launchFacts{network: verified, project: name, listing: listing}
	err = e.compose.Up(withLaunchFacts(ctx, facts), project, api.UpOptions{
		Create: api.CreateOptions{
			Recreate:             api.RecreateDiverged,
			RecreateDependencies: api.RecreateDiverged,
			QuietPull:            true,
			Inherit:              false, // never carry anonymous volumes over
		},
		Start: api.StartOptions{Project: project},
	})
	if err != nil {
		return nil, e.launchFailed(ctx, plan, dockerErr("compose up "+name, err))
	}
	return facts, nil
}

// launchFailed tells a pool network gone under the launch from any other
// failure. Docker creates a container on a missing network and fails only its
// start, so what this launch created (never started) is removed: compose would
// otherwise try to start the same containers again on the lease's own network.
func (e *Engine) launchFailed(ctx context.Context, plan dockerio.Plan, err error) error {
	if !plan.NetworkPooled {
		return err
	}
	if _, ierr := e.docker.NetworkInspect(ctx, plan.NetworkID, network.InspectOptions{}); !isNotFound(ierr) {
		return err
	}
	gone := fmt.Errorf("%w (pool network %s: %w)", err, trimID(plan.NetworkID), dockerio.ErrPoolNetworkGone)
	cohort, lerr := e.Launched(ctx, plan.Lease)
	if lerr != nil {
		return errors.Join(gone, lerr)
	}
	var created []string
	for _, c := range cohort {
		if c.State == "created" {
			created = append(created, c.ID)
		}
	}
	if rerr := e.RemoveContainers(ctx, created); rerr != nil {
		return errors.Join(gone, rerr)
	}
	return gone
}

// admitPlanImages re-admits, right before launch, the exact image each service
// runs (by its content ID, answered from the image cache): a plan written by an
// older release cannot launch an image this one refuses, the Compose build
// stamps it carries are masked, every VOLUME it declares must be covered by the
// plan (else Docker would create an anonymous volume), and the numeric user it
// runs as is resolved when the plan left it 0:0. Returns a copy of services;
// the caller's plan is not changed.
func (e *Engine) admitPlanImages(ctx context.Context, services []dockerio.ServicePlan) ([]dockerio.ServicePlan, error) {
	out := slices.Clone(services)
	for i, svc := range out {
		if !isImageID(svc.ImageID) {
			return nil, fmt.Errorf("plan: service %q: no resolved image ID (%q)", svc.Name, svc.ImageID)
		}
		resp, err := e.imageByID(ctx, svc.ImageID)
		if err != nil {
			return nil, fmt.Errorf("service %q: %w", svc.Name, err)
		}
		info, err := admit(resp, svc.Image)
		if err != nil {
			return nil, fmt.Errorf("service %q: %w", svc.Name, err)
		}
		for _, v := range info.Volumes {
			if !slices.Contains(svc.ImageVolumes, v) {
				return nil, fmt.Errorf("plan: service %q: image VOLUME %q is not in the plan", svc.Name, v)
			}
		}
		masks := slices.Concat(svc.MaskLabels, info.MaskLabels)
		slices.Sort(masks)
		out[i].MaskLabels = slices.Compact(masks)
		if svc.UID == 0 && svc.GID == 0 {
			if out[i].UID, out[i].GID, err = e.imageUser(ctx, svc.ImageID, info.Volumes, svc.User, info.User); err != nil {
				return nil, fmt.Errorf("service %q: %w", svc.Name, err)
			}
		}
	}
	return out, nil
}

// verifyLaunchNetwork proves plan.NetworkID is still this lease's network, right
// before Compose attaches to it: it must exist under exactly that ID and carry
// our ownership labels. Returns what Docker answered.
//
// A pool network is not asked about: the pool found it by our labels (or made
// it), a network's ID is never reused and its labels never change, so the one
// thing that can differ is that it is gone, and then compose's first create
// fails on it before anything exists (launchFailed tells that apart). Compose
// only needs its ID.
func (e *Engine) verifyLaunchNetwork(ctx context.Context, plan dockerio.Plan) (network.Inspect, error) {
	if plan.NetworkBridged {
		return e.verifyBridge(ctx)
	}
	if plan.NetworkPooled {
		return network.Inspect{ID: plan.NetworkID, Driver: "bridge", Scope: "local"}, nil
	}
	n, err := e.docker.NetworkInspect(ctx, plan.NetworkID, network.InspectOptions{})
	if err != nil {
		return network.Inspect{}, dockerErr("verify lease network "+trimID(plan.NetworkID), err)
	}
	if n.ID != plan.NetworkID {
		return network.Inspect{}, fmt.Errorf("verify lease network %s: %w: no network has exactly this ID", trimID(plan.NetworkID), cerrdefs.ErrNotFound)
	}
	if !ownedLeaseNetwork(n, labels.NetworkOwnership(dockerio.NetworkSpec{
		Lease: plan.Lease, BackendName: plan.BackendName, InstallationID: plan.InstallationID,
	})) {
		return network.Inspect{}, fmt.Errorf("verify lease network %s (%s): %w", n.Name, trimID(n.ID), dockerio.ErrForeignNetwork)
	}
	return n, nil
}

// verifyBridge proves, right before a single-container lease's launch, that
// Docker's default bridge still isolates its containers: an operator may have
// turned icc back on (and restarted dockerd) since berthd started, and a tenant
// is never started on a network it would share.
func (e *Engine) verifyBridge(ctx context.Context) (network.Inspect, error) {
	n, err := e.defaultBridge(ctx)
	if err != nil {
		return network.Inspect{}, fmt.Errorf("verify the default bridge: %w", err)
	}
	if why := bridgeNotIsolated(n); why != "" {
		return network.Inspect{}, fmt.Errorf("verify the default bridge: %s: %w", why, dockerio.ErrBridgeNotIsolated)
	}
	return n, nil
}

// refuseForeignProjectContainers lists every container of the Compose project,
// any state, and fails with dockerio.ErrForeignObject naming the first one that
// is not this installation's (it is left alone; an adopted one is this
// installation's, and fred v0.13 used the same project name). Returns the listing.
func (e *Engine) refuseForeignProjectContainers(ctx context.Context, project string) ([]container.Summary, error) {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", api.ProjectLabel+"="+project),
	)})
	if err != nil {
		return nil, dockerErr("list containers of project "+project, err)
	}
	for _, c := range list {
		if e.ownsContainer(c.ID, c.Labels) {
			continue
		}
		name := ""
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		return nil, fmt.Errorf("container %s (%s, installation %q) of project %s: %w", name, trimID(c.ID),
			c.Labels[dockerio.LabelInstallation], project, dockerio.ErrForeignObject)
	}
	return list, nil
}

// checkBindSources requires every volume subdirectory a plan bind-mounts to be
// a directory (not a symlink) right before launch: Docker would otherwise fail
// with a less telling error, or, through a link, mount something else.
// dockerio.Volumes.Ensure made them; berthd and dockerd share the host's mount
// namespace (.ci/btrfs-up.sh checks it on test machines).
func checkBindSources(sources []string) error {
	for _, src := range sources {
		fi, err := os.Lstat(src)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("managed volume directory %s does not exist: ensure the volume before launch", src)
		case err != nil:
			return fmt.Errorf("managed volume directory: %w", err)
		case !fi.IsDir():
			return fmt.Errorf("managed volume directory %s is not a directory (%s); refusing to mount it", src, fi.Mode().Type())
		}
	}
	return nil
}

// Down tears down this installation's containers of the lease, adopted ones
// included, by exact ID: each is stopped within opts.StopTimeout and removed
// (forced: a close must not leave a container behind), dependents before their
// dependencies. Tenant data is never touched: it lives in host volumes
// (dockerio.Volumes), so opts.RemoveVolumes is a no-op. Compose is not used: its
// down works on the project name, which another installation's containers of the
// same lease UUID share (and fred v0.13's, adopted or not). The lease network is
// never removed. Idempotent; works after the network is gone.
func (e *Engine) Down(ctx context.Context, lease string, opts dockerio.DownOptions) error {
	if lease == "" {
		return fmt.Errorf("down: empty lease")
	}
	name := dockerio.ProjectName(lease)
	list, err := e.ownContainers(ctx, "containers", filters.Arg("label", dockerio.LabelLease+"="+lease))
	if err != nil {
		return fmt.Errorf("down %s: %w", name, err)
	}
	var errs []error
	for _, wave := range teardownWaves(list) {
		errs = append(errs, e.removeWave(ctx, wave, opts.StopTimeout)...)
	}
	if len(errs) > 0 {
		return fmt.Errorf("down %s: %w", name, errors.Join(errs...))
	}
	return nil
}

// teardownWaves orders containers for removal: each wave holds the containers no
// later wave's container depends on (Compose's depends_on label names Compose
// service keys). A container without Compose labels goes first; a dependency
// cycle, which Compose never creates, ends the ordering with everything left.
func teardownWaves(list []container.Summary) [][]string {
	type node struct {
		id, key string
		deps    []string
	}
	var remaining []node
	for _, c := range list {
		n := node{id: c.ID, key: c.Labels[api.ServiceLabel]}
		for _, dep := range strings.Split(c.Labels[api.DependenciesLabel], ",") {
			if target, _, _ := strings.Cut(dep, ":"); target != "" {
				n.deps = append(n.deps, target)
			}
		}
		remaining = append(remaining, n)
	}
	var waves [][]string
	for len(remaining) > 0 {
		needed := map[string]bool{}
		for _, n := range remaining {
			for _, d := range n.deps {
				needed[d] = true
			}
		}
		var wave []string
		var rest []node
		for _, n := range remaining {
			if n.key == "" || !needed[n.key] {
				wave = append(wave, n.id)
			} else {
				rest = append(rest, n)
			}
		}
		if len(wave) == 0 {
			for _, n := range rest {
				wave = append(wave, n.id)
			}
			rest = nil
		}
		waves = append(waves, wave)
		remaining = rest
	}
	return waves
}

// teardownParallel bounds concurrent stops within one wave.
const teardownParallel = 8

// removeWave stops and force-removes the containers of one wave concurrently.
func (e *Engine) removeWave(ctx context.Context, ids []string, stopTimeout time.Duration) []error {
	errs := make([]error, len(ids))
	sem := make(chan struct{}, teardownParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			// A failed stop is not fatal: the forced remove kills what still runs.
			if err := e.docker.ContainerStop(ctx, id, stopOptions(stopTimeout)); err != nil && !isNotFound(err) {
				e.log.Warn().Err(err).Str("container_id", id).Msg("stop before removal failed; removing with force")
			}
			// RemoveVolumes only drops anonymous volumes, which berth never mounts
			// (image VOLUMEs are tmpfs or bind mounts of host volumes).
			err := e.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			if !removedOrGoing(err) {
				errs[i] = dockerErr("remove container "+trimID(id), err)
			}
		}()
	}
	wg.Wait()
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
