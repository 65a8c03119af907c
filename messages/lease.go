package messages

import (
	"regexp"
	"time"
)

// Messages between the actors that keep leases: the registry, its lease actors,
// the watcher, the reconciler and the reclaimer. They live here so the background
// actors never import the lease or registry packages.

var canonicalUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ValidLeaseID reports whether s is a canonical (lowercase, hyphenated) UUID. Only
// such IDs are ever stored or used in a Docker name.
func ValidLeaseID(s string) bool { return canonicalUUID.MatchString(s) }

// LeaseReport is what a lease tells the registry after (re)starting and after
// every transition: the registry keeps it as its read model for GET /provisions
// and /stats, and to decide admissions without asking.
type LeaseReport struct {
	Lease     string
	Admission uint64
	Status    string // the lease's own status (lease.Status), not the wire one
	Info      ProvisionInfo
	Running   int // containers believed running (ready cohort size)
	// Images are the image IDs every release in the lease's history recorded
	// (release.pinned): the lease's durable image pins, which the image
	// collector never removes.
	Images []string
}

// LeaseClosed tells the registry a lease's closed receipt is journaled: release
// its pool reservation and stop its actor. Retention is the record of its
// retained data (nil: destroyed); Requarantined names the retention source whose
// data a pre-commit restore handed back.
type LeaseClosed struct {
	Lease         string
	Admission     uint64
	Retention     *RetentionRecord
	Requarantined string
}

// Inventory hands a lease the managed containers Docker lists for it (startup and
// periodic reconciliation). The lease answers on Reply once it has acted on it.
type Inventory struct {
	Containers []Container
	Reply      chan<- InventoryAck // buffered by the sender; nil = no answer wanted
}

// InventoryAck is a lease's answer to an Inventory: the containers of settled
// generations it disowns, for the reconciler's gentle, bounded cleanup.
type InventoryAck struct {
	Stale []string
}

// ContainerDied is a death the watcher saw on Docker's live event stream.
type ContainerDied struct {
	ContainerID string
	Generation  uint64
	ExitCode    int
	// Counted: the stream saw this run start and saw no kill before the death.
	Counted bool
}

// Deliver asks the registry to forward Msg to a live lease's actor. Dropped, when
// set, is called (synchronously, on the registry) if it could not be delivered:
// the lease is unknown, gone, stopped or over its backlog.
type Deliver struct {
	Lease   string
	Msg     any
	Dropped func()
}

// ListLeases asks the registry for the live lease IDs.
type ListLeases struct {
	Reply chan<- LeasesReply
}

// LeasesReply answers ListLeases, sorted.
type LeasesReply struct {
	Leases []string
}

// RecoverNow asks the reconciler for a pass (the registry sends it whenever it
// starts, and again — 1 s, 2 s … 15 s apart — until a pass answers it; the watcher after
// every reconnect). For names the registry incarnation that waits for it (0:
// none does).
type RecoverNow struct{ For uint64 }

// Recovered tells the registry a reconciliation pass over every lease finished.
// For is the registry incarnation whose RecoverNow the pass began after (0:
// none): only such a pass makes a restarted registry ready — one begun before
// it asked accounted for its predecessor's actors. Lingering are the closed
// leases whose containers Docker still listed after the pass's removals (late
// containers, a removal backlog): the pool holds their reservations until a
// pass lists them no more.
type Recovered struct {
	For       uint64
	Lingering []string
}

// RetryStopped asks the registry to respawn lease actors stopped past their
// restart limit.
type RetryStopped struct{}

// RetainedVolume is one volume of a retention record.
type RetainedVolume struct {
	Name      string `json:"name"` // fred-retained-<lease>-<service>-<index>
	Service   string `json:"service"`
	Index     int    `json:"index"`
	QuotaMB   int64  `json:"quota_mb"`   // the quota it had; what the pool counts while retained
	UsedBytes int64  `json:"used_bytes"` // measured at close: what a demote must fit
}

// ServicePin is the recorded image of one service.
type ServicePin struct {
	Service string `json:"service"`
	ImagePin
}

// RetentionRecord is a closed lease's retained data: everything a restore needs to
// redeploy it exactly (the manifest, items and images as they ran) and the volumes
// it owns. A close writes it in the transaction of its closed receipt.
type RetentionRecord struct {
	Lease         string           `json:"lease_uuid"`
	Tenant        string           `json:"tenant"`
	ProviderUUID  string           `json:"provider_uuid"`
	Items         []LeaseItem      `json:"items"`
	Manifest      []byte           `json:"manifest"`
	Images        []ServicePin     `json:"images,omitempty"`
	Volumes       []RetainedVolume `json:"volumes"`
	RetainedAt    time.Time        `json:"retained_at"`
	RetainedUntil time.Time        `json:"retained_until"` // zero: until evicted
	// FredLayout: the volumes may hold fred v0.13's nested VOLUME layout (an
	// adopted lease's): a restore unnests them before it mounts them.
	FredLayout bool `json:"fred_layout,omitempty"`
}

// DiskMB is the footprint the pool counts for the record.
func (r *RetentionRecord) DiskMB() int64 {
	var n int64
	for _, v := range r.Volumes {
		n += v.QuotaMB
	}
	return n
}

// UsedBytes is what the record's volumes hold.
func (r *RetentionRecord) UsedBytes() int64 {
	var n int64
	for _, v := range r.Volumes {
		n += v.UsedBytes
	}
	return n
}

// HoldVolume hands a volume whose destruction failed (busy) to the volumehold
// actor, which retries it with backoff until it is gone and then tells Owner.
type HoldVolume struct {
	Name  string
	Owner string // "lease:<uuid>" (a close waits on it) or "retention:<uuid>" (a reap)
}

// HoldDone tells the registry a held volume is gone; it routes it to its owner.
type HoldDone struct {
	Name  string
	Owner string
}

// VolumeHoldDone tells a lease (a close waiting on it) one of its held volumes is gone.
type VolumeHoldDone struct{ Name string }

// RetentionSweep asks the registry for what the reaper's pass needs; the registry
// first marks every expired record reaping (journaled: its bytes stay counted).
type RetentionSweep struct {
	Now   time.Time
	Reply chan<- RetentionSweepReply
}

// RetentionSweepReply is the registry's answer to RetentionSweep.
type RetentionSweepReply struct {
	Reaping []RetentionRecord // records whose volumes are to be destroyed now
	Active  []RetentionRecord // records that must keep their volumes (orphan check)
	Live    []string          // volume names live leases own (nothing of them is touched)
}

// RetentionReaped tells the registry every volume of a reaping record is gone.
type RetentionReaped struct{ Lease string }

// RetentionOrphaned tells the registry an active record's volumes were all missing
// for the configured number of consecutive sweeps: prune the record.
type RetentionOrphaned struct{ Lease string }

// ReapNow asks the reaper for a pass now (a record was evicted or a hold finished).
type ReapNow struct{}
