package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
)

// Up launches (or converges) the lease's Compose project from plan: verify the
// lease network by ID, create the stateful instances' named volumes, then compose
// up (create + start, no build, no pull, no wait, orphans left alone).
func (e *Engine) Up(ctx context.Context, plan dockerio.Plan) error {
	name := dockerio.ProjectName(plan.Lease)
	if plan.BackendName == "" {
		plan.BackendName = e.opts.BackendName
	}
	project, volumes, err := buildProject(plan, time.Now())
	if err != nil {
		return fmt.Errorf("compose up %s: %w", name, err)
	}
	if err := e.ensureCompose(ctx); err != nil {
		return fmt.Errorf("compose up %s: %w", name, err)
	}
	if err := e.verifyLaunchNetwork(ctx, plan); err != nil {
		return fmt.Errorf("compose up %s: %w", name, err)
	}
	for _, v := range volumes {
		if err := e.ensureVolume(ctx, v); err != nil {
			return fmt.Errorf("compose up %s: %w", name, err)
		}
	}
	err = e.compose.Up(ctx, project, api.UpOptions{
		Create: api.CreateOptions{
			Recreate:             api.RecreateDiverged,
			RecreateDependencies: api.RecreateDiverged,
			QuietPull:            true,
			Inherit:              false, // never carry anonymous volumes over
		},
		Start: api.StartOptions{Project: project},
	})
	if err != nil {
		return dockerErr("compose up "+name, err)
	}
	return nil
}

// verifyLaunchNetwork proves plan.NetworkID is still this lease's network, right
// before Compose attaches to it: it must exist under exactly that ID and carry
// our ownership labels.
func (e *Engine) verifyLaunchNetwork(ctx context.Context, plan dockerio.Plan) error {
	n, err := e.docker.NetworkInspect(ctx, plan.NetworkID, network.InspectOptions{})
	if err != nil {
		return dockerErr("verify lease network "+trimID(plan.NetworkID), err)
	}
	if n.ID != plan.NetworkID {
		return fmt.Errorf("verify lease network %s: %w: no network has exactly this ID", trimID(plan.NetworkID), dockerio.ErrNotFound)
	}
	owner := labels.NetworkOwnership(dockerio.NetworkSpec{
		Lease: plan.Lease, BackendName: plan.BackendName, InstallationID: plan.InstallationID,
	})
	if !ownedLeaseNetwork(n, owner) {
		return fmt.Errorf("verify lease network %s (%s): %w", n.Name, trimID(n.ID), dockerio.ErrForeignNetwork)
	}
	return nil
}

// ensureVolume creates a stateful instance's named volume, or accepts an existing
// one only when it carries exactly our labels (a retried launch reuses its data).
func (e *Engine) ensureVolume(ctx context.Context, v namedVolume) error {
	got, err := e.docker.VolumeInspect(ctx, v.Name)
	if err == nil {
		if !labels.HasAll(got.Labels, v.Labels) {
			return fmt.Errorf("volume %s exists but is not ours (labels differ)", v.Name)
		}
		return nil
	}
	if !isNotFound(err) {
		return dockerErr("inspect volume "+v.Name, err)
	}
	if _, err := e.docker.VolumeCreate(ctx, volume.CreateOptions{Name: v.Name, Driver: "local", Labels: v.Labels}); err != nil {
		return dockerErr("create volume "+v.Name, err)
	}
	return nil
}

