package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/go-connections/nat"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
	"github.com/berth-dev/berth/messages"
)

// Cohort reports this installation's containers (any state) of the lease's
// project, attributed through their Compose service key: a container is included
// only when it carries our fred.installation_id (or is adopted: Options.Adopted),
// its fred.* labels name this lease and a (service, index) that maps to exactly
// that key. Another installation's container of the same project (same lease
// UUID), or fred v0.13's that is not adopted, is never part of it. Each is
// inspected for its live state; an adopted one has generation 0 and no operation
// ID (fred labelled neither). Sorted by (Service, Index, ID).
func (e *Engine) Cohort(ctx context.Context, lease string) ([]messages.Container, error) {
	list, err := e.cohortList(ctx, lease)
	if err != nil {
		return nil, err
	}
	out := make([]messages.Container, 0, len(list))
	for _, s := range list {
		c, err := e.Inspect(ctx, s.ID)
		if cerrdefs.IsNotFound(err) {
			continue // removed since the list
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	dockerio.SortContainers(out)
	return out, nil
}

// Launched is Cohort's attribution over one listing, without the inspects.
func (e *Engine) Launched(ctx context.Context, lease string) ([]messages.Container, error) {
	list, err := e.cohortList(ctx, lease)
	if err != nil {
		return nil, err
	}
	return e.launchedFrom(lease, list), nil
}

// launchedFrom is Launched's answer from an attributed listing.
func (e *Engine) launchedFrom(lease string, list []container.Summary) []messages.Container {
	out := make([]messages.Container, 0, len(list))
	for _, s := range list {
		c := fromSummary(s)
		c.StartRefused = c.State == "created" && e.refusals != nil && e.refusals.refused(s.ID, c.Name)
		out = append(out, c)
	}
	dockerio.SortContainers(out)
	return out
}

// fromSummary is what a container listing says of one container: its labels'
// attribution, image, state and health (from the Status text).
func fromSummary(s container.Summary) messages.Container {
	name := ""
	if len(s.Names) > 0 {
		name = strings.TrimPrefix(s.Names[0], "/")
	}
	c := fromLabels(s.ID, name, s.Labels)
	c.ImageID, c.State, c.Health = s.ImageID, s.State, labels.HealthFromStatus(s.Status)
	if s.NetworkSettings != nil {
		for name, n := range s.NetworkSettings.Networks {
			// The default bridge isolates its containers (icc=false, verified at
			// each launch onto it): being on it shares nothing.
			if n != nil && n.NetworkID != "" && name != dockerio.DefaultBridgeName {
				c.Networks = append(c.Networks, n.NetworkID)
			}
		}
	}
	return c
}

// cohortList lists the lease project's containers that are attributed to it.
func (e *Engine) cohortList(ctx context.Context, lease string) ([]container.Summary, error) {
	name := dockerio.ProjectName(lease)
	list, err := e.ownContainers(ctx, "containers of project "+name, filters.Arg("label", api.ProjectLabel+"="+name))
	if err != nil {
		return nil, err
	}
	return e.attributed(lease, list), nil
}

// attributed keeps the containers of a listing of this installation's project
// containers that are the lease's services (not one-off, labels agreeing with
// their compose key).
func (e *Engine) attributed(lease string, list []container.Summary) []container.Summary {
	out := list[:0]
	for _, s := range list {
		if s.Labels[api.OneoffLabel] == "True" {
			continue // `compose run` containers are not the project's services
		}
		key := s.Labels[api.ServiceLabel]
		inst, ok := labels.ParseInstance(s.Labels)
		if !ok || inst.Lease != lease || !labels.AgreesWithComposeKey(key, inst.Service, inst.Index) {
			e.log.Warn().Str("lease_uuid", lease).Str("container_id", s.ID).Str("compose_service", key).
				Str("service", s.Labels[dockerio.LabelService]).Str("instance", s.Labels[dockerio.LabelInstance]).
				Msg("container's labels disagree with its compose key; not attributed to the lease")
			continue
		}
		out = append(out, s)
	}
	return out
}

// Inspect reports one container's live state; cerrdefs.ErrNotFound when absent.
func (e *Engine) Inspect(ctx context.Context, id string) (messages.Container, error) {
	resp, err := e.docker.ContainerInspect(ctx, id)
	if err != nil {
		return messages.Container{}, dockerErr("inspect container "+trimID(id), err)
	}
	return fromInspect(resp), nil
}

func fromInspect(r container.InspectResponse) messages.Container {
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
func fromLabels(id, name string, l map[string]string) messages.Container {
	c := messages.Container{ID: id, Name: name, Labels: l}
	c.Contract, _ = strconv.Atoi(l[dockerio.LabelRuntimeContract]) // absent: 0, before the contract
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
func bindingsOf(ports nat.PortMap) map[string]messages.PortBinding {
	out := map[string]messages.PortBinding{}
	for port, bs := range ports {
		for _, b := range bs {
			if b.HostPort == "" {
				continue
			}
			prev, seen := out[string(port)]
			if !seen || (strings.Contains(prev.HostIP, ":") && !strings.Contains(b.HostIP, ":")) {
				out[string(port)] = messages.PortBinding{HostIP: b.HostIP, HostPort: b.HostPort}
			}
		}
	}
	return out
}

// RemoveContainers force-removes this installation's containers by exact ID (a
// close's stragglers). Each is re-inspected first: one already gone (or being
// removed by Docker right now) counts as removed; one that is not ours is refused
// with dockerio.ErrForeignObject and left alone, and the others still go.
func (e *Engine) RemoveContainers(ctx context.Context, ids []string) error {
	var errs []error
	for _, id := range ids {
		ok, err := e.ownContainer(ctx, "remove", id)
		if err != nil {
			errs = append(errs, err)
		}
		if !ok {
			continue
		}
		err = e.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if !removedOrGoing(err) {
			errs = append(errs, dockerErr("remove container "+trimID(id), err))
		}
	}
	return errors.Join(errs...)
}

// StopRemove is automatic cleanup's gentle removal: it re-inspects the exact ID,
// requires this installation's label (or an adopted container's labels), stops
// the container within stopTimeout (≤ 0: the container's own stop timeout), then
// removes it with Force=false and RemoveVolumes=false, so its volumes stay and a
// container started again in the meantime is refused by Docker rather than killed. Absent, or a removal already
// in progress, is success.
func (e *Engine) StopRemove(ctx context.Context, id string, stopTimeout time.Duration) error {
	ok, err := e.ownContainer(ctx, "stop", id)
	if !ok {
		return err
	}
	if err := e.docker.ContainerStop(ctx, id, stopOptions(stopTimeout)); err != nil && !isNotFound(err) {
		if isConflict(err) && strings.Contains(err.Error(), "in progress") {
			return nil // Docker is already removing it
		}
		return dockerErr("stop container "+trimID(id), err)
	}
	err = e.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: false, RemoveVolumes: false})
	if removedOrGoing(err) {
		return nil
	}
	return dockerErr("remove container "+trimID(id), err)
}

// ownContainer re-inspects id before a change: ok when it is exactly that
// container and ours or adopted (its labels re-verified). Absent is (false, nil); anything else that is not ok says why.
func (e *Engine) ownContainer(ctx context.Context, op, id string) (bool, error) {
	resp, err := e.docker.ContainerInspect(ctx, id)
	if isNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, dockerErr(op+" container "+trimID(id)+": inspect", err)
	}
	if resp.ID != id {
		return false, fmt.Errorf("%s container %q: not a full container ID (it names %s)", op, id, trimID(resp.ID))
	}
	var l map[string]string
	if resp.Config != nil {
		l = resp.Config.Labels
	}
	if !e.ownsContainer(resp.ID, l) {
		return false, fmt.Errorf("%s container %s (%s, installation %q): %w", op, trimID(id),
			strings.TrimPrefix(resp.Name, "/"), l[dockerio.LabelInstallation], dockerio.ErrForeignObject)
	}
	return true, nil
}

// removedOrGoing reports a removal that succeeded, found nothing, or found
// Docker already removing the container.
func removedOrGoing(err error) bool {
	return err == nil || isNotFound(err) || (isConflict(err) && strings.Contains(err.Error(), "already in progress"))
}

// stopOptions asks Docker to wait d before SIGKILL; d ≤ 0 keeps the container's
// own stop timeout (its stop_grace_period, else Docker's 10 s).
func stopOptions(d time.Duration) container.StopOptions {
	if d <= 0 {
		return container.StopOptions{}
	}
	secs := int(math.Ceil(d.Seconds()))
	return container.StopOptions{Timeout: &secs}
}

// ListManaged lists every managed container of this installation, any state, from
// one list call, two with an adoption (no per-container inspect: it must stay
// cheap for hundreds of containers). Health comes from the list's Status text; ExitCode from its
// "Exited (N)" text; start/finish times are not in a list and stay zero.
func (e *Engine) ListManaged(ctx context.Context) ([]messages.Container, error) {
	list, err := e.ownContainers(ctx, "managed containers")
	if err != nil {
		return nil, err
	}
	out := make([]messages.Container, 0, len(list))
	for _, s := range list {
		c := fromSummary(s)
		c.ExitCode = exitCodeFromStatus(s.Status)
		c.Ports = map[string]messages.PortBinding{}
		for _, p := range s.Ports {
			if p.PublicPort == 0 {
				continue
			}
			key := strconv.Itoa(int(p.PrivatePort)) + "/" + p.Type
			prev, seen := c.Ports[key]
			if !seen || (strings.Contains(prev.HostIP, ":") && !strings.Contains(p.IP, ":")) {
				c.Ports[key] = messages.PortBinding{HostIP: p.IP, HostPort: strconv.Itoa(int(p.PublicPort))}
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
