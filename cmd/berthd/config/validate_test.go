package config

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// ruleCase is one rule applied to one input: want == "" means the input must be
// accepted; otherwise some problem must contain every "|"-separated part of want.
type ruleCase struct {
	name string
	yaml string
	env  []string
	want string
}

func runRuleCases(t *testing.T, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want == "" {
				mustLoad(t, tc.yaml, tc.env...)
				return
			}
			list := problemsOf(t, tc.yaml, tc.env...)
			if findProblem(list, strings.Split(tc.want, "|")...) == "" {
				t.Fatalf("want a problem with %q, got:\n%s", tc.want, strings.Join(list, "\n"))
			}
		})
	}
}

func TestValidate_CallbackSecrets(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"secret 32 bytes accepted", `callback_secret: "` + strings.Repeat("s", 32) + `"`, nil, ""},
		{"secret 31 bytes refused", `callback_secret: "` + strings.Repeat("s", 31) + `"`, nil, "callback_secret: must be at least 32 bytes, got 31"},
		{"secret from env checked", "", []string{"BERTH_CALLBACK_SECRET=short"}, "callback_secret: must be at least 32 bytes"},
		{"next distinct accepted", "callback_secret: " + testSecret + "\ncallback_secret_next: " + testSecretNext, nil, ""},
		{"next short refused", "callback_secret: " + testSecret + "\ncallback_secret_next: tiny", nil, "callback_secret_next: must be at least 32 bytes"},
		{"next equal refused", "callback_secret: " + testSecret + "\ncallback_secret_next: " + testSecret, nil, "callback_secret_next: must differ from callback_secret"},
		// HMAC zero-pads short keys, so a trailing NUL is the same key.
		{"next HMAC-equivalent refused", "callback_secret: " + testSecret + "\ncallback_secret_next: \"" + testSecret + `\0"`, nil, "callback_secret_next: must differ"},
		{"next alone accepted (secret generated)", "callback_secret_next: " + testSecretNext, nil, ""},
		{"production without secret refused", "production_mode: true", nil, "callback_secret: is required in production_mode"},
		{"production with secret accepted", prodBase, nil, ""},
		{"production skip-verify refused", "production_mode: true\ncallback_secret: " + testSecret + "\ncallback_insecure_skip_verify: true", nil, "callback_insecure_skip_verify: is not allowed in production_mode"},
		{"dev skip-verify accepted", "callback_insecure_skip_verify: true", nil, ""},
	})
}

func TestHMACKeysEquivalent_ZeroPaddingAndLongKeyHashing(t *testing.T) {
	long := strings.Repeat("k", 100)
	sum := hmacBlockKey([]byte(long))[:32] // a >64-byte key is replaced by its SHA-256
	cases := []struct {
		a, b string
		want bool
	}{
		{testSecret, testSecret, true},
		{testSecret, testSecret + "\x00\x00", true},
		{testSecret, testSecretNext, false},
		{long, string(sum), true},
		{long, long + "x", false},
	}
	for _, c := range cases {
		if got := hmacKeysEquivalent([]byte(c.a), []byte(c.b)); got != c.want {
			t.Errorf("hmacKeysEquivalent(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestValidate_Addresses(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"host hostname accepted", "host_address: berth.example.com", nil, ""},
		{"host IPv4 accepted", "host_address: 203.0.113.7", nil, ""},
		{"host IPv6 accepted", `host_address: "2001:db8::1"`, nil, ""},
		{"host empty refused", `host_address: ""`, nil, "host_address: is required"},
		{"host URL refused", `host_address: "http://x"`, nil, `host_address: "http://x" is not a valid IP address or hostname`},
		{"host with port refused", `host_address: "berth.example.com:80"`, nil, "host_address:|not a valid"},
		{"host with path refused", `host_address: "example.com/x"`, nil, "host_address:|not a valid"},
		{"host bad IP refused", `host_address: "300.1.1.1"`, nil, "host_address:|not a valid"},
		{"host label hyphen refused", `host_address: "-bad.example.com"`, nil, "host_address:|not a valid"},
		{"bind IP accepted", `host_bind_ip: "0.0.0.0"`, nil, ""},
		{"bind hostname refused", `host_bind_ip: localhost`, nil, `host_bind_ip: "localhost" is not a valid IP address`},
		{"listen all interfaces accepted", `listen_addr: ":9001"`, nil, ""},
		{"listen hostname accepted", `listen_addr: "localhost:9001"`, nil, ""},
		{"listen port 0 accepted", `listen_addr: "127.0.0.1:0"`, nil, ""},
		{"listen no port refused", `listen_addr: "9001"`, nil, `listen_addr: "9001" is not a host:port address`},
		{"listen port range refused", `listen_addr: "127.0.0.1:99999"`, nil, "listen_addr:|port must be a number from 0 to 65535"},
		{"listen URL refused", `listen_addr: "http://127.0.0.1:9001"`, nil, "listen_addr:"},
		{"debug bad refused", `debug_listen_addr: "loopback"`, nil, "debug_listen_addr:|not a host:port"},
		{"debug same as API refused", `debug_listen_addr: "127.0.0.1:9001"`, nil, "debug_listen_addr: must differ from listen_addr"},
		{"both port 0 accepted", "listen_addr: \"127.0.0.1:0\"\ndebug_listen_addr: \"127.0.0.1:0\"", nil, ""},
	})
}

func TestValidate_DebugListenNotLoopback_Warned(t *testing.T) {
	c := mustLoad(t, `debug_listen_addr: "0.0.0.0:9002"`)
	if findProblem(c.Warnings, "debug_listen_addr", "not loopback") == "" {
		t.Fatalf("no warning: %q", c.Warnings)
	}
	if c := mustLoad(t, ""); len(c.Warnings) != 0 {
		t.Fatalf("defaults produce warnings: %q", c.Warnings)
	}
}

func TestValidate_DockerHost(t *testing.T) {
	prod := prodBase
	runRuleCases(t, []ruleCase{
		{"dev unix accepted", `docker_host: "unix:///var/run/docker.sock"`, nil, ""},
		{"dev tcp accepted", `docker_host: "tcp://10.0.0.2:2375"`, nil, ""},
		{"dev empty refused", `docker_host: ""`, nil, "docker_host: is required"},
		{"dev ssh refused", `docker_host: "ssh://user@host"`, nil, "docker_host:|scheme must be unix, tcp, http or https"},
		{"dev relative unix refused", `docker_host: "unix://docker.sock"`, nil, "docker_host:|absolute path"},
		{"prod canonical accepted", prod + `docker_host: "unix:///var/run/docker.sock"`, nil, ""},
		{"prod rootless accepted", prod + `docker_host: "unix:///run/user/1000/docker.sock"`, nil, ""},
		{"prod tcp refused", prod + `docker_host: "tcp://10.0.0.2:2375"`, nil, "docker_host:|canonical absolute local unix socket URL"},
		{"prod http refused", prod + `docker_host: "http://localhost:2375"`, nil, "docker_host:|canonical"},
		{"prod unix with host refused", prod + `docker_host: "unix://remote/var/run/docker.sock"`, nil, "docker_host:|canonical"},
		{"prod dot segments refused", prod + `docker_host: "unix:///var/run/../run/docker.sock"`, nil, "docker_host:|canonical"},
		{"prod double slash refused", prod + `docker_host: "unix:////var/run/docker.sock"`, nil, "docker_host:|canonical"},
		{"prod query refused", prod + `docker_host: "unix:///var/run/docker.sock?x=1"`, nil, "docker_host:|canonical"},
		{"prod via env refused", prod, []string{"BERTH_DOCKER_HOST=tcp://1.2.3.4:2375"}, "docker_host:|canonical"},
	})
}

func TestValidate_CoreScalars(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"log level debug accepted", "log_level: debug", nil, ""},
		{"log level unknown refused", "log_level: verbose", nil, `log_level: "verbose" is not one of debug, info, warn, error`},
		{"log level case refused", "log_level: INFO", nil, "log_level:"},
		{"name empty refused", `name: ""`, nil, "name: must not be empty"},
		{"data dir empty refused", `data_dir: ""`, nil, "data_dir: must not be empty"},
		{"store size 0 refused", "max_store_size_mb: 0", nil, "max_store_size_mb: must be positive"},
		{"store size positive accepted", "max_store_size_mb: 64", nil, ""},
		{"string for number refused", "total_memory_mb: lots", nil, `total_memory_mb: "lots" is not a whole number`},
		{"fraction for int refused", "container_pids_limit: 1.5", nil, "container_pids_limit: must be a whole number"},
		{"integral float for int accepted", "container_pids_limit: 512.0", nil, ""},
		{"number for string refused", "host_address: 12", nil, "host_address: must be a string"},
		{"bool typo from env refused", "", []string{"BERTH_DEBUG__CHAOS=maybe"}, `debug.chaos: "maybe" is not a boolean`},
		{"debug scalar refused", "debug: true", nil, "debug: must be a map"},
		{"list scalar refused", "allowed_registries: docker.io", nil, "allowed_registries: must be a list of strings"},
		{"registry URL refused", `allowed_registries: ["https://ghcr.io"]`, nil, "allowed_registries:|no scheme"},
		{"registry empty entry refused", `allowed_registries: [""]`, nil, "allowed_registries: entry 0 is empty"},
	})
}

