// Package config loads and validates berthd's configuration.
//
// Layers, later wins: the embedded defaults.yaml, then the YAML file given with
// -config (optional), then BERTH_* environment variables. defaults.yaml sets
// every key (tenant_quota, optional, is shown commented out).
//
// Replacement, not merge (ENG-238): a layer that sets sku_profiles, sku_mapping
// or a list (allowed_registries, tls_client_allowed_names,
// ingress.custom_domain_middlewares, ingress.custom_domain_dns_resolvers)
// replaces the value below it whole. An operator who lists one SKU profile gets
// exactly that one, never that one plus the starter profiles. Other sections
// (debug, ingress, tenant_quota) merge field by field, and a section left empty
// (every line below it commented out, a YAML null) changes nothing.
//
// production_mode takes some keys only from an operator layer (the file or the
// environment), never from defaults.yaml: host_address, which must also not be
// a loopback address, and sku_profiles (the seed's DefaultConfig() seeds none;
// the starter profiles are for development). Left unset there, listen_addr,
// host_bind_ip and volume_data_path take the seed's defaults (":9001",
// "0.0.0.0", none), and a loopback listen_addr or host_bind_ip is refused.
// Outside production_mode an unset volume_data_path is <data_dir>/volumes.
//
// Every key of the seed's configuration reference is recognised, so a Fred
// docker-backend.yaml loads. A key for a feature berthd does not have yet is
// accepted at the value that means "off" and refused otherwise with a message
// naming the feature (retain_on_close, volume_data_path, ingress.enabled). Fred's
// callback_db_path, releases_db_path and retention_db_path are kept but unused:
// berth keeps all of that in <data_dir>/state.db, and a non-default path is
// listed in Config.Warnings.
//
// Environment: a variable BERTH_<KEY>=<value> sets <key>. The prefix is stripped,
// the rest lowercased, and "__" separates nesting levels:
//
//	BERTH_LISTEN_ADDR=0.0.0.0:9001           listen_addr
//	BERTH_DEBUG__CHAOS=true                  debug.chaos
//	BERTH_TENANT_QUOTA__MAX_CPU_CORES=4      tenant_quota.max_cpu_cores
//	BERTH_SKU_PROFILES__SMALL__CPU_CORES=1   sku_profiles.small.cpu_cores (replaces all profiles)
//	BERTH_ALLOWED_REGISTRIES=ghcr.io,127.0.0.1:5000
//
// List keys are comma-separated; entries are trimmed and empty entries dropped,
// so an empty value sets an empty list. Values are parsed like YAML scalars of
// the key's type (true/false, numbers, Go durations). BERTH_* variables that name
// no key are not errors (other tools share the prefix) but are listed in
// Config.Warnings for main to log. Unknown keys in the YAML file are errors: a
// typo must not silently fall back to a default.
//
// Aliases, so a Fred host's own environment runs berthd: DOCKER_BACKEND_<KEY> is
// read as BERTH_<KEY> (DOCKER_BACKEND_ADDR as BERTH_LISTEN_ADDR) and the Docker
// CLI's DOCKER_HOST as BERTH_DOCKER_HOST, each with a notice in Config.Warnings.
// A BERTH_* variable wins over its alias, and DOCKER_BACKEND_DOCKER_HOST over
// DOCKER_HOST (the loser is noticed as ignored).
//
// Load reports every problem it finds at once as a *Problems; main prints them and
// exits 2.
package config

import (
	"encoding/json"
	"time"
)

// SKUProfile is the resources one instance of a SKU gets.
type SKUProfile struct {
	CPUCores float64 `key:"cpu_cores"`
	MemoryMB int64   `key:"memory_mb"`
	DiskMB   int64   `key:"disk_mb"` // durable disk budget; 0 is a diskless (ephemeral) profile
}

// TenantQuota caps what one tenant may hold across all its leases. A zero field
// is unlimited for that dimension; Set tells whether tenant_quota was configured
// at all.
type TenantQuota struct {
	MaxCPUCores float64 `key:"max_cpu_cores"`
	MaxMemoryMB int64   `key:"max_memory_mb"`
	MaxDiskMB   int64   `key:"max_disk_mb"`
	Set         bool
}

