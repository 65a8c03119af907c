package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/volumes"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// mustRun: under make test (BERTH_REQUIRE_DOCKER=1) and in CI a missing
// prerequisite fails the test instead of skipping it.
func mustRun(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("BERTH_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true" {
		t.Fatalf("cannot run: %s (BERTH_REQUIRE_DOCKER/CI demand it)", why)
	}
	t.Skip("SKIPPING: " + why)
}

// btrfsVolumes opens the btrfs driver on a fresh directory of $BERTH_TEST_BTRFS
// (make btrfs-up). Call it before newTestLease: cleanups run last-in first-out,
// so the lease's containers are gone before its volumes are destroyed.
func btrfsVolumes(t *testing.T) dockerio.Volumes {
	t.Helper()
	requireDocker(t)
	mnt := os.Getenv("BERTH_TEST_BTRFS")
	if mnt == "" {
		mustRun(t, "BERTH_TEST_BTRFS is not set (make test runs .ci/btrfs-up.sh and sets it)")
	}
	data := filepath.Join(mnt, "engine-test-"+uuid.NewString()[:8])
	v, err := volumes.Open(volumes.Options{DataPath: data, MountPath: mnt})
	if err != nil {
		t.Fatalf("open btrfs volumes on %s: %v", mnt, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		names, _ := v.List(ctx)
		for _, n := range names {
			if err := v.Destroy(ctx, n); err != nil {
				t.Errorf("cleanup: destroy volume %s: %v", n, err)
			}
		}
		if err := os.RemoveAll(data); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return v
}

// testWorkloadImage resolves $BERTH_TEST_IMAGE, the dockerio/dockertest/workload
// image (PUT/GET /file) that make test builds and pushes.
func testWorkloadImage(t *testing.T, e *Engine) (string, dockerio.ImageInfo) {
	t.Helper()
	ref := os.Getenv("BERTH_TEST_IMAGE")
	if ref == "" {
		mustRun(t, "BERTH_TEST_IMAGE is not set (make test builds and pushes it)")
	}
	info, err := e.ResolveImage(testCtx(t, 2*time.Minute), ref)
	if err != nil {
		t.Fatalf("ResolveImage(%s): %v", ref, err)
	}
	return ref, info
}

// putFile writes body to path inside the container through the workload's
// PUT /file and returns the status and answer.
func putFile(port, path string, body []byte) (int, string, error) {
	req, err := http.NewRequest(http.MethodPut, "http://127.0.0.1:"+port+"/file?path="+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

func getFile(port, path string) ([]byte, error) {
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + port + "/file?path=" + path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

// fillVolume writes 1 MiB files /data/f0, /data/f1, … through the container
// until a write fails or max files are written; it returns the bodies written
// and the failing answer ("" when none failed).
func fillVolume(t *testing.T, port string, max int) ([][]byte, string) {
	t.Helper()
	var written [][]byte
	for i := range max {
		body := make([]byte, 1<<20)
		_, _ = rand.Read(body)
		code, answer, err := putFile(port, fmt.Sprintf("/data/f%d", i), body)
		if err != nil {
			t.Fatalf("PUT /data/f%d: %v", i, err)
		}
		if code != http.StatusOK {
			return written, fmt.Sprintf("%d %s", code, answer)
		}
		written = append(written, body)
	}
	return written, ""
}

// statefulTestWorkload is one instance of the test workload image with a
// managed volume of quotaMB in v at /data.
func statefulTestWorkload(t *testing.T, v dockerio.Volumes, l testLease, ref string, info dockerio.ImageInfo, quotaMB int64) dockerio.ServicePlan {
	t.Helper()
	svc := dockerio.ServicePlan{Name: "db", SKU: "stateful", Quantity: 1, CPUCores: 0.5, MemoryMB: 64,
		Service: manifest.Service{Image: ref, Ports: map[string]manifest.Port{"8080/tcp": {}}},
		ImageID: info.ID, ImageVolumes: info.Volumes, MaskLabels: info.MaskLabels}
	return stateful(t, v, l.Lease, svc, quotaMB, info.UID, info.GID)
}

func upAndPort(t *testing.T, e *Engine, l testLease, svc dockerio.ServicePlan) (messages.Container, string) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	if err := e.Up(ctx, l.plan(svc)); err != nil {
		t.Fatalf("Up: %v", err)
	}
	cohort, err := e.Cohort(ctx, l.Lease)
	if err != nil || len(cohort) != 1 {
		t.Fatalf("Cohort = %d, %v", len(cohort), err)
	}
	port := cohort[0].Ports["8080/tcp"].HostPort
	eventually(t, 20*time.Second, "the workload answers", func() bool {
		_, err := httpGet("http://127.0.0.1:" + port + "/")
		return err == nil
	})
	return cohort[0], port
}

// The engine's bind mount is what the kernel enforces the quota on: inside
// the running container, the write that crosses the 16 MiB qgroup limit fails
// with EDQUOT, and what was written below it reads back. While the container
// runs, the volume is busy; once it is down, it is destroyed with its qgroup.
func TestUp_StatefulOnBtrfs_KernelEnforcesTheQuotaInsideTheContainer_EDQUOT(t *testing.T) {
	v := btrfsVolumes(t)
	e := newTestEngine(t)
	ref, info := testWorkloadImage(t, e)
	l := newTestLease(t, e)
	svc := statefulTestWorkload(t, v, l, ref, info, 16)
	c, port := upAndPort(t, e, l, svc)
	assertMount(t, c.ID, "/data", "bind", filepath.Join(svc.VolumeDirs[0], "data"))

	written, failed := fillVolume(t, port, 40)
	t.Logf("under a 16 MiB quota: %d MiB written, then %q", len(written), failed)
	if failed == "" || !strings.Contains(failed, "disk quota exceeded") {
		t.Fatalf("writing 40 MiB into a 16 MiB volume: %d MiB written, failure %q; want EDQUOT (disk quota exceeded)", len(written), failed)
	}
	if len(written) < 12 || len(written) > 16 {
		t.Errorf("EDQUOT after %d MiB, want between 12 and 16 under a 16 MiB limit", len(written))
	}
	for i, want := range written {
		got, err := getFile(port, fmt.Sprintf("/data/f%d", i))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("reading back /data/f%d below the limit: %d bytes, %v", i, len(got), err)
		}
	}
	ctx := testCtx(t, 2*time.Minute)
	name := messages.VolumeName(l.Lease, "db", 0)
	used, err := v.Usage(ctx, name)
	if err != nil || used > 16<<20 || used < int64(len(written))<<20 {
		t.Errorf("Usage = %d, %v; want between %d MiB written and the 16 MiB limit", used, err, len(written))
	}
	t.Logf("Usage = %d bytes", used)

	// The kernel would delete the subvolume under the running container; the
	// driver's own check refuses.
	if err := v.Destroy(ctx, name); !errors.Is(err, dockerio.ErrVolumeBusy) {
		t.Fatalf("Destroy while the container runs = %v, want ErrVolumeBusy", err)
	} else {
		t.Logf("Destroy while running: %v", err)
	}
	if _, err := getFile(port, "/data/f0"); err != nil {
		t.Fatalf("the refused Destroy touched the data: %v", err)
	}
	if err := e.Down(ctx, l.Lease, dockerio.DownOptions{StopTimeout: time.Second}); err != nil {
		t.Fatalf("Down: %v", err)
	}
	if err := v.Destroy(ctx, name); err != nil {
		t.Fatalf("Destroy once the container is gone: %v", err)
	}
	if ok, _ := v.Exists(ctx, name); ok {
		t.Error("volume still there")
	}
}

// The dir driver enforces nothing: the same writes all succeed.
func TestUp_StatefulOnDirDriver_NoEnforcement_WritesPastTheQuotaSucceed(t *testing.T) {
	e := newTestEngine(t)
	ref, info := testWorkloadImage(t, e)
	v := dirVolumes(t)
	l := newTestLease(t, e)
	svc := statefulTestWorkload(t, v, l, ref, info, 16)
	_, port := upAndPort(t, e, l, svc)
	written, failed := fillVolume(t, port, 24)
	if failed != "" || len(written) != 24 {
		t.Fatalf("dir driver: %d MiB written, then %q; want all 24 MiB (no quota)", len(written), failed)
	}
	if fi, err := os.Stat(filepath.Join(svc.VolumeDirs[0], "data", "f23")); err != nil || fi.Size() != 1<<20 {
		t.Errorf("host side of the dir volume: %v", err)
	}
}

// A named image user (USER app, uid 1000 in the image's own passwd) gets the
// volume's mount point, so it can write its data; the volume root stays root's.
func TestUp_NamedImageUser_OwnsItsVolumeMountPoints(t *testing.T) {
	v := btrfsVolumes(t)
	e := newTestEngine(t)
	ref := testImageRepo("volume-user") + ":app"
	makeImage(t, ref, true, "USER app", "VOLUME /data")
	info, err := e.ResolveImage(testCtx(t, 2*time.Minute), ref)
	if err != nil {
		t.Fatalf("ResolveImage: %v", err)
	}
	if info.UID != 1000 || info.GID != 1000 {
		t.Fatalf("USER app resolved to %d:%d, want 1000:1000", info.UID, info.GID)
	}
	l := newTestLease(t, e)
	svc := dockerio.ServicePlan{Name: "app", SKU: "stateful", Quantity: 1, CPUCores: 0.5, MemoryMB: 64,
		Service: manifest.Service{Image: ref}, ImageID: info.ID, ImageVolumes: info.Volumes, MaskLabels: info.MaskLabels}
	svc = stateful(t, v, l.Lease, svc, 16, info.UID, info.GID)
	ctx := testCtx(t, 2*time.Minute)
	if err := e.Up(ctx, l.plan(svc)); err != nil {
		t.Fatalf("Up: %v", err)
	}
	cohort, err := e.Cohort(ctx, l.Lease)
	if err != nil || len(cohort) != 1 {
		t.Fatalf("Cohort = %d, %v", len(cohort), err)
	}
	if code, out := execIn(t, cohort[0].ID, "/workload", "write", "/data/mine"); code != 0 {
		t.Fatalf("the image user cannot write its volume: %s", out)
	}
	stat := func(p string) (uint32, uint32) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return st.Uid, st.Gid
	}
	if uid, gid := stat(filepath.Join(svc.VolumeDirs[0], "data")); uid != 1000 || gid != 1000 {
		t.Errorf("mount point owned %d:%d, want 1000:1000", uid, gid)
	}
	if uid, gid := stat(filepath.Join(svc.VolumeDirs[0], "data", "mine")); uid != 1000 || gid != 1000 {
		t.Errorf("the container's file owned %d:%d, want 1000:1000", uid, gid)
	}
	if uid, _ := stat(svc.VolumeDirs[0]); uid != 0 {
		t.Errorf("volume root owned %d, want root", uid)
	}
}