func TestValidate_ResourcesAndSKUs(t *testing.T) {
	one := "sku_profiles:\n  p: {cpu_cores: 1, memory_mb: 512, disk_mb: 0}\n"
	runRuleCases(t, []ruleCase{
		{"cpu total fractional accepted", "total_cpu_cores: 1.5", nil, ""},
		{"cpu total 0 refused", "total_cpu_cores: 0", nil, "total_cpu_cores: must be finite and positive"},
		{"cpu total NaN refused", "total_cpu_cores: .nan", nil, "total_cpu_cores: must be finite and positive"},
		{"cpu total Inf refused", "total_cpu_cores: .inf", nil, "total_cpu_cores: must be finite and positive"},
		{"cpu total -Inf refused", "total_cpu_cores: -.inf", nil, "total_cpu_cores: must be finite and positive"},
		{"cpu total NaN env refused", "", []string{"BERTH_TOTAL_CPU_CORES=NaN"}, "total_cpu_cores: must be finite and positive"},
		{"memory total negative refused", "total_memory_mb: -1", nil, "total_memory_mb: must be positive"},
		{"disk total 0 refused", "total_disk_mb: 0", nil, "total_disk_mb: must be positive"},
		{"disk total NaN refused", "total_disk_mb: .nan", nil, "total_disk_mb: must be a finite whole number"},
		{"one profile accepted", one, nil, ""},
		{"empty profiles refused", "sku_profiles: {}", nil, "sku_profiles: at least one SKU profile is required"},
		{"null profiles refused", "sku_profiles:", nil, "sku_profiles: at least one SKU profile is required"},
		{"profile cpu 0 refused", "sku_profiles:\n  p: {cpu_cores: 0, memory_mb: 512}", nil, "sku_profiles.p.cpu_cores: must be finite and positive"},
		{"profile cpu NaN refused", "sku_profiles:\n  p: {cpu_cores: .nan, memory_mb: 512}", nil, "sku_profiles.p.cpu_cores: must be finite and positive"},
		{"profile cpu Inf refused", "sku_profiles:\n  p: {cpu_cores: .inf, memory_mb: 512}", nil, "sku_profiles.p.cpu_cores: must be finite and positive"},
		{"profile cpu missing refused", "sku_profiles:\n  p: {memory_mb: 512}", nil, "sku_profiles.p.cpu_cores: is required"},
		{"profile memory 0 refused", "sku_profiles:\n  p: {cpu_cores: 1, memory_mb: 0}", nil, "sku_profiles.p.memory_mb: must be positive"},
		{"profile disk negative refused", "sku_profiles:\n  p: {cpu_cores: 1, memory_mb: 1, disk_mb: -1}", nil, "sku_profiles.p.disk_mb: must not be negative"},
		{"profile not a map refused", "sku_profiles:\n  p: small", nil, "sku_profiles.p: must be a map"},
		{"profile field typo refused", "sku_profiles:\n  p: {cpu: 1, cpu_cores: 1, memory_mb: 1}", nil, `sku_profiles.p.cpu: unknown key`},
		{"mapping to known accepted", one + "sku_mapping: {chain-1: p}", nil, ""},
		{"mapping to unknown refused", one + "sku_mapping: {chain-1: docker-small}", nil, `sku_mapping.chain-1: names unknown profile "docker-small"`},
	})
}

