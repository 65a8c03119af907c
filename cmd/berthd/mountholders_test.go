package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

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
