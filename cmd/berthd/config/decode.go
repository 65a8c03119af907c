package config

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// decoder turns the merged koanf map into a typed Config, one key at a time, so a
// wrong value becomes a "<key>: ..." problem instead of aborting the whole decode
// (mapstructure stops being useful there, and would accept "7d" only to fail
// somewhere opaque). Type errors never echo the value: it may be a secret.
type decoder struct {
	root map[string]any
	ps   *problemSet
	// quotaSet holds the tenant_quota.* keys that were given: an explicit 0 is a
	// mistake to report, an absent one means unlimited.
	quotaSet map[string]bool
}

// lookup returns the value at a dotted path of fixed keys and whether it is set.
func (d *decoder) lookup(key string) (any, bool) {
	return lookupPath(d.root, strings.Split(key, "."))
}

func (d *decoder) str(key string) string {
	v, _ := d.lookup(key)
	return d.asString(key, v)
}

func (d *decoder) boolean(key string) bool {
	v, _ := d.lookup(key)
	return d.asBool(key, v)
}

func (d *decoder) int64(key string) int64 {
	v, _ := d.lookup(key)
	return d.asInt64(key, v)
}

// integer reads a whole number into an int (counts, concurrency).
func (d *decoder) integer(key string) int {
	v, _ := d.lookup(key)
	n := d.asInt64(key, v)
	if n < math.MinInt || n > math.MaxInt {
		d.ps.badValue(key, "must be a whole number within int")
		return 0
	}
	return int(n)
}

func (d *decoder) float(key string) float64 {
	v, _ := d.lookup(key)
	return d.asFloat(key, v)
}

func (d *decoder) duration(key string) time.Duration {
	v, _ := d.lookup(key)
	return d.asDuration(key, v)
}

func (d *decoder) strings(key string) []string {
	v, _ := d.lookup(key)
	return d.asStringList(key, v)
}

// kind names a value's YAML type for messages, without its content.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "nothing"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int, int64, uint64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	case time.Time:
		return "a timestamp"
	default:
		return fmt.Sprintf("a %T", v)
	}
}

func (d *decoder) asString(key string, v any) string {
	switch s := v.(type) {
	case nil:
		return ""
	case string:
		return s
	}
	d.ps.badValue(key, "must be a string, not %s (quote it)", kind(v))
	return ""
}

func (d *decoder) asBool(key string, v any) bool {
	switch b := v.(type) {
	case bool:
		return b
	case string: // from the environment
		if parsed, err := strconv.ParseBool(strings.TrimSpace(b)); err == nil {
			return parsed
		}
		d.ps.badValue(key, "%q is not a boolean (use true or false)", b)
		return false
	}
	d.ps.badValue(key, "must be true or false, not %s", kind(v))
	return false
}

func (d *decoder) asInt64(key string, v any) int64 {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int64:
		return n
	case uint64:
		if n <= math.MaxInt64 {
			return int64(n)
		}
	case float64:
		// YAML gives 512.0 and 1e20 as floats; accept only exact integers in range.
		switch {
		case math.IsNaN(n) || math.IsInf(n, 0):
			d.ps.badValue(key, "must be a finite whole number")
			return 0
		case n != math.Trunc(n):
			d.ps.badValue(key, "must be a whole number, not %v", n)
			return 0
		case math.Abs(n) < math.MaxInt64:
			return int64(n)
		}
	case string: // from the environment
		parsed, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		if err == nil {
			return parsed
		}
		d.ps.badValue(key, "%q is not a whole number", n)
		return 0
	default:
		d.ps.badValue(key, "must be a whole number, not %s", kind(v))
		return 0
	}
	d.ps.badValue(key, "must be a whole number within int64")
	return 0
}

func (d *decoder) asFloat(key string, v any) float64 {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int64:
		return float64(n)
	case uint64:
		return float64(n)
	case float64:
		return n
	case string: // from the environment; NaN/Inf parse and are refused by the rules
		parsed, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		if err == nil {
			return parsed
		}
		d.ps.badValue(key, "%q is not a number", n)
		return 0
	}
	d.ps.badValue(key, "must be a number, not %s", kind(v))
	return 0
}

// dwUnit spots the day/week units people reach for ("7d", "2w", "1d12h").
var dwUnit = regexp.MustCompile(`(?i)[0-9.][dw]`)

// asDuration parses Go duration syntax from the raw value. A bare 0 is allowed
// (the keys where zero means "default" need it); other bare numbers lack a unit.
func (d *decoder) asDuration(key string, v any) time.Duration {
	switch x := v.(type) {
	case string:
		dur, problem := parseDuration(x)
		if problem != "" {
			d.ps.badValue(key, "%s", problem)
		}
		return dur
	case int:
		if x == 0 {
			return 0
		}
		d.ps.badValue(key, "%d has no unit: use h, m or s", x)
		return 0
	}
	d.ps.badValue(key, "must be a duration such as 30s, 5m or 2h, not %s", kind(v))
	return 0
}

