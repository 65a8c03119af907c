package messages

import "time"

// Commands the facade sends to the registry (which answers or forwards them to a
// lease actor), and the replies. Every Reply channel is buffered by the asker, so an
// actor never blocks answering; an asker that gave up simply never reads it.

// Admit asks the registry to admit a provision request. A nil error means 202.
type Admit struct {
	Req    ProvisionRequest
	Reply  chan<- error
	Ticket *Ticket // taken at the admission's commit
}

// Deprovision asks for a lease to be closed. A nil error means 200: the lease is
// gone (or never existed). ErrLifecyclePending means teardown is still running.
type Deprovision struct {
	Lease string
	// Retain is the registry's decision for this close (retain_on_close and the
	// retained-disk cap): keep the lease's durable volumes as a retention record
	// instead of destroying them.
	Retain bool
	Reply  chan<- error
	Ticket *Ticket // taken by the lease as it journals the close intent
	// Durable, when set, is signalled (never blocking: buffer it) once the close
	// intent is journaled and teardown is under way, not held; Reply comes when
	// the close is done, or at once with ErrLifecyclePending when teardown is held.
	Durable chan<- struct{}
}

// InfoReply answers GetInfo.
type InfoReply struct {
	Info *LeaseInfo
	Err  error
}

// GetInfo asks for a ready lease's connection details.
type GetInfo struct {
	Lease string
	Reply chan<- InfoReply
}

// LogsReply answers GetLogs.
type LogsReply struct {
	Logs map[string]string
	Err  error
}

// GetLogs asks for the last Tail lines of every instance of a lease.
type GetLogs struct {
	Lease string
	Tail  int
	Reply chan<- LogsReply
}

// ProvisionReply answers GetProvision.
type ProvisionReply struct {
	Info *ProvisionInfo
	Err  error
}

// GetProvision asks for one lease's provision record.
type GetProvision struct {
	Lease string
	Reply chan<- ProvisionReply
}

// ProvisionsReply answers ListProvisions.
type ProvisionsReply struct {
	Provisions []ProvisionInfo
	Continue   string
}

// ListProvisions lists provision records: by Leases when set (no paging), else all
// leases sorted by UUID, strictly after Continue, at most Limit (0 = all).
type ListProvisions struct {
	Leases   []string
	Limit    int
	Continue string
	Reply    chan<- ProvisionsReply
}

// StatsReply answers GetStats.
type StatsReply struct {
	Stats Stats
	Err   error
}

// GetStats asks for the resource pool and active container count.
type GetStats struct {
	Reply chan<- StatsReply
}

// HealthReply answers GetHealth.
type HealthReply struct {
	Ready  bool     // startup recovery finished, accounting is whole and the store is healthy
	Reason string   // why not, tenant-safe, for the 503 body
	Detail []string // operator-facing findings that do not make berthd unhealthy (e.g. a bbolt meta fallback at open)
}

// GetHealth asks the registry whether accounting is whole (recovery done) and the
// state store it owns is healthy.
type GetHealth struct {
	Reply chan<- HealthReply
}

// DockerHealthReply answers GetDockerHealth.
type DockerHealthReply struct {
	Reachable bool   // Docker answered recently (event stream connected or a ping succeeded)
	Reason    string // why not, for the 503 body
}

// GetDockerHealth asks the watcher, which owns berthd's live connection to Docker,
// whether the engine is reachable.
type GetDockerHealth struct {
	Reply chan<- DockerHealthReply
}

// Maintenance kinds.
const (
	MaintenanceRestart = "restart"
	MaintenanceUpdate  = "update"
	// MaintenanceRuntimeRefresh is a restart the runtime refresh asks for: the
	// active release recreated unchanged under the current runtime contract.
	MaintenanceRuntimeRefresh = "runtime_refresh"
)

// Maintain asks for a restart or an update of a lease. MaintenanceID is always a
// canonical UUIDv4 (the facade derives one when the request has none) and
// AdmittedAt the time Fred stamped on the command (or the facade's receipt time).
// A nil error means 202: the intent is journaled and the status already reads
// restarting / updating.
type Maintain struct {
	Kind          string // MaintenanceRestart | MaintenanceUpdate | MaintenanceRuntimeRefresh
	Req           MaintenanceRequest
	MaintenanceID string
	AdmittedAt    time.Time
	// Stale (runtime_refresh) are the containers seen under an older runtime
	// contract: the lease refreshes only while one of them is its ready cohort.
	Stale  []string
	Reply  chan<- error
	Ticket *Ticket // taken by the lease as it decides the maintenance
}

