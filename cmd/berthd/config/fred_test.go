package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/knadh/koanf/parsers/yaml"
)

// seedReferenceKeys is every key of the Configuration Reference in
// seeds/docker-backend.md, section by section. berthd must recognise each one:
// a Fred docker-backend.yaml must never be refused for an "unknown key".
var seedReferenceKeys = []string{
	// Core
	"name", "listen_addr", "docker_host", "host_address", "host_bind_ip", "log_level", "production_mode",
	"max_request_body_size",
	// TLS & mTLS
	"tls_cert_file", "tls_key_file", "tls_client_ca_file", "tls_client_allowed_names",
	// Resources
	"total_cpu_cores", "total_memory_mb", "total_disk_mb",
	// SKU Management
	"sku_mapping", "sku_profiles",
	// Image Security
	"allowed_registries",
	// Callbacks
	"callback_secret", "callback_secret_next", "callback_insecure_skip_verify", "callback_db_path", "callback_max_age",
	// Diagnostics
	"diagnostics_db_path", "diagnostics_max_age",
	// Releases
	"releases_db_path", "releases_max_age",
	// Soft-delete & Retention
	"retain_on_close", "retention_db_path", "retention_max_age", "retention_reap_interval",
	"max_retained_leases_per_tenant", "retention_orphan_confirmations", "max_retained_disk_mb",
	// Tenant Quotas
	"tenant_quota.max_cpu_cores", "tenant_quota.max_memory_mb", "tenant_quota.max_disk_mb",
	// Timeouts
	"image_pull_timeout", "storage_attestation_timeout", "container_create_timeout", "container_start_timeout",
	"provision_timeout", "reconcile_interval", "startup_verify_duration", "container_stop_timeout",
	// Container Hardening
	"network_isolation", "container_readonly_rootfs", "container_pids_limit", "runtime_refresh_max_concurrency",
	"container_tmpfs_size_mb",
	// Ingress (Traefik Integration)
	"ingress.enabled", "ingress.wildcard_domain", "ingress.entrypoint", "ingress.custom_domain_cert_resolver",
	"ingress.custom_domain_middlewares", "ingress.custom_domain_dns_resolvers", "ingress.custom_domain_dns_quorum",
	"ingress.custom_domain_dns_check_disabled",
	// Volume Management
	"volume_data_path", "volume_mount_path", "volume_filesystem", "min_avg_file_bytes",
}

func TestSchema_KnowsEverySeedReferenceKey(t *testing.T) {
	for _, key := range seedReferenceKeys {
		if !schemaKnows(strings.Split(key, ".")) {
			t.Errorf("%s is in the seed's configuration reference but not in the schema", key)
		}
	}
}

func testdataPath(name string) string { return filepath.Join("testdata", name) }