// parseDuration returns the duration or a problem text.
func parseDuration(raw string) (time.Duration, string) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return 0, "must be set to a duration such as 30s, 5m or 2h"
	}
	dur, err := time.ParseDuration(s)
	if err == nil {
		return dur, ""
	}
	switch {
	case dwUnit.MatchString(s):
		return 0, fmt.Sprintf("%q: use h, m or s; d and w are not valid", raw)
	case strings.Trim(s, "+-0123456789.") == "":
		return 0, fmt.Sprintf("%q has no unit: use h, m or s", raw)
	default:
		return 0, fmt.Sprintf("%q is not a duration: use Go syntax such as 90s, 5m or 2h", raw)
	}
}

func (d *decoder) asStringList(key string, v any) []string {
	switch list := v.(type) {
	case nil:
		return []string{}
	case []any:
		out := make([]string, 0, len(list))
		for i, item := range list {
			s, ok := item.(string)
			if !ok {
				d.ps.badValue(key, "entry %d must be a string, not %s", i, kind(item))
				return []string{}
			}
			out = append(out, s)
		}
		return out
	}
	d.ps.badValue(key, "must be a list of strings, not %s", kind(v))
	return []string{}
}

// sortedKeys returns m's keys in order, so problems come out deterministically.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// freeMap is the map with free keys (SKU ids, profile names) at key: nil when
// unset, or when it is not a map (a problem saying what it must map).
func (d *decoder) freeMap(key, of string) map[string]any {
	v, _ := d.lookup(key)
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		d.ps.badValue(key, "must be a map of %s, not %s", of, kind(v))
	}
	return m
}

func (d *decoder) skuMapping() map[string]string {
	out := map[string]string{}
	m := d.freeMap("sku_mapping", "SKU id to profile name")
	for _, sku := range sortedKeys(m) {
		out[sku] = d.asString("sku_mapping."+sku, m[sku])
	}
	return out
}

func (d *decoder) skuProfiles() map[string]SKUProfile {
	out := map[string]SKUProfile{}
	m := d.freeMap("sku_profiles", "profile name to {cpu_cores, memory_mb, disk_mb}")
	for _, name := range sortedKeys(m) {
		key := "sku_profiles." + name
		fields, ok := m[name].(map[string]any)
		if !ok {
			d.ps.badValue(key, "must be a map with cpu_cores, memory_mb and disk_mb, not %s", kind(m[name]))
			continue
		}
		p := SKUProfile{}
		if cpu, set := fields["cpu_cores"]; set {
			p.CPUCores = d.asFloat(key+".cpu_cores", cpu)
		} else {
			d.ps.badValue(key+".cpu_cores", "is required")
		}
		if mem, set := fields["memory_mb"]; set {
			p.MemoryMB = d.asInt64(key+".memory_mb", mem)
		} else {
			d.ps.badValue(key+".memory_mb", "is required")
		}
		if disk, set := fields["disk_mb"]; set { // absent: diskless
			p.DiskMB = d.asInt64(key+".disk_mb", disk)
		}
		out[name] = p
	}
	return out
}

func (d *decoder) tenantQuota() TenantQuota {
	v, _ := d.lookup("tenant_quota")
	if v == nil {
		return TenantQuota{}
	}
	if _, ok := v.(map[string]any); !ok {
		d.ps.badValue("tenant_quota", "must be a map with max_cpu_cores, max_memory_mb and/or max_disk_mb, not %s", kind(v))
		return TenantQuota{}
	}
	q := TenantQuota{Set: true}
	d.quotaSet = map[string]bool{}
	if v, set := d.lookup("tenant_quota.max_cpu_cores"); set {
		q.MaxCPUCores = d.asFloat("tenant_quota.max_cpu_cores", v)
		d.quotaSet["tenant_quota.max_cpu_cores"] = true
	}
	if v, set := d.lookup("tenant_quota.max_memory_mb"); set {
		q.MaxMemoryMB = d.asInt64("tenant_quota.max_memory_mb", v)
		d.quotaSet["tenant_quota.max_memory_mb"] = true
	}
	if v, set := d.lookup("tenant_quota.max_disk_mb"); set {
		q.MaxDiskMB = d.asInt64("tenant_quota.max_disk_mb", v)
		d.quotaSet["tenant_quota.max_disk_mb"] = true
	}
	return q
}

