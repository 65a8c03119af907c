package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/go-connections/nat"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
)

// psAttempts bounds compose ps retries: compose lists, then inspects each
// container, and fails as a whole when one is removed in between.
const psAttempts = 3

// Cohort reports the lease project's containers (any state), attributed through
// their Compose service key: a container is included only when its fred.* labels
// name this lease and a (service, index) that maps to exactly that key. Each is
// inspected for its live state. Sorted by (Service, Index, ID).
func (e *Engine) Cohort(ctx context.Context, lease string) ([]dockerio.Container, error) {
	name := dockerio.ProjectName(lease)
	if err := e.ensureCompose(ctx); err != nil {
		return nil, fmt.Errorf("compose ps %s: %w", name, err)
	}
	var summaries []api.ContainerSummary
	for attempt := 1; ; attempt++ {
		var err error
		summaries, err = e.compose.Ps(ctx, name, api.PsOptions{All: true})
		if err == nil {
			break
		}
		if !isNotFound(err) || attempt == psAttempts || ctx.Err() != nil {
			return nil, dockerErr("compose ps "+name, err)
		}
	}
	out := make([]dockerio.Container, 0, len(summaries))
	for _, s := range summaries {
		inst, ok := labels.ParseInstance(s.Labels)
		if !ok || inst.Lease != lease || !labels.AgreesWithComposeKey(s.Service, inst.Service, inst.Index) {
			e.log.Warn().Str("lease_uuid", lease).Str("container_id", s.ID).Str("compose_service", s.Service).
				Str("service", s.Labels[dockerio.LabelService]).Str("instance", s.Labels[dockerio.LabelInstance]).
				Msg("container's labels disagree with its compose key; not attributed to the lease")
			continue
		}
		c, err := e.Inspect(ctx, s.ID)
		if errors.Is(err, dockerio.ErrNotFound) {
			continue // removed since compose listed it
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	dockerio.SortContainers(out)
	return out, nil
}

// Inspect reports one container's live state; dockerio.ErrNotFound when absent.
func (e *Engine) Inspect(ctx context.Context, id string) (dockerio.Container, error) {
	resp, err := e.docker.ContainerInspect(ctx, id)
	if err != nil {
		return dockerio.Container{}, dockerErr("inspect container "+trimID(id), err)
	}
	return fromInspect(resp), nil
}

func fromInspect(r container.InspectResponse) dockerio.Container {
	var l map[string]string
	if r.Config != nil {
		l = r.Config.Labels
	}
	c := fromLabels(r.ID, strings.TrimPrefix(r.Name, "/"), l)
	c.ImageID = r.Image
	if st := r.State; st != nil {
		c.State = st.Status
		if st.Health != nil {
			c.Health = st.Health.Status
		}
		c.ExitCode = st.ExitCode
		c.OOMKilled = st.OOMKilled
		c.StartedAt = parseDockerTime(st.StartedAt)
		c.FinishedAt = parseDockerTime(st.FinishedAt)
	}
	if r.NetworkSettings != nil {
		c.Ports = bindingsOf(r.NetworkSettings.Ports)
	}
	return c
}

// fromLabels fills what a container's labels say about it; a managed container
// with missing or malformed identity labels keeps what is readable (the
// reconciler decides what such a container means).
func fromLabels(id, name string, l map[string]string) dockerio.Container {
	c := dockerio.Container{ID: id, Name: name, Labels: l}
	if inst, ok := labels.ParseInstance(l); ok {
		c.Lease, c.Service, c.Index = inst.Lease, inst.Service, inst.Index
		c.OperationID, c.Generation, c.Image = inst.OperationID, inst.Generation, inst.ImageRef
		return c
	}
	c.Lease = l[dockerio.LabelLease]
	c.Service = l[dockerio.LabelService]
	c.Index = -1
	c.OperationID = l[dockerio.LabelOperationID]
	c.Image = l[dockerio.LabelImageRef]
	c.Generation, _ = strconv.ParseUint(l[dockerio.LabelGeneration], 10, 64)
	return c
}

// parseDockerTime reads Docker's RFC 3339 times; its "never" (0001-01-01) is zero.
func parseDockerTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// bindingsOf keeps the first published binding of each port, preferring IPv4.
func bindingsOf(ports nat.PortMap) map[string]dockerio.Binding {
	out := map[string]dockerio.Binding{}
	for port, bs := range ports {
		for _, b := range bs {
			if b.HostPort == "" {
				continue
			}
			prev, seen := out[string(port)]
			if !seen || (strings.Contains(prev.HostIP, ":") && !strings.Contains(b.HostIP, ":")) {
				out[string(port)] = dockerio.Binding{HostIP: b.HostIP, HostPort: b.HostPort}
			}
		}
	}
	return out
}

// RemoveContainers force-removes each container by ID; one already gone (or
// being removed by Docker right now) counts as removed.
func (e *Engine) RemoveContainers(ctx context.Context, ids []string) error {
	var errs []error
	for _, id := range ids {
		err := e.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err == nil || isNotFound(err) || (isConflict(err) && strings.Contains(err.Error(), "already in progress")) {
			continue
		}
		errs = append(errs, dockerErr("remove container "+trimID(id), err))
	}
	return errors.Join(errs...)
}

// StopRemove stops this installation's container id within stopTimeout and
// removes it without force and without its volumes.
func (e *Engine) StopRemove(ctx context.Context, id string, stopTimeout time.Duration) error {
	resp, err := e.docker.ContainerInspect(ctx, id)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return dockerErr("inspect container "+trimID(id), err)
	}
	if resp.ID != id || resp.Config == nil || resp.Config.Labels[dockerio.LabelInstallation] != e.opts.InstallationID {
		return fmt.Errorf("stop container %s: %w", trimID(id), dockerio.ErrForeignObject)
	}
	secs := int(stopTimeout.Round(time.Second) / time.Second)
	if err := e.docker.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}); err != nil && !isNotFound(err) {
		return dockerErr("stop container "+trimID(id), err)
	}
	err = e.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: false, RemoveVolumes: false})
	if err == nil || isNotFound(err) || (isConflict(err) && strings.Contains(err.Error(), "already in progress")) {
		return nil
	}
	return dockerErr("remove container "+trimID(id), err)
}

