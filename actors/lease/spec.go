package lease

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"time"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// Profile is a SKU's resources, frozen at admission: later edits of sku_profiles
// never reprice a lease that already exists.
type Profile struct {
	CPUCores  float64 `json:"cpu_cores"`
	MemoryMB  int64   `json:"memory_mb"`
	DiskMB    int64   `json:"disk_mb"`
	ScratchMB int64   `json:"scratch_mb,omitempty"` // diskless instances pin container_tmpfs_size_mb
}

// EffectiveDiskMB is what one instance takes from the disk pool.
func (p Profile) EffectiveDiskMB() int64 { return p.DiskMB + p.ScratchMB }

// ServiceSpec is one service of a lease: its item and its validated manifest.
type ServiceSpec struct {
	Name     string            `json:"name"`
	SKU      string            `json:"sku"`
	Quantity int               `json:"quantity"`
	Profile  Profile           `json:"profile"`
	Manifest *manifest.Service `json:"manifest"`
}

// Spec is a lease as admitted: immutable once journaled by the registry. A
// re-provision of a failed lease is a new admission with a new Spec.
type Spec struct {
	Lease        string               `json:"lease_uuid"`
	Tenant       string               `json:"tenant"`
	ProviderUUID string               `json:"provider_uuid"`
	Items        []messages.LeaseItem `json:"items"`
	Services     []ServiceSpec        `json:"services"` // sorted by name
	Flat         bool                 `json:"flat,omitempty"`
	Manifest     []byte               `json:"manifest,omitempty"` // the tenant manifest JSON as sent (decoded payload)
	CallbackURL  string               `json:"callback_url"`
	LifecycleURL string               `json:"lifecycle_callback_url"`
	OperationID  string               `json:"operation_id"`
	Admission    uint64               `json:"admission"` // registry-wide admission number
	AdmittedAt   time.Time            `json:"admitted_at"`
	// Images are the recorded contents this admission starts from (a restore keeps
	// the retained lease's exact images; never its tags resolved again).
	Images []ServiceImage `json:"images,omitempty"`
	// Restore is set when this admission restores a retained lease's data.
	Restore *RestoreFrom `json:"restore,omitempty"`
	// FQDNs pins instance names ("<service>/<index>" → fqdn) a takeover found:
	// fred v0.13's naming scheme, kept for the lease's life so its public names
	// never change. Unpinned instances are named by berthd's scheme.
	FQDNs map[string]string `json:"fqdns,omitempty"`
}

// pinnedFQDNs are a service's pinned names by index (nil: none pinned).
func (s *Spec) pinnedFQDNs(service string, quantity int) []string {
	if len(s.FQDNs) == 0 {
		return nil
	}
	out := make([]string, quantity)
	for i := range out {
		out[i] = s.FQDNs[service+"/"+strconv.Itoa(i)]
	}
	return out
}

// latest is a lease's latest admitted spec, held by its actor and by the producer
// that builds each incarnation: an actor a supervisor restarts starts from the
// admission the lease last took, not the one it was spawned with. Only the
// lease's goroutine touches it (a restart runs on its mailbox).
type latest struct {
	spec  *Spec
	shift time.Duration // the lease clock's FloorShift, kept across incarnations
}

// Load is the spec.
func (l *latest) Load() *Spec { return l.spec }

// take keeps a newer admission (a re-provision), before anything can fail.
func (l *latest) take(spec *Spec) {
	if spec.Admission > l.spec.Admission {
		l.spec = spec
	}
}

// RestoreFrom is a restore's source: the retained lease whose volumes this lease
// adopts (renamed into its own names, given its own quota) before its first launch.
type RestoreFrom struct {
	From    string          `json:"from_lease_uuid"`
	Volumes []RestoreVolume `json:"volumes"`
	// FredLayout: the record's volumes may hold fred v0.13's nested layout.
	FredLayout bool `json:"fred_layout,omitempty"`
}

// RestoreVolume is one adopted volume.
type RestoreVolume = steps.RestoreVolume

// Allocation is one instance's reservation in the resource pool.
type Allocation struct {
	ID      string // <lease>-<service>-<index>
	Profile Profile
}

// Allocations lists the pool reservations of every instance of the lease.
func (s *Spec) Allocations() []Allocation {
	var out []Allocation
	for _, svc := range s.Services {
		for i := 0; i < svc.Quantity; i++ {
			out = append(out, Allocation{ID: fmt.Sprintf("%s-%s-%d", s.Lease, svc.Name, i), Profile: svc.Profile})
		}
	}
	return out
}

// Instances is the total number of containers the lease runs.
func (s *Spec) Instances() int {
	n := 0
	for _, svc := range s.Services {
		n += svc.Quantity
	}
	return n
}

// ServiceImages maps service → manifest image reference.
func (s *Spec) ServiceImages() map[string]string { return serviceImages(s.Services) }

// release is the admission's release, before the journal numbers it. With the
// custom-domain DNS gate disabled (ungated) it routes every item's custom
// domain at once; else none, until each domain's gate opens. It carries its own
// copy of the admission: a re-provision replaces the registry's spec before the
// lease journals anything, and from then on only the release records what it ran.
func (s *Spec) release(now time.Time, ungated bool) Release {
	r := Release{Kind: KindProvision, OperationID: s.OperationID, CreatedAt: now,
		Manifest: s.Manifest, Items: s.Items, Services: s.Services, Images: s.Images}
	for _, it := range s.Items {
		if ungated && it.CustomDomain != "" {
			if r.Domains == nil {
				r.Domains = map[string]string{}
			}
			r.Domains[it.ServiceName] = it.CustomDomain
		}
	}
	return r
}

func serviceImages(services []ServiceSpec) map[string]string {
	out := make(map[string]string, len(services))
	for _, svc := range services {
		out[svc.Name] = svc.Manifest.Image
	}
	return out
}

// launch is what one Compose launch of a lease stamps on its containers.
type launch struct {
	Generation    uint64
	OperationID   string
	MaintenanceID string
	FailCount     int
}

func encodeManifest(raw []byte) string { return base64.StdEncoding.EncodeToString(raw) }
