package config

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// minSecretBytes is the shortest accepted HMAC key (seed: "min 32 bytes").
const minSecretBytes = 32

var logLevels = map[string]bool{"debug": true, "info": true, "warn": true, "error": true}

// given is what the rules need to know about where values came from.
type given struct {
	quota    map[string]bool // the keys some layer set (decoder.given)
	operator map[string]bool // top-level keys the file or the environment set, not the embedded defaults
}

// validate applies every rule to c, recording problems in ps and non-fatal
// findings in c.Warnings. It also fills the documented zero-value defaults.
func validate(c *Config, ps *problemSet, g given) {
	fillUnset(c, g)
	validateCore(c, ps)
	validateHostAddresses(c, ps, g)
	validateTLS(c, ps)
	validateResources(c, ps)
	validateSKUs(c, ps, g)
	validateQuota(c, ps, g.quota)
	validateRegistries(c, ps)
	validateCallbacks(c, ps)
	validateStores(c, ps)
	validateRetention(c, ps)
	validateImageStore(c, ps)
	validateTimeouts(c, ps)
	validateHardening(c, ps)
	validateVolumes(c, ps)
	validateIngress(c, ps)
	validateDebug(c, ps)
}

// Seed defaults (its DefaultConfig()) of the keys whose embedded default is a laptop's.
const (
	seedListenAddr = ":9001"
	seedHostBindIP = "0.0.0.0"
)

// seedAllowedRegistries: the embedded list adds the laptop's local registry.
var seedAllowedRegistries = []string{"docker.io", "ghcr.io"}

// fillUnset gives the keys no operator layer set the default of their mode. In
// production_mode that is the seed's: the API on every interface, ports
// published on every address, images from docker.io and ghcr.io, and no volume
// root (only diskless SKUs load without one), never the embedded loopback a
// laptop needs. Outside it the volume
// root is <data_dir>/volumes, so it goes with its data dir: one in the working
// directory outlived a reset data dir and was then refused as another
// installation's.
func fillUnset(c *Config, g given) {
	if !g.operator["volume_data_path"] {
		c.VolumeDataPath = ""
		if !c.ProductionMode && strings.TrimSpace(c.DataDir) != "" {
			c.VolumeDataPath = filepath.Join(c.DataDir, "volumes")
		}
	}
	if c.ProductionMode && !g.operator["listen_addr"] {
		c.ListenAddr = seedListenAddr
	}
	if c.ProductionMode && !g.operator["host_bind_ip"] {
		c.HostBindIP = seedHostBindIP
	}
	if c.ProductionMode && !g.operator["allowed_registries"] {
		c.AllowedRegistries = slices.Clone(seedAllowedRegistries) // never a registry on the host's loopback
	}
}

func validateCore(c *Config, ps *problemSet) {
	if strings.TrimSpace(c.Name) == "" {
		ps.add("name", "must not be empty")
	}
	if problem := listenAddrProblem(c.ListenAddr); problem != "" {
		ps.add("listen_addr", "%s", problem)
	} else if c.ProductionMode && isLoopbackListen(c.ListenAddr) {
		ps.add("listen_addr", "%q is loopback: in production_mode providerd reaches the API over the network; "+
			"listen on an address it reaches (%q is every interface)", c.ListenAddr, seedListenAddr)
	}
	if problem := listenAddrProblem(c.DebugListenAddr); problem != "" {
		ps.add("debug_listen_addr", "%s", problem)
	} else if c.DebugListenAddr == c.ListenAddr && !strings.HasSuffix(c.ListenAddr, ":0") {
		ps.add("debug_listen_addr", "must differ from listen_addr")
	} else if !isLoopbackListen(c.DebugListenAddr) {
		msg := "debug_listen_addr: " + c.DebugListenAddr +
			" is not loopback; the debug endpoints (pprof, actor tree, chaos) are reachable from the network"
		if c.Debug.Token == "" {
			msg += " without authentication; setting debug.token is advised"
		}
		c.Warnings = append(c.Warnings, msg)
	}

	switch {
	case strings.TrimSpace(c.DockerHost) == "":
		ps.add("docker_host", "is required")
	case c.ProductionMode && !isCanonicalUnixSocketURL(c.DockerHost):
		ps.add("docker_host", "%q: production_mode requires a canonical absolute local unix socket URL such as unix:///var/run/docker.sock", c.DockerHost)
	case !c.ProductionMode:
		if problem := dockerHostProblem(c.DockerHost); problem != "" {
			ps.add("docker_host", "%s", problem)
		}
	}

	if !logLevels[c.LogLevel] {
		ps.add("log_level", "%q is not one of debug, info, warn, error", c.LogLevel)
	}
	if strings.TrimSpace(c.DataDir) == "" {
		ps.add("data_dir", "must not be empty")
	}
	ps.positive("max_store_size_mb", c.MaxStoreSizeMB)
	if c.MaxRequestBodySize <= 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("max_request_body_size: %d is not positive; using the default %d",
			c.MaxRequestBodySize, DefaultMaxRequestBodySize))
		c.MaxRequestBodySize = DefaultMaxRequestBodySize
	}
}

