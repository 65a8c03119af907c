package volumes

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containerd/errdefs"
)

func TestDir_EnsureUsageRenameDestroy_NoEnforcement(t *testing.T) {
	v, err := NewDir(filepath.Join(t.TempDir(), "volumes"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind() != FSDir || v.Enforced() {
		t.Errorf("Kind/Enforced = %s/%v, want dir/false", v.Kind(), v.Enforced())
	}
	ctx := testCtx(t)
	name := volName("db", 0)
	p, err := v.Ensure(ctx, name, 16, []string{"data"}, 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if uid, gid := ownerOf(t, filepath.Join(p, "data")); uid != 1000 || gid != 1000 {
		t.Errorf("mount point owned %d:%d", uid, gid)
	}
	// No quota: 20 MiB fit in a "16 MiB" volume.
	if err := writeRandom(filepath.Join(p, "data", "f"), 20<<20); err != nil {
		t.Fatalf("write past the quota on the dir driver: %v", err)
	}
	got, err := v.Usage(ctx, name)
	if err != nil || got < 20<<20 || got > 21<<20 {
		t.Errorf("Usage = %d, %v, want about 20 MiB", got, err)
	}
	if again, err := v.Ensure(ctx, name, 32, []string{"data"}, 0, 0); err != nil || again != p {
		t.Errorf("reuse = %s, %v", again, err)
	}
	if _, err := os.Stat(filepath.Join(p, "data", "f")); err != nil {
		t.Errorf("reuse lost data: %v", err)
	}
	if err := v.SetQuota(ctx, name, 64); err != nil {
		t.Errorf("SetQuota: %v", err)
	}
	other := volName("db", 1)
	if err := v.Rename(ctx, name, other); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if err := v.Rename(ctx, name, other); !errdefs.IsNotFound(err) {
		t.Errorf("Rename of missing = %v", err)
	}
	if names, _ := v.List(ctx); !slices.Equal(names, []string{other}) {
		t.Errorf("List = %v", names)
	}
	if err := v.Destroy(ctx, other); err != nil {
		t.Fatal(err)
	}
	if ok, err := v.Exists(ctx, other); ok || err != nil {
		t.Errorf("after Destroy exists=%v, %v", ok, err)
	}
	if err := v.Destroy(ctx, other); err != nil {
		t.Errorf("Destroy of absent = %v", err)
	}

	// A symlink of a managed name is refused and left alone.
	outside := t.TempDir()
	link := volName("x", 0)
	if err := os.Symlink(outside, filepath.Join(v.Root(), link)); err != nil {
		t.Fatal(err)
	}
	if err := v.Destroy(ctx, link); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("Destroy of a symlink = %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("the symlink's target went: %v", err)
	}
	if _, err := v.Ensure(ctx, "not-managed", 8, nil, 0, 0); err == nil {
		t.Error("a non-managed name was accepted")
	}
}

func TestOpen_DirOnlyWhenAskedFor_MountCheckedWhenGiven(t *testing.T) {
	mnt := btrfsMount(t)
	data := filepath.Join(mnt, "dir-test-"+randHex(4))
	t.Cleanup(func() { os.RemoveAll(data) })
	v, err := Open(Options{DataPath: data, MountPath: mnt, Filesystem: "dir"})
	if err != nil {
		t.Fatalf("Open dir: %v", err)
	}
	if v.Kind() != FSDir {
		t.Errorf("Kind = %s", v.Kind())
	}
	// Detection never picks dir: on this btrfs mount it is btrfs.
	auto, err := Open(Options{DataPath: data, MountPath: mnt})
	if err != nil || auto.Kind() != FSBtrfs {
		t.Errorf("detected driver = %v, %v, want btrfs", auto, err)
	}
	if _, err := Open(Options{DataPath: os.TempDir(), MountPath: mnt, Filesystem: "dir"}); err == nil {
		t.Error("dir with a data path outside its mount accepted")
	}
}