func TestValidate_TenantQuota(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"partial quota accepted", "tenant_quota: {max_cpu_cores: 4}", nil, ""},
		{"full quota at totals accepted", "tenant_quota: {max_cpu_cores: 8, max_memory_mb: 16384, max_disk_mb: 102400}", nil, ""},
		{"cpu 0 refused", "tenant_quota: {max_cpu_cores: 0}", nil, "tenant_quota.max_cpu_cores: must be finite and positive"},
		{"cpu NaN refused", "tenant_quota: {max_cpu_cores: .nan}", nil, "tenant_quota.max_cpu_cores: must be finite and positive"},
		{"cpu Inf refused", "tenant_quota: {max_cpu_cores: .inf}", nil, "tenant_quota.max_cpu_cores: must be finite and positive"},
		{"cpu above pool refused", "tenant_quota: {max_cpu_cores: 8.5}", nil, "tenant_quota.max_cpu_cores: 8.5 exceeds total_cpu_cores (8)"},
		{"memory 0 refused", "tenant_quota: {max_memory_mb: 0}", nil, "tenant_quota.max_memory_mb: must be positive"},
		{"memory above pool refused", "tenant_quota: {max_memory_mb: 16385}", nil, "tenant_quota.max_memory_mb: 16385 exceeds total_memory_mb (16384)"},
		{"disk negative refused", "tenant_quota: {max_disk_mb: -1}", nil, "tenant_quota.max_disk_mb: must be positive"},
		{"disk above pool refused", "tenant_quota: {max_disk_mb: 102401}", nil, "tenant_quota.max_disk_mb: 102401 exceeds total_disk_mb"},
		{"above lowered total refused", "total_memory_mb: 1000\ntenant_quota: {max_memory_mb: 1001}", nil, "tenant_quota.max_memory_mb:|exceeds total_memory_mb (1000)"},
		{"env quota above pool refused", "", []string{"BERTH_TENANT_QUOTA__MAX_CPU_CORES=16"}, "tenant_quota.max_cpu_cores:|exceeds"},
		{"quota key typo refused", "tenant_quota: {max_cpus: 2}", nil, "tenant_quota.max_cpus: unknown key"},
	})
}

func TestValidate_Durations(t *testing.T) {
	const dw = "use h, m or s; d and w are not valid"
	runRuleCases(t, []ruleCase{
		{"hours accepted", "diagnostics_max_age: 336h", nil, ""},
		{"compound accepted", "provision_timeout: 1h30m", nil, ""},
		{"days refused", "diagnostics_max_age: 7d", nil, "diagnostics_max_age: \"7d\": " + dw},
		{"weeks refused", "reconcile_interval: 2w", nil, "reconcile_interval:|" + dw},
		{"mixed days refused", "provision_timeout: 1d12h", nil, "provision_timeout:|" + dw},
		{"days from env refused", "", []string{"BERTH_IMAGE_PULL_TIMEOUT=1d"}, "image_pull_timeout:|" + dw},
		{"no unit refused", "container_start_timeout: 30", nil, "container_start_timeout: 30 has no unit"},
		{"garbage refused", "container_create_timeout: soon", nil, `container_create_timeout: "soon" is not a duration`},
		{"image pull zero refused", "image_pull_timeout: 0s", nil, "image_pull_timeout: must be positive"},
		{"create negative refused", "container_create_timeout: -1s", nil, "container_create_timeout: must be positive"},
		{"start zero refused", "container_start_timeout: 0", nil, "container_start_timeout: must be positive"},
		{"provision zero refused", "provision_timeout: 0s", nil, "provision_timeout: must be positive"},
		{"reconcile zero refused", "reconcile_interval: 0s", nil, "reconcile_interval: must be positive"},
		{"diagnostics zero refused", "diagnostics_max_age: 0s", nil, "diagnostics_max_age: must be positive"},
		{"startup verify zero accepted", "startup_verify_duration: 0s", nil, ""},
		{"startup verify negative refused", "startup_verify_duration: -5s", nil, "startup_verify_duration: must not be negative"},
		{"stop timeout zero accepted", "container_stop_timeout: 0", nil, ""},
		{"stop timeout negative refused", "container_stop_timeout: -1m", nil, "container_stop_timeout: must not be negative"},
		{"bool for duration refused", "provision_timeout: true", nil, "provision_timeout: must be a duration"},
	})
}

func TestValidate_TLS(t *testing.T) {
	both := "tls_cert_file: /c.pem\ntls_key_file: /k.pem\n"
	runRuleCases(t, []ruleCase{
		{"cert and key accepted", both, nil, ""},
		{"full mTLS accepted", both + "tls_client_ca_file: /ca.pem\ntls_client_allowed_names: [providerd]", nil, ""},
		{"cert without key refused", "tls_cert_file: /c.pem", nil, "tls_key_file: is required when tls_cert_file is set"},
		{"key without cert refused", "tls_key_file: /k.pem", nil, "tls_cert_file: is required when tls_key_file is set"},
		{"CA without cert/key refused", "tls_client_ca_file: /ca.pem", nil, "tls_client_ca_file: requires tls_cert_file and tls_key_file"},
		{"CA with cert only refused", "tls_cert_file: /c.pem\ntls_client_ca_file: /ca.pem", nil, "tls_client_ca_file: requires"},
		{"names without CA refused", both + "tls_client_allowed_names: [providerd]", nil, "tls_client_allowed_names: requires tls_client_ca_file"},
		{"empty name refused", both + "tls_client_ca_file: /ca.pem\ntls_client_allowed_names: [\"\"]", nil, "tls_client_allowed_names: entry 0 is empty"},
	})
}

func TestValidate_Hardening(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"readonly rootfs off accepted", "container_readonly_rootfs: false", nil, ""},
		{"network isolation off refused", "network_isolation: false", nil, "network_isolation: false is not supported"},
		{"network isolation off env refused", "", []string{"BERTH_NETWORK_ISOLATION=false"}, "network_isolation: false is not supported"},
		{"pids 0 refused", "container_pids_limit: 0", nil, "container_pids_limit: must be positive"},
		{"pids 1 accepted", "container_pids_limit: 1", nil, ""},
		{"tmpfs negative refused", "container_tmpfs_size_mb: -64", nil, "container_tmpfs_size_mb: must be positive"},
	})
}