// validateHostAddresses checks where tenants are told to go (host_address) and
// where their ports are published (host_bind_ip).
func validateHostAddresses(c *Config, ps *problemSet, g given) {
	switch {
	case c.ProductionMode && !g.operator["host_address"]:
		// The embedded 127.0.0.1 is for a laptop; it must never be what tenants are told.
		ps.add("host_address", "is required in production_mode: set the external IP or hostname tenants reach "+
			"their ports on in the config file or BERTH_HOST_ADDRESS (the embedded default never applies there)")
	case strings.TrimSpace(c.HostAddress) == "":
		ps.add("host_address", "is required (the external IP or hostname tenants reach their ports on)")
	case !isIPOrHostname(c.HostAddress):
		ps.add("host_address", "%q is not a valid IP address or hostname (no scheme, port or path)", c.HostAddress)
	case c.ProductionMode && isLoopbackHost(c.HostAddress):
		ps.add("host_address", "%q is a loopback address; production_mode needs the external IP or hostname tenants reach", c.HostAddress)
	case c.ProductionMode && isUnspecifiedIP(c.HostAddress):
		ps.add("host_address", "%q is not an address tenants can reach; production_mode needs the external IP or hostname", c.HostAddress)
	}
	switch ip, err := netip.ParseAddr(c.HostBindIP); {
	case err != nil || ip.Zone() != "":
		ps.add("host_bind_ip", "%q is not a valid IP address", c.HostBindIP)
	case c.ProductionMode && ip.Unmap().IsLoopback():
		ps.add("host_bind_ip", "%q is loopback: in production_mode tenants' published ports would be unreachable from "+
			"outside this host while their provisions report success; use %s or the address tenants reach", c.HostBindIP, seedHostBindIP)
	}
}

func validateTLS(c *Config, ps *problemSet) {
	cert, key := c.TLSCertFile != "", c.TLSKeyFile != ""
	if cert && !key {
		ps.add("tls_key_file", "is required when tls_cert_file is set")
	}
	if key && !cert {
		ps.add("tls_cert_file", "is required when tls_key_file is set")
	}
	if c.TLSClientCAFile != "" && !(cert && key) {
		ps.add("tls_client_ca_file", "requires tls_cert_file and tls_key_file (mTLS needs a TLS listener)")
	}
	if len(c.TLSClientAllowedNames) > 0 && c.TLSClientCAFile == "" {
		ps.add("tls_client_allowed_names", "requires tls_client_ca_file")
	}
	for i, name := range c.TLSClientAllowedNames {
		if strings.TrimSpace(name) == "" {
			ps.add("tls_client_allowed_names", "entry %d is empty", i)
		}
	}
}

func finitePositive(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) && f > 0 }

func validateResources(c *Config, ps *problemSet) {
	if !finitePositive(c.TotalCPUCores) {
		ps.add("total_cpu_cores", "must be finite and positive, got %v", c.TotalCPUCores)
	}
	ps.positive("total_memory_mb", c.TotalMemoryMB)
	ps.positive("total_disk_mb", c.TotalDiskMB)
}