// decode reads every key of the schema into a Config.
func (d *decoder) decode() *Config {
	return &Config{
		Name:               d.str("name"),
		ListenAddr:         d.str("listen_addr"),
		DebugListenAddr:    d.str("debug_listen_addr"),
		HostAddress:        d.str("host_address"),
		HostBindIP:         d.str("host_bind_ip"),
		DockerHost:         d.str("docker_host"),
		LogLevel:           d.str("log_level"),
		ProductionMode:     d.boolean("production_mode"),
		DataDir:            d.str("data_dir"),
		MaxStoreSizeMB:     d.int64("max_store_size_mb"),
		MaxRequestBodySize: d.int64("max_request_body_size"),

		TLSCertFile:           d.str("tls_cert_file"),
		TLSKeyFile:            d.str("tls_key_file"),
		TLSClientCAFile:       d.str("tls_client_ca_file"),
		TLSClientAllowedNames: d.strings("tls_client_allowed_names"),

		TotalCPUCores: d.float("total_cpu_cores"),
		TotalMemoryMB: d.int64("total_memory_mb"),
		TotalDiskMB:   d.int64("total_disk_mb"),

		SKUMapping:        d.skuMapping(),
		SKUProfiles:       d.skuProfiles(),
		TenantQuota:       d.tenantQuota(),
		AllowedRegistries: d.strings("allowed_registries"),

		CallbackSecret:             Secret(d.str("callback_secret")),
		CallbackSecretNext:         Secret(d.str("callback_secret_next")),
		CallbackInsecureSkipVerify: d.boolean("callback_insecure_skip_verify"),
		CallbackDBPath:             d.str("callback_db_path"),
		CallbackMaxAge:             d.duration("callback_max_age"),

		DiagnosticsDBPath: d.str("diagnostics_db_path"),
		DiagnosticsMaxAge: d.duration("diagnostics_max_age"),

		ReleasesDBPath: d.str("releases_db_path"),
		ReleasesMaxAge: d.duration("releases_max_age"),

		RetainOnClose:                d.boolean("retain_on_close"),
		RetentionDBPath:              d.str("retention_db_path"),
		RetentionMaxAge:              d.duration("retention_max_age"),
		RetentionReapInterval:        d.duration("retention_reap_interval"),
		MaxRetainedLeasesPerTenant:   d.integer("max_retained_leases_per_tenant"),
		RetentionOrphanConfirmations: d.integer("retention_orphan_confirmations"),
		MaxRetainedDiskMB:            d.int64("max_retained_disk_mb"),

		ImagePullTimeout:          d.duration("image_pull_timeout"),
		StorageAttestationTimeout: d.duration("storage_attestation_timeout"),
		ContainerCreateTimeout:    d.duration("container_create_timeout"),
		ContainerStartTimeout:     d.duration("container_start_timeout"),
		ProvisionTimeout:          d.duration("provision_timeout"),
		ReconcileInterval:         d.duration("reconcile_interval"),
		StartupVerifyDuration:     d.duration("startup_verify_duration"),
		ContainerStopTimeout:      d.duration("container_stop_timeout"),

		NetworkIsolation:             d.boolean("network_isolation"),
		ContainerReadonlyRootfs:      d.boolean("container_readonly_rootfs"),
		ContainerPidsLimit:           d.int64("container_pids_limit"),
		ContainerTmpfsSizeMB:         d.int64("container_tmpfs_size_mb"),
		RuntimeRefreshMaxConcurrency: d.integer("runtime_refresh_max_concurrency"),
		DockerMaxInFlight:            d.integer("docker_max_in_flight"),
		NetworkPoolSize:              d.integer("network_pool_size"),
		DockerMaxStartsInFlight:      d.integer("docker_max_starts_in_flight"),

		VolumeDataPath:   d.str("volume_data_path"),
		VolumeMountPath:  d.str("volume_mount_path"),
		VolumeFilesystem: d.str("volume_filesystem"),
		MinAvgFileBytes:  d.int64("min_avg_file_bytes"),

		Ingress: d.ingress(),
		Debug:   d.debug(),
	}
}

// section reports whether the nested section key holds a map (or nothing); a
// scalar there is a problem naming the keys it should hold.
func (d *decoder) section(key, keys string) bool {
	if v, _ := d.lookup(key); v != nil {
		if _, ok := v.(map[string]any); !ok {
			d.ps.badValue(key, "must be a map (%s), not %s", keys, kind(v))
			return false
		}
	}
	return true
}

func (d *decoder) debug() Debug {
	if !d.section("debug", "debug.chaos, debug.token") {
		return Debug{}
	}
	return Debug{Chaos: d.boolean("debug.chaos"), Token: Secret(d.str("debug.token"))}
}

func (d *decoder) ingress() Ingress {
	if !d.section("ingress", "ingress.enabled, ingress.wildcard_domain, …") {
		return Ingress{CustomDomainMiddlewares: []string{}, CustomDomainDNSResolvers: []string{}}
	}
	return Ingress{
		Enabled:                      d.boolean("ingress.enabled"),
		WildcardDomain:               d.str("ingress.wildcard_domain"),
		Entrypoint:                   d.str("ingress.entrypoint"),
		CustomDomainCertResolver:     d.str("ingress.custom_domain_cert_resolver"),
		CustomDomainMiddlewares:      d.strings("ingress.custom_domain_middlewares"),
		CustomDomainDNSResolvers:     d.strings("ingress.custom_domain_dns_resolvers"),
		CustomDomainDNSQuorum:        d.integer("ingress.custom_domain_dns_quorum"),
		CustomDomainDNSCheckDisabled: d.boolean("ingress.custom_domain_dns_check_disabled"),
	}
}
