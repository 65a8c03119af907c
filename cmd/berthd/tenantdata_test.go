package main

// Tenant data on the real engine and a real btrfs volume root (the loop mount
// make test creates, $BERTH_TEST_BTRFS): the kernel enforces the quota inside the
// container; a retaining close keeps the data, GET /retentions lists it, a restore
// brings it into a new lease (promote; demote refused; shape and ownership
// rules); the reaper destroys expired data and frees its bytes; the per-tenant cap
// evicts; an orphaned record is pruned; a busy deletion is held until it can go.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// btrfsRoot is a fresh volume root on the test btrfs mount; the test fails when
// the mount is missing under make test.
func btrfsRoot(t *testing.T) (mnt, root string) {
	t.Helper()
	mnt = os.Getenv("BERTH_TEST_BTRFS")
	if mnt == "" {
		skipOrFail(t, "BERTH_TEST_BTRFS is not set (make test loop-mounts a btrfs with quotas)")
	}
	root = filepath.Join(mnt, "berthd-"+uuid.NewString()[:8])
	t.Cleanup(func() { cleanBtrfsRoot(root) })
	return mnt, root
}

// cleanBtrfsRoot deletes whatever subvolumes a test left under root, then root.
func cleanBtrfsRoot(root string) {
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		_ = exec.Command("btrfs", "subvolume", "delete", filepath.Join(root, e.Name())).Run()
	}
	_ = os.RemoveAll(root)
}

// managedVolumes lists the volumes in a root (the "fred-" entries: not the
// installation marker).
func managedVolumes(t *testing.T, root string) []string {
	t.Helper()
	entries, err := os.ReadDir(root)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "fred-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// tenantDaemon is a daemon whose stateful SKUs live on a btrfs volume root.
func tenantDaemon(t *testing.T, extra ...string) (*daemonProc, string) {
	t.Helper()
	mnt, root := btrfsRoot(t)
	cfg := append([]string{
		"volume_data_path: " + root,
		"volume_mount_path: " + mnt,
		"volume_filesystem: btrfs",
		"sku_profiles: {tiny: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 16}, small: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 64}, big: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 128}, diskless: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 0}}",
	}, extra...)
	return newDaemonDir(t, cfg...).startInProcess(), root
}

func putFile(t *testing.T, hostPort, path string, body []byte) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:"+hostPort+"/file?path="+path, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (d *daemonProc) restoreLease(dest, from, sku string, cb *callbackReceiver) response {
	d.t.Helper()
	return d.postJSON("/restore", messages.RestoreRequest{LeaseUUID: dest, FromLeaseUUID: from, Tenant: "tenant-test",
		ProviderUUID: "provider-test", Items: []messages.LeaseItem{{SKU: sku, Quantity: 1}}, CallbackURL: cb.callbackURL()})
}

func (d *daemonProc) retentionList() []messages.Retention {
	d.t.Helper()
	var page struct {
		Retentions []messages.Retention `json:"retentions"`
	}
	r := d.get("/retentions")
	if r.Status != 200 || !strings.Contains(string(r.Body), `"retentions":[`) {
		d.t.Fatalf("GET /retentions: %d %s", r.Status, r.Body)
	}
	r.json(d.t, &page)
	return page.Retentions
}

func TestVolumes_BtrfsQuota_EnforcedInsideTheRunningContainer(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t)
	lease := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "tiny", Quantity: 1})
	hp := hostPort(t, d, lease, "app", 0)
	if code, body := putFile(t, hp, "/data/small.bin", bytes.Repeat([]byte("x"), 4<<20)); code >= 300 {
		t.Fatalf("a 4 MiB write under a 16 MiB quota failed: %d %s", code, body)
	}
	code, body := putFile(t, hp, "/data/big.bin", bytes.Repeat([]byte("y"), 14<<20))
	if code < 300 || !strings.Contains(strings.ToLower(body), "quota") {
		t.Fatalf("18 MiB in all under a 16 MiB quota: %d %q, want the kernel's EDQUOT", code, body)
	}
	if c, got, err := httpGetHostPort("127.0.0.1:"+hp, "/file?path=/data/small.bin"); err != nil || c != 200 || len(got) != 4<<20 {
		t.Fatalf("data under the limit: %d %d bytes %v", c, len(got), err)
	}
	if _, err := os.Stat(filepath.Join(root, messages.VolumeName(lease, "app", 0), "data")); err != nil {
		t.Fatalf("the instance volume is not under the volume root: %v", err)
	}
	var s messages.Stats
	d.get("/stats").json(t, &s)
	if !s.DiskQuotaEnforced {
		t.Fatalf("/stats on btrfs says the quota is not enforced: %+v", s)
	}
	d.closeAll(dc, lease)
	if entries := managedVolumes(t, root); len(entries) != 0 {
		t.Fatalf("a destroying close left %d volumes", len(entries))
	}
}

