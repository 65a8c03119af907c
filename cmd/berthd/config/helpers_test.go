package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A valid 32+ byte secret, and a different one, for tests that need them.
const (
	testSecret     = "0123456789abcdef0123456789abcdef-primary"
	testSecretNext = "fedcba9876543210fedcba9876543210-next"
	testDebugToken = "debug-token-0123456789"
)

// prodOperator is every key that production_mode requires from an operator, set
// by the file, and no volume key: its profile is stateful, and production_mode
// never takes the embedded volume root, so it is refused without prodVolumes.
// Volume tests add the volume keys they are about to it.
const prodOperator = "production_mode: true\ncallback_secret: " + testSecret + "\nhost_address: 203.0.113.7\n" +
	"sku_profiles:\n  app: {cpu_cores: 1, memory_mb: 512, disk_mb: 1024}\n"

// prodVolumes are the managed-volume paths of a production host: the data path
// and the mount that contains it (production_mode requires both for a stateful SKU).
const prodVolumes = "volume_data_path: /var/lib/berth/volumes\nvolume_mount_path: /var/lib/berth\n"

// prodBase is a minimal production_mode file that loads: prodOperator with its
// tenant data on an explicit mount (prodVolumes).
const prodBase = prodOperator + prodVolumes

// writeConfig writes yaml to a fresh file and returns its path.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "berthd.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// loadYAML loads yaml as the config file ("" = no file) over the defaults, with env.
func loadYAML(t *testing.T, yaml string, env ...string) (*Config, error) {
	t.Helper()
	path := ""
	if yaml != "" {
		path = writeConfig(t, yaml)
	}
	return Load(path, env)
}

func mustLoad(t *testing.T, yaml string, env ...string) *Config {
	t.Helper()
	c, err := loadYAML(t, yaml, env...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// problemsOf loads and returns the problem list, failing unless Load refused.
func problemsOf(t *testing.T, yaml string, env ...string) []string {
	t.Helper()
	c, err := loadYAML(t, yaml, env...)
	if err == nil {
		t.Fatalf("Load accepted the config, want problems; got %+v", c)
	}
	var p *Problems
	if !errors.As(err, &p) {
		t.Fatalf("Load error is %T (%v), want *Problems", err, err)
	}
	if len(p.List) == 0 {
		t.Fatal("Problems with an empty list")
	}
	if got := p.Error(); got != strings.Join(p.List, "\n") {
		t.Fatalf("Error() = %q, want one problem per line", got)
	}
	return p.List
}

// findProblem returns the problem containing every one of parts, or "".
func findProblem(list []string, parts ...string) string {
	for _, p := range list {
		all := true
		for _, part := range parts {
			if !strings.Contains(p, part) {
				all = false
				break
			}
		}
		if all {
			return p
		}
	}
	return ""
}