// Debug holds the debug.* keys.
type Debug struct {
	// Chaos enables POST /debug/chaos/crash on the debug listener; Load requires Token with it.
	Chaos bool `key:"chaos"`
	// Token is the debug listener's bearer token ("Authorization: Bearer <token>");
	// "" is none, a set one is at least MinDebugTokenBytes long.
	Token Secret `key:"token"`
}

// Ingress holds the ingress.* keys (Traefik routing); ingress.go validates them.
type Ingress struct {
	Enabled                      bool     `key:"enabled"`
	WildcardDomain               string   `key:"wildcard_domain"`
	Entrypoint                   string   `key:"entrypoint"`
	CustomDomainCertResolver     string   `key:"custom_domain_cert_resolver"`
	CustomDomainMiddlewares      []string `key:"custom_domain_middlewares"`
	CustomDomainDNSResolvers     []string `key:"custom_domain_dns_resolvers"` // host:port
	CustomDomainDNSQuorum        int      `key:"custom_domain_dns_quorum"`    // 0 is a majority
	CustomDomainDNSCheckDisabled bool     `key:"custom_domain_dns_check_disabled"`
}

// Secret is a string that does not print itself: fmt, encoding/json and
// encoding/text see "<redacted>" (or "<unset>"), so a Config can be logged by
// accident without leaking keys. Use string(s) or []byte(s) for the value.
type Secret string

// String implements fmt.Stringer.
func (s Secret) String() string {
	if s == "" {
		return unsetText
	}
	return redactedText
}

// GoString implements fmt.GoStringer (%#v).
func (s Secret) GoString() string { return s.String() }

// MarshalText implements encoding.TextMarshaler.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// MarshalJSON implements json.Marshaler.
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

const (
	redactedText = "<redacted>"
	unsetText    = "<unset>"
)