func TestRetention_CloseRetains_RestorePromotesDataIntoANewLease(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t, "retain_on_close: true")
	src := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "small", Quantity: 1})
	if code, body := putFile(t, hostPort(t, d, src, "app", 0), "/data/kept.txt", []byte("tenant data")); code >= 300 {
		t.Fatalf("write: %d %s", code, body)
	}
	d.deprovisionUntilGone(src)
	got := cb.waitFor(src, 2, time.Minute)
	if got[1].Body.Status != messages.CallbackDeprovisioned || !got[1].Body.Retained {
		t.Fatalf("deprovisioned callback %+v, want retained: true", got[1].Body)
	}
	if n := len(leaseContainers(t, dc, src)); n != 0 {
		t.Fatalf("%d containers of the retained lease remain", n)
	}
	list := d.retentionList()
	if len(list) != 1 || list[0].LeaseUUID != src || list[0].Status != "active" || list[0].RetainedUntil.IsZero() {
		t.Fatalf("retentions %+v", list)
	}
	if pi := d.provisionInfo(src); pi.Status != messages.StatusRetained || pi.RetainedUntil.IsZero() {
		t.Fatalf("provision of the retained lease %+v", pi)
	}
	if _, err := os.Stat(filepath.Join(root, messages.RetainedVolumeName(src, "app", 0))); err != nil {
		t.Fatalf("retained volume: %v", err)
	}

	dest := uuid.NewString()
	if r := d.restoreLease(dest, src, "big", cb); r.Status != 202 || strings.TrimSpace(string(r.Body)) != `{"status":"restoring"}` {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	if c := cb.waitFor(dest, 1, 2*time.Minute)[0]; c.Body.Status != messages.CallbackSuccess || !strings.Contains(c.Path, "operation_id=") {
		t.Fatalf("restore callback %+v", c)
	}
	code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, dest, "app", 0), "/file?path=/data/kept.txt")
	if err != nil || code != 200 || body != "tenant data" {
		t.Fatalf("the restored lease reads %d %q %v, want the retained data", code, body, err)
	}
	// Promoted: the restored volume takes 70 MiB, more than the source tier's 64.
	for i := range 5 {
		if code, body := putFile(t, hostPort(t, d, dest, "app", 0), fmt.Sprintf("/data/grow-%d.bin", i), bytes.Repeat([]byte("g"), 14<<20)); code >= 300 {
			t.Fatalf("write %d MiB into the promoted volume: %d %s", 14*(i+1), code, body)
		}
	}
	if list := d.retentionList(); len(list) != 0 {
		t.Fatalf("the consumed record is still listed: %+v", list)
	}
	if r := d.restoreLease(uuid.NewString(), src, "big", cb); r.Status != 422 || len(bytes.TrimSpace(r.Body)) != 0 {
		t.Fatalf("a second restore of consumed data: %d %q, want a bare 422", r.Status, r.Body)
	}
	// The restored lease is a lease like any other: its close retains again, at its own (promoted) tier.
	d.closeAll(dc, dest)
	if list := d.retentionList(); len(list) != 1 || list[0].LeaseUUID != dest || list[0].DiskMB != 128 {
		t.Fatalf("retentions after closing the restored lease %+v, want it retained at 128 MB", list)
	}
}