func TestValidate_UnknownFileKeys(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"top-level typo refused", "listen_adr: x", nil, `listen_adr: unknown key in|did you mean "listen_addr"`},
		{"unrelated key refused", "restore_on_open: true", nil, "restore_on_open: unknown key"},
		{"nested typo refused", "debug: {chaoss: true}", nil, `debug.chaoss: unknown key|did you mean "chaos"`},
	})
}

// Ingress was the last key of a feature berthd did not have: its keys load
// now, on or off (TestIngress_EnabledLoads_FromFileAndEnvironment).
func TestValidate_IngressOff_SettingsLoad(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"ingress off with settings", "ingress:\n  enabled: false\n  wildcard_domain: apps.example.com\n  entrypoint: websecure\n" +
			"  custom_domain_dns_quorum: 2\n  custom_domain_dns_check_disabled: true", nil, ""},
	})
}

func TestValidate_TyposOfNewKeys_StillUnknownWithSuggestion(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"top-level", "retain_on_clse: true", nil, `retain_on_clse: unknown key in|did you mean "retain_on_close"`},
		{"volume", `volume_data_pth: ""`, nil, `volume_data_pth: unknown key|did you mean "volume_data_path"`},
		{"ingress", "ingress: {enabeld: true}", nil, `ingress.enabeld: unknown key|did you mean "enabled"`},
		{"debug", "debug: {tokn: x}", nil, `debug.tokn: unknown key|did you mean "token"`},
	})
}

func TestValidate_StorePathsAndAges(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "data")
	runRuleCases(t, []ruleCase{
		{"callback max age zero refused", "callback_max_age: 0s", nil, "callback_max_age: must be positive"},
		{"callback max age negative refused", "callback_max_age: -1h", nil, "callback_max_age: must be positive"},
		{"callback max age days refused", "callback_max_age: 1d", nil, "callback_max_age:|d and w are not valid"},
		{"releases max age zero refused", "releases_max_age: 0", nil, "releases_max_age: must be positive"},
		{"releases max age weeks refused", "releases_max_age: 12w", nil, "releases_max_age:|d and w are not valid"},
		{"diagnostics path empty refused", `diagnostics_db_path: ""`, nil, "diagnostics_db_path: must not be empty"},
		{"diagnostics path state.db refused", "diagnostics_db_path: state.db", nil,
			"diagnostics_db_path: \"state.db\" is " + filepath.Join("./var/berth", "state.db")},
		{"diagnostics path state.db absolute refused", "data_dir: " + abs + "\ndiagnostics_db_path: " + filepath.Join(abs, "state.db"), nil,
			"diagnostics_db_path:|which berth keeps in data_dir"},
		{"diagnostics path state.db dotted refused", "diagnostics_db_path: sub/../state.db", nil, "diagnostics_db_path:|state.db"},
		{"diagnostics path secret refused", "diagnostics_db_path: callback-secret", nil, "diagnostics_db_path:|callback-secret"},
		{"diagnostics path lock refused", "diagnostics_db_path: daemon.lock", nil, "diagnostics_db_path:|daemon.lock"},
		{"diagnostics path data_dir refused", "diagnostics_db_path: .", nil, "diagnostics_db_path: \".\" names data_dir itself"},
		{"diagnostics path elsewhere accepted", "diagnostics_db_path: " + filepath.Join(abs, "..", "diag", "d.db"), nil, ""},
		{"store paths as strings only", "callback_db_path: 12", nil, "callback_db_path: must be a string"},
	})
}

func TestLoad_DiagnosticsDBPath_RelativeResolvedUnderDataDir_AbsoluteKept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if c := mustLoad(t, "data_dir: "+dir+"\ndiagnostics_db_path: diag/failures.db\n"); c.DiagnosticsDBPath != filepath.Join(dir, "diag", "failures.db") {
		t.Fatalf("relative: %q", c.DiagnosticsDBPath)
	}
	if c := mustLoad(t, "data_dir: "+dir+"\n"); c.DiagnosticsDBPath != filepath.Join(dir, "diagnostics.db") {
		t.Fatalf("default: %q", c.DiagnosticsDBPath)
	}
	if c := mustLoad(t, "data_dir: "+dir+"\ndiagnostics_db_path: /srv/diag.db\n"); c.DiagnosticsDBPath != "/srv/diag.db" {
		t.Fatalf("absolute: %q", c.DiagnosticsDBPath)
	}
	if c := mustLoad(t, "", "BERTH_DATA_DIR="+dir, "BERTH_DIAGNOSTICS_DB_PATH=d.db"); c.DiagnosticsDBPath != filepath.Join(dir, "d.db") {
		t.Fatalf("env: %q", c.DiagnosticsDBPath)
	}
}

func TestLoad_UnusedFredStorePaths_KeptAndWarnedOnlyWhenNotDefault(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := mustLoad(t, "data_dir: "+dir+"\ncallback_db_path: /f/cb.db\nreleases_db_path: ./releases.db\nretention_db_path: /f/ret.db\n")
	state := filepath.Join(dir, "state.db")
	want := []string{
		`callback_db_path: "/f/cb.db": berth keeps the callback outbox and operation state in ` + state + "; this path is not used",
		`retention_db_path: "/f/ret.db": berth keeps retention records in ` + state + "; this path is not used",
	}
	if !reflect.DeepEqual(c.Warnings, want) {
		t.Fatalf("warnings:\n got %q\nwant %q", c.Warnings, want)
	}
	if c.CallbackDBPath != "/f/cb.db" || c.ReleasesDBPath != "./releases.db" || c.RetentionDBPath != "/f/ret.db" {
		t.Fatalf("values not kept: %q %q %q", c.CallbackDBPath, c.ReleasesDBPath, c.RetentionDBPath)
	}
}