// Down tears the lease's project down: compose down (stop within opts.StopTimeout,
// remove containers, one-offs included; the network is external and is never
// removed, the named volumes are not Compose's), then force-remove by exact ID
// every container still labelled with the lease, then (opts.RemoveVolumes) the
// lease's named volumes. Idempotent; works after the network is gone.
func (e *Engine) Down(ctx context.Context, lease string, opts dockerio.DownOptions) error {
	if lease == "" {
		return fmt.Errorf("compose down: empty lease")
	}
	name := dockerio.ProjectName(lease)
	if err := e.ensureCompose(ctx); err != nil {
		return fmt.Errorf("compose down %s: %w", name, err)
	}
	var timeout *time.Duration
	if opts.StopTimeout > 0 {
		timeout = &opts.StopTimeout
	}
	project, composeErr := e.teardownProject(ctx, name)
	if composeErr == nil {
		composeErr = e.compose.Down(ctx, name, api.DownOptions{Project: project, RemoveOrphans: true, Timeout: timeout})
	}
	if composeErr != nil {
		e.log.Warn().Err(composeErr).Str("lease_uuid", lease).Msg("compose down failed; removing the lease's containers by ID")
	}

	var errs []error
	stragglers, err := e.leaseContainerIDs(ctx, lease)
	if err != nil {
		errs = append(errs, err)
	}
	if len(stragglers) > 0 {
		e.log.Info().Str("lease_uuid", lease).Int("containers", len(stragglers)).Msg("removing containers compose down left behind")
		if err := e.RemoveContainers(ctx, stragglers); err != nil {
			errs = append(errs, err)
		}
	}
	if opts.RemoveVolumes && len(errs) == 0 {
		if err := e.removeLeaseVolumes(ctx, lease); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		if composeErr != nil {
			errs = append(errs, fmt.Errorf("compose down: %w", composeErr))
		}
		return fmt.Errorf("down %s: %w", name, errors.Join(errs...))
	}
	return nil
}

// teardownProject rebuilds, from the project's containers, just enough of its
// Compose model for compose down to stop dependents before their dependencies.
// Handing compose a project (instead of letting it rebuild one) also avoids a
// data race in compose-go's Project.WithServicesTransform, which compose's own
// rebuild goes through. The model has no networks and no volumes, so compose down
// has nothing else to remove.
func (e *Engine) teardownProject(ctx context.Context, name string) (*types.Project, error) {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", api.ProjectLabel+"="+name),
	)})
	if err != nil {
		return nil, dockerErr("list containers of project "+name, err)
	}
	project := &types.Project{Name: name, Services: types.Services{}}
	for _, c := range list {
		key := c.Labels[api.ServiceLabel]
		if key == "" {
			continue // not Compose's; the by-ID sweep handles it
		}
		svc := project.Services[key]
		svc.Name = key
		for _, dep := range strings.Split(c.Labels[api.DependenciesLabel], ",") {
			target, rest, _ := strings.Cut(dep, ":")
			if target == "" {
				continue
			}
			condition, _, _ := strings.Cut(rest, ":")
			if svc.DependsOn == nil {
				svc.DependsOn = types.DependsOnConfig{}
			}
			// Not required: a dependency whose containers are already gone is skipped.
			svc.DependsOn[target] = types.ServiceDependency{Condition: condition, Required: false}
		}
		project.Services[key] = svc
	}
	return project, nil
}

// leaseContainerIDs lists every managed container (any state) of the lease.
func (e *Engine) leaseContainerIDs(ctx context.Context, lease string) ([]string, error) {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", dockerio.LabelManaged+"=true"),
		filters.Arg("label", dockerio.LabelLease+"="+lease),
	)})
	if err != nil {
		return nil, dockerErr("list containers of lease "+lease, err)
	}
	ids := make([]string, 0, len(list))
	for _, c := range list {
		ids = append(ids, c.ID)
	}
	return ids, nil
}

// removeLeaseVolumes removes the lease's managed named volumes.
func (e *Engine) removeLeaseVolumes(ctx context.Context, lease string) error {
	list, err := e.docker.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", dockerio.LabelManaged+"=true"),
		filters.Arg("label", dockerio.LabelLease+"="+lease),
	)})
	if err != nil {
		return dockerErr("list volumes of lease "+lease, err)
	}
	var errs []error
	for _, v := range list.Volumes {
		if err := e.docker.VolumeRemove(ctx, v.Name, false); err != nil && !isNotFound(err) {
			errs = append(errs, dockerErr("remove volume "+v.Name, err))
		}
	}
	return errors.Join(errs...)
}
