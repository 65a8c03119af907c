package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/cmd/berthd/config"
)

// unitDirectives reads a systemd unit's Key=Value lines (comments and sections
// skipped), a key given twice keeping both values.
func unitDirectives(t *testing.T, raw []byte) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("unit line %q is not Key=Value", line)
		}
		out[k] = append(out[k], v)
	}
	return out
}

// The unit as shipped: systemd-analyze verify finds nothing to say about it
// (with ExecStart pointed at a real executable), and it holds exactly the
// capabilities and settings the daemon is built around.
func TestUnit_VerifiesAndHoldsExactlyWhatBerthdNeeds(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("deploy/berthd.service")
	if err != nil {
		t.Fatal(err)
	}
	d := unitDirectives(t, raw)
	caps := "CAP_SYS_ADMIN CAP_CHOWN CAP_DAC_OVERRIDE CAP_FOWNER CAP_SYS_PTRACE CAP_NET_ADMIN CAP_NET_RAW"
	for key, want := range map[string]string{
		"Type":                    "notify",
		"Restart":                 "on-failure",
		"TimeoutStopSec":          "90",
		"WatchdogSec":             "30",
		"CapabilityBoundingSet":   caps,
		"AmbientCapabilities":     caps,
		"ProtectSystem":           "strict",
		"ReadWritePaths":          "/var/lib/berth /srv/berth-volumes -/run/xtables.lock",
		"NoNewPrivileges":         "yes",
		"PrivateTmp":              "yes",
		"ProtectHome":             "yes",
		"ProtectKernelTunables":   "yes",
		"ProtectKernelModules":    "yes",
		"ProtectControlGroups":    "yes",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
		"User":                    "berth",
		"Group":                   "berth",
		"SupplementaryGroups":     "docker",
		"LimitNOFILE":             "65536",
		"ExecStart":               "/usr/local/bin/berthd -config /etc/berth/berthd.yaml",
	} {
		if got := d[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want exactly %q", key, got, want)
		}
	}
	if _, ok := d["MountFlags"]; ok {
		t.Error("MountFlags set: host mounts made after the start would not reach berthd")
	}
	if stop, _ := time.ParseDuration(d["TimeoutStopSec"][0] + "s"); stop <= drainBudget {
		t.Errorf("TimeoutStopSec %s does not exceed the drain budget %s", stop, drainBudget)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		skipOrFail(t, "systemd-analyze is not installed (Debian package systemd)")
	}
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "berthd")
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	unit := filepath.Join(dir, "berthd.service")
	if err := os.WriteFile(unit, bytes.ReplaceAll(raw, []byte("/usr/local/bin/berthd"), []byte(bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The example production config loads and validates with the example secrets
// file as its environment, as the unit runs it.
func TestExampleConfig_LoadsInProductionMode(t *testing.T) {
	t.Parallel()
	envRaw, err := os.ReadFile("deploy/berthd.example.env")
	if err != nil {
		t.Fatal(err)
	}
	var environ []string
	for _, line := range strings.Split(string(envRaw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			environ = append(environ, line)
		}
	}
	cfg, err := config.Load("deploy/berthd.example.yaml", environ)
	if err != nil {
		t.Fatalf("example config: %v", err)
	}
	if !cfg.ProductionMode || cfg.VolumeFilesystem != "btrfs" || !cfg.RetainOnClose || cfg.TLSCertFile == "" ||
		cfg.CallbackSecret == "" || cfg.Debug.Token == "" || cfg.DebugListenAddr != "127.0.0.1:9002" || len(cfg.Warnings) != 0 {
		t.Fatalf("example config loaded as %+v", cfg)
	}
	// Without the secrets file it does not: production needs callback_secret.
	if _, err := config.Load("deploy/berthd.example.yaml", nil); err == nil || !strings.Contains(err.Error(), "callback_secret") {
		t.Fatalf("example config without its secrets: %v", err)
	}
}
