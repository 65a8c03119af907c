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
	"strconv"
	"strings"
	"time"
)

// minSecretBytes is the shortest accepted HMAC key (seed: "min 32 bytes").
const minSecretBytes = 32

var logLevels = map[string]bool{"debug": true, "info": true, "warn": true, "error": true}

// validate applies every rule to c, recording problems in ps and non-fatal
// findings in c.Warnings. It also fills the documented zero-value defaults.
// quotaSet names the tenant_quota keys that were given.
func validate(c *Config, ps *problemSet, quotaSet map[string]bool) {
	validateCore(c, ps)
	validateTLS(c, ps)
	validateResources(c, ps)
	validateSKUs(c, ps)
	validateQuota(c, ps, quotaSet)
	validateRegistries(c, ps)
	validateCallbacks(c, ps)
	validateTimeouts(c, ps)
	validateHardening(c, ps)
}

func validateCore(c *Config, ps *problemSet) {
	if strings.TrimSpace(c.Name) == "" {
		ps.add("name", "must not be empty")
	}
	if problem := listenAddrProblem(c.ListenAddr); problem != "" {
		ps.add("listen_addr", "%s", problem)
	}
	if problem := listenAddrProblem(c.DebugListenAddr); problem != "" {
		ps.add("debug_listen_addr", "%s", problem)
	} else if c.DebugListenAddr == c.ListenAddr && !strings.HasSuffix(c.ListenAddr, ":0") {
		ps.add("debug_listen_addr", "must differ from listen_addr")
	} else if !isLoopbackListen(c.DebugListenAddr) {
		c.Warnings = append(c.Warnings, "debug_listen_addr: "+c.DebugListenAddr+
			" is not loopback; the debug endpoints (pprof, actor tree, chaos) are unauthenticated")
	}

	if strings.TrimSpace(c.HostAddress) == "" {
		ps.add("host_address", "is required (the external IP or hostname tenants reach their ports on)")
	} else if !isIPOrHostname(c.HostAddress) {
		ps.add("host_address", "%q is not a valid IP address or hostname (no scheme, port or path)", c.HostAddress)
	}
	if _, err := netip.ParseAddr(c.HostBindIP); err != nil || strings.Contains(c.HostBindIP, "%") {
		ps.add("host_bind_ip", "%q is not a valid IP address", c.HostBindIP)
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
	if c.MaxStoreSizeMB <= 0 {
		ps.add("max_store_size_mb", "must be positive, got %d", c.MaxStoreSizeMB)
	}
	if c.MaxRequestBodySize <= 0 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("max_request_body_size: %d is not positive; using the default %d",
			c.MaxRequestBodySize, DefaultMaxRequestBodySize))
		c.MaxRequestBodySize = DefaultMaxRequestBodySize
	}
	if c.ProductionMode && c.Debug.Chaos {
		c.Warnings = append(c.Warnings, "debug.chaos: enabled in production_mode; any debug client can crash actors")
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
	if c.TotalMemoryMB <= 0 {
		ps.add("total_memory_mb", "must be positive, got %d", c.TotalMemoryMB)
	}
	if c.TotalDiskMB <= 0 {
		ps.add("total_disk_mb", "must be positive, got %d", c.TotalDiskMB)
	}
}

func validateSKUs(c *Config, ps *problemSet) {
	if len(c.SKUProfiles) == 0 {
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
		if p.MemoryMB <= 0 {
			ps.add(key+".memory_mb", "must be positive, got %d", p.MemoryMB)
		}
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

func validateTimeouts(c *Config, ps *problemSet) {
	positive := []struct {
		key string
		d   time.Duration
	}{
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
}

func validateHardening(c *Config, ps *problemSet) {
	if !c.NetworkIsolation {
		ps.add("network_isolation", "false is not supported: every lease gets its own bridge network")
	}
	if c.ContainerPidsLimit <= 0 {
		ps.add("container_pids_limit", "must be positive, got %d", c.ContainerPidsLimit)
	}
	if c.ContainerTmpfsSizeMB <= 0 {
		ps.add("container_tmpfs_size_mb", "must be positive, got %d", c.ContainerTmpfsSizeMB)
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

func isLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
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
	if !ok || !strings.HasPrefix(p, "/") || p == "/" {
		return false
	}
	if strings.ContainsAny(p, "?#% \t\n") {
		return false
	}
	return path.Clean(p) == p
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
