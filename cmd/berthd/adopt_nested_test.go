package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/messages"
)

// pushNestedVolumeImage is the test workload with a second VOLUME below a
// directory (/var/lib/data), pushed to the local registry; removed at cleanup.
func pushNestedVolumeImage(t *testing.T) string {
	t.Helper()
	dc := dockerClient(t)
	ctx := context.Background()
	ref := strings.TrimSuffix(testImage(), ":test") + ":nested-" + uuid.NewString()[:8]
	c, err := dc.ContainerCreate(ctx, &container.Config{Image: testImage()}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dc.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}) }()
	if _, err := dc.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: ref, Changes: []string{"VOLUME /var/lib/data"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", ref).Run() })
	if out, err := exec.Command("docker", "push", ref).CombinedOutput(); err != nil {
		t.Fatalf("push %s: %v\n%s", ref, err, out)
	}
	return ref
}

// waitFile waits until the workload on port serves path with content.
func waitFile(t *testing.T, port, path, content string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		code, body, err := httpGetHostPort("127.0.0.1:"+port, "/file?path="+path)
		if err == nil && code == 200 && body == content {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s on port %s: %d %q %v, want %q", path, port, code, body, err, content)
		}
	}
}

// Fred keeps an image's VOLUME /var/lib/data nested in the instance's volume
// (var/lib/data), berthd under its escaped name: the adopted lease runs on in
// fred's layout, and its first relaunch moves the data onto berthd's before
// Compose mounts it; data fred retained in that layout, and data an adopted
// lease retains before it was ever relaunched, come back at a restore.
func TestFredV013Host_AnAdoptedNestedVolumeKeepsItsDataThroughRelaunchAndRestore(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	profiles := "sku_profiles:\n  docker-small: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 64}"
	fred := startFredWith(t, profiles, "retain_on_close: true")
	img := pushNestedVolumeImage(t)
	small := []messages.LeaseItem{{SKU: "docker-small", Quantity: 1}}
	relaunched := fred.provisionAs(small, flatManifest(map[string]any{"image": img}), cb.callbackURL())
	fredRetained := fred.provisionAs(small, flatManifest(map[string]any{"image": img}), cb.callbackURL())
	berthRetained := fred.provisionAs(small, flatManifest(map[string]any{"image": img}), cb.callbackURL())
	for _, l := range []string{relaunched, fredRetained, berthRetained} {
		fred.waitFor(l, "/provisions/", `"status":"ready"`)
		for path, content := range map[string]string{"/var/lib/data/kept.txt": "nested data of " + l, "/data/top.txt": "top data"} {
			if code, body := putFile(t, fred.port(l), path, []byte(content)); code != http.StatusOK {
				t.Fatalf("PUT %s: %d %s", path, code, body)
			}
		}
	}
	if code, answer := fred.signed(http.MethodPost, "/deprovision", messages.DeprovisionRequest{LeaseUUID: fredRetained}); code != http.StatusOK {
		t.Fatalf("fred's POST /deprovision: %d %s", code, answer)
	}
	fred.waitFor(fredRetained, "/provisions/", `"status":"retained"`)
	fred.stop()
	vol := filepath.Join(fred.volumes, messages.VolumeName(relaunched, "app", 0))
	if _, err := os.Stat(filepath.Join(vol, "var/lib/data/kept.txt")); err != nil {
		t.Fatalf("fred's nested layout is not what the takeover expects: %v", err)
	}

	mnt := os.Getenv("BERTH_TEST_BTRFS")
	code, out := runOnce(t, "-config", newDaemonDir(t, "name: "+fred.name, "listen_addr: "+fred.api, profiles, "retain_on_close: true",
		"volume_data_path: "+fred.volumes, "volume_mount_path: "+mnt, "volume_filesystem: btrfs").cfgPath,
		"-preflight-storage-identity-adoption", "-v013-dir", fred.dir)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), takeover.ReadyLine) {
		t.Fatalf("preflight of nested-VOLUME leases: exit %d\n%s", code, out)
	}
	berth := fred.adoptInto([]string{"adopted 2 leases, 1 retained leases' data"}, profiles, "retain_on_close: true")
	berth.startInProcess()
	berth.waitStatus(relaunched, messages.StatusReady, 30*time.Second)
	waitFile(t, fred.port(relaunched), "/var/lib/data/kept.txt", "nested data of "+relaunched) // fred's container, untouched

	relaunchOntoBerthd(t, berth, relaunched, 1)
	port := hostPort(t, berth, relaunched, "app", 0)
	waitFile(t, port, "/var/lib/data/kept.txt", "nested data of "+relaunched)
	waitFile(t, port, "/data/top.txt", "top data")
	if _, err := os.Stat(filepath.Join(vol, "var")); !os.IsNotExist(err) {
		t.Fatalf("fred's nested directories are still in the volume: %v", err)
	}
	if _, err := os.Stat(filepath.Join(vol, "var%2Flib%2Fdata", "kept.txt")); err != nil {
		t.Fatalf("the data is not under berthd's name: %v", err)
	}

	// Retained in fred's layout — by fred, or by berthd before any relaunch —
	// and restored: the data is where the image says.
	berth.deprovisionUntilGone(berthRetained)
	for _, from := range []string{fredRetained, berthRetained} {
		dest := uuid.NewString()
		if r := berth.postJSON("/restore", messages.RestoreRequest{LeaseUUID: dest, FromLeaseUUID: from, Tenant: fred.tenant(),
			ProviderUUID: "p", Items: small, CallbackURL: cb.callbackURL()}); r.Status != http.StatusAccepted {
			t.Fatalf("restore of %s: %d %s", from, r.Status, r.Body)
		}
		berth.waitStatus(dest, messages.StatusReady, 2*time.Minute)
		waitFile(t, hostPort(t, berth, dest, "app", 0), "/var/lib/data/kept.txt", "nested data of "+from)
		berth.deprovisionUntilGone(dest)
	}
	berth.deprovisionUntilGone(relaunched)
}
