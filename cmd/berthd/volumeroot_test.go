package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio/volumes"
	"github.com/berth-dev/berth/messages"
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

// The volume root is unmounted while berthd runs (its path becomes a plain
// directory on the filesystem underneath, where every volume looks absent): a
// close of a stateful lease must not report the data destroyed. It holds — no
// completion callback, 503 lifecycle_pending — while /health, berthctl doctor and
// the metrics say why; mounted again, the close completes by itself and the
// data is really gone. The root is a bind mount of a fresh subdirectory of the
// shared test btrfs at a private path, so no other test's root is disturbed.
func TestVolumeRoot_UnmountedMidLife_CloseHeldAndVisible_CompletesOnceMountedAgain(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	_, src := btrfsRoot(t)
	if err := os.Mkdir(src, 0o711); err != nil {
		t.Fatal(err)
	}
	priv := bindMount(t, src)
	d := newDaemonDir(t, "volume_data_path: "+priv, "volume_mount_path: "+priv, "volume_filesystem: btrfs",
		"sku_profiles: {tiny: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 16}}").startInProcess()
	lease := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "tiny", Quantity: 1})
	if code, body := putFile(t, hostPort(t, d, lease, "app", 0), "/data/keep.bin", bytes.Repeat([]byte("k"), 1<<20)); code >= 300 {
		t.Fatalf("write tenant data: %d %s", code, body)
	}
	kept := filepath.Join(src, messages.VolumeName(lease, "app", 0), "data", "keep.bin")
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the tenant's file is not on the btrfs: %v", err)
	}

	unmount(t, priv)
	r := d.deprovision(lease)
	if r.Status != 503 || !strings.Contains(string(r.Body), "lifecycle_pending") {
		t.Fatalf("close on an unmounted volume root: %d %s, want 503 lifecycle_pending", r.Status, r.Body)
	}
	if got := cb.forLease(lease); len(got) != 1 {
		t.Fatalf("%d callbacks for the lease; a held close must send none: %+v", len(got), got)
	}
	if _, err := os.Stat(kept); err != nil {
		t.Fatalf("the data left the btrfs while the close was held: %v", err)
	}
	h := d.get("/health")
	if h.Status != 503 || !strings.Contains(string(h.Body), "volume root unproven") || !strings.Contains(string(h.Body), "not mounted there") {
		t.Fatalf("/health with the root unmounted: %d %s", h.Status, h.Body)
	}
	m := string(d.get("/metrics").Body)
	if !strings.Contains(m, "berth_volume_root_unproven 1") || strings.Contains(m, "berth_volume_root_held_operations 0") {
		t.Fatalf("metrics with the root unmounted:\n%s", grepLines(m, "berth_volume_root"))
	}
	doc := runBerthctl(t, buildBerthctl(t, t.TempDir()), d, "-config", d.cfgPath, "doctor")
	if doc.code == 0 || !regexp.MustCompile(`(?m)^volumes +fail +.*not an active mount point`).MatchString(doc.stdout) ||
		!regexp.MustCompile(`(?m)^health +fail +.*volume root unproven`).MatchString(doc.stdout) {
		t.Fatalf("doctor with the root unmounted: exit %d\n%s%s", doc.code, doc.stdout, doc.stderr)
	}

	if out, err := exec.Command("mount", "--bind", src, priv).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind again: %v %s", err, out)
	}
	d.deprovisionUntilGone(lease)
	if _, err := os.Stat(filepath.Dir(filepath.Dir(kept))); !os.IsNotExist(err) {
		t.Fatalf("the close completed but the volume is still on the btrfs (%v)", err)
	}
	if c := cb.waitFor(lease, 2, time.Minute)[1]; c.Body.Status != messages.CallbackDeprovisioned || c.Body.Retained {
		t.Fatalf("close callback %+v", c.Body)
	}
	if h := d.get("/health"); h.Status != 200 {
		t.Fatalf("/health with the root mounted again: %d %s", h.Status, h.Body)
	}
	if m := string(d.get("/metrics").Body); !strings.Contains(m, "berth_volume_root_unproven 0") {
		t.Fatalf("metrics with the root mounted again:\n%s", grepLines(m, "berth_volume_root"))
	}
	assertGone(t, dc, lease)
}

// bindMount bind-mounts src at a fresh private directory (the tests run as
// root); it is unmounted and removed however the test ends.
func bindMount(t *testing.T, src string) string {
	t.Helper()
	priv, err := os.MkdirTemp("", "berth-volroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 10 {
			if exec.Command("mountpoint", "-q", priv).Run() != nil {
				break
			}
			if exec.Command("umount", priv).Run() != nil {
				_ = exec.Command("umount", "-l", priv).Run()
			}
		}
		_ = os.Remove(priv)
	})
	if out, err := exec.Command("mount", "--bind", src, priv).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind %s %s: %v %s", src, priv, err, out)
	}
	return priv
}

// unmount unmounts p (lazily when a running container's mount keeps it busy:
// the path shows the filesystem underneath at once either way).
func unmount(t *testing.T, p string) {
	t.Helper()
	if out, err := exec.Command("umount", p).CombinedOutput(); err != nil {
		if out2, err2 := exec.Command("umount", "-l", p).CombinedOutput(); err2 != nil {
			t.Fatalf("umount %s: %v %s; lazily: %v %s", p, err, out, err2, out2)
		}
	}
}

// storage_attestation_timeout is the budget of the volume root's proof at start:
// one too small for the btrfs quota check refuses to start, naming the key.
func TestStart_StorageAttestationTimeout_ASmallBudgetRefusesTheVolumeRoot(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	mnt, root := btrfsRoot(t)
	d := newDaemonDir(t, "volume_data_path: "+root, "volume_mount_path: "+mnt, "volume_filesystem: btrfs",
		"storage_attestation_timeout: 1ns")
	code, out := runOnce(t, "-config", d.cfgPath)
	if code != 1 || !strings.Contains(out, "storage_attestation_timeout (1ns)") {
		t.Fatalf("start with a 1ns attestation budget: exit %d, want 1 naming storage_attestation_timeout\n%s", code, out)
	}
}