// ListManaged lists every managed container of this installation, any state, from
// one list call (no per-container inspect: it must stay cheap for hundreds of
// containers). Health comes from the list's Status text; ExitCode from its
// "Exited (N)" text; start/finish times are not in a list and stay zero.
func (e *Engine) ListManaged(ctx context.Context) ([]dockerio.Container, error) {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
		filters.Arg("label", dockerio.LabelManaged+"=true"),
		filters.Arg("label", dockerio.LabelInstallation+"="+e.opts.InstallationID),
	)})
	if err != nil {
		return nil, dockerErr("list managed containers", err)
	}
	out := make([]dockerio.Container, 0, len(list))
	for _, s := range list {
		name := ""
		if len(s.Names) > 0 {
			name = strings.TrimPrefix(s.Names[0], "/")
		}
		c := fromLabels(s.ID, name, s.Labels)
		c.ImageID = s.ImageID
		c.State = s.State
		c.Health = labels.HealthFromStatus(s.Status)
		c.ExitCode = exitCodeFromStatus(s.Status)
		c.Ports = map[string]dockerio.Binding{}
		for _, p := range s.Ports {
			if p.PublicPort == 0 {
				continue
			}
			key := strconv.Itoa(int(p.PrivatePort)) + "/" + p.Type
			prev, seen := c.Ports[key]
			if !seen || (strings.Contains(prev.HostIP, ":") && !strings.Contains(p.IP, ":")) {
				c.Ports[key] = dockerio.Binding{HostIP: p.IP, HostPort: strconv.Itoa(int(p.PublicPort))}
			}
		}
		out = append(out, c)
	}
	dockerio.SortContainers(out)
	return out, nil
}

// exitCodeFromStatus reads N out of Docker's "Exited (N) 3 minutes ago".
func exitCodeFromStatus(status string) int {
	rest, ok := strings.CutPrefix(status, "Exited (")
	if !ok {
		return 0
	}
	num, _, ok := strings.Cut(rest, ")")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0
	}
	return n
}