func validateSKUs(c *Config, ps *problemSet, g given) {
	switch {
	case c.ProductionMode && !g.operator["sku_profiles"]:
		// The seed's DefaultConfig() deliberately seeds none: a production host
		// sells exactly the profiles its operator declared.
		ps.add("sku_profiles", "at least one SKU profile is required in production_mode, from the config file or "+
			"BERTH_SKU_PROFILES__* (the embedded starter profiles never apply there)")
	case len(c.SKUProfiles) == 0:
		ps.add("sku_profiles", "at least one SKU profile is required")
	}
	for _, name := range sortedKeys(c.SKUProfiles) {
		p, key := c.SKUProfiles[name], "sku_profiles."+name
		if strings.TrimSpace(name) == "" {
			ps.add(key, "profile name must not be empty")
		}
		if !finitePositive(p.CPUCores) {
			ps.add(key+".cpu_cores", "must be finite and positive, got %v", p.CPUCores)
		}
		ps.positive(key+".memory_mb", p.MemoryMB)
		if p.DiskMB < 0 {
			ps.add(key+".disk_mb", "must not be negative, got %d", p.DiskMB)
		}
	}
	for _, sku := range sortedKeys(c.SKUMapping) {
		profile := c.SKUMapping[sku]
		if _, ok := c.SKUProfiles[profile]; !ok {
			ps.add("sku_mapping."+sku, "names unknown profile %q", profile)
		}
	}
}

// validateQuota checks the tenant_quota dimensions that were given (set holds
// their keys): each must be positive and finite, and within the pool total. A
// total that is itself invalid is not compared against, so one bad total does
// not produce a second, misleading message here.
func validateQuota(c *Config, ps *problemSet, set map[string]bool) {
	q := c.TenantQuota
	if !q.Set {
		return
	}
	const cpuKey = "tenant_quota.max_cpu_cores"
	if set[cpuKey] {
		if !finitePositive(q.MaxCPUCores) {
			ps.add(cpuKey, "must be finite and positive, got %v", q.MaxCPUCores)
		} else if finitePositive(c.TotalCPUCores) && q.MaxCPUCores > c.TotalCPUCores {
			ps.add(cpuKey, "%v exceeds total_cpu_cores (%v)", q.MaxCPUCores, c.TotalCPUCores)
		}
	}
	checkInt := func(key string, v, total int64, totalKey string) {
		switch {
		case !set[key]:
		case v <= 0:
			ps.add(key, "must be positive, got %d", v)
		case total > 0 && v > total:
			ps.add(key, "%d exceeds %s (%d)", v, totalKey, total)
		}
	}
	checkInt("tenant_quota.max_memory_mb", q.MaxMemoryMB, c.TotalMemoryMB, "total_memory_mb")
	checkInt("tenant_quota.max_disk_mb", q.MaxDiskMB, c.TotalDiskMB, "total_disk_mb")
}

func validateRegistries(c *Config, ps *problemSet) {
	for i, r := range c.AllowedRegistries {
		switch {
		case strings.TrimSpace(r) == "":
			ps.add("allowed_registries", "entry %d is empty", i)
		case strings.Contains(r, "://") || strings.ContainsAny(r, "/ \t@"):
			ps.add("allowed_registries", "%q must be a registry host[:port] (no scheme, path or spaces)", r)
		}
	}
	if len(c.AllowedRegistries) == 0 {
		c.Warnings = append(c.Warnings, "allowed_registries: empty; every provision will be refused with image_not_allowed")
	}
}

func validateCallbacks(c *Config, ps *problemSet) {
	if c.CallbackSecret != "" && len(c.CallbackSecret) < minSecretBytes {
		ps.add("callback_secret", "must be at least %d bytes, got %d", minSecretBytes, len(c.CallbackSecret))
	}
	if c.ProductionMode && c.CallbackSecret == "" {
		ps.add("callback_secret", "is required in production_mode (at least %d bytes)", minSecretBytes)
	}
	if c.CallbackSecretNext != "" {
		if len(c.CallbackSecretNext) < minSecretBytes {
			ps.add("callback_secret_next", "must be at least %d bytes, got %d", minSecretBytes, len(c.CallbackSecretNext))
		} else if c.CallbackSecret != "" && hmacKeysEquivalent([]byte(c.CallbackSecret), []byte(c.CallbackSecretNext)) {
			ps.add("callback_secret_next", "must differ from callback_secret")
		}
	}
	if c.ProductionMode && c.CallbackInsecureSkipVerify {
		ps.add("callback_insecure_skip_verify", "is not allowed in production_mode")
	}
}

