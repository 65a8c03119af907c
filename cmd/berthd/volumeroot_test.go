package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/dockerio/volumes"
)

// setConfigLine replaces the config file's top-level line for key with line, or
// drops it when line is "" (so the key takes its default).
func (d *daemonProc) setConfigLine(key, line string) {
	d.t.Helper()
	raw, err := os.ReadFile(d.cfgPath)
	if err != nil {
		d.t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(l, key+":") {
			out = append(out, l)
		} else if line != "" {
			out = append(out, line)
		}
	}
	if err := os.WriteFile(d.cfgPath, []byte(strings.Join(out, "\n")), 0o600); err != nil {
		d.t.Fatal(err)
	}
}

// Without volume_data_path the volume root is <data_dir>/volumes: two daemons
// started from one working directory each get their own, and a daemon whose data
// dir was reset starts again (a root in the working directory outlived the reset
// and named the old installation, so the new one was refused).
func TestVolumeRoot_FollowsDataDir_AResetDataDirStarts(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	owner := func(d *daemonProc) string {
		raw, err := os.ReadFile(filepath.Join(d.dir, "data", "volumes", volumes.InstallationMarker))
		if err != nil {
			t.Fatalf("no volume root in the data dir: %v", err)
		}
		return strings.TrimSpace(string(raw))
	}
	var daemons []*daemonProc
	for range 2 {
		d := newDaemonDir(t)
		d.setConfigLine("volume_data_path", "")
		d.startInProcess()
		if id := readInstallationID(filepath.Join(d.dir, "data")); owner(d) != id {
			t.Fatalf("volume root owned by %q, want this daemon's %q", owner(d), id)
		}
		if code := d.stop(); code != exitOK {
			t.Fatalf("stop exit %d", code)
		}
		daemons = append(daemons, d)
	}
	d := daemons[0]
	before := owner(d)
	if err := os.RemoveAll(filepath.Join(d.dir, "data")); err != nil {
		t.Fatal(err)
	}
	d.startInProcess()
	if after := owner(d); after == before || after != readInstallationID(filepath.Join(d.dir, "data")) {
		t.Fatalf("after the reset the volume root is owned by %q (before %q)", after, before)
	}
}