// ReleasesReply answers GetReleases.
type ReleasesReply struct {
	Releases []Release
	Err      error
}

// GetReleases asks for a lease's release history, oldest first.
type GetReleases struct {
	Lease string
	Reply chan<- ReleasesReply
}

// OutboxWake tells the outbox that rows were committed for Lease ("" = rescan all).
type OutboxWake struct {
	Lease string
}

// LeaseGone tells the network reclaimer and the network pool a lease closed:
// its network may be reclaimable (or returned to the pool) soon.
type LeaseGone struct {
	Lease string
}

// Restore asks the registry to restore a retained lease's data into a new lease.
// A nil error means 202.
type Restore struct {
	Req    RestoreRequest
	Reply  chan<- error
	Ticket *Ticket // taken at the restore's admission commit
}

// RetentionsReply answers ListRetentions.
type RetentionsReply struct {
	Retentions []Retention
	Continue   string
}

// ListRetentions lists retention records sorted by lease UUID, strictly after
// Continue, at most Limit (0 = all).
type ListRetentions struct {
	Limit    int
	Continue string
	Reply    chan<- RetentionsReply
}

// ClaimNetwork asks the network pool for the lease's warm network: the one
// already bound to it, else (Bind) a free one, bound in the pool's journal
// before the reply. An empty NetworkClaim: none to give. With Made, the lease
// found the pool empty and created a pool network itself: the pool binds that
// one (so it comes back to the pool when the lease closes, instead of being
// removed), unless the lease holds a network already or another lease got it.
type ClaimNetwork struct {
	Lease string
	Bind  bool
	// Single: the lease's release runs one container. A first claim of such a
	// lease binds it to Docker's isolated default bridge while the pool says
	// the daemon isolates it and it has room (NetworkClaim.Bridged).
	Single   bool
	Made     string // ID of a pool network the lease just created for itself
	MadeName string
	Reply    chan<- NetworkClaim
}

// NetworkClaim is the pool's answer: the bound network, or empty.
type NetworkClaim struct {
	ID   string
	Name string
	// Bridged: the lease is bound to the default bridge (ID is its ID, Name
	// "bridge"), not to a pool network: a single-container release runs there.
	Bridged bool
	Err     error // the binding could not be journaled
}

// DropNetwork tells the pool that the network bound to Lease is unusable (gone,
// or no longer ours): the binding is forgotten and the network never handed out
// again. An empty ID: the lease's first attempt gave up waiting for its claim
// and never learned the network, which is free again.
type DropNetwork struct {
	Lease string
	ID    string
}

// GetCleanup asks the reconciler what Docker still holds of a lease, now
// (GET /cleanup/{lease}).
type GetCleanup struct {
	Lease string
	Reply chan<- CleanupReply
}

// CleanupReply answers GetCleanup.
type CleanupReply struct {
	Observation CleanupObservation
	Err         error
}

// Cleanup observation states.
const (
	CleanupNotClosed     = "not_closed"     // the lease is live: its objects are its own
	CleanupObservedClear = "observed_clear" // a complete observation found nothing of the lease
	CleanupPending       = "pending"        // closed, and Docker still holds some of it (removal under way or held)
	CleanupUnknown       = "unknown"        // Docker or the registry could not be read: nothing is claimed
)

// CleanupObservation is GET /cleanup/{lease}: one fresh observation of what
// Docker holds of the lease. It is evidence, not a removal authority; volumes,
// images and host data are out of its scope (retention records cover volumes).
type CleanupObservation struct {
	LeaseUUID  string    `json:"lease_uuid"`
	Scope      string    `json:"scope"` // "containers,networks"
	State      string    `json:"state"`
	ObservedAt time.Time `json:"observed_at"`
	// Complete: every read succeeded, so remaining and unattributed are whole.
	Complete bool `json:"complete"`
	// Remaining names this installation's containers and lease networks still there.
	Remaining []string `json:"remaining"`
	// Unattributed counts containers labelled with the lease that are not this
	// installation's (another installation's, or fred v0.13's not adopted): never touched.
	Unattributed int    `json:"unattributed"`
	Error        string `json:"error,omitempty"` // a fixed code: docker_unavailable, registry_unavailable
}