func TestValidate_Retention(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"max age zero accepted", "retention_max_age: 0s", nil, ""},
		{"max age negative refused", "retention_max_age: -1h", nil, "retention_max_age: must not be negative"},
		{"max age days refused", "retention_max_age: 90d", nil, "retention_max_age:|d and w are not valid"},
		{"reap interval negative refused", "retention_reap_interval: -1s", nil, "retention_reap_interval: must not be negative"},
		{"per-tenant cap negative refused", "max_retained_leases_per_tenant: -1", nil, "max_retained_leases_per_tenant: must not be negative"},
		{"per-tenant cap accepted", "max_retained_leases_per_tenant: 5", nil, ""},
		{"per-tenant cap fraction refused", "max_retained_leases_per_tenant: 1.5", nil, "max_retained_leases_per_tenant: must be a whole number"},
		{"orphan confirmations negative refused", "retention_orphan_confirmations: -3", nil, "retention_orphan_confirmations: must not be negative"},
		{"orphan confirmations zero accepted", "retention_orphan_confirmations: 0", nil, ""},
		{"disk cap negative refused", "max_retained_disk_mb: -1", nil, "max_retained_disk_mb: must not be negative"},
		{"disk cap above total refused", "max_retained_disk_mb: 102401", nil, "max_retained_disk_mb: 102401 exceeds total_disk_mb (102400)"},
		{"disk cap at total accepted", "max_retained_disk_mb: 102400", nil, ""},
		{"disk cap below largest SKU refused", "max_retained_disk_mb: 4095", nil,
			"max_retained_disk_mb: 4095 is below the disk_mb of SKU profile docker-large (4096)"},
		{"disk cap at largest SKU accepted", "max_retained_disk_mb: 4096", nil, ""},
		{"disk cap diskless SKUs accepted", "max_retained_disk_mb: 1\nsku_profiles: {p: {cpu_cores: 1, memory_mb: 64}}", nil, ""},
		{"disk cap env checked", "", []string{"BERTH_MAX_RETAINED_DISK_MB=200000"}, "max_retained_disk_mb:|exceeds total_disk_mb"},
	})
}

func TestValidate_ImageStore(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"budget accepted", "image_store_budget_mb: 1", nil, ""},
		{"budget zero refused", "image_store_budget_mb: 0", nil, "image_store_budget_mb: must be positive, got 0"},
		{"budget negative refused", "image_store_budget_mb: -5", nil, "image_store_budget_mb: must be positive, got -5"},
		{"budget fraction refused", "image_store_budget_mb: 1.5", nil, "image_store_budget_mb: must be a whole number"},
		{"budget text refused", "image_store_budget_mb: lots", nil, "image_store_budget_mb:"},
		{"budget beyond a petabyte refused", "image_store_budget_mb: 1073741825", nil, "image_store_budget_mb: must be at most 1073741824"},
		{"floor zero accepted (no floor)", "image_store_min_free_mb: 0", nil, ""},
		{"floor negative refused", "image_store_min_free_mb: -1", nil, "image_store_min_free_mb: must not be negative"},
		{"interval zero refused", "image_gc_interval: 0s", nil, "image_gc_interval: must be positive"},
		{"interval negative refused", "image_gc_interval: -1m", nil, "image_gc_interval: must be positive"},
		{"interval accepted", "image_gc_interval: 30s", nil, ""},
		{"budget env checked", "", []string{"BERTH_IMAGE_STORE_BUDGET_MB=-1"}, "image_store_budget_mb: must be positive"},
	})
}

// retain_on_close keeps a closed lease's managed volumes, so it needs volume_data_path.
func TestValidate_RetainOnClose(t *testing.T) {
	const needsData = "retain_on_close: requires volume_data_path: only managed volumes can be retained"
	runRuleCases(t, []ruleCase{
		{"true with the default data path accepted", "retain_on_close: true", nil, ""},
		{"true from env accepted", "", []string{"BERTH_RETAIN_ON_CLOSE=true"}, ""},
		{"true with data path accepted", "retain_on_close: true\nvolume_data_path: /srv/berth/volumes", nil, ""},
		{"true with data path from env accepted", "retain_on_close: true\n" + noVolumes + diskless,
			[]string{"BERTH_VOLUME_DATA_PATH=/srv/berth/volumes"}, ""},
		{"true in production accepted", prodBase + "retain_on_close: true", nil, ""},
		{"true without data path refused", "retain_on_close: true\n" + noVolumes + diskless, nil, needsData},
		{"true from env without data path refused", noVolumes + diskless, []string{"BERTH_RETAIN_ON_CLOSE=true"}, needsData},
		{"true with data path cleared by env refused", "retain_on_close: true\n" + diskless, []string{"BERTH_VOLUME_DATA_PATH="}, needsData},
		{"false without data path accepted", "retain_on_close: false\n" + noVolumes + diskless, nil, ""},
	})

	// Every volume problem at once, one message each.
	list := problemsOf(t, "retain_on_close: true\n"+noVolumes+"volume_filesystem: zfs\n")
	want := []string{"volume_data_path: is required: sku_profiles.docker-large is stateful", needsData,
		"volume_filesystem: zfs quotas are not supported"}
	for _, w := range want {
		if findProblem(list, w) == "" {
			t.Errorf("missing problem %q", w)
		}
	}
	if len(list) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(list), len(want), strings.Join(list, "\n"))
	}
}

func TestLoad_RetentionReapIntervalZero_FallsBackToMaxAgeThenOneHour(t *testing.T) {
	if c := mustLoad(t, "retention_reap_interval: 0s\nretention_max_age: 336h\n"); c.RetentionReapInterval != 336*time.Hour {
		t.Fatalf("0 with max age 336h: %s, want 336h", c.RetentionReapInterval)
	}
	if c := mustLoad(t, "retention_reap_interval: 0\nretention_max_age: 0s\n"); c.RetentionReapInterval != time.Hour || c.RetentionMaxAge != 0 {
		t.Fatalf("0 with max age 0: interval %s max age %s, want 1h and 0", c.RetentionReapInterval, c.RetentionMaxAge)
	}
	if c := mustLoad(t, "retention_reap_interval: 15m\n"); c.RetentionReapInterval != 15*time.Minute {
		t.Fatalf("15m: %s", c.RetentionReapInterval)
	}
}

// diskless is a file whose only SKU profile keeps no data (disk_mb 0), so it may
// run without managed volumes: volume_data_path "" is valid with it.
const diskless = "sku_profiles:\n  p: {cpu_cores: 1, memory_mb: 64, disk_mb: 0}\n"

// noVolumes turns managed volumes off (the embedded default sets a data path).
const noVolumes = "volume_data_path: \"\"\n"

