package main

// The sandbox a tenant cannot widen (issue 17): inside a container berthd
// launched on the btrfs volume root, the subvolume escape out of the volume's
// quota (measured before the tenant profile: 20 MiB written into an 8 MiB
// volume) fails with EPERM, and writing past the quota gets EDQUOT.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages"
)

// buildWorkloadBinary compiles dockerio/dockertest/workload (whose ioctl mode makes
// the btrfs subvolume and snapshot creation calls) as a static binary.
func buildWorkloadBinary(t *testing.T) []byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "workload")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./dockerio/dockertest/workload")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build testworkload: %v\n%s", err, b)
	}
	bin, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestTenantSandbox_BtrfsSubvolumeEscapeEPERMAndWritePastQuotaEDQUOT(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	bin := buildWorkloadBinary(t)
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t)
	lease := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "small", Quantity: 1})
	vol := filepath.Join(root, messages.VolumeName(lease, "app", 0))
	// The tenant's own program, put in its volume: a tenant runs what it likes.
	if err := os.WriteFile(filepath.Join(vol, "data", "escape"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	id := runningContainerID(t, dc, lease)
	out, err := exec.Command("docker", "exec", id, "/data/escape", "ioctl", "/data").CombinedOutput()
	t.Logf("inside the tenant container:\n%s", out)
	if err != nil {
		t.Fatalf("docker exec ioctl: %v", err)
	}
	for _, name := range []string{"SUBVOL_CREATE", "SUBVOL_CREATE_V2", "SNAP_CREATE", "SNAP_CREATE_V2"} {
		if !strings.Contains(string(out), name+" EPERM (1)\n") {
			t.Errorf("%s not refused with EPERM", name)
		}
	}
	if !strings.Contains(string(out), "FIONREAD ok\n") {
		t.Errorf("an ordinary ioctl was refused")
	}
	if list, err := exec.Command("btrfs", "subvolume", "list", "-o", vol).CombinedOutput(); err != nil || len(bytes.TrimSpace(list)) != 0 {
		t.Errorf("subvolumes under the instance volume: %s %v", list, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(vol, "data")); len(entries) != 1 {
		t.Errorf("the volume holds %v after the refused ioctls, want only the program", entries)
	}
	// The writes the escape would have taken past the quota: 15 MiB files (the
	// workload's largest PUT) into a 64 MiB volume already holding the program.
	hp := hostPort(t, d, lease, "app", 0)
	for i := 0; ; i++ {
		code, body := putFile(t, hp, fmt.Sprintf("/data/past-quota-%d.bin", i), bytes.Repeat([]byte("z"), 15<<20))
		if code < 300 {
			if i == 4 {
				t.Fatalf("75 MiB written into a 64 MiB volume")
			}
			continue
		}
		if !strings.Contains(strings.ToLower(body), "quota") {
			t.Fatalf("write %d past the quota: %d %q, want the kernel's EDQUOT", i, code, body)
		}
		break
	}
	d.closeAll(dc, lease)
	if entries := managedVolumes(t, root); len(entries) != 0 {
		t.Fatalf("a destroying close left %d volumes", len(entries))
	}
}
