package messages

import "time"

// Wire types of CONTRACT.md. Field names and JSON tags match providerd's client to
// the letter; actors build them and the facade serialises them unchanged.

// LeaseItem is one SKU line of a lease.
type LeaseItem struct {
	SKU          string `json:"sku"`
	Quantity     int    `json:"quantity"`
	ServiceName  string `json:"service_name,omitempty"`
	CustomDomain string `json:"custom_domain,omitempty"`
}

// ProvisionRequest is the body of POST /provision.
type ProvisionRequest struct {
	LeaseUUID            string      `json:"lease_uuid"`
	Tenant               string      `json:"tenant"`
	ProviderUUID         string      `json:"provider_uuid"`
	Items                []LeaseItem `json:"items"`
	CallbackURL          string      `json:"callback_url"`
	LifecycleCallbackURL string      `json:"lifecycle_callback_url,omitempty"`
	Payload              string      `json:"payload"`
	PayloadHash          string      `json:"payload_hash,omitempty"`
}

// DeprovisionRequest is the body of POST /deprovision.
type DeprovisionRequest struct {
	LeaseUUID string `json:"lease_uuid"`
}

// MaintenanceRequest is the body of POST /restart (Payload empty) and POST /update.
// MaintenanceID and MaintenanceAdmittedAt are optional: when providerd sends no
// maintenance_id, the facade derives one deterministically from the signed request.
type MaintenanceRequest struct {
	LeaseUUID             string `json:"lease_uuid"`
	CallbackURL           string `json:"callback_url,omitempty"`
	Payload               string `json:"payload,omitempty"`
	PayloadHash           string `json:"payload_hash,omitempty"`
	MaintenanceID         string `json:"maintenance_id,omitempty"`
	MaintenanceAdmittedAt string `json:"maintenance_admitted_at,omitempty"`
}

// RestoreRequest is the body of POST /restore.
type RestoreRequest struct {
	LeaseUUID            string      `json:"lease_uuid"`
	FromLeaseUUID        string      `json:"from_lease_uuid"`
	Tenant               string      `json:"tenant"`
	ProviderUUID         string      `json:"provider_uuid"`
	Items                []LeaseItem `json:"items"`
	CallbackURL          string      `json:"callback_url"`
	LifecycleCallbackURL string      `json:"lifecycle_callback_url,omitempty"`
}

// Retention is one entry of GET /retentions: a closed lease whose durable data is
// retained. Only lease_uuid is in CONTRACT.md; the rest is additive.
type Retention struct {
	LeaseUUID     string    `json:"lease_uuid"`
	Tenant        string    `json:"tenant,omitempty"`
	ProviderUUID  string    `json:"provider_uuid,omitempty"`
	Status        string    `json:"status"` // active | restoring | reaping
	RetainedAt    time.Time `json:"retained_at"`
	RetainedUntil time.Time `json:"retained_until"` // zero: kept until evicted
	DiskMB        int64     `json:"disk_mb"`        // the footprint the pool counts
	UsedBytes     int64     `json:"used_bytes"`
}

// Release is one entry of GET /releases/{lease}.
type Release struct {
	Version   int       `json:"version"`
	Image     string    `json:"image"` // always "stack"
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	Manifest  string    `json:"manifest"` // base64 of the release's manifest JSON
}

// Release statuses (CONTRACT.md).
const (
	ReleaseDeploying  = "deploying"
	ReleaseActive     = "active"
	ReleaseSuperseded = "superseded"
	ReleaseFailed     = "failed"
)

// Lease statuses (CONTRACT.md).
const (
	StatusProvisioning   = "provisioning"
	StatusReady          = "ready"
	StatusFailing        = "failing"
	StatusFailed         = "failed"
	StatusUnknown        = "unknown"
	StatusRestarting     = "restarting"
	StatusUpdating       = "updating"
	StatusDeprovisioning = "deprovisioning"
	StatusRetained       = "retained"
)

// Failure reasons (open, add-only).
const (
	ReasonContainerExited      = "ContainerExited"
	ReasonImagePullFailed      = "ImagePullFailed"
	ReasonHealthCheckFailed    = "HealthCheckFailed"
	ReasonContainerStartFailed = "ContainerStartFailed"
	ReasonInternal             = "Internal"
	ReasonRestartFailed        = "RestartFailed"
	ReasonUpdateFailed         = "UpdateFailed"
	ReasonRestoreFailed        = "RestoreFailed"
	ReasonCleanupFailed        = "CleanupFailed"
	ReasonUnknown              = "Unknown"
)

// Callback statuses.
const (
	CallbackSuccess       = "success"
	CallbackFailed        = "failed"
	CallbackDeprovisioned = "deprovisioned"
)

