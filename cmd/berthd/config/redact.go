package config

import "maps"

// Redacted returns the configuration keyed by YAML key, fit for one startup log
// line: callback_secret, callback_secret_next and debug.token read "<redacted>"
// when set and "<unset>" when not; durations are strings such as "5m0s".
func (c *Config) Redacted() map[string]any {
	out := map[string]any{
		"config_file":           c.File,
		"name":                  c.Name,
		"listen_addr":           c.ListenAddr,
		"debug_listen_addr":     c.DebugListenAddr,
		"host_address":          c.HostAddress,
		"host_bind_ip":          c.HostBindIP,
		"docker_host":           c.DockerHost,
		"log_level":             c.LogLevel,
		"production_mode":       c.ProductionMode,
		"data_dir":              c.DataDir,
		"max_store_size_mb":     c.MaxStoreSizeMB,
		"max_request_body_size": c.MaxRequestBodySize,

		"tls_cert_file":            c.TLSCertFile,
		"tls_key_file":             c.TLSKeyFile,
		"tls_client_ca_file":       c.TLSClientCAFile,
		"tls_client_allowed_names": append([]string{}, c.TLSClientAllowedNames...),

		"callback_secret":               c.CallbackSecret.String(),
		"callback_secret_next":          c.CallbackSecretNext.String(),
		"callback_insecure_skip_verify": c.CallbackInsecureSkipVerify,
		"callback_db_path":              c.CallbackDBPath,
		"callback_max_age":              c.CallbackMaxAge.String(),

		"diagnostics_db_path": c.DiagnosticsDBPath,
		"diagnostics_max_age": c.DiagnosticsMaxAge.String(),

		"releases_db_path": c.ReleasesDBPath,
		"releases_max_age": c.ReleasesMaxAge.String(),

		"retain_on_close":                c.RetainOnClose,
		"retention_db_path":              c.RetentionDBPath,
		"retention_max_age":              c.RetentionMaxAge.String(),
		"retention_reap_interval":        c.RetentionReapInterval.String(),
		"max_retained_leases_per_tenant": c.MaxRetainedLeasesPerTenant,
		"retention_orphan_confirmations": c.RetentionOrphanConfirmations,
		"max_retained_disk_mb":           c.MaxRetainedDiskMB,

		"debug": map[string]any{"chaos": c.Debug.Chaos, "token": c.Debug.Token.String()},
	}
	maps.Copy(out, c.redactedCapacity())
	maps.Copy(out, c.redactedContainers())
	return out
}

// redactedCapacity is Redacted's pool, SKU and quota keys.
func (c *Config) redactedCapacity() map[string]any {
	profiles := make(map[string]any, len(c.SKUProfiles))
	for name, p := range c.SKUProfiles {
		profiles[name] = map[string]any{"cpu_cores": p.CPUCores, "memory_mb": p.MemoryMB, "disk_mb": p.DiskMB}
	}
	mapping := make(map[string]any, len(c.SKUMapping))
	for sku, profile := range c.SKUMapping {
		mapping[sku] = profile
	}
	var quota any = unsetText
	if c.TenantQuota.Set {
		quota = map[string]any{
			"max_cpu_cores": c.TenantQuota.MaxCPUCores,
			"max_memory_mb": c.TenantQuota.MaxMemoryMB,
			"max_disk_mb":   c.TenantQuota.MaxDiskMB,
		}
	}
	return map[string]any{
		"total_cpu_cores": c.TotalCPUCores,
		"total_memory_mb": c.TotalMemoryMB,
		"total_disk_mb":   c.TotalDiskMB,

		"sku_mapping":        mapping,
		"sku_profiles":       profiles,
		"tenant_quota":       quota,
		"allowed_registries": append([]string{}, c.AllowedRegistries...),
	}
}

// redactedContainers is Redacted's keys of how containers are run: timeouts,
// limits, Docker concurrency, volumes and ingress.
func (c *Config) redactedContainers() map[string]any {
	return map[string]any{
		"image_pull_timeout":          c.ImagePullTimeout.String(),
		"storage_attestation_timeout": c.StorageAttestationTimeout.String(),
		"container_create_timeout":    c.ContainerCreateTimeout.String(),
		"container_start_timeout":     c.ContainerStartTimeout.String(),
		"provision_timeout":           c.ProvisionTimeout.String(),
		"reconcile_interval":          c.ReconcileInterval.String(),
		"startup_verify_duration":     c.StartupVerifyDuration.String(),
		"container_stop_timeout":      c.ContainerStopTimeout.String(),

		"network_isolation":               c.NetworkIsolation,
		"container_readonly_rootfs":       c.ContainerReadonlyRootfs,
		"container_pids_limit":            c.ContainerPidsLimit,
		"container_tmpfs_size_mb":         c.ContainerTmpfsSizeMB,
		"runtime_refresh_max_concurrency": c.RuntimeRefreshMaxConcurrency,
		"docker_max_in_flight":            c.DockerMaxInFlight,
		"network_pool_size":               c.NetworkPoolSize,
		"docker_max_starts_in_flight":     c.DockerMaxStartsInFlight,

		"volume_data_path":   c.VolumeDataPath,
		"volume_mount_path":  c.VolumeMountPath,
		"volume_filesystem":  c.VolumeFilesystem,
		"min_avg_file_bytes": c.MinAvgFileBytes,

		"ingress": map[string]any{
			"enabled":                          c.Ingress.Enabled,
			"wildcard_domain":                  c.Ingress.WildcardDomain,
			"entrypoint":                       c.Ingress.Entrypoint,
			"custom_domain_cert_resolver":      c.Ingress.CustomDomainCertResolver,
			"custom_domain_middlewares":        append([]string{}, c.Ingress.CustomDomainMiddlewares...),
			"custom_domain_dns_resolvers":      append([]string{}, c.Ingress.CustomDomainDNSResolvers...),
			"custom_domain_dns_quorum":         c.Ingress.CustomDomainDNSQuorum,
			"custom_domain_dns_check_disabled": c.Ingress.CustomDomainDNSCheckDisabled,
		},
	}
}
