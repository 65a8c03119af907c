package main

// The leftover check every daemon a test starts goes through (newDaemonDir's
// cleanup, after the daemon stopped): nothing of its installations may be left
// in Docker or in its volume root — no container, no network (pool networks
// above all: a berthd that stops with no lease bound trims its pool), no Docker
// volume, no managed volume dir. A leak fails the test and is then removed, so
// runs do not pile objects up (one machine once held 384 pool networks of 22
// installations no longer there). A test that stops a daemon on purpose with
// leases running removes its installation's objects itself (discardObjects).

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/volumes"
)

// checkLeftovers fails the test for whatever the daemon's installations left
// behind, then removes it from Docker (volume dirs go with the test's temp dir
// or btrfs root).
func (d *daemonProc) checkLeftovers() {
	d.rememberInstallation()
	d.installsMu.Lock()
	defer d.installsMu.Unlock()
	root := d.volumeRoot()
	for id := range d.installations {
		if left := leftovers(id, root); len(left) > 0 {
			said := d.logLines("network pool")
			if said == "" { // the pool never got to its stop: how the daemon's stop went
				said = "(nothing) — the log's last lines:\n" + d.logTail(25)
			}
			d.t.Errorf("installation %s left behind after its daemon stopped (removed now):\n  %s\nthe pool's stop, as logged:\n%s",
				id, strings.Join(left, "\n  "), said)
		}
		removeInstallation(id)
	}
}

// discardObjects removes what the daemon's installations hold in Docker now:
// for a test that stopped (or killed) its daemon with leases running on purpose.
func (d *daemonProc) discardObjects() {
	d.rememberInstallation()
	d.installsMu.Lock()
	defer d.installsMu.Unlock()
	for id := range d.installations {
		removeInstallation(id)
	}
}

// volumeRoot is the daemon's volume_data_path, as its config file sets it.
func (d *daemonProc) volumeRoot() string {
	raw, _ := os.ReadFile(d.cfgPath)
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "volume_data_path:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// leftovers names every container, network and Docker volume labelled with the
// installation, and the managed volume dirs of a volume root it owns.
func leftovers(installation, volumeRoot string) []string {
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return []string{"docker client: " + err.Error()}
	}
	defer dc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []string
	f := filters.NewArgs(filters.Arg("label", dockerio.LabelInstallation+"="+installation))
	cs, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		out = append(out, "list containers: "+err.Error())
	}
	for _, c := range cs {
		out = append(out, "container "+strings.Join(c.Names, ",")+" ("+c.State+")")
	}
	ns, err := dc.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		out = append(out, "list networks: "+err.Error())
	}
	for _, n := range ns {
		out = append(out, "network "+n.Name+" ("+n.Labels[dockerio.LabelNetworkScope]+")")
	}
	vs, err := dc.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err != nil {
		out = append(out, "list volumes: "+err.Error())
	}
	for _, v := range vs.Volumes {
		out = append(out, "volume "+v.Name)
	}
	return append(out, volumeDirs(installation, volumeRoot)...)
}

// volumeDirs names the managed volume dirs (fred-…) of a volume root whose
// marker names the installation (retained data is not a leak).
func volumeDirs(installation, root string) []string {
	marker, err := os.ReadFile(filepath.Join(root, volumes.InstallationMarker))
	if root == "" || err != nil || strings.TrimSpace(string(marker)) != installation {
		return nil
	}
	entries, _ := os.ReadDir(root)
	var out []string
	for _, e := range entries {
		// Retained data (fred-retained-…) is kept on purpose until
		// retention_max_age; the test's temp dir or btrfs root takes it.
		if strings.HasPrefix(e.Name(), "fred-") && !strings.HasPrefix(e.Name(), "fred-retained-") {
			out = append(out, "volume dir "+filepath.Join(root, e.Name()))
		}
	}
	return out
}

// logLines are the daemon's log lines holding substr (why a pool was kept).
func (d *daemonProc) logLines(substr string) string {
	var out []string
	for _, l := range strings.Split(d.log.String(), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, "  "+l)
		}
	}
	return strings.Join(out, "\n")
}

// logTail is the daemon log's last n lines.
func (d *daemonProc) logTail(n int) string {
	lines := strings.Split(strings.TrimSpace(d.log.String()), "\n")
	return "  " + strings.Join(lines[max(0, len(lines)-n):], "\n  ")
}

// whyNotRemoved describes the containers of leases that did not settle: their
// state and, when Docker could not remove one ("device or resource busy"), the
// processes whose mount namespace still holds its root filesystem — so a
// failure after a dockerd restart says whether berthd or the host kept it.
func whyNotRemoved(dc *client.Client, pending []string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	for _, p := range pending {
		if len(p) < 36 {
			continue
		}
		cs, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", "fred.lease_uuid="+p[:36]))})
		if err != nil {
			return fmt.Sprintf("list containers: %v", err)
		}
		for _, c := range cs {
			fmt.Fprintf(&b, "  %s %s %s (%s)\n", p[:36], c.ID[:12], c.State, c.Status)
			in, err := dc.ContainerInspect(ctx, c.ID)
			if err != nil || in.GraphDriver.Data["MergedDir"] == "" {
				continue
			}
			if holders := mountHolders(in.GraphDriver.Data["MergedDir"]); len(holders) > 0 {
				fmt.Fprintf(&b, "    its root filesystem is mounted in: %s\n", strings.Join(holders, ", "))
			}
		}
	}
	return b.String()
}

// mountHolders are the processes (pid/comm) whose mountinfo lists dir.
func mountHolders(dir string) []string {
	infos, _ := filepath.Glob("/proc/[0-9]*/mountinfo")
	var out []string
	for _, f := range infos {
		data, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(data), dir) {
			continue
		}
		pid := filepath.Base(filepath.Dir(f))
		comm, _ := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		out = append(out, pid+"/"+strings.TrimSpace(string(comm)))
	}
	return out
}
