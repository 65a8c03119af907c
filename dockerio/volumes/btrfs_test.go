package volumes

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

func TestOpen_BtrfsWithQuotas_EnforcedAndDataDirCreated0711(t *testing.T) {
	d, mnt := btrfsVolumes(t)
	if d.Kind() != FSBtrfs || !d.Enforced() {
		t.Errorf("Kind/Enforced = %s/%v, want btrfs/true", d.Kind(), d.Enforced())
	}
	fi, err := os.Stat(d.Root())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o711 {
		t.Errorf("data dir mode %o, want 0711", fi.Mode().Perm())
	}
	// An explicit "btrfs" agrees with detection; NewBtrfs is that.
	if _, err := NewBtrfs(mnt, d.Root()); err != nil {
		t.Errorf("NewBtrfs: %v", err)
	}
	// btrfs needs the mount declared.
	if _, err := Open(Options{DataPath: d.Root()}); err == nil || !strings.Contains(err.Error(), "volume_mount_path is required") {
		t.Errorf("Open without MountPath = %v", err)
	}
}

func TestOpen_UnsupportedFilesystems_RefusedSayingWhy(t *testing.T) {
	mnt := btrfsMount(t)
	for fs, want := range map[string]string{"xfs": "xfs is not supported", "zfs": "zfs is not supported", "ext3": "not supported"} {
		if _, err := Open(Options{DataPath: filepath.Join(mnt, "x"), MountPath: mnt, Filesystem: fs}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(Filesystem %s) = %v, want %q", fs, err, want)
		}
	}
	// A detected tmpfs (no quota berth can enforce) is refused, and nothing is
	// created on it.
	shm := "/dev/shm"
	if got, _ := Detect(shm); got == FSTmpfs {
		data := filepath.Join(shm, "berth-volumes-test-"+randHex(4))
		_, err := Open(Options{DataPath: data, MountPath: shm})
		if err == nil || !strings.Contains(err.Error(), "tmpfs is not supported") {
			t.Errorf("Open on tmpfs = %v, want 'tmpfs is not supported'", err)
		}
		if _, serr := os.Lstat(data); serr == nil {
			os.RemoveAll(data)
			t.Errorf("Open on tmpfs created %s", data)
		}
		if _, err := Open(Options{DataPath: data, MountPath: shm, Filesystem: "btrfs"}); err == nil || !strings.Contains(err.Error(), "is tmpfs") {
			t.Errorf("Open(btrfs) on tmpfs = %v", err)
		}
	}
}

func TestDetect_StatfsMagic(t *testing.T) {
	mnt := btrfsMount(t)
	if got, err := Detect(mnt); err != nil || got != FSBtrfs {
		t.Errorf("Detect(%s) = %q, %v", mnt, got, err)
	}
	if got, err := Detect("/proc"); err != nil || !strings.HasPrefix(got, "unknown-0x9fa0") {
		t.Errorf("Detect(/proc) = %q, %v, want unknown-0x9fa0 (procfs has no name here)", got, err)
	}
	if got, _ := Detect("/dev/shm"); got != FSTmpfs {
		t.Logf("/dev/shm is %q here", got)
	}
	if _, err := Detect(filepath.Join(mnt, "absent-"+randHex(4))); err == nil {
		t.Error("Detect of a missing path succeeded")
	}
}

