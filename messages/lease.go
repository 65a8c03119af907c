package messages

import (
	"regexp"

	"github.com/berth-dev/berth/dockerio"
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
}

// LeaseClosed tells the registry a lease's closed receipt is journaled: release
// its pool reservation and stop its actor.
type LeaseClosed struct {
	Lease     string
	Admission uint64
}

// Inventory hands a lease the managed containers Docker lists for it (startup and
// periodic reconciliation). The lease answers on Reply once it has acted on it.
type Inventory struct {
	Containers []dockerio.Container
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
// starts, the watcher after every reconnect).
type RecoverNow struct{}

// Recovered tells the registry a reconciliation pass over every lease finished.
type Recovered struct{}

// RetryStopped asks the registry to respawn lease actors stopped past their
// restart limit.
type RetryStopped struct{}