// Files berth keeps in data_dir besides state.db; diagnostics_db_path must name none of them.
var dataDirFiles = []string{StateDBFile, "storage-identity", "daemon.lock", CallbackSecretFile}

// validateStores warns about a non-default path of a Fred store berth keeps in
// state.db (an operator must not back up a file that never exists), and checks
// and resolves diagnostics_db_path.
func validateStores(c *Config, ps *problemSet) {
	statePath := filepath.Join(c.DataDir, StateDBFile)
	unused := []struct{ key, value, def, what string }{
		{"callback_db_path", c.CallbackDBPath, DefaultCallbackDBPath, "the callback outbox and operation state"},
		{"releases_db_path", c.ReleasesDBPath, DefaultReleasesDBPath, "release history"},
		{"retention_db_path", c.RetentionDBPath, DefaultRetentionDBPath, "retention records"},
	}
	for _, u := range unused {
		if filepath.Clean(u.value) != u.def {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: %q: berth keeps %s in %s; this path is not used",
				u.key, u.value, u.what, statePath))
		}
	}

	if strings.TrimSpace(c.DiagnosticsDBPath) == "" {
		ps.add("diagnostics_db_path", "must not be empty")
	} else if strings.TrimSpace(c.DataDir) != "" {
		resolved := c.DiagnosticsDBPath
		if !filepath.IsAbs(resolved) {
			resolved = filepath.Join(c.DataDir, resolved)
		}
		resolved = filepath.Clean(resolved)
		switch clash := dataDirClash(c.DataDir, resolved); {
		case clash == ".":
			ps.add("diagnostics_db_path", "%q names data_dir itself; it must name a file", c.DiagnosticsDBPath)
		case clash != "":
			ps.add("diagnostics_db_path", "%q is %s, which berth keeps in data_dir; diagnostics need a file of their own",
				c.DiagnosticsDBPath, filepath.Join(c.DataDir, clash))
		default:
			c.DiagnosticsDBPath = resolved
		}
	}
}

// dataDirClash returns which of berth's own data_dir files path is ("." for
// data_dir itself), or "". Paths are compared absolute, so "./var/berth/state.db"
// and "/…/var/berth/state.db" are the same file.
func dataDirClash(dataDir, path string) string {
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return filepath.Clean(p)
	}
	dir, target := abs(dataDir), abs(path)
	if target == dir {
		return "."
	}
	for _, name := range dataDirFiles {
		if target == filepath.Join(dir, name) {
			return name
		}
	}
	return ""
}

// validateRetention checks the Soft-delete & Retention keys as Fred does.
func validateRetention(c *Config, ps *problemSet) {
	if c.RetainOnClose && c.VolumeDataPath == "" {
		ps.add("retain_on_close", "requires volume_data_path: only managed volumes can be retained")
	}
	if c.RetentionMaxAge < 0 {
		ps.add("retention_max_age", "must not be negative, got %s (0 keeps retained volumes until a cap evicts them)", c.RetentionMaxAge)
	}
	switch {
	case c.RetentionReapInterval < 0:
		ps.add("retention_reap_interval", "must not be negative, got %s", c.RetentionReapInterval)
	case c.RetentionReapInterval == 0 && c.RetentionMaxAge > 0:
		c.RetentionReapInterval = c.RetentionMaxAge // the seed: 0 falls back to retention_max_age…
	case c.RetentionReapInterval == 0:
		c.RetentionReapInterval = DefaultRetentionReapInterval // …then to 1h
	}
	if c.MaxRetainedLeasesPerTenant < 0 {
		ps.add("max_retained_leases_per_tenant", "must not be negative, got %d (0 is no cap)", c.MaxRetainedLeasesPerTenant)
	}
	if c.RetentionOrphanConfirmations < 0 {
		ps.add("retention_orphan_confirmations", "must not be negative, got %d (0 disables orphan pruning)", c.RetentionOrphanConfirmations)
	}
	const capKey = "max_retained_disk_mb"
	switch {
	case c.MaxRetainedDiskMB < 0:
		ps.add(capKey, "must not be negative, got %d (0 is no cap)", c.MaxRetainedDiskMB)
	case c.MaxRetainedDiskMB == 0:
	case c.TotalDiskMB > 0 && c.MaxRetainedDiskMB > c.TotalDiskMB:
		ps.add(capKey, "%d exceeds total_disk_mb (%d)", c.MaxRetainedDiskMB, c.TotalDiskMB)
	default:
		if name, disk := largestStatefulSKU(c.SKUProfiles); c.MaxRetainedDiskMB < disk {
			ps.add(capKey, "%d is below the disk_mb of SKU profile %s (%d); a lease of that SKU could never be retained",
				c.MaxRetainedDiskMB, name, disk)
		}
	}
}