// Config is berthd's validated configuration. A field's key tag is its YAML key
// (under its section's); the tags are the schema, what decode reads and what
// Redacted shows.
type Config struct {
	File string // the YAML file loaded ("" when only defaults and env were used)

	Name            string `key:"name"`              // backend name
	ListenAddr      string `key:"listen_addr"`       // API listener, host:port
	DebugListenAddr string `key:"debug_listen_addr"` // debug/pprof/chaos listener, host:port
	HostAddress     string `key:"host_address"`      // external IP or hostname reported in LeaseInfo
	HostBindIP      string `key:"host_bind_ip"`      // IP tenant ports are published on
	DockerHost      string `key:"docker_host"`       // Docker Engine URL
	LogLevel        string `key:"log_level"`         // debug, info, warn or error
	ProductionMode  bool   `key:"production_mode"`
	// DataDir holds state.db, diagnostics.db, daemon.lock, the storage identity
	// marker and the generated callback-secret.
	DataDir        string `key:"data_dir"`
	MaxStoreSizeMB int64  `key:"max_store_size_mb"` // size ceiling of state.db and diagnostics.db
	// MaxRequestBodySize caps request bodies, in bytes; a non-positive setting is
	// replaced by DefaultMaxRequestBodySize.
	MaxRequestBodySize int64 `key:"max_request_body_size"`

	TLSCertFile           string   `key:"tls_cert_file"`
	TLSKeyFile            string   `key:"tls_key_file"`
	TLSClientCAFile       string   `key:"tls_client_ca_file"`       // enables mTLS
	TLSClientAllowedNames []string `key:"tls_client_allowed_names"` // pinned client CN / DNS SANs

	TotalCPUCores float64 `key:"total_cpu_cores"`
	TotalMemoryMB int64   `key:"total_memory_mb"`
	TotalDiskMB   int64   `key:"total_disk_mb"`

	SKUMapping        map[string]string     `key:"sku_mapping"`  // on-chain SKU id → profile name
	SKUProfiles       map[string]SKUProfile `key:"sku_profiles"` // profile name → resources
	TenantQuota       TenantQuota           `key:"tenant_quota"`
	AllowedRegistries []string              `key:"allowed_registries"`

	CallbackSecret             Secret `key:"callback_secret"`      // HMAC key ("" → see CallbackSecret())
	CallbackSecretNext         Secret `key:"callback_secret_next"` // verify-only rotation key
	CallbackInsecureSkipVerify bool   `key:"callback_insecure_skip_verify"`

	// Fred's callback, releases and retention files are one state.db in berth:
	// CallbackDBPath, ReleasesDBPath and RetentionDBPath are kept but never opened
	// (a value other than Fred's default is warned about).
	CallbackDBPath string `key:"callback_db_path"`
	// CallbackMaxAge (positive) bounds how long a coalescible lifecycle observation
	// may wait in the outbox. Exact operation and maintenance completions never
	// age out, whatever this says.
	CallbackMaxAge time.Duration `key:"callback_max_age"`

	// DiagnosticsDBPath is the recreatable failure-diagnostics store. Load resolves
	// a relative setting under data_dir, so this is the path to open; it never
	// equals state.db or another file berth keeps in data_dir.
	DiagnosticsDBPath string        `key:"diagnostics_db_path"`
	DiagnosticsMaxAge time.Duration `key:"diagnostics_max_age"` // age at which diagnostics entries are removed

	ReleasesDBPath string `key:"releases_db_path"`
	// ReleasesMaxAge (positive) is the age at which disposable release-history
	// entries expire (the maintenance capability compacts by it).
	ReleasesMaxAge time.Duration `key:"releases_max_age"`

	// RetainOnClose soft-deletes a closed lease's managed volumes for a later
	// restore; it requires VolumeDataPath.
	RetainOnClose   bool   `key:"retain_on_close"`
	RetentionDBPath string `key:"retention_db_path"`
	// RetentionMaxAge (≥ 0) is how long retained volumes are kept and restorable;
	// 0 keeps them until evicted by a cap.
	RetentionMaxAge time.Duration `key:"retention_max_age"`
	// RetentionReapInterval (≥ 0) is the retention sweep cadence. Load replaces 0
	// by RetentionMaxAge, or by DefaultRetentionReapInterval when that is 0 too, so
	// it is always positive.
	RetentionReapInterval time.Duration `key:"retention_reap_interval"`
	// MaxRetainedLeasesPerTenant (≥ 0) caps the retained leases of one tenant,
	// evicting its oldest; 0 is no cap.
	MaxRetainedLeasesPerTenant int `key:"max_retained_leases_per_tenant"`
	// RetentionOrphanConfirmations (≥ 0) is how many consecutive sweeps must find a
	// record's volumes all missing before the record is pruned; 0 disables orphan
	// pruning.
	RetentionOrphanConfirmations int `key:"retention_orphan_confirmations"`
	// MaxRetainedDiskMB (≥ 0) caps the retained footprint across tenants; 0 is no
	// cap. When set it is ≤ total_disk_mb and ≥ the largest stateful SKU's disk_mb.
	MaxRetainedDiskMB int64 `key:"max_retained_disk_mb"`

	ImagePullTimeout time.Duration `key:"image_pull_timeout"`
	// ImageStoreBudgetMB (> 0) bounds the images this installation pulled: above
	// it the image collector removes those no pin needs and no container uses,
	// oldest first. Berth's own key.
	ImageStoreBudgetMB int64 `key:"image_store_budget_mb"`
	// ImageStoreMinFreeMB (≥ 0) is the free space on Docker's data root below
	// which the collector removes them as well; 0 is no floor. Berth's own key.
	ImageStoreMinFreeMB int64 `key:"image_store_min_free_mb"`
	// ImageGCInterval (> 0) is the image collector's cadence. Berth's own key.
	ImageGCInterval time.Duration `key:"image_gc_interval"`
	// StorageAttestationTimeout (≥ 0) is the startup budget for proving the
	// managed-volume storage (volumes.Open's btrfs quota check: a root not proven
	// within it refuses the start); Load replaces 0 by DefaultStorageAttestationTimeout.
	StorageAttestationTimeout time.Duration `key:"storage_attestation_timeout"`
	ContainerCreateTimeout    time.Duration `key:"container_create_timeout"`
	ContainerStartTimeout     time.Duration `key:"container_start_timeout"`
	ProvisionTimeout          time.Duration `key:"provision_timeout"`
	ReconcileInterval         time.Duration `key:"reconcile_interval"`
	StartupVerifyDuration     time.Duration `key:"startup_verify_duration"` // 0 → 5s
	ContainerStopTimeout      time.Duration `key:"container_stop_timeout"`  // 0 → 30s

	NetworkIsolation        bool  `key:"network_isolation"` // must be true
	ContainerReadonlyRootfs bool  `key:"container_readonly_rootfs"`
	ContainerPidsLimit      int64 `key:"container_pids_limit"`
	ContainerTmpfsSizeMB    int64 `key:"container_tmpfs_size_mb"`
	// RuntimeRefreshMaxConcurrency (0–64) is how many leases one operator-started
	// runtime refresh (POST /runtime_refresh, actors/refresh) recreates at once;
	// 0 disables the endpoint.
	RuntimeRefreshMaxConcurrency int `key:"runtime_refresh_max_concurrency"`
	// DockerMaxInFlight (0 = unlimited, the default) bounds the Engine API requests
	// berthd has in flight at once (streams, pulls, registry look-ups and stops
	// aside). Measured, a bound only slows a burst of provisions (defaults.yaml
	// says by how much); it is there for hosts whose dockerd serves others too.
	DockerMaxInFlight int `key:"docker_max_in_flight"`
	// NetworkPoolSize (0 = off) is how many pre-created lease networks the network
	// pool keeps free, so a provision does not wait for a network create
	// (actors/netpool). Each takes one of Docker's address-pool networks while it
	// waits.
	NetworkPoolSize int `key:"network_pool_size"`
	// SingleContainerNetwork is where a lease whose release runs one container
	// runs: "default_bridge" (the default) on Docker's default bridge when the
	// daemon isolates it there ("icc": false), sparing a network per lease;
	// else, or with "own", on its own network like a stack.
	SingleContainerNetwork string `key:"single_container_network"`
	// DockerMaxStartsInFlight (default 8, 0 = unlimited) bounds the container
	// starts berthd has in flight, first come first served: dockerd given a whole
	// burst finishes every start late.
	DockerMaxStartsInFlight int `key:"docker_max_starts_in_flight"`

	// VolumeDataPath is the host directory for managed volumes (one per stateful
	// instance, with a kernel quota on btrfs); a stateful SKU requires it.
	VolumeDataPath string `key:"volume_data_path"`
	// VolumeMountPath is the active mount containing VolumeDataPath; it requires
	// VolumeDataPath.
	VolumeMountPath string `key:"volume_mount_path"`
	// VolumeFilesystem is "" (auto-detect from VolumeDataPath), btrfs, or dir
	// (development: no quota; refused in production). xfs and zfs are refused:
	// this build has no driver for them.
	VolumeFilesystem string `key:"volume_filesystem"`
	// MinAvgFileBytes (positive) is the smallest average file size before a
	// volume's inode ceiling binds; it also caps the entry count when writable
	// paths are seeded from an image.
	MinAvgFileBytes int64 `key:"min_avg_file_bytes"`

	Ingress Ingress `key:"ingress"`
	Debug   Debug   `key:"debug"`

	// Warnings are non-fatal findings ("<key>: <what>") main should log at startup:
	// ignored BERTH_* variables, settings replaced by their default, and the like.
	Warnings []string
}

// Defaults the seed assigns to zero or non-positive settings.
const (
	DefaultMaxRequestBodySize        int64         = 2 << 20
	DefaultStartupVerifyDuration     time.Duration = 5 * time.Second
	DefaultContainerStopTimeout      time.Duration = 30 * time.Second
	DefaultStorageAttestationTimeout time.Duration = 30 * time.Second
	DefaultRetentionReapInterval     time.Duration = time.Hour
)

// Fred's default file names for the stores berth keeps in StateDBFile.
const (
	DefaultCallbackDBPath  = "callbacks.db"
	DefaultReleasesDBPath  = "releases.db"
	DefaultRetentionDBPath = "retention.db"
)

// StateDBFile is berth's authoritative store inside data_dir.
const StateDBFile = "state.db"

// MinDebugTokenBytes is the shortest accepted debug.token.
const MinDebugTokenBytes = 16