func TestVerifyMount_PathNotUnderMount_NonMount_Symlink_StackedMount(t *testing.T) {
	d, mnt := btrfsVolumes(t)
	if err := VerifyMount(mnt, d.Root()); err != nil {
		t.Fatalf("VerifyMount(mount, data) = %v", err)
	}
	// A path not under the mount.
	if err := VerifyMount(mnt, os.TempDir()); err == nil || !strings.Contains(err.Error(), "not inside") {
		t.Errorf("data outside the mount = %v", err)
	}
	// A directory that is not a mount point.
	if err := VerifyMount(d.Root(), d.Root()); err == nil || !strings.Contains(err.Error(), "not an active mount point") {
		t.Errorf("non-mount = %v", err)
	}
	if err := VerifyMount(filepath.Join(mnt, "absent"), d.Root()); err == nil {
		t.Error("missing mount path accepted")
	}
	// A symlink inside the mount that leads outside it.
	link := filepath.Join(d.Root(), "escape")
	if err := os.Symlink(os.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if err := VerifyMount(mnt, link); err == nil || !strings.Contains(err.Error(), "not inside") {
		t.Errorf("symlink out of the mount = %v", err)
	}
	// Open refuses it too, and creates nothing through it.
	if _, err := Open(Options{DataPath: filepath.Join(link, "vols"), MountPath: mnt}); err == nil {
		t.Error("Open through a symlink out of the mount succeeded")
	}
	// Another filesystem mounted between the mount and the data path.
	stacked := filepath.Join(d.Root(), "stacked")
	if err := os.Mkdir(stacked, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("berth-test", stacked, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(stacked, unix.MNT_DETACH) })
	if err := VerifyMount(mnt, stacked); err == nil || !strings.Contains(err.Error(), "mounted in between") {
		t.Errorf("stacked mount = %v", err)
	}
}

func TestBtrfs_Ensure_SubvolumeQuotaSubdirs_ReuseUpdatesQuotaAndOwner_NonRecursive(t *testing.T) {
	d, _ := btrfsVolumes(t)
	ctx := testCtx(t)
	name := volName("db", 0)
	p, err := d.Ensure(ctx, name, 16, []string{"data", dockerio.VolumeSubdir("/var/lib/x")}, 1000, 1001)
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if p != filepath.Join(d.Root(), name) {
		t.Errorf("path %s", p)
	}
	fi, _ := os.Lstat(p)
	if err := isSubvolume(p, fi); err != nil {
		t.Fatalf("not a subvolume: %v", err)
	}
	id, err := d.cli.rootID(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := qgroupOf(t, d, id); !ok || r.MaxRfer != 16<<20 {
		t.Errorf("qgroup %s = %+v (found %v), want max referenced 16 MiB", qgroupID(id), r, ok)
	}
	for _, sub := range []string{"data", "var%2Flib%2Fx"} {
		if uid, gid := ownerOf(t, filepath.Join(p, sub)); uid != 1000 || gid != 1001 {
			t.Errorf("%s owned %d:%d, want 1000:1001", sub, uid, gid)
		}
	}
	if uid, gid := ownerOf(t, p); uid != 0 || gid != 0 {
		t.Errorf("volume root owned %d:%d, want root", uid, gid)
	}
	// Tenant content the mount point holds keeps its owner on a reuse.
	inner := filepath.Join(p, "data", "inner")
	if err := os.Mkdir(inner, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(inner, 1000, 1001); err != nil {
		t.Fatal(err)
	}
	again, err := d.Ensure(ctx, name, 32, []string{"data"}, 2000, 2000)
	if err != nil || again != p {
		t.Fatalf("Ensure again = %s, %v", again, err)
	}
	if id2, _ := d.cli.rootID(ctx, p); id2 != id {
		t.Errorf("reuse made a new subvolume %d (was %d)", id2, id)
	}
	if r, _ := qgroupOf(t, d, id); r.MaxRfer != 32<<20 {
		t.Errorf("quota after reuse = %d, want 32 MiB", r.MaxRfer)
	}
	if uid, gid := ownerOf(t, filepath.Join(p, "data")); uid != 2000 || gid != 2000 {
		t.Errorf("mount point after reuse owned %d:%d, want 2000:2000", uid, gid)
	}
	if uid, gid := ownerOf(t, inner); uid != 1000 || gid != 1001 {
		t.Errorf("content below the mount point re-owned to %d:%d: the chown must not be recursive", uid, gid)
	}
	if err := d.SetQuota(ctx, name, 8); err != nil {
		t.Fatalf("SetQuota: %v", err)
	}
	if r, _ := qgroupOf(t, d, id); r.MaxRfer != 8<<20 {
		t.Errorf("quota after SetQuota = %d, want 8 MiB", r.MaxRfer)
	}
	if err := d.SetQuota(ctx, volName("db", 1), 8); !errdefs.IsNotFound(err) {
		t.Errorf("SetQuota of a missing volume = %v, want ErrNotFound", err)
	}
	if _, err := d.Ensure(ctx, name, 0, nil, 0, 0); err == nil {
		t.Error("Ensure with quota 0 accepted")
	}
}

func TestBtrfs_Usage_CurrentRightAfterWriting(t *testing.T) {
	d, _ := btrfsVolumes(t)
	ctx := testCtx(t)
	name := volName("app", 0)
	p, err := d.Ensure(ctx, name, 64, []string{"data"}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	base, err := d.Usage(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5 << 20
	if err := writeRandom(filepath.Join(p, "data", "f"), n); err != nil {
		t.Fatal(err)
	}
	// Without a commit, btrfs reports the last transaction's numbers: the lag
	// Usage's --sync removes (measured: the write is invisible here).
	id, _ := d.cli.rootID(ctx, p)
	rows, _, err := d.cli.qgroups(ctx, d.mount, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("referenced without a commit right after writing %d bytes: %d (baseline %d)", n, rows[qgroupID(id)].Referenced, base)
	start := time.Now()
	got, err := d.Usage(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Usage = %d bytes in %s", got, time.Since(start))
	if got < base+n || got > base+n+256<<10 {
		t.Errorf("Usage after writing %d bytes = %d (baseline %d), want within 256 KiB above", n, got, base)
	}
	if err := os.Remove(filepath.Join(p, "data", "f")); err != nil {
		t.Fatal(err)
	}
	if after, err := d.Usage(ctx, name); err != nil || after > base+64<<10 {
		t.Errorf("Usage after removing the file = %d, %v, want back near %d", after, err, base)
	}
	if _, err := d.Usage(ctx, volName("app", 1)); !errdefs.IsNotFound(err) {
		t.Errorf("Usage of a missing volume = %v, want ErrNotFound", err)
	}
}

func TestBtrfs_Rename_QgroupLimitFollows_MissingIsNotFound_TargetTaken(t *testing.T) {
	d, _ := btrfsVolumes(t)
	ctx := testCtx(t)
	name := volName("db", 0)
	if _, err := d.Ensure(ctx, name, 8, []string{"data"}, 0, 0); err != nil {
		t.Fatal(err)
	}
	lease := strings.TrimSuffix(strings.TrimPrefix(name, "fred-"), "-db-0")
	retained := messages.RetainedVolumeName(lease, "db", 0)
	if err := d.Rename(ctx, name, retained); err != nil {
		t.Fatalf("Rename: %v", err)
	}
	if ok, err := d.Exists(ctx, name); err != nil || ok {
		t.Errorf("old name exists=%v, %v", ok, err)
	}
	if ok, err := d.Exists(ctx, retained); err != nil || !ok {
		t.Fatalf("new name exists=%v, %v", ok, err)
	}
	// The kernel still enforces the 8 MiB limit under the new name.
	err := writeRandom(filepath.Join(d.Root(), retained, "data", "big"), 12<<20)
	if !errors.Is(err, syscall.EDQUOT) {
		t.Errorf("writing 12 MiB into the renamed 8 MiB volume = %v, want EDQUOT", err)
	}
	if err := d.Rename(ctx, name, retained); !errdefs.IsNotFound(err) {
		t.Errorf("Rename of a missing volume = %v, want ErrNotFound", err)
	}
	other := volName("db", 1)
	if _, err := d.Ensure(ctx, other, 8, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename(ctx, retained, other); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("Rename onto an existing volume = %v", err)
	}
	if ok, _ := d.Exists(ctx, retained); !ok {
		t.Error("the refused rename lost the source")
	}
}

func TestBtrfs_Destroy_RemovesSubvolumeAndItsQgroup_AbsentIsSuccess(t *testing.T) {
	d, _ := btrfsVolumes(t)
	ctx := testCtx(t)
	name := volName("db", 0)
	p, err := d.Ensure(ctx, name, 16, []string{"data"}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeRandom(filepath.Join(p, "data", "f"), 2<<20); err != nil {
		t.Fatal(err)
	}
	id, _ := d.cli.rootID(ctx, p)
	start := time.Now()
	if err := d.Destroy(ctx, name); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	t.Logf("Destroy (delete, cleaner sync, qgroup) took %s", time.Since(start))
	if ok, err := d.Exists(ctx, name); err != nil || ok {
		t.Errorf("after Destroy exists=%v, %v", ok, err)
	}
	if r, ok := qgroupOf(t, d, id); ok {
		t.Errorf("qgroup %s still there after Destroy: %+v", qgroupID(id), r)
	}
	if err := d.Destroy(ctx, name); err != nil {
		t.Errorf("Destroy of an absent volume = %v, want nil", err)
	}
}

// The kernel deletes a subvolume that is in use (see the package doc); the
// driver's own check is what makes these busy.
func TestBtrfs_Destroy_InUse_IsErrVolumeBusy_OpenFileCwdBindMount(t *testing.T) {
	d, _ := btrfsVolumes(t)
	ctx := testCtx(t)
	name := volName("db", 0)
	p, err := d.Ensure(ctx, name, 16, []string{"data"}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	busy := func(step, want string) {
		t.Helper()
		err := d.Destroy(ctx, name)
		if !errors.Is(err, dockerio.ErrVolumeBusy) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s: Destroy = %v, want ErrVolumeBusy saying %q", step, err, want)
		}
		if ok, _ := d.Exists(ctx, name); !ok {
			t.Fatalf("%s: the busy volume was deleted", step)
		}
		t.Logf("%s: %v", step, err)
	}

	// A file held open by a process.
	f, err := os.Create(filepath.Join(p, "data", "held"))
	if err != nil {
		t.Fatal(err)
	}
	busy("open file", "holds")
	f.Close()

	// A process whose working directory is inside.
	sleeper := exec.Command("sleep", "60")
	sleeper.Dir = filepath.Join(p, "data")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	busy("cwd", "cwd")
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()

	// A bind mount of the data subdirectory (what a container has).
	target := t.TempDir()
	if err := unix.Mount(filepath.Join(p, "data"), target, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind mount: %v", err)
	}
	mounted := true
	t.Cleanup(func() {
		if mounted {
			_ = unix.Unmount(target, unix.MNT_DETACH)
		}
	})
	busy("bind mount", "is mounted at "+target)
	if err := unix.Unmount(target, 0); err != nil {
		t.Fatal(err)
	}
	mounted = false

	if err := d.Destroy(ctx, name); err != nil {
		t.Fatalf("Destroy once nothing uses it: %v", err)
	}
}

// A tenant can make a subvolume inside its volume without any privilege; its
// bytes are counted and it goes with the volume.
func TestBtrfs_NestedSubvolumeByTenant_CountedInUsageAndDestroyed(t *testing.T) {
	d, _ := btrfsVolumes(t)
	ctx := testCtx(t)
	name := volName("app", 0)
	p, err := d.Ensure(ctx, name, 64, []string{"data"}, 1000, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runAs(t, filepath.Join(p, "data"), 1000, "btrfs", "subvolume", "create", "nested"); err != nil {
		t.Fatalf("unprivileged subvolume create: %v: %s", err, out)
	}
	if out, err := runAs(t, filepath.Join(p, "data"), 1000, "dd", "if=/dev/urandom", "of=nested/f", "bs=1M", "count=3", "status=none"); err != nil {
		t.Fatalf("write into nested: %v: %s", err, out)
	}
	got, err := d.Usage(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got < 3<<20 {
		t.Errorf("Usage = %d, want the nested subvolume's 3 MiB counted", got)
	}
	subs, err := d.nested(ctx, p)
	if err != nil || len(subs) != 1 {
		t.Fatalf("nested = %+v, %v", subs, err)
	}
	if err := d.Destroy(ctx, name); err != nil {
		t.Fatalf("Destroy with a nested subvolume: %v", err)
	}
	if ok, _ := d.Exists(ctx, name); ok {
		t.Error("volume still there")
	}
	if _, ok := qgroupOf(t, d, subs[0].ID); ok {
		t.Errorf("the nested subvolume's qgroup %s is still there", qgroupID(subs[0].ID))
	}
}

func TestBtrfs_List_EntriesWithManagedPrefix(t *testing.T) {
	d, _ := btrfsVolumes(t)
	ctx := testCtx(t)
	a, b := volName("a", 0), volName("b", 1)
	for _, n := range []string{a, b} {
		if _, err := d.Ensure(ctx, n, 8, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(d.Root(), "lost+found"), 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{a, b}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("List = %v, want %v", got, want)
	}
}

func TestBtrfs_RefusesNonManagedNamesSymlinksFilesPlainDirs_NeverDeletesThem(t *testing.T) {
	d, _ := btrfsVolumes(t)
	ctx := testCtx(t)
	for _, bad := range []string{"app", "../x", "fred-x-app-0", volName("app", 0) + "/..", ""} {
		if _, err := d.Ensure(ctx, bad, 8, nil, 0, 0); err == nil || !strings.Contains(err.Error(), "not a managed volume name") {
			t.Errorf("Ensure(%q) = %v", bad, err)
		}
		if err := d.Destroy(ctx, bad); err == nil {
			t.Errorf("Destroy(%q) accepted", bad)
		}
		if err := d.Rename(ctx, bad, volName("app", 0)); err == nil {
			t.Errorf("Rename(%q) accepted", bad)
		}
	}
	outside := t.TempDir()
	marker := filepath.Join(outside, "keep")
	if err := os.WriteFile(marker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link, file, plain := volName("link", 0), volName("file", 0), volName("plain", 0)
	if err := os.Symlink(outside, filepath.Join(d.Root(), link)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Root(), file), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(d.Root(), plain), 0o700); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]string{link: "symlink", file: "regular file", plain: "not a btrfs subvolume"} {
		if _, err := d.Ensure(ctx, n, 8, []string{"data"}, 1000, 1000); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Ensure over a %s = %v", want, err)
		}
		if err := d.Destroy(ctx, n); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Destroy of a %s = %v", want, err)
		}
		if _, err := d.Exists(ctx, n); err == nil {
			t.Errorf("Exists of a %s said nothing", want)
		}
		if _, err := os.Lstat(filepath.Join(d.Root(), n)); err != nil {
			t.Errorf("the %s entry was removed: %v", want, err)
		}
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("the symlink's target lost its content: %v", err)
	}
	if uid, _ := ownerOf(t, outside); uid != 0 {
		t.Errorf("the symlink's target was chowned to %d", uid)
	}

	// A subdirectory that is a symlink is refused; its target is not chowned.
	name := volName("app", 1)
	p, err := d.Ensure(ctx, name, 8, nil, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(p, "data")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Ensure(ctx, name, 8, []string{"data"}, 1000, 1000); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("Ensure with a symlinked subdirectory = %v", err)
	}
	if uid, _ := ownerOf(t, outside); uid != 0 {
		t.Errorf("a symlinked subdirectory's target was chowned to %d", uid)
	}
	if _, err := d.Ensure(ctx, name, 8, []string{"../x"}, 0, 0); err == nil {
		t.Error("a subdirectory escaping the volume was accepted")
	}
}

// TestContaining_NotYetCreatedPath_FoundThroughItsExistingAncestor: a data path
// that does not exist yet is attributed to the mount holding its deepest
// existing ancestor: the btrfs mount for a path below it, and for a temp dir
// the mount that holds that instead (never btrfs here).
func TestContaining_NotYetCreatedPath_FoundThroughItsExistingAncestor(t *testing.T) {
	mnt := btrfsMount(t)
	point, fsType, err := Containing(filepath.Join(mnt, "not", "yet", randHex(4)))
	if err != nil || fsType != FSBtrfs {
		t.Fatalf("Containing under the btrfs mount = %q, %q, %v; want that mount, btrfs", point, fsType, err)
	}
	if want, _ := filepath.EvalSymlinks(mnt); point != want {
		t.Fatalf("mount point %q, want %q", point, want)
	}
	tmp := t.TempDir()
	point, fsType, err = Containing(filepath.Join(tmp, "volumes"))
	if err != nil || fsType == FSBtrfs || point == "" {
		t.Fatalf("Containing under a temp dir = %q, %q, %v", point, fsType, err)
	}
	if want, _ := filepath.EvalSymlinks(tmp); !within(want, point) {
		t.Fatalf("mount point %q does not hold %q", point, want)
	}
}

// storage_attestation_timeout bounds Open's proof of a btrfs root: a budget too
// small for the quota check refuses the root, saying which key ran out.
func TestOpen_AttestTimeout_ASmallBudgetRefusesTheRootNamingTheKey(t *testing.T) {
	mnt := btrfsMount(t)
	data := filepath.Join(mnt, "volumes-attest-"+randHex(4))
	t.Cleanup(func() { _ = os.RemoveAll(data) })
	_, err := Open(Options{DataPath: data, MountPath: mnt, Filesystem: FSBtrfs, AttestTimeout: time.Nanosecond})
	if err == nil || !strings.Contains(err.Error(), "storage_attestation_timeout (1ns)") {
		t.Fatalf("Open with a 1ns attestation budget: %v", err)
	}
	if _, err := Open(Options{DataPath: data, MountPath: mnt, Filesystem: FSBtrfs, AttestTimeout: time.Minute}); err != nil {
		t.Fatalf("Open with a minute: %v", err)
	}
}