// maxImageStoreMB keeps the byte figures the collector works in (MB << 20)
// inside an int64: a petabyte.
const maxImageStoreMB = 1 << 30

// validateImageStore checks the image collector's keys.
func validateImageStore(c *Config, ps *problemSet) {
	switch {
	case c.ImageStoreBudgetMB <= 0:
		ps.add("image_store_budget_mb", "must be positive, got %d (the images of this installation need room)", c.ImageStoreBudgetMB)
	case c.ImageStoreBudgetMB > maxImageStoreMB:
		ps.add("image_store_budget_mb", "must be at most %d, got %d", maxImageStoreMB, c.ImageStoreBudgetMB)
	}
	switch {
	case c.ImageStoreMinFreeMB < 0:
		ps.add("image_store_min_free_mb", "must not be negative, got %d (0 is no floor)", c.ImageStoreMinFreeMB)
	case c.ImageStoreMinFreeMB > maxImageStoreMB:
		ps.add("image_store_min_free_mb", "must be at most %d, got %d", maxImageStoreMB, c.ImageStoreMinFreeMB)
	}
	if c.ImageGCInterval <= 0 {
		ps.add("image_gc_interval", "must be positive, got %s", c.ImageGCInterval)
	}
}

// largestStatefulSKU returns the profile with the largest disk_mb (the first
// name among equals), or "", 0 when every profile is diskless.
func largestStatefulSKU(profiles map[string]SKUProfile) (string, int64) {
	name, disk := "", int64(0)
	for _, n := range sortedKeys(profiles) {
		if d := profiles[n].DiskMB; d > disk {
			name, disk = n, d
		}
	}
	return name, disk
}

func validateTimeouts(c *Config, ps *problemSet) {
	positive := []struct {
		key string
		d   time.Duration
	}{
		{"callback_max_age", c.CallbackMaxAge},
		{"releases_max_age", c.ReleasesMaxAge},
		{"diagnostics_max_age", c.DiagnosticsMaxAge},
		{"image_pull_timeout", c.ImagePullTimeout},
		{"container_create_timeout", c.ContainerCreateTimeout},
		{"container_start_timeout", c.ContainerStartTimeout},
		{"provision_timeout", c.ProvisionTimeout},
		{"reconcile_interval", c.ReconcileInterval},
	}
	for _, p := range positive {
		if p.d <= 0 {
			ps.add(p.key, "must be positive, got %s", p.d)
		}
	}
	// Zero selects the seed default here rather than disabling the wait.
	if c.StartupVerifyDuration < 0 {
		ps.add("startup_verify_duration", "must not be negative, got %s", c.StartupVerifyDuration)
	} else if c.StartupVerifyDuration == 0 {
		c.StartupVerifyDuration = DefaultStartupVerifyDuration
	}
	if c.ContainerStopTimeout < 0 {
		ps.add("container_stop_timeout", "must not be negative, got %s", c.ContainerStopTimeout)
	} else if c.ContainerStopTimeout == 0 {
		c.ContainerStopTimeout = DefaultContainerStopTimeout
	}
	if c.StorageAttestationTimeout < 0 {
		ps.add("storage_attestation_timeout", "must not be negative, got %s", c.StorageAttestationTimeout)
	} else if c.StorageAttestationTimeout == 0 {
		c.StorageAttestationTimeout = DefaultStorageAttestationTimeout
	}
}

