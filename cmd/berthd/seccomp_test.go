package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio/dockertest/fake"
)

// seccompOffEngine runs the daemon on the fake engine answering that Docker
// applies no seccomp profiles (a dockerd started with seccomp disabled).
func seccompOffEngine(t *testing.T) {
	testHooks.engine = func(installationID string) (docker, error) {
		e := fake.New(fake.Options{InstallationID: installationID})
		e.SetSeccompEnabled(false)
		return e, nil
	}
	t.Cleanup(func() { testHooks.engine = nil })
}

func TestStart_DockerWithoutSeccomp_RefusedInProduction(t *testing.T) {
	// Sequential: sets testHooks.engine, which every in-process daemon reads.
	dockerClient(t)
	mnt, root := btrfsRoot(t)
	// Production refuses loopback listen and bind addresses (config).
	api := nonLoopbackAddr(t)
	ip, _, _ := net.SplitHostPort(api)
	d := newDaemonDir(t, "production_mode: true", "host_address: 203.0.113.10",
		"listen_addr: "+api, "host_bind_ip: "+ip,
		"sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 512}",
		"volume_data_path: "+root, "volume_mount_path: "+mnt, "volume_filesystem: btrfs")
	if code, out := runOnce(t, "-config", d.cfgPath, "-initialize-storage-identity", "new"); code != 0 {
		t.Fatalf("initialize: exit %d\n%s", code, out)
	}
	seccompOffEngine(t)
	code, out := runOnce(t, "-config", d.cfgPath)
	if code != 1 || !strings.Contains(out, "applies no seccomp profiles") || !strings.Contains(out, "refusing to start") {
		t.Fatalf("production on a Docker without seccomp: exit %d, want 1 with the seccomp reason\n%s", code, out)
	}
	// Refused before the volume root was opened: nothing was created there.
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Fatalf("a refused start created %d entries in the volume root", len(entries))
	}
}

func TestStart_DockerWithoutSeccomp_WarnedOutsideProduction(t *testing.T) {
	// Sequential: sets testHooks.engine, which every in-process daemon reads.
	seccompOffEngine(t)
	d := newDaemonDir(t, "volume_data_path: "+filepath.Join(t.TempDir(), "volumes"), "log_level: info")
	d.startInProcess()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(d.log.String(), "applies no seccomp profiles") {
		if time.Now().After(deadline) {
			t.Fatalf("no seccomp warning in the log\n%s", d.log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := d.stop(); code != 0 {
		t.Fatalf("stop exit %d\n%s", code, d.log.String())
	}
}
