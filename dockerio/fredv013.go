package dockerio

import "sort"

// fred v0.13's docker backend — the daemon berthd replaces — labels what it
// makes as berth does (fred.managed, fred.backend_name, fred.lease_uuid) but
// with no fred.installation_id, which every object of a berth installation
// carries. A host that still holds such objects of berthd's backend name runs,
// or ran, fred's leases: berthd's journals know none of them, so it would
// answer providerd that they do not exist and fail every re-provision
// providerd then sends, while their containers run on unseen. The start guard
// and berthctl doctor look for them (seed: "in-place adoption of a v0.13 host").

// FredObject is one Docker object fred v0.13 made.
type FredObject struct {
	Kind  string // "container" or "network"
	ID    string
	Name  string
	Lease string // its fred.lease_uuid ("" on fred's per-tenant networks)
}

// MadeByFredV013 reports whether an object's labels are fred v0.13's for
// backend: managed, of that backend name, of no berth installation.
func MadeByFredV013(labels map[string]string, backend string) bool {
	_, berth := labels[LabelInstallation]
	return labels[LabelManaged] == "true" && labels[LabelBackend] == backend && !berth
}

// SortFredObjects orders objects containers first, then by name.
func SortFredObjects(objs []FredObject) {
	sort.Slice(objs, func(i, j int) bool {
		if objs[i].Kind != objs[j].Kind {
			return objs[i].Kind == "container"
		}
		return objs[i].Name < objs[j].Name
	})
}