func validateHardening(c *Config, ps *problemSet) {
	if !c.NetworkIsolation {
		ps.add("network_isolation", "false is not supported: every lease gets its own bridge network")
	}
	ps.positive("container_pids_limit", c.ContainerPidsLimit)
	ps.positive("container_tmpfs_size_mb", c.ContainerTmpfsSizeMB)
	if n := c.RuntimeRefreshMaxConcurrency; n < 0 || n > maxRuntimeRefreshConcurrency {
		ps.add("runtime_refresh_max_concurrency", "must be from 0 to %d, got %d", maxRuntimeRefreshConcurrency, n)
	}
	if n := c.DockerMaxInFlight; n < 0 || n > maxDockerInFlight {
		ps.add("docker_max_in_flight", "must be from 0 (unlimited) to %d, got %d", maxDockerInFlight, n)
	}
	if n := c.DockerMaxStartsInFlight; n < 0 || n > maxDockerInFlight {
		ps.add("docker_max_starts_in_flight", "must be from 0 (unlimited) to %d, got %d", maxDockerInFlight, n)
	}
	if n := c.NetworkPoolSize; n < 0 || n > maxNetworkPoolSize {
		ps.add("network_pool_size", "must be from 0 (no pool) to %d, got %d", maxNetworkPoolSize, n)
	}
	if v := c.SingleContainerNetwork; v != SingleOnDefaultBridge && v != SingleOnOwnNetwork {
		ps.add("single_container_network", "%q is not one of %s, %s", v, SingleOnDefaultBridge, SingleOnOwnNetwork)
	}
}

// single_container_network's values.
const (
	SingleOnDefaultBridge = "default_bridge"
	SingleOnOwnNetwork    = "own"
)

// maxRuntimeRefreshConcurrency is the seed's upper bound for runtime_refresh_max_concurrency.
const maxRuntimeRefreshConcurrency = 64

// maxNetworkPoolSize bounds network_pool_size: Docker's largest address pools
// hold a few thousand networks, and every free one is held back from leases.
const maxNetworkPoolSize = 1024

// maxDockerInFlight bounds docker_max_in_flight (a bigger bound only queues in dockerd).
const maxDockerInFlight = 1024

// volumeFilesystems are the volume_filesystem values Fred configs use besides
// "" (auto-detect); xfs and zfs are recognised only to refuse them clearly.
var volumeFilesystems = map[string]bool{"btrfs": true, "xfs": true, "zfs": true, "dir": true}

// validateVolumes checks the Volume Management keys. Tenant data lives in managed
// volumes under volume_data_path: a stateful SKU (disk_mb > 0) needs one. The
// quota drivers are btrfs (subvolumes + qgroups) and dir (no enforcement:
// development only, refused in production_mode); xfs and zfs are refused by name,
// because no driver for them has been tested on a kernel that supports them.
func validateVolumes(c *Config, ps *problemSet) {
	stateful := ""
	for _, name := range sortedKeys(c.SKUProfiles) {
		if c.SKUProfiles[name].DiskMB > 0 {
			stateful = name
			break
		}
	}
	switch {
	case c.VolumeDataPath == "" && stateful != "":
		ps.add("volume_data_path", "is required: sku_profiles.%s is stateful (disk_mb > 0) and its data lives in managed volumes", stateful)
	case c.VolumeDataPath == "" && c.VolumeMountPath != "":
		ps.add("volume_mount_path", "requires volume_data_path (it names the mount that contains volume_data_path)")
	case c.VolumeDataPath != "" && c.ProductionMode && c.VolumeMountPath == "":
		ps.add("volume_mount_path", "is required in production_mode: the active mount that contains volume_data_path")
	}
	switch {
	case c.VolumeFilesystem != "" && !volumeFilesystems[c.VolumeFilesystem]:
		ps.add("volume_filesystem", "%q is not one of btrfs, dir (or empty to auto-detect)", c.VolumeFilesystem)
	case c.VolumeFilesystem == "xfs" || c.VolumeFilesystem == "zfs":
		ps.add("volume_filesystem", "%s quotas are not supported by this berthd: its quota driver is btrfs (dir for development)", c.VolumeFilesystem)
	case c.VolumeFilesystem == "dir" && c.ProductionMode:
		ps.add("volume_filesystem", "dir enforces no quota and is refused in production_mode: use btrfs")
	}
	ps.positive("min_avg_file_bytes", c.MinAvgFileBytes)
}