// Tenant data of a stateful SKU (disk_mb > 0) lives in managed volumes under
// volume_data_path; volume_mount_path names the mount that contains it and is
// required with a data path in production_mode.
func TestValidate_ManagedVolumePaths(t *testing.T) {
	const (
		stateful = "volume_data_path: is required: sku_profiles.docker-large is stateful (disk_mb > 0)"
		mountReq = "volume_mount_path: requires volume_data_path"
		prodReq  = "volume_mount_path: is required in production_mode: the active mount that contains volume_data_path"
	)
	envStateful := []string{"BERTH_SKU_PROFILES__DB__CPU_CORES=1", "BERTH_SKU_PROFILES__DB__MEMORY_MB=512",
		"BERTH_SKU_PROFILES__DB__DISK_MB=1024"}
	runRuleCases(t, []ruleCase{
		// A stateful SKU needs a data path.
		{"stateful starter profiles at the default data path accepted", "", nil, ""},
		{"stateful profile at the default data path accepted", "sku_profiles:\n  db: {cpu_cores: 1, memory_mb: 512, disk_mb: 1}", nil, ""},
		{"stateful with data path from file accepted", "volume_data_path: /srv/berth/volumes", nil, ""},
		{"stateful with data path from env accepted", noVolumes, []string{"BERTH_VOLUME_DATA_PATH=/srv/berth/volumes"}, ""},
		{"stateful without data path from file refused", noVolumes, nil, stateful},
		{"stateful without data path from env refused", "", []string{"BERTH_VOLUME_DATA_PATH="}, stateful},
		{"stateful profile from env without data path refused", noVolumes + diskless, envStateful,
			"volume_data_path: is required: sku_profiles.db is stateful"},
		{"stateful profile from env with data path accepted", diskless, envStateful, ""},
		{"diskless without data path accepted", noVolumes + diskless, nil, ""},
		{"diskless implicit disk_mb without data path accepted", noVolumes + "sku_profiles: {p: {cpu_cores: 1, memory_mb: 64}}", nil, ""},
		{"diskless without data path from env accepted", diskless, []string{"BERTH_VOLUME_DATA_PATH="}, ""},

		// A mount path names the mount of a data path.
		{"mount without data path from file refused", noVolumes + diskless + "volume_mount_path: /var/lib/fred", nil, mountReq},
		{"mount without data path from env refused", diskless, []string{"BERTH_VOLUME_DATA_PATH=", "BERTH_VOLUME_MOUNT_PATH=/srv"}, mountReq},
		{"mount with data path accepted", "volume_data_path: /srv/berth/volumes\nvolume_mount_path: /srv", nil, ""},
		{"mount from env with the default data path accepted", "", []string{"BERTH_VOLUME_MOUNT_PATH=/srv"}, ""},
		{"dev data path without mount accepted", "volume_data_path: /srv/berth/volumes\nvolume_mount_path: \"\"", nil, ""},

		// production_mode: a data path needs its mount, and only the operator gives one.
		{"prod with data path and mount accepted", prodBase, nil, ""},
		{"prod stateful without an operator's data path refused (no embedded root)", prodOperator, nil,
			"volume_data_path: is required: sku_profiles.app is stateful"},
		{"prod data path from file without mount refused", prodOperator + "volume_data_path: /var/lib/berth/volumes", nil, prodReq},
		{"prod data path from env without mount refused", prodOperator, []string{"BERTH_VOLUME_DATA_PATH=/srv/v"}, prodReq},
		{"prod data path and mount from env accepted", prodOperator,
			[]string{"BERTH_VOLUME_DATA_PATH=/var/lib/berth/volumes", "BERTH_VOLUME_MOUNT_PATH=/var/lib/berth"}, ""},
		{"prod mount cleared by env refused", prodBase, []string{"BERTH_VOLUME_MOUNT_PATH="}, prodReq},
		{"prod mode from env with a data path, without mount refused", "callback_secret: " + testSecret +
			"\nhost_address: 203.0.113.7\nvolume_data_path: /srv/v\n" + diskless, []string{"BERTH_PRODUCTION_MODE=true"}, prodReq},
		{"prod mode from env, diskless, no volume keys accepted", "callback_secret: " + testSecret + "\nhost_address: 203.0.113.7\n" + diskless,
			[]string{"BERTH_PRODUCTION_MODE=true"}, ""},
		{"prod stateful without data path refused", prodOperator + noVolumes, nil,
			"volume_data_path: is required: sku_profiles.app is stateful"},
		// Fred's shape: no managed volumes at all, which only diskless profiles allow.
		{"prod diskless without volumes accepted", "production_mode: true\ncallback_secret: " + testSecret +
			"\nhost_address: 203.0.113.7\n" + diskless + noVolumes, nil, ""},
	})

	// One missing data path is one mistake: a stateful SKU with only a mount path
	// is told the data path it needs, not also that the mount lacks one.
	list := problemsOf(t, noVolumes+"volume_mount_path: /srv")
	if len(list) != 1 || findProblem(list, stateful) == "" {
		t.Fatalf("problems = %q, want exactly the volume_data_path one", list)
	}
}