func TestLoad_SeedReferenceFile_EveryKeyAtItsDocumentedDefault_Loads(t *testing.T) {
	path := testdataPath("seed-defaults.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := yaml.Parser().Unmarshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	// The file must really hold the whole reference, or it proves less than it says.
	for _, key := range seedReferenceKeys {
		if strings.HasPrefix(key, "tenant_quota.") {
			continue // documented default: absent
		}
		if _, ok := lookupPath(m, strings.Split(key, ".")); !ok {
			t.Errorf("%s does not set %s", path, key)
		}
	}

	c, err := Load(path, nil)
	if err != nil {
		t.Fatalf("the seed reference at its defaults is refused:\n%v", err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("defaults produce warnings: %q", c.Warnings)
	}
	want := &Config{
		File:                         path,
		Name:                         "docker",
		ListenAddr:                   ":9001",
		DebugListenAddr:              "127.0.0.1:9002", // berth's own key, not in the file
		HostAddress:                  "203.0.113.10",
		HostBindIP:                   "0.0.0.0",
		DockerHost:                   "unix:///var/run/docker.sock",
		LogLevel:                     "info",
		DataDir:                      "./var/berth", // berth's own key
		MaxStoreSizeMB:               1024,          // berth's own key
		MaxRequestBodySize:           2097152,
		TLSClientAllowedNames:        []string{},
		TotalCPUCores:                8,
		TotalMemoryMB:                16384,
		TotalDiskMB:                  102400,
		SKUMapping:                   map[string]string{},
		SKUProfiles:                  map[string]SKUProfile{"docker-app": {CPUCores: 1, MemoryMB: 1024}},
		AllowedRegistries:            []string{"docker.io", "ghcr.io"},
		CallbackSecret:               "seed-defaults-callback-secret-0123456789abcdef",
		CallbackDBPath:               "callbacks.db",
		CallbackMaxAge:               24 * time.Hour,
		DiagnosticsDBPath:            filepath.Join("var", "berth", "diagnostics.db"),
		DiagnosticsMaxAge:            168 * time.Hour,
		ReleasesDBPath:               "releases.db",
		ReleasesMaxAge:               2160 * time.Hour,
		RetentionDBPath:              "retention.db",
		RetentionMaxAge:              2160 * time.Hour,
		RetentionReapInterval:        time.Hour,
		RetentionOrphanConfirmations: 3,
		ImagePullTimeout:             5 * time.Minute,
		ImageStoreBudgetMB:           20480,
		ImageStoreMinFreeMB:          10240,
		ImageGCInterval:              5 * time.Minute,
		StorageAttestationTimeout:    30 * time.Second,
		ContainerCreateTimeout:       30 * time.Second,
		ContainerStartTimeout:        30 * time.Second,
		ProvisionTimeout:             10 * time.Minute,
		ReconcileInterval:            5 * time.Minute,
		StartupVerifyDuration:        5 * time.Second,
		ContainerStopTimeout:         30 * time.Second,
		NetworkIsolation:             true,
		ContainerReadonlyRootfs:      true,
		ContainerPidsLimit:           256,
		ContainerTmpfsSizeMB:         64,
		RuntimeRefreshMaxConcurrency: 4,
		DockerMaxInFlight:            0,
		NetworkPoolSize:              16,
		SingleContainerNetwork:       "default_bridge",
		DockerMaxStartsInFlight:      8,
		MinAvgFileBytes:              1024,
		Ingress: Ingress{
			CustomDomainCertResolver: "http01",
			CustomDomainMiddlewares:  []string{"security-headers@file"},
			CustomDomainDNSResolvers: []string{"1.1.1.1:53", "8.8.8.8:53", "9.9.9.9:53"},
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded values differ from the seed's defaults:\n got %+v\nwant %+v", c, want)
	}

	// The file loads with volume_data_path at its documented default "" only
	// because docker-app is diskless: made stateful, it needs a data path.
	stateful := []string{"BERTH_SKU_PROFILES__DOCKER-APP__CPU_CORES=1", "BERTH_SKU_PROFILES__DOCKER-APP__MEMORY_MB=1024",
		"BERTH_SKU_PROFILES__DOCKER-APP__DISK_MB=1024"}
	_, err = Load(path, stateful)
	var p *Problems
	if !errors.As(err, &p) || len(p.List) != 1 ||
		findProblem(p.List, "volume_data_path: is required: sku_profiles.docker-app is stateful") == "" {
		t.Fatalf("a stateful docker-app without volume_data_path: err = %v, want only the volume_data_path problem", err)
	}
	if c, err := Load(path, append(stateful, "BERTH_VOLUME_DATA_PATH=/srv/berth/volumes")); err != nil || c.VolumeDataPath != "/srv/berth/volumes" {
		t.Fatalf("a stateful docker-app with volume_data_path: %v", err)
	}
}

func TestLoad_SeedStarterProfiles_CopiedIntoAProductionFile_Loads(t *testing.T) {
	c, err := Load(testdataPath("seed-starter-profiles.yaml"), nil)
	if err != nil {
		t.Fatalf("the seed's starter profiles are refused:\n%v", err)
	}
	want := map[string]SKUProfile{
		"docker-micro":  {CPUCores: 0.25, MemoryMB: 256, DiskMB: 512},
		"docker-small":  {CPUCores: 0.5, MemoryMB: 512, DiskMB: 1024},
		"docker-medium": {CPUCores: 1.0, MemoryMB: 1024, DiskMB: 2048},
		"docker-large":  {CPUCores: 2.0, MemoryMB: 2048, DiskMB: 4096},
	}
	if !reflect.DeepEqual(c.SKUProfiles, want) {
		t.Fatalf("sku_profiles = %+v, want the four starter profiles", c.SKUProfiles)
	}
	if !c.ProductionMode || c.HostAddress != "node1.provider.example.com" {
		t.Fatalf("production_mode=%v host_address=%q", c.ProductionMode, c.HostAddress)
	}
	// Stateful profiles in production_mode: the file names the managed-volume
	// data path and its mount, and loads only with both.
	if c.VolumeDataPath != "/var/lib/berth/volumes" || c.VolumeMountPath != "/var/lib/berth" {
		t.Fatalf("volume_data_path=%q volume_mount_path=%q", c.VolumeDataPath, c.VolumeMountPath)
	}
	_, err = Load(testdataPath("seed-starter-profiles.yaml"), []string{"BERTH_VOLUME_MOUNT_PATH="})
	var p *Problems
	if !errors.As(err, &p) || len(p.List) != 1 || findProblem(p.List, "volume_mount_path: is required in production_mode") == "" {
		t.Fatalf("without volume_mount_path: err = %v, want only the volume_mount_path problem", err)
	}
}

func TestLoad_FredExampleDockerBackendYAML_LoadsWithWarningsForUnusedStorePaths(t *testing.T) {
	c, err := Load(testdataPath("fred-docker-backend.yaml"), nil)
	if err != nil {
		t.Fatalf("Fred's example docker-backend.yaml is refused:\n%v", err)
	}
	state := filepath.Join("var", "berth", "state.db")
	wantWarnings := []string{
		`callback_db_path: "/var/lib/fred/docker-backend/callbacks.db": berth keeps the callback outbox and operation state in ` +
			state + "; this path is not used",
		`releases_db_path: "/var/lib/fred/docker-backend/releases.db": berth keeps release history in ` +
			state + "; this path is not used",
	}
	if !reflect.DeepEqual(c.Warnings, wantWarnings) {
		t.Fatalf("warnings:\n got %q\nwant %q", c.Warnings, wantWarnings)
	}
	if c.CallbackDBPath != "/var/lib/fred/docker-backend/callbacks.db" || c.ReleasesDBPath != "/var/lib/fred/docker-backend/releases.db" {
		t.Fatalf("unused store paths not kept: %q %q", c.CallbackDBPath, c.ReleasesDBPath)
	}
	if c.DiagnosticsDBPath != "/var/lib/fred/docker-backend/diagnostics.db" {
		t.Fatalf("diagnostics_db_path = %q, want the absolute path as given", c.DiagnosticsDBPath)
	}
	if c.CallbackMaxAge != 48*time.Hour || c.ReleasesMaxAge != 4320*time.Hour || c.DiagnosticsMaxAge != 336*time.Hour {
		t.Fatalf("ages: callback %s releases %s diagnostics %s", c.CallbackMaxAge, c.ReleasesMaxAge, c.DiagnosticsMaxAge)
	}
	// The file sets volume_data_path "" (the seed's default), which its diskless
	// profiles allow: without managed volumes production_mode needs no
	// volume_mount_path either.
	if c.VolumeDataPath != "" || c.VolumeMountPath != "" || c.RetentionDBPath != "retention.db" {
		t.Fatalf("volume_data_path=%q volume_mount_path=%q retention_db_path=%q", c.VolumeDataPath, c.VolumeMountPath, c.RetentionDBPath)
	}

	// Turning managed volumes on for this production node takes the mount as well.
	path := testdataPath("fred-docker-backend.yaml")
	_, err = Load(path, []string{"BERTH_VOLUME_DATA_PATH=/var/lib/fred/volumes"})
	var p *Problems
	if !errors.As(err, &p) || len(p.List) != 1 || findProblem(p.List, "volume_mount_path: is required in production_mode") == "" {
		t.Fatalf("volume_data_path without volume_mount_path: err = %v, want only the volume_mount_path problem", err)
	}
	c, err = Load(path, []string{"BERTH_VOLUME_DATA_PATH=/var/lib/fred/volumes", "BERTH_VOLUME_MOUNT_PATH=/var/lib/fred",
		"BERTH_RETAIN_ON_CLOSE=true"})
	if err != nil {
		t.Fatalf("with managed volumes and retention: %v", err)
	}
	if c.VolumeDataPath != "/var/lib/fred/volumes" || c.VolumeMountPath != "/var/lib/fred" || !c.RetainOnClose {
		t.Fatalf("volume_data_path=%q volume_mount_path=%q retain_on_close=%v", c.VolumeDataPath, c.VolumeMountPath, c.RetainOnClose)
	}
}