// validateDebug keeps the chaos endpoint from ever being open without a token.
func validateDebug(c *Config, ps *problemSet) {
	tokenOK := true
	if n := len(c.Debug.Token); n > 0 && n < MinDebugTokenBytes {
		ps.add("debug.token", "must be at least %d bytes, got %d", MinDebugTokenBytes, n)
		tokenOK = false
	}
	if c.Debug.Chaos && c.Debug.Token == "" {
		ps.add("debug.chaos", "requires debug.token (at least %d bytes): the chaos endpoint must never be open without it",
			MinDebugTokenBytes)
	}
	if c.ProductionMode && c.Debug.Chaos && tokenOK {
		ps.add("debug.chaos", "is refused in production_mode: it lets any holder of debug.token crash actors of a host that runs tenants")
	}
}

// listenAddrProblem checks a host:port listen address; the host may be empty
// (all interfaces), an IP or a hostname, the port numeric (0 = any free port).
func listenAddrProblem(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Sprintf("%q is not a host:port address", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%q: port must be a number from 0 to 65535", addr)
	}
	if host != "" && !isIPOrHostname(host) {
		return fmt.Sprintf("%q: host must be empty, an IP address or a hostname", addr)
	}
	return ""
}

// isLoopbackHost reports whether an IP or hostname names this host only:
// a loopback IP (also IPv4-mapped), localhost, or a name under .localhost.
func isLoopbackHost(host string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().IsLoopback()
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	return name == "localhost" || strings.HasSuffix(name, ".localhost")
}

// isUnspecifiedIP reports whether host is 0.0.0.0 or :: (any address, no host).
func isUnspecifiedIP(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsUnspecified()
}

// isLoopbackListen reports whether a host:port listens on this host only.
func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err == nil && isLoopbackHost(host)
}

// isIPOrHostname accepts an IP address (no zone) or an RFC 1123 hostname. A URL,
// host:port or anything with a path fails both.
func isIPOrHostname(s string) bool {
	if ip, err := netip.ParseAddr(s); err == nil {
		return ip.Zone() == ""
	}
	name := strings.TrimSuffix(s, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	labels := strings.Split(name, ".")
	for _, label := range labels {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	// An all-numeric last label is a mistyped IP (e.g. 300.1.1.1), not a hostname.
	return strings.Trim(labels[len(labels)-1], "0123456789") != ""
}

// isCanonicalUnixSocketURL accepts exactly unix://<clean absolute path>: no host,
// query, fragment, escapes or dot segments, so the daemon cannot be pointed at a
// remote engine or an ambiguous path in production.
func isCanonicalUnixSocketURL(s string) bool {
	p, ok := strings.CutPrefix(s, "unix://")
	return ok && strings.HasPrefix(p, "/") && p != "/" && !strings.ContainsAny(p, "?#% \t\n") && path.Clean(p) == p
}

// dockerHostProblem checks a development docker_host: unix sockets and TCP/HTTP
// endpoints the Docker client can dial directly.
func dockerHostProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Sprintf("%q is not a URL", s)
	}
	switch u.Scheme {
	case "unix":
		if !strings.HasPrefix(u.Path, "/") || u.Host != "" {
			return fmt.Sprintf("%q: a unix socket URL needs an absolute path (unix:///path)", s)
		}
	case "tcp", "http", "https":
		if u.Host == "" {
			return fmt.Sprintf("%q: needs a host:port", s)
		}
	default:
		return fmt.Sprintf("%q: scheme must be unix, tcp, http or https", s)
	}
	return ""
}

// hmacKeysEquivalent reports whether two HMAC-SHA256 keys produce the same MACs:
// keys longer than the block are hashed first, shorter ones are zero-padded, so
// "k" and "k\x00" are the same key.
func hmacKeysEquivalent(a, b []byte) bool {
	return hmac.Equal(hmacBlockKey(a), hmacBlockKey(b))
}

func hmacBlockKey(k []byte) []byte {
	const blockSize = 64 // sha256
	if len(k) > blockSize {
		sum := sha256.Sum256(k)
		k = sum[:]
	}
	block := make([]byte, blockSize)
	copy(block, k)
	return block
}