func TestRestore_Refusals_DemoteShapeOwnership_NothingChanged(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	d, _ := tenantDaemon(t, "retain_on_close: true")
	src := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "big", Quantity: 1})
	hp := hostPort(t, d, src, "app", 0)
	for _, f := range []string{"/data/fill-1.bin", "/data/fill-2.bin"} { // 20 MiB: more than tiny's 16
		if code, body := putFile(t, hp, f, bytes.Repeat([]byte("z"), 10<<20)); code >= 300 {
			t.Fatalf("write: %d %s", code, body)
		}
	}
	d.deprovisionUntilGone(src)
	d.waitStatus(src, messages.StatusRetained, time.Minute)

	if r := d.restoreLease(uuid.NewString(), src, "tiny", cb); r.Status != 422 || !strings.Contains(string(r.Body), `"code":"demote_exceeds_tier"`) {
		t.Fatalf("demote below the data: %d %s", r.Status, r.Body)
	}
	if r := d.restoreLease(uuid.NewString(), src, "diskless", cb); r.Status != 422 || !strings.Contains(string(r.Body), `"code":"demote_exceeds_tier"`) {
		t.Fatalf("restore into a diskless tier: %d %s", r.Status, r.Body)
	}
	if n := d.metricValue("berth_restore_demote_refused_total"); n != 2 {
		t.Fatalf("berth_restore_demote_refused_total %v after two demote refusals, want 2", n)
	}
	shape := messages.RestoreRequest{LeaseUUID: uuid.NewString(), FromLeaseUUID: src, Tenant: "tenant-test",
		Items: []messages.LeaseItem{{SKU: "big", Quantity: 2}}, CallbackURL: cb.callbackURL()}
	if r := d.postJSON("/restore", shape); r.Status != 400 {
		t.Fatalf("changed shape: %d %s", r.Status, r.Body)
	}
	other := shape
	other.Items[0].Quantity, other.Tenant = 1, "another-tenant"
	if r := d.postJSON("/restore", other); r.Status != 422 || len(bytes.TrimSpace(r.Body)) != 0 {
		t.Fatalf("another tenant's restore: %d %q, want a bare 422", r.Status, r.Body)
	}
	if r := d.restoreLease(uuid.NewString(), uuid.NewString(), "big", cb); r.Status != 422 || len(bytes.TrimSpace(r.Body)) != 0 {
		t.Fatalf("unknown source: %d %q, want a bare 422", r.Status, r.Body)
	}
	if list := d.retentionList(); len(list) != 1 || list[0].Status != "active" {
		t.Fatalf("refusals changed the record: %+v", list)
	}
	// The same data still restores into a tier it fits.
	dest := uuid.NewString()
	if r := d.restoreLease(dest, src, "small", cb); r.Status != 202 {
		t.Fatalf("demote that fits: %d %s", r.Status, r.Body)
	}
	if c := cb.waitFor(dest, 1, 2*time.Minute)[0]; c.Body.Status != messages.CallbackSuccess {
		t.Fatalf("restore callback %+v", c.Body)
	}
	d.closeAll(dockerClient(t), dest)
}

func TestRetention_GraceExpired_ReapedAndBytesFreed(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t, "retain_on_close: true", "retention_max_age: 4s", "retention_reap_interval: 1s")
	src := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "small", Quantity: 1})
	d.deprovisionUntilGone(src)
	d.waitStatus(src, messages.StatusRetained, time.Minute)
	var s messages.Stats
	d.get("/stats").json(t, &s)
	if s.RetainedDiskMB != 64 || s.AllocatedDiskMB != 64 {
		t.Fatalf("stats while retained %+v", s)
	}
	deadline := time.Now().Add(time.Minute)
	for len(d.retentionList()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the expired record was never reaped: %+v", d.retentionList())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if entries := managedVolumes(t, root); len(entries) != 0 {
		t.Fatalf("%d volumes remain after the reap", len(entries))
	}
	d.get("/stats").json(t, &s)
	if s.RetainedDiskMB != 0 || s.AllocatedDiskMB != 0 {
		t.Fatalf("stats after the reap %+v: the bytes must be freed", s)
	}
	if r := d.get("/provisions/" + src); r.Status != 404 {
		t.Fatalf("provision of a reaped lease: %d", r.Status)
	}
}

