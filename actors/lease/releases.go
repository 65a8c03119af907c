package lease

// Release history: what a lease deployed, which release runs, and how the history
// is kept within its age and size bounds.

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Release kinds.
const (
	KindProvision = "provision"
	KindRestart   = messages.MaintenanceRestart
	KindUpdate    = messages.MaintenanceUpdate
	KindAdopted   = "adopted" // a release fred v0.13 made, taken over with its lease
	// KindRuntimeRefresh is a restart the runtime refresh asks for: restart-shaped,
	// without any failure-budget effect.
	KindRuntimeRefresh = messages.MaintenanceRuntimeRefresh
)

// Release is one deployment of the lease: what was asked for (manifest, items, the
// frozen resource profiles) and what ran (the image of every service).
type Release struct {
	Version       int                  `json:"version"`
	Status        string               `json:"status"` // messages.Release* statuses
	Kind          string               `json:"kind"`   // provision | restart | update
	OperationID   string               `json:"operation_id,omitempty"`
	MaintenanceID string               `json:"maintenance_id,omitempty"`
	CreatedAt     time.Time            `json:"created_at"`
	Reason        string               `json:"reason,omitempty"`
	Message       string               `json:"message,omitempty"`
	Manifest      []byte               `json:"manifest,omitempty"` // the tenant manifest JSON as sent
	Items         []messages.LeaseItem `json:"items,omitempty"`
	Services      []ServiceSpec        `json:"services,omitempty"` // sorted by name
	Images        []ServiceImage       `json:"images,omitempty"`   // content as deployed, by service
	// Domains are the custom domains this release routes, service → domain:
	// only those whose DNS gate opened (or every item's, the gate disabled).
	Domains map[string]string `json:"custom_domains,omitempty"`
}

// ServiceImage is the recorded content of one service of a release.
type ServiceImage struct {
	Service string `json:"service"`
	messages.ImagePin
}

// Pin is the recorded image of service, if any.
func (r *Release) Pin(service string) (messages.ImagePin, bool) {
	for _, si := range r.Images {
		if si.Service == service {
			return si.ImagePin, true
		}
	}
	return messages.ImagePin{}, false
}

// ImageIDs are the distinct image IDs the release history records: the
// lease's image pins (its report carries them to the registry).
func (s *State) ImageIDs() []string {
	var out []string
	for i := range s.Releases {
		for _, si := range s.Releases[i].Images {
			if si.ID != "" && !slices.Contains(out, si.ID) {
				out = append(out, si.ID)
			}
		}
	}
	return out
}

// Release returns the release with version v, or nil.
func (s *State) Release(v int) *Release {
	for i := range s.Releases {
		if s.Releases[i].Version == v {
			return &s.Releases[i]
		}
	}
	return nil
}

// Latest is the newest release, or nil.
func (s *State) Latest() *Release {
	if len(s.Releases) == 0 {
		return nil
	}
	return &s.Releases[len(s.Releases)-1]
}

// Active is the release whose cohort is (or last was) running, or nil.
func (s *State) Active() *Release {
	for i := len(s.Releases) - 1; i >= 0; i-- {
		if s.Releases[i].Status == messages.ReleaseActive {
			return &s.Releases[i]
		}
	}
	return nil
}

// Running is the release a lease's containers are built from now: the deploying
// one while provisioning, the target during maintenance, else the newest release
// that is active or belongs to a provision — a failed re-provision is the current
// admission's release, newer than the active one it replaced; a failed maintenance
// target never is.
func (s *State) Running() *Release {
	if s.Status == Provisioning || s.Status.maintaining() {
		return s.Latest()
	}
	for i := len(s.Releases) - 1; i >= 0; i-- {
		if r := &s.Releases[i]; r.Status == messages.ReleaseActive || r.Kind == KindProvision {
			return r
		}
	}
	return s.Latest()
}

func (s *State) nextVersion() int {
	if l := s.Latest(); l != nil {
		return l.Version + 1
	}
	return 1
}