// Callback is the body berthd POSTs to callback_url / lifecycle_callback_url.
type Callback struct {
	LeaseUUID             string `json:"lease_uuid"`
	Status                string `json:"status"`
	Error                 string `json:"error,omitempty"`
	Backend               string `json:"backend,omitempty"`
	Retained              bool   `json:"retained,omitempty"`
	BackendStorageID      string `json:"backend_storage_id"`
	MaintenanceID         string `json:"maintenance_id,omitempty"`
	MaintenanceAdmittedAt string `json:"maintenance_admitted_at,omitempty"`
}

// TerminalBudget is the verdict of the seed's terminal failure budget.
type TerminalBudget struct {
	Verdict             string `json:"verdict"` // "retry" | "exhausted"
	ConsecutiveFailures int    `json:"consecutive_failures"`
}

// ProvisionInfo is one entry of GET /provisions and the body of GET /provisions/{lease}.
type ProvisionInfo struct {
	LeaseUUID      string            `json:"lease_uuid"`
	ProviderUUID   string            `json:"provider_uuid"`
	Status         string            `json:"status"`
	CreatedAt      time.Time         `json:"created_at"`
	FailCount      int               `json:"fail_count"`
	Reason         string            `json:"reason,omitempty"`
	Message        string            `json:"message,omitempty"`
	RetainedUntil  time.Time         `json:"retained_until"`
	Tenant         string            `json:"tenant,omitempty"`
	Quantity       int               `json:"quantity"`
	Items          []LeaseItem       `json:"items,omitempty"`
	ServiceImages  map[string]string `json:"service_images,omitempty"`
	TerminalBudget *TerminalBudget   `json:"terminal_budget,omitempty"`
	// LifecycleGeneration is the generation a failure (Reason) was observed in —
	// the same value the diagnostics fallback reads from its capture.
	LifecycleGeneration uint64 `json:"lifecycle_generation,omitempty"`
	// FQDNs (ingress on) name each instance of a service Traefik routes to,
	// service → one name per instance index: what each container's fred.fqdn
	// says. CustomDomains are the custom domains whose routers are deployed,
	// service → domain (a domain whose DNS gate is still closed is absent).
	FQDNs         map[string][]string `json:"fqdns,omitempty"`
	CustomDomains map[string]string   `json:"custom_domains,omitempty"`
}

// PortBinding is one published port; HostPort is a string on the wire.
type PortBinding struct {
	HostIP   string `json:"host_ip"`
	HostPort string `json:"host_port"`
}

// Instance is one container of a lease in LeaseInfo.
type Instance struct {
	InstanceIndex int                    `json:"instance_index"`
	ContainerID   string                 `json:"container_id"`
	Image         string                 `json:"image"`
	Status        string                 `json:"status"`
	FQDN          string                 `json:"fqdn,omitempty"`
	Ports         map[string]PortBinding `json:"ports"`
}

// ServiceInfo groups a service's instances in LeaseInfo.
type ServiceInfo struct {
	Instances []Instance `json:"instances"`
	FQDN      string     `json:"fqdn,omitempty"`
}

// LeaseInfo is the body of GET /info/{lease}.
type LeaseInfo struct {
	Host      string                 `json:"host"`
	Instances []Instance             `json:"instances"`
	Services  map[string]ServiceInfo `json:"services"`
}

// Stats is the body of GET /stats.
type Stats struct {
	TotalCPUCores     float64 `json:"total_cpu_cores"`
	TotalMemoryMB     int64   `json:"total_memory_mb"`
	TotalDiskMB       int64   `json:"total_disk_mb"`
	AllocatedCPUCores float64 `json:"allocated_cpu_cores"`
	AllocatedMemoryMB int64   `json:"allocated_memory_mb"`
	AllocatedDiskMB   int64   `json:"allocated_disk_mb"`
	AvailableCPUCores float64 `json:"available_cpu_cores"`
	AvailableMemoryMB int64   `json:"available_memory_mb"`
	AvailableDiskMB   int64   `json:"available_disk_mb"`
	ActiveContainers  int     `json:"active_containers"`
	// RetainedDiskMB is the disk retained data holds (counted in allocated_disk_mb).
	RetainedDiskMB int64 `json:"retained_disk_mb"`
	// Lingering* is what containers of closed leases still running hold (counted in
	// allocated_*) until the reconciler sees them gone.
	LingeringCPUCores float64 `json:"lingering_cpu_cores"`
	LingeringMemoryMB int64   `json:"lingering_memory_mb"`
	LingeringDiskMB   int64   `json:"lingering_disk_mb"`
	// DiskQuotaEnforced is false when tenant volumes live on the dir driver: quotas
	// are accounting only, the kernel does not enforce them.
	DiskQuotaEnforced bool `json:"disk_quota_enforced"`
}

// ErrorBody is every error response: {"error": ..., "validation_code"?, "code"?}.
type ErrorBody struct {
	Error          string `json:"error"`
	ValidationCode string `json:"validation_code,omitempty"`
	Code           string `json:"code,omitempty"`
}
