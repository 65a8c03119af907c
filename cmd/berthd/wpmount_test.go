package main

// Issue 30, items 2 and 3 on real Docker: a retaining close reclaims volumes
// that hold only writable-path copies (a VOLUME-less image on a stateful SKU)
// instead of retaining them; a lease over the mount budget is refused once,
// definitely, before any image helper ran.

import (
	"archive/tar"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// writablePathRootfs is the test workload (serving on 8080 as app, uid 1000)
// with no VOLUME and one directory app owns, /var/lib/app: detection keeps it
// as a writable path under the read-only rootfs.
func writablePathRootfs(t *testing.T) []byte {
	return tarOf(t,
		tar.Header{Name: "etc/", Typeflag: tar.TypeDir},
		tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Linkname: "root:x:0:0::/:/x\napp:x:1000:1000::/:/x\n", Mode: 0o644},
		tar.Header{Name: "etc/group", Typeflag: tar.TypeReg, Linkname: "root:x:0:\napp:x:1000:\n", Mode: 0o644},
		tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777},
		tar.Header{Name: "run/", Typeflag: tar.TypeDir},
		tar.Header{Name: "workload", Typeflag: tar.TypeReg, Linkname: string(buildWorkloadBinary(t))},
		tar.Header{Name: "var/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/lib/", Typeflag: tar.TypeDir},
		tar.Header{Name: "var/lib/app/", Typeflag: tar.TypeDir, Uid: 1000, Gid: 1000},
		tar.Header{Name: "var/lib/app/seed.txt", Typeflag: tar.TypeReg, Linkname: "from the image", Uid: 1000, Gid: 1000, Mode: 0o644},
	)
}

const wpReclaimed = "berth_retention_writable_path_reclaimed_total"

// A VOLUME-less image on a stateful SKU gets a volume holding only its seeded
// writable paths: a close with retain_on_close retains nothing (no record,
// callback retained=false), its volume directory is gone, and the metric
// counts it.
func TestRetention_WritablePathOnlyLease_CloseRetainsNothing(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	ref := pushHostile(t, writablePathRootfs(t), "wp-only")
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t, "retain_on_close: true")
	lease := stockProvision(t, d, cb, flatManifest(map[string]any{"image": ref}), messages.LeaseItem{SKU: "small", Quantity: 1})
	assertNotDegraded(t, d, lease)
	vol := filepath.Join(root, messages.VolumeName(lease, "app", 0))
	if b, err := os.ReadFile(filepath.Join(vol, dockerio.WritableRoot, dockerio.VolumeSubdir("/var/lib/app"), "seed.txt")); err != nil || string(b) != "from the image" {
		t.Fatalf("the writable path was not seeded into the managed volume: %q %v", b, err)
	}
	// What the tenant writes there is writable-path content: reseeded at a restore, never kept.
	if code, body := putFile(t, hostPort(t, d, lease, "app", 0), "/var/lib/app/cache.bin", []byte("scratch")); code >= 300 {
		t.Fatalf("write into the writable path: %d %s", code, body)
	}
	before := d.metricValue(wpReclaimed)
	d.deprovisionUntilGone(lease)
	got := cb.waitFor(lease, 2, time.Minute)
	if got[1].Body.Status != messages.CallbackDeprovisioned || got[1].Body.Retained {
		t.Fatalf("deprovisioned callback %+v, want retained: false", got[1].Body)
	}
	if list := d.retentionList(); len(list) != 0 {
		t.Fatalf("retentions %+v, want none", list)
	}
	if vs := managedVolumes(t, root); len(vs) != 0 {
		t.Fatalf("volumes %v remain, want none", vs)
	}
	if _, err := os.Stat(vol); !os.IsNotExist(err) {
		t.Fatalf("volume directory %s: %v, want it gone", vol, err)
	}
	if after := d.metricValue(wpReclaimed); after != before+1 {
		t.Fatalf("%s went %v → %v, want one more", wpReclaimed, before, after)
	}
	if r := d.get("/provisions/" + lease); r.Status != 404 {
		t.Fatalf("GET /provisions of the closed lease: %d %s, want 404 (nothing retained)", r.Status, r.Body)
	}
	assertGone(t, dc, lease)
}

