package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLoad_EmbeddedDefaults_NoFileNoEnv_ValuesAsDocumented(t *testing.T) {
	got, err := Load("", nil)
	if err != nil {
		t.Fatalf("embedded defaults refused: %v", err)
	}
	want := &Config{
		Name:                  "docker",
		ListenAddr:            "127.0.0.1:9001",
		DebugListenAddr:       "127.0.0.1:9002",
		HostAddress:           "127.0.0.1",
		HostBindIP:            "127.0.0.1",
		DockerHost:            "unix:///var/run/docker.sock",
		LogLevel:              "info",
		DataDir:               "./var/berth",
		MaxStoreSizeMB:        1024,
		MaxRequestBodySize:    2097152,
		TLSClientAllowedNames: []string{},
		TotalCPUCores:         8,
		TotalMemoryMB:         16384,
		TotalDiskMB:           102400,
		SKUMapping:            map[string]string{},
		SKUProfiles: map[string]SKUProfile{
			"docker-micro":  {CPUCores: 0.25, MemoryMB: 256, DiskMB: 512},
			"docker-small":  {CPUCores: 0.5, MemoryMB: 512, DiskMB: 1024},
			"docker-medium": {CPUCores: 1, MemoryMB: 1024, DiskMB: 2048},
			"docker-large":  {CPUCores: 2, MemoryMB: 2048, DiskMB: 4096},
		},
		AllowedRegistries:            []string{"docker.io", "ghcr.io", "127.0.0.1:5000", "localhost:5000"},
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
		// The starter profiles are stateful: their data lives in managed volumes here.
		VolumeDataPath:  filepath.Join("var", "berth", "volumes"), // <data_dir>/volumes
		MinAvgFileBytes: 1024,
		Ingress: Ingress{
			CustomDomainCertResolver: "http01",
			CustomDomainMiddlewares:  []string{"security-headers@file"},
			CustomDomainDNSResolvers: []string{"1.1.1.1:53", "8.8.8.8:53", "9.9.9.9:53"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults differ:\n got %#v\nwant %#v", got, want)
	}
}

func TestLoad_FileOverridesSomeKeys_OthersKeepDefaults(t *testing.T) {
	c := mustLoad(t, `
listen_addr: "0.0.0.0:9101"
host_address: berth.example.com
total_cpu_cores: 3.5
image_pull_timeout: 90s
debug:
  chaos: true
  token: `+testDebugToken+`
`)
	if c.ListenAddr != "0.0.0.0:9101" || c.HostAddress != "berth.example.com" || c.TotalCPUCores != 3.5 ||
		c.ImagePullTimeout != 90*time.Second || !c.Debug.Chaos {
		t.Fatalf("file values not applied: %+v", c)
	}
	if c.DebugListenAddr != "127.0.0.1:9002" || c.TotalMemoryMB != 16384 || len(c.SKUProfiles) != 4 || c.ProvisionTimeout != 10*time.Minute {
		t.Fatalf("keys absent from the file lost their defaults: %+v", c)
	}
	if c.File == "" || !strings.HasSuffix(c.File, "berthd.yaml") {
		t.Fatalf("File = %q, want the loaded path", c.File)
	}
}

func TestLoad_EnvOverridesFile(t *testing.T) {
	c := mustLoad(t, `
listen_addr: "0.0.0.0:9101"
total_memory_mb: 4096
log_level: warn
`, "BERTH_LISTEN_ADDR=127.0.0.1:9201", "BERTH_TOTAL_MEMORY_MB=8192", "UNRELATED=1")
	if c.ListenAddr != "127.0.0.1:9201" || c.TotalMemoryMB != 8192 {
		t.Fatalf("env did not override the file: listen=%q memory=%d", c.ListenAddr, c.TotalMemoryMB)
	}
	if c.LogLevel != "warn" {
		t.Fatalf("file value without env override lost: log_level=%q", c.LogLevel)
	}
}

func TestLoad_NestedEnv_DebugChaosAndTenantQuota(t *testing.T) {
	c := mustLoad(t, "", "BERTH_DEBUG__CHAOS=true", "BERTH_DEBUG__TOKEN="+testDebugToken, "BERTH_TENANT_QUOTA__MAX_CPU_CORES=4",
		"BERTH_TENANT_QUOTA__MAX_MEMORY_MB=2048", "BERTH_PRODUCTION_MODE=false", "BERTH_CONTAINER_STOP_TIMEOUT=45s")
	if !c.Debug.Chaos || string(c.Debug.Token) != testDebugToken {
		t.Fatal("BERTH_DEBUG__CHAOS / BERTH_DEBUG__TOKEN did not set debug.chaos / debug.token")
	}
	want := TenantQuota{MaxCPUCores: 4, MaxMemoryMB: 2048, Set: true}
	if c.TenantQuota != want {
		t.Fatalf("tenant quota = %+v, want %+v (disk unlimited)", c.TenantQuota, want)
	}
	if c.ContainerStopTimeout != 45*time.Second {
		t.Fatalf("duration from env = %s", c.ContainerStopTimeout)
	}
}

func TestLoad_TenantQuota_FileAndEnvMergeFieldByField(t *testing.T) {
	c := mustLoad(t, "tenant_quota: {max_cpu_cores: 2, max_disk_mb: 1000}\n", "BERTH_TENANT_QUOTA__MAX_MEMORY_MB=512")
	want := TenantQuota{MaxCPUCores: 2, MaxMemoryMB: 512, MaxDiskMB: 1000, Set: true}
	if c.TenantQuota != want {
		t.Fatalf("tenant quota = %+v, want %+v", c.TenantQuota, want)
	}
}

func TestLoad_EnvLists_CommaSeparatedTrimmed(t *testing.T) {
	c := mustLoad(t, "", "BERTH_ALLOWED_REGISTRIES= ghcr.io, 127.0.0.1:5000 ,,",
		"BERTH_TLS_CERT_FILE=/c.pem", "BERTH_TLS_KEY_FILE=/k.pem", "BERTH_TLS_CLIENT_CA_FILE=/ca.pem",
		"BERTH_TLS_CLIENT_ALLOWED_NAMES=providerd,providerd.example.com")
	if !reflect.DeepEqual(c.AllowedRegistries, []string{"ghcr.io", "127.0.0.1:5000"}) {
		t.Fatalf("allowed_registries = %q", c.AllowedRegistries)
	}
	if !reflect.DeepEqual(c.TLSClientAllowedNames, []string{"providerd", "providerd.example.com"}) {
		t.Fatalf("tls_client_allowed_names = %q", c.TLSClientAllowedNames)
	}
}

func TestLoad_FileSKUProfiles_ReplaceStarterProfilesNotMerge(t *testing.T) {
	c := mustLoad(t, `
sku_profiles:
  docker-small: {cpu_cores: 1.5, memory_mb: 768}
`)
	want := map[string]SKUProfile{"docker-small": {CPUCores: 1.5, MemoryMB: 768, DiskMB: 0}}
	if !reflect.DeepEqual(c.SKUProfiles, want) {
		t.Fatalf("sku_profiles = %+v, want exactly %+v (no starter profiles, no inherited disk_mb)", c.SKUProfiles, want)
	}
}

func TestLoad_EnvSKUProfiles_ReplaceFileProfiles(t *testing.T) {
	c := mustLoad(t, `
sku_profiles:
  big: {cpu_cores: 4, memory_mb: 8192, disk_mb: 100}
  small: {cpu_cores: 1, memory_mb: 512}
`, "BERTH_SKU_PROFILES__TINY__CPU_CORES=0.1", "BERTH_SKU_PROFILES__TINY__MEMORY_MB=64")
	want := map[string]SKUProfile{"tiny": {CPUCores: 0.1, MemoryMB: 64}}
	if !reflect.DeepEqual(c.SKUProfiles, want) {
		t.Fatalf("sku_profiles = %+v, want exactly %+v", c.SKUProfiles, want)
	}
}

func TestLoad_SKUMappingAndRegistries_ReplacedWhole(t *testing.T) {
	c := mustLoad(t, `
allowed_registries: ["registry.example.com"]
sku_mapping:
  sku-a: docker-small
  sku-b: docker-micro
`, "BERTH_SKU_MAPPING__SKU-C=docker-large")
	if !reflect.DeepEqual(c.AllowedRegistries, []string{"registry.example.com"}) {
		t.Fatalf("allowed_registries = %q, want only the file's entry", c.AllowedRegistries)
	}
	if !reflect.DeepEqual(c.SKUMapping, map[string]string{"sku-c": "docker-large"}) {
		t.Fatalf("sku_mapping = %v, want only the env entry", c.SKUMapping)
	}
}

func TestLoad_UnknownEnvVariable_WarnedNotRefused(t *testing.T) {
	c := mustLoad(t, "", "BERTH_LISTEN_ADRR=0.0.0.0:1", "BERTH_DEBUG__CHAOSS=true")
	for _, name := range []string{"BERTH_LISTEN_ADRR", "BERTH_DEBUG__CHAOSS"} {
		if findProblem(c.Warnings, name, "ignored") == "" {
			t.Errorf("no warning for %s in %q", name, c.Warnings)
		}
	}
	if c.ListenAddr != "127.0.0.1:9001" || c.Debug.Chaos {
		t.Fatalf("unknown variables changed the config: %+v", c)
	}
}

func TestLoad_ConflictingEnvVariables_Refused(t *testing.T) {
	list := problemsOf(t, "", "BERTH_DEBUG=yes", "BERTH_DEBUG__CHAOS=true")
	if findProblem(list, "BERTH_DEBUG", "conflicts with") == "" {
		t.Fatalf("no conflict reported: %q", list)
	}
}

func TestLoad_FileWithTwelveProblems_ReportsEveryOne(t *testing.T) {
	list := problemsOf(t, `
host_address: "http://berth.example.com"
listen_adr: "0.0.0.0:9001"
callback_secret: "too-short"
total_cpu_cores: .nan
total_memory_mb: 0
sku_profiles:
  broken: {cpu_cores: -1, memory_mb: 0, disk_mb: -5}
sku_mapping:
  chain-sku: missing-profile
tenant_quota:
  max_cpu_cores: 0
  max_disk_mb: 999999999
provision_timeout: 7d
reconcile_interval: 2w
image_pull_timeout: 0s
tls_cert_file: /etc/berth/cert.pem
log_level: verbose
network_isolation: false
container_pids_limit: 0
`)
	want := [][]string{
		{"listen_adr: unknown key", `did you mean "listen_addr"`},
		{"host_address:", "not a valid IP address or hostname"},
		{"callback_secret: must be at least 32 bytes"},
		{"total_cpu_cores: must be finite and positive"},
		{"total_memory_mb: must be positive"},
		{"sku_profiles.broken.cpu_cores: must be finite and positive"},
		{"sku_profiles.broken.memory_mb: must be positive"},
		{"sku_profiles.broken.disk_mb: must not be negative"},
		{"sku_mapping.chain-sku: names unknown profile \"missing-profile\""},
		{"tenant_quota.max_cpu_cores: must be finite and positive"},
		{"tenant_quota.max_disk_mb:", "exceeds total_disk_mb"},
		{"provision_timeout:", "use h, m or s; d and w are not valid"},
		{"reconcile_interval:", "use h, m or s; d and w are not valid"},
		{"image_pull_timeout: must be positive"},
		{"tls_key_file: is required when tls_cert_file is set"},
		{"log_level:", "verbose"},
		{"network_isolation: false is not supported"},
		{"container_pids_limit: must be positive"},
	}
	for _, parts := range want {
		if findProblem(list, parts...) == "" {
			t.Errorf("missing problem %q", parts)
		}
	}
	if len(list) != len(want) {
		t.Errorf("got %d problems, want %d (one per mistake):\n%s", len(list), len(want), strings.Join(list, "\n"))
	}
}

func TestLoad_UnparsableYAML_OneProblemNamingFile(t *testing.T) {
	path := writeConfig(t, "listen_addr: [unclosed\nhost_address: x\n")
	_, err := Load(path, []string{"BERTH_TOTAL_CPU_CORES=-1"})
	p, ok := err.(*Problems)
	if !ok {
		t.Fatalf("err = %T %v, want *Problems", err, err)
	}
	if len(p.List) != 1 || !strings.Contains(p.List[0], path) || !strings.Contains(p.List[0], "not valid YAML") {
		t.Fatalf("problems = %q, want exactly one naming %s", p.List, path)
	}
}

func TestLoad_YAMLNotAMapping_OneProblemNamingFile(t *testing.T) {
	list := problemsOf(t, "- listen_addr\n- host_address\n")
	if len(list) != 1 || findProblem(list, "berthd.yaml", "not valid YAML") == "" {
		t.Fatalf("problems = %q", list)
	}
}

func TestLoad_MissingFile_Refused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := Load(path, nil)
	p, ok := err.(*Problems)
	if !ok || len(p.List) != 1 || !strings.Contains(p.List[0], path) {
		t.Fatalf("err = %v, want one problem naming %s", err, path)
	}
}

func TestLoad_EmptyFile_IsTheDefaults(t *testing.T) {
	path := writeConfig(t, "# nothing here\n")
	c, err := Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defaults, _ := Load("", nil)
	c.File = ""
	if !reflect.DeepEqual(c, defaults) {
		t.Fatalf("empty file changed the config:\n%+v\n%+v", c, defaults)
	}
}

func TestLoad_DoesNotReadProcessEnvironment(t *testing.T) {
	t.Setenv("BERTH_LISTEN_ADDR", "not an address")
	if _, err := Load("", nil); err != nil {
		t.Fatalf("Load read os.Environ instead of its environ argument: %v", err)
	}
	if _, err := Load("", os.Environ()); err == nil {
		t.Fatal("a bad BERTH_LISTEN_ADDR passed in environ was accepted")
	}
}

func TestLoad_ZeroDurationsSelectDefaults(t *testing.T) {
	c := mustLoad(t, "startup_verify_duration: 0\ncontainer_stop_timeout: 0s\n")
	if c.StartupVerifyDuration != 5*time.Second || c.ContainerStopTimeout != 30*time.Second {
		t.Fatalf("zero durations: startup_verify=%s stop=%s, want 5s and 30s", c.StartupVerifyDuration, c.ContainerStopTimeout)
	}
}

func TestLoad_NonPositiveBodySize_DefaultWithWarning(t *testing.T) {
	c := mustLoad(t, "max_request_body_size: -1\n")
	if c.MaxRequestBodySize != 2<<20 {
		t.Fatalf("max_request_body_size = %d, want 2 MiB", c.MaxRequestBodySize)
	}
	if findProblem(c.Warnings, "max_request_body_size") == "" {
		t.Fatalf("no warning: %q", c.Warnings)
	}
}
