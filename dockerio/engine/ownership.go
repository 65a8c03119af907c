package engine

import (
	"fmt"

	"github.com/docker/docker/api/types/filters"

	"github.com/berth-dev/berth/dockerio"
)

// ours reports whether an object's labels prove it is a managed object of this
// installation: the only objects the engine lists, attributes, changes or removes.
func (e *Engine) ours(l map[string]string) bool {
	return l[dockerio.LabelManaged] == "true" && l[dockerio.LabelInstallation] == e.opts.InstallationID
}

// ownFilters is a Docker list filter for this installation's managed objects,
// narrowed by extra.
func (e *Engine) ownFilters(extra ...filters.KeyValuePair) filters.Args {
	return filters.NewArgs(append([]filters.KeyValuePair{
		filters.Arg("label", dockerio.LabelManaged+"=true"),
		filters.Arg("label", dockerio.LabelInstallation+"="+e.opts.InstallationID),
	}, extra...)...)
}

// installation is the installation a plan or network spec acts for: the engine's
// own. An empty one means the engine's; any other is a caller bug, refused.
func (e *Engine) installation(asked string) (string, error) {
	if asked == "" || asked == e.opts.InstallationID {
		return e.opts.InstallationID, nil
	}
	return "", fmt.Errorf("asked to act for installation %q on the engine of installation %q", asked, e.opts.InstallationID)
}