func TestRetention_TenantCap_EvictsTheOldest(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	d, _ := tenantDaemon(t, "retain_on_close: true", "max_retained_leases_per_tenant: 1", "retention_reap_interval: 1s")
	first := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "small", Quantity: 1})
	second := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "small", Quantity: 1})
	d.deprovisionUntilGone(first)
	d.waitStatus(first, messages.StatusRetained, time.Minute)
	d.deprovisionUntilGone(second)
	d.waitStatus(second, messages.StatusRetained, time.Minute)
	deadline := time.Now().Add(time.Minute)
	for {
		list := d.retentionList()
		if len(list) == 1 && list[0].LeaseUUID == second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retentions %+v, want only the newest", list)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestRetention_OrphanedRecord_PrunedAfterConfirmingSweeps(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t, "retain_on_close: true", "retention_reap_interval: 1s", "retention_orphan_confirmations: 3")
	src := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "small", Quantity: 1})
	d.deprovisionUntilGone(src)
	d.waitStatus(src, messages.StatusRetained, time.Minute)
	vol := filepath.Join(root, messages.RetainedVolumeName(src, "app", 0))
	if out, err := exec.Command("btrfs", "subvolume", "delete", vol).CombinedOutput(); err != nil {
		t.Fatalf("delete the retained subvolume out of band: %v %s", err, out)
	}
	start := time.Now()
	for len(d.retentionList()) != 0 {
		if time.Since(start) > time.Minute {
			t.Fatalf("the orphaned record was never pruned")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if time.Since(start) < 2*time.Second {
		t.Fatalf("pruned after %s: it must take several confirming sweeps", time.Since(start))
	}
	if m := string(d.get("/metrics").Body); !strings.Contains(m, "berth_retention_orphans_pruned_total 1") {
		t.Fatalf("orphan metric missing:\n%s", grepLines(m, "berth_retention_orphan"))
	}
}

func TestVolumeHold_BusyDeletion_CloseWaitsThenCompletes(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t)
	lease := provisionReady(t, d, cb, flatManifest(nil), messages.LeaseItem{SKU: "small", Quantity: 1})
	// Something that is not berth's keeps the volume busy: a container of our own
	// bind-mounting it.
	vol := filepath.Join(root, messages.VolumeName(lease, "app", 0))
	holder := holdMount(t, dc, vol)
	r := d.deprovision(lease)
	if r.Status != 503 || !strings.Contains(string(r.Body), "lifecycle_pending") {
		t.Fatalf("close with a busy volume: %d %s, want 503 lifecycle_pending", r.Status, r.Body)
	}
	if _, err := os.Stat(vol); err != nil {
		t.Fatalf("the busy volume vanished: %v", err)
	}
	// The lease answers held as it hands the volume to the volumehold actor,
	// which records the hold a moment later.
	for deadline := time.Now().Add(30 * time.Second); d.metricValue("berth_volume_holds") != 1; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no held deletion in metrics:\n%s", grepLines(string(d.get("/metrics").Body), "berth_volume_hold"))
		}
	}
	if n := d.metricValue("berth_close_intents_delete_held"); n != 1 {
		t.Fatalf("berth_close_intents_delete_held %v while the close waits only on the busy volume, want 1", n)
	}
	if err := dc.ContainerRemove(context.Background(), holder, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		t.Fatal(err)
	}
	d.deprovisionUntilGone(lease)
	if _, err := os.Stat(vol); !os.IsNotExist(err) {
		t.Fatalf("the held volume was never destroyed (%v)", err)
	}
	if c := cb.waitFor(lease, 2, time.Minute)[1]; c.Body.Status != messages.CallbackDeprovisioned {
		t.Fatalf("close callback %+v", c.Body)
	}
}

// holdMount runs a plain container (not berth's) that bind-mounts path.
func holdMount(t *testing.T, dc *client.Client, path string) string {
	t.Helper()
	ctx := context.Background()
	created, err := dc.ContainerCreate(ctx, &container.Config{Image: testImage(), Cmd: []string{"serve", "-port", "0"},
		Labels: map[string]string{"berth.test": "volume-holder"}},
		&container.HostConfig{Mounts: []mount.Mount{{Type: mount.TypeBind, Source: path, Target: "/held"}}}, nil, nil,
		"berth-holder-"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dc.ContainerRemove(context.Background(), created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
	if err := dc.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	return created.ID
}
