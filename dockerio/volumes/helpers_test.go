package volumes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// required: under make test (BERTH_REQUIRE_DOCKER=1) and in CI a test whose
// prerequisite is missing fails instead of skipping.
func required() bool {
	return os.Getenv("BERTH_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true"
}

func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if required() {
		t.Fatalf("cannot run: %s (BERTH_REQUIRE_DOCKER/CI demand it)", why)
	}
	t.Skip("SKIPPING: " + why)
}

// btrfsMount is $BERTH_TEST_BTRFS, the loop-mounted btrfs with quotas that
// `make btrfs-up` (.ci/btrfs-up.sh) provides.
func btrfsMount(t *testing.T) string {
	t.Helper()
	mnt := os.Getenv("BERTH_TEST_BTRFS")
	if mnt == "" {
		skipOrFail(t, "BERTH_TEST_BTRFS is not set (make test runs .ci/btrfs-up.sh and sets it)")
	}
	if fs, err := Detect(mnt); err != nil || fs != FSBtrfs {
		skipOrFail(t, "BERTH_TEST_BTRFS="+mnt+" is not a btrfs mount (make btrfs-up)")
	}
	return mnt
}

// btrfsVolumes opens the btrfs driver on a fresh subdirectory of the test
// mount; every volume left in it, and the directory, go when the test ends.
func btrfsVolumes(t *testing.T) (*btrfsDriver, string) {
	t.Helper()
	mnt := btrfsMount(t)
	data := filepath.Join(mnt, "volumes-test-"+strings.ReplaceAll(t.Name(), "/", "_")+"-"+randHex(4))
	v, err := Open(Options{DataPath: data, MountPath: mnt})
	if err != nil {
		t.Fatalf("Open(%s on %s): %v", data, mnt, err)
	}
	d := v.(*btrfsDriver)
	t.Cleanup(func() { cleanupBtrfs(t, d) })
	return d, mnt
}

// cleanupBtrfs destroys what a test left: volumes through the driver, any
// other subvolume below the test root through the CLI, then the directory.
func cleanupBtrfs(t *testing.T, d *btrfsDriver) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	names, _ := listManaged(d.root)
	for _, n := range names {
		if ValidName(n) {
			if err := d.Destroy(ctx, n); err != nil {
				t.Logf("cleanup: destroy %s: %v", n, err)
			}
		}
	}
	if subs, err := d.cli.listSubvolumes(ctx, d.mount); err == nil {
		prefix := strings.TrimPrefix(d.fsPath(d.root), "/") + "/"
		for i := len(subs) - 1; i >= 0; i-- {
			if strings.HasPrefix(subs[i].Path, prefix) {
				_, _, _ = d.cli.run(ctx, "subvolume", "delete", "--commit-after", d.hostPath(subs[i].Path))
			}
		}
	}
	if err := os.RemoveAll(d.root); err != nil {
		t.Logf("cleanup: remove %s: %v", d.root, err)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// volName is a fresh managed name.
func volName(service string, index int) string {
	return messages.VolumeName(uuid.NewString(), service, index)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// writeRandom writes n random bytes to p (random: btrfs compresses nothing
// here, but zeros could be made sparse by a future writer).
func writeRandom(p string, n int) error {
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	_, _ = rand.Read(buf)
	for n > 0 {
		chunk := min(n, len(buf))
		if _, err := f.Write(buf[:chunk]); err != nil {
			f.Close()
			return err
		}
		n -= chunk
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// qgroupOf reads the qgroup row of the volume at p (after a commit).
func qgroupOf(t *testing.T, d *btrfsDriver, id uint64) (qgroupRow, bool) {
	t.Helper()
	rows, _, err := d.cli.qgroups(testCtx(t), d.mount, true)
	if err != nil {
		t.Fatalf("qgroup show: %v", err)
	}
	r, ok := rows[qgroupID(id)]
	return r, ok
}

func ownerOf(t *testing.T, p string) (int, int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	s := fi.Sys().(*syscall.Stat_t)
	return int(s.Uid), int(s.Gid)
}

// runAs runs a command in dir as uid:gid without any capability: a tenant's
// view of its mount point (the working directory is entered as root, as a
// container's mount is reached without walking the host's volume root).
func runAs(t *testing.T, dir string, uid int, args ...string) (string, error) {
	t.Helper()
	cmdArgs := append([]string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(uid), "--clear-groups", "--inh-caps=-all", "--"}, args...)
	cmd := exec.Command("setpriv", cmdArgs...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}
