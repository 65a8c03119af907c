package dockerio

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// fred v0.13's docker backend — the daemon berthd replaces — labels what it
// makes as berth does (fred.managed, fred.backend_name, fred.lease_uuid) but
// with no fred.installation_id, which every object of a berth installation
// carries. A host that still holds such objects of berthd's backend name runs,
// or ran, fred's leases: berthd's journals know none of them, so it would
// answer providerd that they do not exist and fail every re-provision
// providerd then sends, while their containers run on unseen. The start guard
// and berthctl doctor look for them (seed: "in-place adoption of a v0.13 host").

// FredObject is one Docker object fred v0.13 made, as the start guard names it
// and the takeover's preflight classifies it.
type FredObject struct {
	Kind   string // "container" or "network"
	ID     string
	Name   string
	Lease  string // its fred.lease_uuid ("" on fred's per-tenant networks)
	Labels map[string]string
	// Containers only.
	State    string            // Docker's: running, exited, created, restarting, paused, dead, removing
	ImageID  string            // the image it runs (fred runs the manifest's tag: this is what the tag meant then); "" when it is gone
	Image    FredImage         // what that image declares
	Networks map[string]string // attached networks, name → ID
	Mounts   []FredMount
	Ports    []FredPort // published ports
}

// FredPort is one published port of a fred container.
type FredPort struct {
	Port     int
	Protocol string // tcp | udp
	HostIP   string
	HostPort int
}

// FredImage is what a fred container's image declares: what berthd's image
// admission judges at a relaunch, and the digests that pin it.
type FredImage struct {
	Volumes     []string
	Labels      map[string]string
	RepoDigests []string
}

// FredMount is one mount of a fred container.
type FredMount struct {
	Type        string // bind, tmpfs, volume
	Source      string
	Destination string
}

// MadeByFredV013 reports whether an object's labels are fred v0.13's for
// backend: managed, of that backend name, of no berth installation.
func MadeByFredV013(labels map[string]string, backend string) bool {
	_, berth := labels[LabelInstallation]
	return labels[LabelManaged] == "true" && labels[LabelBackend] == backend && !berth
}

// FredTenantNetwork is the name of fred's one network per tenant:
// fred-tenant-<16 hex digits of sha256(tenant)>.
func FredTenantNetwork(tenant string) string {
	sum := sha256.Sum256([]byte(tenant))
	return "fred-tenant-" + hex.EncodeToString(sum[:8])
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

// DescribeFredObjects names fred's objects for an operator — how many of each,
// of how many leases, and the first few — as berthd's start guard and berthctl
// doctor both say it.
func DescribeFredObjects(objs []FredObject, backend string) string {
	containers, leases := 0, map[string]bool{}
	var names []string
	for _, o := range objs {
		if o.Kind == "container" {
			containers++
			leases[o.Lease] = true
		}
		if len(names) < 5 {
			names = append(names, o.Kind+" "+o.Name)
		}
	}
	more := ""
	if len(objs) > len(names) {
		more = fmt.Sprintf(", and %d more", len(objs)-len(names))
	}
	return fmt.Sprintf("Docker holds %d containers of %d leases and %d networks of backend %q that fred v0.13's docker backend made "+
		"(fred.managed=true, no fred.installation_id): %s%s", containers, len(leases), len(objs)-containers, backend,
		strings.Join(names, ", "), more)
}

// Adopted is the closed allow-list a takeover's adoption recorded: exactly these
// fred v0.13 objects are this installation's, each only while its labels still
// say what they said when it was adopted (fred's, of this backend, of no berth
// installation, of the recorded lease or tenant). Nothing else with fred's labels
// is ever listed, attributed, changed or removed.
type Adopted struct {
	Containers map[string]AdoptedContainer `json:"containers"` // container ID →
	Networks   map[string]AdoptedNetwork   `json:"networks"`   // network ID → fred's per-tenant network
}

// AdoptedContainer is one adopted container's place in its lease.
type AdoptedContainer struct {
	Lease   string `json:"lease_uuid"`
	Service string `json:"service"`
	Index   int    `json:"index"`
}

// AdoptedNetwork is one of fred's per-tenant networks.
type AdoptedNetwork struct {
	Tenant string `json:"tenant"`
}

// OwnsContainer reports whether the container id with these labels is adopted.
func (a *Adopted) OwnsContainer(id string, labels map[string]string, backend string) bool {
	if a == nil {
		return false
	}
	c, ok := a.Containers[id]
	return ok && MadeByFredV013(labels, backend) && labels[LabelLease] == c.Lease && labels[LabelService] == c.Service
}

// OwnsNetwork reports whether the network id with these labels is adopted.
func (a *Adopted) OwnsNetwork(id string, labels map[string]string, backend string) bool {
	if a == nil {
		return false
	}
	n, ok := a.Networks[id]
	return ok && MadeByFredV013(labels, backend) && labels[LabelTenant] == n.Tenant
}

// Unadopted are the objects of backend no adoption made this installation's
// (all of them when a is nil): what the start guard and doctor name.
func (a *Adopted) Unadopted(objs []FredObject, backend string) []FredObject {
	var out []FredObject
	for _, o := range objs {
		if !a.OwnsContainer(o.ID, o.Labels, backend) && !a.OwnsNetwork(o.ID, o.Labels, backend) {
			out = append(out, o)
		}
	}
	return out
}