// helperCreates counts the image helpers Docker creates for installation from
// now on, as its event stream reports them (never berthd's own word).
func helperCreates(t *testing.T, installation string) func() int {
	t.Helper()
	dc := dockerClient(t)
	ctx, cancel := context.WithCancel(context.Background())
	msgs, errs := dc.Events(ctx, events.ListOptions{Filters: filters.NewArgs(
		filters.Arg("type", string(events.ContainerEventType)), filters.Arg("event", string(events.ActionCreate)),
		filters.Arg("label", "fred.helper"), filters.Arg("label", "fred.installation_id="+installation))})
	var mu sync.Mutex
	n := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-msgs:
				mu.Lock()
				n++
				mu.Unlock()
			case <-errs:
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	time.Sleep(200 * time.Millisecond) // the subscription is live before what it watches starts
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// A lease whose instances would mount more than the budget allows (1,000
// instances of an image with 16 VOLUMEs: 22,000 mounts) fails once,
// definitely, with the rule it broke, before any helper ran (its image names
// its user, which takes a helper to resolve, and would be scanned for
// writable paths by another), and is never launched again. The same image
// within the budget does run its helpers: the event stream would have seen one.
func TestMountBudget_OverBudget_FailsOnceBeforeAnyHelper(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	changes := []string{}
	for i := range 16 {
		changes = append(changes, fmt.Sprintf("VOLUME /v%d", i))
	}
	ref := pushHostile(t, writablePathRootfs(t), "16volumes-budget", changes...)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "sku_profiles: {micro: {cpu_cores: 0.001, memory_mb: 8, disk_mb: 0}, diskless: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 0}}").startInProcess()
	helpers := helperCreates(t, readInstallationID(filepath.Join(d.dir, "data")))

	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(map[string]any{"image": ref}), messages.LeaseItem{SKU: "micro", Quantity: 1000}); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	got := cb.waitFor(lease, 1, 2*time.Minute)[0].Body
	if got.Status != messages.CallbackFailed || !strings.HasPrefix(got.Error, messages.ReasonImagePullFailed) {
		t.Fatalf("callback %+v, want failed ImagePullFailed", got)
	}
	info := d.waitStatus(lease, "failed", 10*time.Second)
	t.Logf("refused: %s", info.Message)
	if info.FailCount != 1 || !strings.HasPrefix(info.Message, "image metadata is not admissible: ") || !strings.Contains(info.Message, "16384") {
		t.Fatalf("provision %+v, want fail_count 1 and the mount budget named", info)
	}
	if n := helpers(); n != 0 {
		t.Fatalf("%d image helpers were created for a lease refused by its mount budget", n)
	}
	// Not launched again: within two relaunch periods of the old loop, nothing more.
	time.Sleep(12 * time.Second)
	if cbs := cb.forLease(lease); len(cbs) != 1 {
		t.Fatalf("%d callbacks, want the one failure", len(cbs))
	}
	if info := d.provisionInfo(lease); info.Status != messages.StatusFailed || info.FailCount != 1 {
		t.Fatalf("provision %+v after waiting, want still failed once", info)
	}
	if n := helpers(); n != 0 || len(leaseContainers(t, dc, lease)) != 0 {
		t.Fatalf("after the refusal: %d helpers, %d containers", n, len(leaseContainers(t, dc, lease)))
	}

	// The control: within the budget the same image's helpers run and are seen.
	ok := stockProvision(t, d, cb, flatManifest(map[string]any{"image": ref}), messages.LeaseItem{SKU: "diskless", Quantity: 1})
	if n := helpers(); n == 0 {
		t.Fatalf("a lease within the budget created no helper the event stream saw: the observation proves nothing")
	}
	d.closeAll(dc, lease, ok)
}