func (s *State) hasMaintenance(id string) bool {
	for _, r := range s.Releases {
		if r.MaintenanceID == id {
			return true
		}
	}
	return false
}

// activate makes r the active release; the previously active one is superseded.
func (s *State) activate(r *Release) {
	if r == nil {
		return
	}
	for i := range s.Releases {
		if s.Releases[i].Status == messages.ReleaseActive && s.Releases[i].Version != r.Version {
			s.Releases[i].Status = messages.ReleaseSuperseded
		}
	}
	r.Status, r.Reason, r.Message = messages.ReleaseActive, "", ""
}

func (s *State) failRelease(r *Release, reason, message string) {
	if r != nil && r.Status == messages.ReleaseDeploying {
		r.Status, r.Reason, r.Message = messages.ReleaseFailed, reason, message
	}
}

// pruneReleases decides which releases the history drops, in the transaction that
// appends next (nil: nothing is appended; the periodic expiry). The event is
// journaled after the append, so it sees the history as the append leaves it:
// superseded and failed releases that are neither the latest nor the active one
// go when older than releases_max_age, then — oldest first — as many more as the
// per-lease history cap needs. ok is false when the protected releases (the
// active one and the new latest) alone would not fit: then nothing is admitted,
// before any Docker effect.
func pruneReleases(st *State, next *Release, env Env) (evs []persistence.Event, ok bool) {
	limit := env.Limits.HistoryBytes
	total := 0
	if next != nil {
		total = encodedSize(*next)
		protected := total
		if a := st.Active(); a != nil {
			protected += encodedSize(*a)
		}
		if limit > 0 && protected > limit {
			return nil, false
		}
	}
	latest := st.Latest()
	if !slices.ContainsFunc(st.Releases, func(r Release) bool { return droppable(&r, next, latest) }) {
		return nil, true // nothing could go: no need to weigh the history (a restart at 10k leases asks each)
	}
	for i := range st.Releases {
		total += encodedSize(st.Releases[i])
	}
	var drop []int
	for i := range st.Releases {
		r := &st.Releases[i]
		if !droppable(r, next, latest) {
			continue
		}
		expired := env.Limits.ReleasesMaxAge > 0 && env.Now.Sub(r.CreatedAt) > env.Limits.ReleasesMaxAge
		if expired || (limit > 0 && total > limit) {
			drop = append(drop, r.Version)
			total -= encodedSize(*r)
		}
	}
	if len(drop) == 0 {
		return nil, true
	}
	return []persistence.Event{event(EvReleasesPruned, env.Now, ReleasesPruned{Versions: drop})}, true
}

// droppable reports whether the history may drop r: superseded or failed, and
// not the latest when nothing new is appended (the latest stays the latest; the
// active one is never superseded or failed).
func droppable(r *Release, next, latest *Release) bool {
	if r.Status != messages.ReleaseSuperseded && r.Status != messages.ReleaseFailed {
		return false
	}
	return next != nil || latest == nil || r.Version != latest.Version
}

func encodedSize(r Release) int {
	b, _ := json.Marshal(r)
	return len(b)
}

func (r *Release) clone() Release {
	c := *r
	c.Items = slices.Clone(r.Items)
	c.Services = slices.Clone(r.Services)
	c.Manifest = slices.Clone(r.Manifest)
	c.Images = slices.Clone(r.Images)
	c.Domains = maps.Clone(r.Domains)
	return c
}

// expected is the set of instances a complete cohort of r has.
func (r *Release) expected() map[dockerio.InstanceKey]bool {
	out := make(map[dockerio.InstanceKey]bool)
	for _, svc := range r.Services {
		for i := 0; i < svc.Quantity; i++ {
			out[dockerio.InstanceKey{Service: svc.Name, Index: i}] = true
		}
	}
	return out
}

// Wire is the release as GET /releases shows it.
func (r *Release) Wire() messages.Release {
	return messages.Release{Version: r.Version, Image: "stack", Status: r.Status, CreatedAt: r.CreatedAt,
		Reason: r.Reason, Message: r.Message, Manifest: encodeManifest(r.Manifest)}
}
