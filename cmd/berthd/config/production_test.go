package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// In production_mode a loopback listen_addr or host_bind_ip is refused with the
// reason: providerd could not reach the API, and tenants' published ports would
// be unreachable while their provisions report success.
func TestProductionMode_LoopbackListenAddrOrHostBindIP_RefusedWithTheReason(t *testing.T) {
	const (
		listen = "is loopback: in production_mode providerd reaches the API over the network"
		bind   = "is loopback: in production_mode tenants' published ports would be unreachable from outside this host while their provisions report success"
	)
	runRuleCases(t, []ruleCase{
		{"listen IPv4 loopback refused", prodBase + `listen_addr: "127.0.0.1:9001"`, nil, "listen_addr: \"127.0.0.1:9001\" " + listen},
		{"listen localhost refused", prodBase + `listen_addr: "localhost:9001"`, nil, "listen_addr:|" + listen},
		{"listen IPv6 loopback from env refused", prodBase, []string{"BERTH_LISTEN_ADDR=[::1]:9001"}, "listen_addr:|" + listen},
		{"listen external accepted", prodBase + `listen_addr: "203.0.113.7:9001"`, nil, ""},
		{"bind IPv4 loopback refused", prodBase + `host_bind_ip: "127.0.0.1"`, nil, "host_bind_ip: \"127.0.0.1\" " + bind},
		{"bind IPv4-mapped loopback refused", prodBase + `host_bind_ip: "::ffff:127.0.0.2"`, nil, "host_bind_ip:|" + bind},
		{"bind loopback from an alias refused", prodBase, []string{"DOCKER_BACKEND_HOST_BIND_IP=::1"}, "host_bind_ip:|" + bind},
		{"bind external accepted", prodBase + `host_bind_ip: "203.0.113.7"`, nil, ""},
		// Development keeps its loopback defaults.
		{"dev loopback accepted", `listen_addr: "127.0.0.1:9001"` + "\nhost_bind_ip: 127.0.0.1", nil, ""},
	})
}

// production_mode never takes the embedded laptop addresses or volume root: left
// unset, they are the seed's defaults.
func TestProductionMode_UnsetAddressesAndVolumeRoot_TakeTheSeedDefaults(t *testing.T) {
	c := mustLoad(t, "production_mode: true\ncallback_secret: "+testSecret+"\nhost_address: 203.0.113.7\n"+diskless)
	if c.ListenAddr != ":9001" || c.HostBindIP != "0.0.0.0" || c.VolumeDataPath != "" {
		t.Fatalf("listen_addr %q host_bind_ip %q volume_data_path %q, want the seed's \":9001\", \"0.0.0.0\", \"\"",
			c.ListenAddr, c.HostBindIP, c.VolumeDataPath)
	}
	if !slices.Equal(c.AllowedRegistries, []string{"docker.io", "ghcr.io"}) {
		t.Fatalf("allowed_registries %q, want the seed's [docker.io ghcr.io]: never the laptop's 127.0.0.1:5000 or localhost:5000", c.AllowedRegistries)
	}
	// Set by the operator, it is theirs, local registries included.
	c = mustLoad(t, "production_mode: true\ncallback_secret: "+testSecret+"\nhost_address: 203.0.113.7\n"+diskless+
		"allowed_registries: [\"registry.internal:5000\"]\n")
	if !slices.Equal(c.AllowedRegistries, []string{"registry.internal:5000"}) {
		t.Fatalf("allowed_registries %q, want the operator's", c.AllowedRegistries)
	}
	// Outside production the embedded development list stays (make run pulls from the local registry).
	if c := mustLoad(t, "callback_secret: "+testSecret+"\n"); !slices.Contains(c.AllowedRegistries, "127.0.0.1:5000") {
		t.Fatalf("development allowed_registries %q lack the local registry", c.AllowedRegistries)
	}
}

// debug.chaos crashes actors on request: a host running tenants refuses it.
func TestProductionMode_DebugChaosRefused(t *testing.T) {
	good := strings.Repeat("t", MinDebugTokenBytes)
	runRuleCases(t, []ruleCase{
		{"chaos in production refused", prodBase + "debug: {chaos: true, token: " + good + "}", nil,
			"debug.chaos: is refused in production_mode"},
		{"chaos from env in production refused", prodBase, []string{"BERTH_DEBUG__CHAOS=true", "BERTH_DEBUG__TOKEN=" + good},
			"debug.chaos: is refused in production_mode"},
		{"token alone in production accepted", prodBase + "debug: {token: " + good + "}", nil, ""},
	})
}

// A diskless Fred production file that leaves volume_data_path out loads: the
// seed's default is no volume root, which diskless profiles do not need.
func TestProductionMode_DisklessFredFileWithoutVolumeDataPath_Loads(t *testing.T) {
	raw, err := os.ReadFile(testdataPath("fred-docker-backend.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "volume_data_path:") {
			kept = append(kept, line)
		}
	}
	c, err := Load(writeConfig(t, strings.Join(kept, "\n")), nil)
	if err != nil {
		t.Fatalf("a diskless Fred file without volume_data_path is refused:\n%v", err)
	}
	if !c.ProductionMode || c.VolumeDataPath != "" || c.VolumeMountPath != "" {
		t.Fatalf("production_mode %v volume_data_path %q volume_mount_path %q", c.ProductionMode, c.VolumeDataPath, c.VolumeMountPath)
	}
}

// Outside production_mode an unset volume root is <data_dir>/volumes, so it goes
// with its data dir (never the working directory's ./var/berth/volumes); a set
// one, "" (none) included, is kept.
func TestVolumeRoot_FollowsDataDir(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"embedded data dir", "", nil, filepath.Join("var", "berth", "volumes")},
		{"data dir from the file", "data_dir: /srv/berth-a\n", nil, "/srv/berth-a/volumes"},
		{"data dir from env", "", []string{"BERTH_DATA_DIR=/srv/berth-b"}, "/srv/berth-b/volumes"},
		{"data dir from an alias", "", []string{"DOCKER_BACKEND_DATA_DIR=/srv/berth-c"}, "/srv/berth-c/volumes"},
		{"root set", "data_dir: /srv/berth-a\nvolume_data_path: /srv/tenants\n", nil, "/srv/tenants"},
		{"root set to none", "data_dir: /srv/berth-a\nvolume_data_path: \"\"\n" + diskless, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := mustLoad(t, c.yaml, c.env...).VolumeDataPath; got != c.want {
				t.Fatalf("volume_data_path = %q, want %q", got, c.want)
			}
		})
	}
}