// The verdict survives kill -9: a retaining close journals that the volume
// holds only writable-path copies, its destroy is held (something not berth's
// keeps the volume busy), berthd is killed; meanwhile the volume gains a
// directory a fresh judgement would keep. The restarted berthd carries out the
// journaled verdict once the volume is free: nothing retained, the volume gone.
func TestRetention_Kill9AfterTheVerdict_WritablePathOnlyStillReclaimed(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	ref := pushHostile(t, writablePathRootfs(t), "wp-only-kill9")
	cb := newCallbackReceiver(t)
	mnt, root := btrfsRoot(t)
	d := newDaemonDir(t, "volume_data_path: "+root, "volume_mount_path: "+mnt, "volume_filesystem: btrfs",
		"sku_profiles: {small: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 64}}", "retain_on_close: true").startChild(true)
	lease := stockProvision(t, d, cb, flatManifest(map[string]any{"image": ref}), messages.LeaseItem{SKU: "small", Quantity: 1})
	vol := filepath.Join(root, messages.VolumeName(lease, "app", 0))
	holder := holdMount(t, dc, vol)
	if r := d.deprovision(lease); r.Status != 503 || !strings.Contains(string(r.Body), "lifecycle_pending") {
		t.Fatalf("close with a busy volume: %d %s, want 503 lifecycle_pending", r.Status, r.Body)
	}
	if body := string(d.debugGet("/debug/leases/" + lease).Body); !strings.Contains(body, "writable-path-only, destroyed: "+messages.VolumeName(lease, "app", 0)) {
		t.Fatalf("no journaled verdict in the lease's history:\n%s", body)
	}
	d.kill9()
	if err := os.Mkdir(filepath.Join(vol, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	d.startChild(true)
	if err := dc.ContainerRemove(context.Background(), holder, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		t.Fatal(err)
	}
	d.deprovisionUntilGone(lease)
	if got := cb.waitFor(lease, 2, time.Minute)[1].Body; got.Status != messages.CallbackDeprovisioned || got.Retained {
		t.Fatalf("deprovisioned callback %+v, want retained: false", got)
	}
	if list := d.retentionList(); len(list) != 0 {
		t.Fatalf("retentions %+v: the journaled verdict reclaims", list)
	}
	if vs := managedVolumes(t, root); len(vs) != 0 {
		t.Fatalf("volumes %v remain", vs)
	}
	if n := d.metricValue(wpReclaimed); n != 1 {
		t.Fatalf("%s = %v in the restarted berthd, want 1", wpReclaimed, n)
	}
	assertGone(t, dc, lease)
}

// In a stack the verdict is per volume: the service with VOLUME data is
// retained and restorable with its data; the writable-path-only one is
// reclaimed, and the restore makes it a fresh volume reseeded from the image.
func TestRetention_Stack_DataRetainedWritablePathReclaimed_RestoreReseeds(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	ref := pushHostile(t, writablePathRootfs(t), "wp-only-stack")
	cb := newCallbackReceiver(t)
	d, root := tenantDaemon(t, "retain_on_close: true")
	port := map[string]any{"8080/tcp": map[string]any{}}
	stack := map[string]any{"services": map[string]any{"db": map[string]any{"image": testImage(), "ports": port},
		"web": map[string]any{"image": ref, "ports": port}}}
	items := []messages.LeaseItem{{SKU: "small", Quantity: 1, ServiceName: "db"}, {SKU: "small", Quantity: 1, ServiceName: "web"}}
	src := provisionReady(t, d, cb, stack, items...)
	if code, body := putFile(t, hostPort(t, d, src, "db", 0), "/data/marker", []byte(src)); code >= 300 {
		t.Fatalf("write db's data: %d %s", code, body)
	}
	if code, body := putFile(t, hostPort(t, d, src, "web", 0), "/var/lib/app/seed.txt", []byte("written by the tenant")); code >= 300 {
		t.Fatalf("write web's writable path: %d %s", code, body)
	}
	before := d.metricValue(wpReclaimed)
	d.deprovisionUntilGone(src)
	if got := cb.waitFor(src, 2, time.Minute)[1].Body; !got.Retained {
		t.Fatalf("deprovisioned callback %+v, want retained: true (db's data)", got)
	}
	if list := d.retentionList(); len(list) != 1 || list[0].LeaseUUID != src || list[0].DiskMB != 64 {
		t.Fatalf("retentions %+v, want one record of db's 64 MB", list)
	}
	if vs := managedVolumes(t, root); len(vs) != 1 || vs[0] != messages.RetainedVolumeName(src, "db", 0) {
		t.Fatalf("volumes %v, want db's retained one alone", vs)
	}
	if after := d.metricValue(wpReclaimed); after != before+1 {
		t.Fatalf("%s went %v → %v, want one more (web's)", wpReclaimed, before, after)
	}

	dest := uuid.NewString()
	if r := d.postJSON("/restore", messages.RestoreRequest{LeaseUUID: dest, FromLeaseUUID: src, Tenant: "tenant-test",
		ProviderUUID: "provider-test", Items: items, CallbackURL: cb.callbackURL()}); r.Status != 202 {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	if c := cb.waitFor(dest, 1, 2*time.Minute)[0].Body; c.Status != messages.CallbackSuccess {
		t.Fatalf("restore callback %+v", c)
	}
	if code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, dest, "db", 0), "/file?path=/data/marker"); err != nil || code != 200 || body != src {
		t.Fatalf("restored db reads %d %q %v, want its retained data", code, body, err)
	}
	if code, body, err := httpGetHostPort("127.0.0.1:"+hostPort(t, d, dest, "web", 0), "/file?path=/var/lib/app/seed.txt"); err != nil || code != 200 || body != "from the image" {
		t.Fatalf("restored web reads %d %q %v, want its writable path reseeded from the image", code, body, err)
	}
	d.closeAll(dc, dest)
}