// volume_filesystem: "" auto-detects; btrfs and dir (development only) are the
// drivers; xfs and zfs are refused naming the reason; anything else is unknown.
func TestValidate_VolumeFilesystem(t *testing.T) {
	const (
		notSupported = " quotas are not supported by this berthd: its quota driver is btrfs"
		dirProd      = "volume_filesystem: dir enforces no quota and is refused in production_mode"
	)
	runRuleCases(t, []ruleCase{
		{"auto-detect accepted", `volume_filesystem: ""`, nil, ""},
		{"btrfs accepted", "volume_filesystem: btrfs", nil, ""},
		{"btrfs from env accepted", "", []string{"BERTH_VOLUME_FILESYSTEM=btrfs"}, ""},
		{"dir accepted", "volume_filesystem: dir", nil, ""},
		{"dir from env accepted", "", []string{"BERTH_VOLUME_FILESYSTEM=dir"}, ""},
		{"xfs refused", "volume_filesystem: xfs", nil, "volume_filesystem: xfs" + notSupported},
		{"zfs refused", "volume_filesystem: zfs", nil, "volume_filesystem: zfs" + notSupported},
		{"xfs from env refused", "", []string{"BERTH_VOLUME_FILESYSTEM=xfs"}, "volume_filesystem: xfs" + notSupported},
		{"zfs from env refused", "", []string{"BERTH_VOLUME_FILESYSTEM=zfs"}, "volume_filesystem: zfs" + notSupported},
		{"zfs refused without volumes too", noVolumes + diskless + "volume_filesystem: zfs", nil, "volume_filesystem: zfs" + notSupported},
		{"ext4 refused", "volume_filesystem: ext4", nil, `volume_filesystem: "ext4" is not one of`},
		{"ext4 from env refused", "", []string{"BERTH_VOLUME_FILESYSTEM=ext4"}, `volume_filesystem: "ext4" is not one of`},
		{"case refused", "volume_filesystem: BTRFS", nil, `volume_filesystem: "BTRFS" is not one of`},
		{"XFS case refused as unknown", "volume_filesystem: XFS", nil, "volume_filesystem:|not one of"},

		{"prod auto-detect accepted", prodBase + `volume_filesystem: ""`, nil, ""},
		{"prod btrfs accepted", prodBase + "volume_filesystem: btrfs", nil, ""},
		{"prod btrfs from env accepted", prodBase, []string{"BERTH_VOLUME_FILESYSTEM=btrfs"}, ""},
		{"prod dir refused", prodBase + "volume_filesystem: dir", nil, dirProd},
		{"prod dir from env refused", prodBase, []string{"BERTH_VOLUME_FILESYSTEM=dir"}, dirProd},
		{"prod mode from env with dir refused", "volume_filesystem: dir", []string{"BERTH_PRODUCTION_MODE=true"}, dirProd},
		{"prod xfs refused", prodBase + "volume_filesystem: xfs", nil, "volume_filesystem: xfs" + notSupported},
	})
}

func TestValidate_VolumesAttestationAndRuntimeRefresh(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"min avg file bytes zero refused", "min_avg_file_bytes: 0", nil, "min_avg_file_bytes: must be positive"},
		{"min avg file bytes negative refused", "min_avg_file_bytes: -1024", nil, "min_avg_file_bytes: must be positive"},
		{"min avg file bytes one accepted", "min_avg_file_bytes: 1", nil, ""},
		{"attestation negative refused", "storage_attestation_timeout: -1s", nil, "storage_attestation_timeout: must not be negative"},
		{"attestation no unit refused", "storage_attestation_timeout: 30", nil, "storage_attestation_timeout: 30 has no unit"},
		{"refresh 0 accepted", "runtime_refresh_max_concurrency: 0", nil, ""},
		{"refresh 64 accepted", "runtime_refresh_max_concurrency: 64", nil, ""},
		{"refresh 65 refused", "runtime_refresh_max_concurrency: 65", nil, "runtime_refresh_max_concurrency: must be from 0 to 64, got 65"},
		{"refresh negative refused", "runtime_refresh_max_concurrency: -1", nil, "runtime_refresh_max_concurrency: must be from 0 to 64, got -1"},
	})
}

func TestLoad_StorageAttestationTimeoutZero_Selects30s(t *testing.T) {
	if c := mustLoad(t, "storage_attestation_timeout: 0\n"); c.StorageAttestationTimeout != 30*time.Second {
		t.Fatalf("0: %s, want 30s", c.StorageAttestationTimeout)
	}
	if c := mustLoad(t, "storage_attestation_timeout: 2m\n"); c.StorageAttestationTimeout != 2*time.Minute {
		t.Fatalf("2m: %s", c.StorageAttestationTimeout)
	}
}

func TestLoad_IngressLists_ReplacedWhole_NullSectionKeepsDefaults(t *testing.T) {
	c := mustLoad(t, "ingress:\n  custom_domain_middlewares: [\"hsts@file\"]\n",
		"BERTH_INGRESS__CUSTOM_DOMAIN_DNS_RESOLVERS= 10.0.0.1:53, 10.0.0.2:53")
	if !reflect.DeepEqual(c.Ingress.CustomDomainMiddlewares, []string{"hsts@file"}) {
		t.Fatalf("middlewares = %q, want only the file's entry", c.Ingress.CustomDomainMiddlewares)
	}
	if !reflect.DeepEqual(c.Ingress.CustomDomainDNSResolvers, []string{"10.0.0.1:53", "10.0.0.2:53"}) {
		t.Fatalf("resolvers = %q, want the env list", c.Ingress.CustomDomainDNSResolvers)
	}
	if c.Ingress.CustomDomainCertResolver != "http01" {
		t.Fatalf("cert resolver lost its default: %q", c.Ingress.CustomDomainCertResolver)
	}

	// A section whose every line is commented out is a YAML null: the defaults stay.
	c = mustLoad(t, "ingress:\n  # enabled: true\ndebug:\n")
	defaults := mustLoad(t, "")
	if !reflect.DeepEqual(c.Ingress, defaults.Ingress) || c.Debug != defaults.Debug {
		t.Fatalf("null sections changed the config: ingress %+v debug %+v", c.Ingress, c.Debug)
	}
	runRuleCases(t, []ruleCase{
		{"ingress scalar refused", "ingress: true", nil, "ingress: must be a map"},
		{"ingress list scalar refused", "ingress: {custom_domain_middlewares: x}", nil, "ingress.custom_domain_middlewares: must be a list of strings"},
		{"null profiles still refused", "sku_profiles: ~", nil, "sku_profiles: at least one SKU profile is required"},
	})
}

func TestValidate_DebugChaosRequiresToken(t *testing.T) {
	short := strings.Repeat("t", MinDebugTokenBytes-1)
	good := strings.Repeat("t", MinDebugTokenBytes)
	runRuleCases(t, []ruleCase{
		{"chaos without token refused", "debug: {chaos: true}", nil,
			"debug.chaos: requires debug.token (at least 16 bytes): the chaos endpoint must never be open without it"},
		{"chaos with empty token refused", `debug: {chaos: true, token: ""}`, nil, "debug.chaos: requires debug.token"},
		{"chaos with short token refused", "debug: {chaos: true, token: " + short + "}", nil, "debug.token: must be at least 16 bytes, got 15"},
		{"chaos with 16-byte token accepted", "debug: {chaos: true, token: " + good + "}", nil, ""},
		{"chaos and token from env accepted", "", []string{"BERTH_DEBUG__CHAOS=true", "BERTH_DEBUG__TOKEN=" + good}, ""},
		{"chaos from env without token refused", "", []string{"BERTH_DEBUG__CHAOS=true"}, "debug.chaos: requires debug.token"},
		{"short token without chaos refused", "debug: {token: " + short + "}", nil, "debug.token: must be at least 16 bytes"},
		{"token without chaos accepted", "debug: {token: " + good + "}", nil, ""},
		{"token as number refused", "debug: {token: 1234567890123456}", nil, "debug.token: must be a string"},
	})
	list := problemsOf(t, "debug: {chaos: true, token: "+short+"}")
	if len(list) != 1 {
		t.Fatalf("a short token is one mistake, got %q", list)
	}
	if strings.Contains(strings.Join(list, "\n"), short) {
		t.Fatal("a problem echoes the token")
	}
}

