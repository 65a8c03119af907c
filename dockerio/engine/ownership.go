package engine

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/berth-dev/berth/dockerio"
)

// ours reports whether an object's labels prove it is a managed object of this
// installation: with the adopted ones (Options.Adopted), the only objects the
// engine lists, attributes, changes or removes.
func (e *Engine) ours(l map[string]string) bool {
	return l[dockerio.LabelManaged] == "true" && l[dockerio.LabelInstallation] == e.opts.InstallationID
}

// ownsContainer reports whether the container id with labels l is this
// installation's: ours, or a fred v0.13 container the adoption allow-list names
// whose labels still say what they said when it was adopted.
func (e *Engine) ownsContainer(id string, l map[string]string) bool {
	return e.ours(l) || e.opts.Adopted.OwnsContainer(id, l, e.opts.BackendName)
}

// adoptedNetwork reports whether n is an adopted fred v0.13 per-tenant network:
// allow-listed by its ID, its labels as recorded, fred's name for its tenant.
func (e *Engine) adoptedNetwork(n network.Inspect) bool {
	return e.opts.Adopted.OwnsNetwork(n.ID, n.Labels, e.opts.BackendName) &&
		n.Name == dockerio.FredTenantNetwork(n.Labels[dockerio.LabelTenant])
}

// adoptsContainers reports whether the allow-list names any container: only
// then is anything asked of Docker beyond our own labels' listing.
func (e *Engine) adoptsContainers() bool {
	return e.opts.Adopted != nil && len(e.opts.Adopted.Containers) > 0
}

// adoptsNetworks reports whether the allow-list names any network.
func (e *Engine) adoptsNetworks() bool {
	return e.opts.Adopted != nil && len(e.opts.Adopted.Networks) > 0
}

// ownFilters is a Docker list filter for this installation's managed objects,
// narrowed by extra.
func (e *Engine) ownFilters(extra ...filters.KeyValuePair) filters.Args {
	return filters.NewArgs(append([]filters.KeyValuePair{
		filters.Arg("label", dockerio.LabelManaged+"=true"),
		filters.Arg("label", dockerio.LabelInstallation+"="+e.opts.InstallationID),
	}, extra...)...)
}

// fredFilters is a Docker list filter for the managed objects of this backend
// name, narrowed by extra: where fred v0.13's, and so the adopted ones, are.
// It matches berthd's own as well; a filter cannot ask for a missing label.
func (e *Engine) fredFilters(extra ...filters.KeyValuePair) filters.Args {
	return filters.NewArgs(append([]filters.KeyValuePair{
		filters.Arg("label", dockerio.LabelManaged+"=true"),
		filters.Arg("label", dockerio.LabelBackend+"="+e.opts.BackendName),
	}, extra...)...)
}

// ownContainers lists this installation's containers, any state, narrowed by
// extra (what names them in errors). A Docker filter cannot say "our
// installation label or an allow-listed ID", so the adopted ones come from a
// second listing by fredFilters, asked only when the allow-list names a
// container, of which exactly the adopted are kept.
func (e *Engine) ownContainers(ctx context.Context, what string, extra ...filters.KeyValuePair) ([]container.Summary, error) {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: e.ownFilters(extra...)})
	if err != nil {
		return nil, dockerErr("list "+what, err)
	}
	if !e.adoptsContainers() {
		return list, nil
	}
	fred, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: e.fredFilters(extra...)})
	if err != nil {
		return nil, dockerErr("list adopted "+what, err)
	}
	for _, c := range fred {
		// Never one of ours again: an adopted container carries no installation label.
		if e.opts.Adopted.OwnsContainer(c.ID, c.Labels, e.opts.BackendName) {
			list = append(list, c)
		}
	}
	return list, nil
}

// installation is the installation a plan or network spec acts for: the engine's
// own. An empty one means the engine's; any other is a caller bug, refused.
func (e *Engine) installation(asked string) (string, error) {
	if asked == "" || asked == e.opts.InstallationID {
		return e.opts.InstallationID, nil
	}
	return "", fmt.Errorf("asked to act for installation %q on the engine of installation %q", asked, e.opts.InstallationID)
}
