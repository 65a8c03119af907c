// Package config loads and validates berthd's configuration.
//
// Layers, later wins: the embedded defaults.yaml, then the YAML file given with
// -config (optional), then BERTH_* environment variables.
//
// Replacement, not merge (ENG-238): a layer that sets sku_profiles, sku_mapping,
// allowed_registries or tls_client_allowed_names replaces the value below it
// whole. An operator who lists one SKU profile gets exactly that one, never that
// one plus the starter profiles. Other nested keys (debug, tenant_quota) merge
// field by field.
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
// List keys (allowed_registries, tls_client_allowed_names) are comma-separated;
// entries are trimmed and empty entries dropped, so an empty value sets an empty
// list. Values are parsed like YAML scalars of the key's type (true/false, numbers,
// Go durations). BERTH_* variables that name no key are not errors (other tools
// share the prefix) but are listed in Config.Warnings for main to log. Unknown keys
// in the YAML file are errors: a typo must not silently fall back to a default.
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
	CPUCores float64
	MemoryMB int64
	// DiskMB is the durable disk budget; 0 is a diskless (ephemeral) profile.
	DiskMB int64
}

// TenantQuota caps what one tenant may hold across all its leases. A zero field
// is unlimited for that dimension; Set tells whether tenant_quota was configured
// at all.
type TenantQuota struct {
	MaxCPUCores float64
	MaxMemoryMB int64
	MaxDiskMB   int64
	Set         bool
}

// Debug holds the debug.* keys.
type Debug struct {
	// Chaos enables POST /debug/chaos/crash on the debug listener.
	Chaos bool
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

// Config is berthd's validated configuration. Field comments name the YAML key.
type Config struct {
	// File is the YAML file that was loaded ("" when only defaults and env were used).
	File string

	Name            string // name: backend name
	ListenAddr      string // listen_addr: API listener, host:port
	DebugListenAddr string // debug_listen_addr: debug/pprof/chaos listener, host:port
	HostAddress     string // host_address: external IP or hostname reported in LeaseInfo
	HostBindIP      string // host_bind_ip: IP tenant ports are published on
	DockerHost      string // docker_host: Docker Engine URL
	LogLevel        string // log_level: debug, info, warn or error
	ProductionMode  bool   // production_mode
	// DataDir (data_dir) holds state.db, diagnostics.db, daemon.lock, the storage
	// identity marker and the generated callback-secret.
	DataDir string
	// MaxStoreSizeMB (max_store_size_mb) is the size ceiling of state.db and diagnostics.db.
	MaxStoreSizeMB int64
	// MaxRequestBodySize (max_request_body_size) caps request bodies, in bytes; a
	// non-positive setting is replaced by DefaultMaxRequestBodySize.
	MaxRequestBodySize int64

	TLSCertFile           string   // tls_cert_file
	TLSKeyFile            string   // tls_key_file
	TLSClientCAFile       string   // tls_client_ca_file: enables mTLS
	TLSClientAllowedNames []string // tls_client_allowed_names: pinned client CN / DNS SANs

	TotalCPUCores float64 // total_cpu_cores
	TotalMemoryMB int64   // total_memory_mb
	TotalDiskMB   int64   // total_disk_mb

	SKUMapping        map[string]string     // sku_mapping: on-chain SKU id → profile name
	SKUProfiles       map[string]SKUProfile // sku_profiles: profile name → resources
	TenantQuota       TenantQuota           // tenant_quota
	AllowedRegistries []string              // allowed_registries

	CallbackSecret             Secret // callback_secret: HMAC key ("" → see CallbackSecret())
	CallbackSecretNext         Secret // callback_secret_next: verify-only rotation key
	CallbackInsecureSkipVerify bool   // callback_insecure_skip_verify

	DiagnosticsMaxAge      time.Duration // diagnostics_max_age
	ImagePullTimeout       time.Duration // image_pull_timeout
	ContainerCreateTimeout time.Duration // container_create_timeout
	ContainerStartTimeout  time.Duration // container_start_timeout
	ProvisionTimeout       time.Duration // provision_timeout
	ReconcileInterval      time.Duration // reconcile_interval
	StartupVerifyDuration  time.Duration // startup_verify_duration (0 → 5s)
	ContainerStopTimeout   time.Duration // container_stop_timeout (0 → 30s)

	NetworkIsolation        bool  // network_isolation (must be true)
	ContainerReadonlyRootfs bool  // container_readonly_rootfs
	ContainerPidsLimit      int64 // container_pids_limit
	ContainerTmpfsSizeMB    int64 // container_tmpfs_size_mb

	Debug Debug // debug.*

	// Warnings are non-fatal findings ("<key>: <what>") main should log at startup:
	// ignored BERTH_* variables, settings replaced by their default, and the like.
	Warnings []string
}

// Defaults the seed assigns to zero or non-positive settings.
const (
	DefaultMaxRequestBodySize    int64         = 2 << 20
	DefaultStartupVerifyDuration time.Duration = 5 * time.Second
	DefaultContainerStopTimeout  time.Duration = 30 * time.Second
)