func TestValidate_DebugListenNotLoopback_WarningAdvisesToken(t *testing.T) {
	c := mustLoad(t, `debug_listen_addr: "0.0.0.0:9002"`)
	if findProblem(c.Warnings, "debug_listen_addr: 0.0.0.0:9002 is not loopback", "setting debug.token is advised") == "" {
		t.Fatalf("no token advice: %q", c.Warnings)
	}
	c = mustLoad(t, "debug_listen_addr: \"0.0.0.0:9002\"\ndebug: {token: "+testDebugToken+"}\n")
	if findProblem(c.Warnings, "debug_listen_addr", "not loopback") == "" || findProblem(c.Warnings, "advised") != "" {
		t.Fatalf("with a token: %q, want the loopback warning without the advice", c.Warnings)
	}
}

// production_mode takes host_address and sku_profiles only from an operator: the
// embedded defaults (127.0.0.1, the starter profiles) are for a laptop.
func TestValidate_ProductionMode_HostAddressAndSKUProfilesFromOperatorOnly(t *testing.T) {
	// prodVolumes: the embedded volume_data_path applies in production_mode too and
	// needs its volume_mount_path there; with it, host_address and sku_profiles
	// are the only keys these cases are about.
	prod := "production_mode: true\ncallback_secret: " + testSecret + "\n" + prodVolumes
	profiles := "sku_profiles:\n  app: {cpu_cores: 1, memory_mb: 512}\n"
	runRuleCases(t, []ruleCase{
		{"host_address missing refused", prod + profiles, nil, "host_address: is required in production_mode"},
		{"host_address loopback refused", prod + profiles + "host_address: 127.0.0.1", nil,
			`host_address: "127.0.0.1" is a loopback address; production_mode needs`},
		{"host_address loopback range refused", prod + profiles + "host_address: 127.1.2.3", nil, "host_address:|loopback"},
		{"host_address ::1 refused", prod + profiles + `host_address: "::1"`, nil, "host_address:|loopback"},
		{"host_address mapped loopback refused", prod + profiles + `host_address: "::ffff:127.0.0.1"`, nil, "host_address:|loopback"},
		{"host_address localhost refused", prod + profiles + "host_address: localhost", nil, "host_address:|loopback"},
		{"host_address name.localhost refused", prod + profiles + "host_address: berth.localhost.", nil, "host_address:|loopback"},
		{"host_address unspecified refused", prod + profiles + "host_address: 0.0.0.0", nil, "host_address:|not an address tenants can reach"},
		{"host_address loopback env refused", prod + profiles, []string{"BERTH_HOST_ADDRESS=127.0.0.1"}, "host_address:|loopback"},
		{"host_address from file accepted", prod + profiles + "host_address: 203.0.113.7", nil, ""},
		{"host_address from env accepted", prod + profiles, []string{"BERTH_HOST_ADDRESS=berth.example.com"}, ""},
		{"sku_profiles missing refused", prod + "host_address: 203.0.113.7", nil,
			"sku_profiles: at least one SKU profile is required in production_mode|starter profiles never apply"},
		{"sku_profiles empty refused", prod + "host_address: 203.0.113.7\nsku_profiles: {}", nil,
			"sku_profiles: at least one SKU profile is required"},
		{"sku_profiles from env accepted", prod + "host_address: 203.0.113.7", []string{
			"BERTH_SKU_PROFILES__APP__CPU_CORES=1", "BERTH_SKU_PROFILES__APP__MEMORY_MB=512"}, ""},
		{"everything from env accepted", "", []string{"BERTH_PRODUCTION_MODE=true", "BERTH_CALLBACK_SECRET=" + testSecret,
			"BERTH_HOST_ADDRESS=203.0.113.7", "BERTH_SKU_PROFILES__APP__CPU_CORES=1", "BERTH_SKU_PROFILES__APP__MEMORY_MB=512",
			"BERTH_VOLUME_DATA_PATH=/var/lib/berth/volumes", "BERTH_VOLUME_MOUNT_PATH=/var/lib/berth"}, ""},
		{"dev mode keeps the defaults", "", nil, ""},
		{"dev mode loopback accepted", "host_address: localhost", nil, ""},
	})

	// Both missing: exactly one problem each, and none about the defaults' values.
	list := problemsOf(t, prod)
	if len(list) != 2 || findProblem(list, "host_address: is required in production_mode") == "" ||
		findProblem(list, "sku_profiles:", "production_mode") == "" {
		t.Fatalf("problems = %q, want exactly host_address and sku_profiles", list)
	}

	c := mustLoad(t, prod+"host_address: 203.0.113.7", "BERTH_SKU_PROFILES__APP__CPU_CORES=1", "BERTH_SKU_PROFILES__APP__MEMORY_MB=512")
	if want := map[string]SKUProfile{"app": {CPUCores: 1, MemoryMB: 512}}; !reflect.DeepEqual(c.SKUProfiles, want) {
		t.Fatalf("sku_profiles = %+v, want only the env profile", c.SKUProfiles)
	}
}

func TestValidate_SingleContainerNetwork_DefaultBridgeOrOwn(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"default_bridge accepted", "single_container_network: default_bridge", nil, ""},
		{"own accepted", "single_container_network: own", nil, ""},
		{"anything else refused", "single_container_network: bridge", nil, `single_container_network: "bridge" is not one of default_bridge, own`},
		{"empty refused", `single_container_network: ""`, nil, "single_container_network:"},
	})
}
