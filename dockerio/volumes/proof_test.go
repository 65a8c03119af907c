package volumes

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containerd/errdefs"
	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/dockerio"
)

func claim(t *testing.T, root, id string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, InstallationMarker), []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRootIdentity_Mismatch_SaysWhatChanged(t *testing.T) {
	want := RootIdentity{FSType: 0x9123683e, FSID: [2]int32{1, 2}, Ino: 256, Owner: "inst-a"}
	for _, tc := range []struct {
		name string
		got  func(RootIdentity) RootIdentity
		says string
	}{
		{"same root", func(r RootIdentity) RootIdentity { return r }, ""},
		{"unmounted: another filesystem type", func(r RootIdentity) RootIdentity { r.FSType = 0xef53; return r },
			"it is on ext4 now, not on the btrfs it was on at start: that filesystem is not mounted there"},
		{"another btrfs mounted there", func(r RootIdentity) RootIdentity { r.FSID[1] = 7; return r }, "another btrfs filesystem is mounted there"},
		{"the directory replaced", func(r RootIdentity) RootIdentity { r.Ino = 300; return r }, "it is another directory now (inode 300, 256 at start)"},
		{"marker gone", func(r RootIdentity) RootIdentity { r.Owner = ""; return r }, "its .berth-installation is gone"},
		{"marker of another installation", func(r RootIdentity) RootIdentity { r.Owner = "inst-b"; return r }, "names installation inst-b, not inst-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := want.Mismatch(tc.got(want))
			if (tc.says == "") != (got == "") || !strings.Contains(got, tc.says) {
				t.Fatalf("Mismatch = %q, want it to say %q", got, tc.says)
			}
		})
	}
}

func TestReadRootIdentity_ReadsTheMarkerAndTheDirectory(t *testing.T) {
	root := t.TempDir()
	claim(t, root, "inst-a")
	id, err := ReadRootIdentity(root)
	if err != nil || id.Owner != "inst-a" || id.Ino == 0 || id.FSType == 0 {
		t.Fatalf("ReadRootIdentity = %+v, %v", id, err)
	}
	if err := os.Remove(filepath.Join(root, InstallationMarker)); err != nil {
		t.Fatal(err)
	}
	if again, err := ReadRootIdentity(root); err != nil || id.Mismatch(again) != "its .berth-installation is gone" {
		t.Fatalf("without the marker: %+v, %v", again, err)
	}
	if _, err := ReadRootIdentity(filepath.Join(root, "absent")); err == nil {
		t.Fatal("a root that does not exist has an identity")
	}
}

func TestNewGuard_RefusesARootThisInstallationDidNotClaim(t *testing.T) {
	root := t.TempDir()
	v, err := NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewGuard(v, "inst-a", zerolog.Nop()); err == nil {
		t.Fatal("a root without a marker was guarded")
	}
	claim(t, root, "inst-b")
	if _, err := NewGuard(v, "inst-a", zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "inst-b") {
		t.Fatalf("a root another installation claimed: %v", err)
	}
}

// The root swapped under the guard (the injected identity read): every
// operation is refused as unproven, nothing on disk changes, the refusals are
// counted as held; once the root is back the same destroy goes through.
func TestGuard_UnprovenRoot_RefusesEveryOperation_TouchesNothing_ThenCompletes(t *testing.T) {
	root := t.TempDir()
	claim(t, root, "inst-a")
	v, err := NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var swapped atomic.Bool
	read := func(p string) (RootIdentity, error) {
		id, err := ReadRootIdentity(p)
		if swapped.Load() {
			id.FSType = unix.XFS_SUPER_MAGIC // what the path shows once the real root is unmounted
		}
		return id, err
	}
	g, err := newGuard(v, "inst-a", read, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	name, other := volName("app", 0), volName("db", 0)
	vol, err := g.Ensure(ctx, name, 16, []string{"data"}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "data", "f"), []byte("tenant data"), 0o600); err != nil {
		t.Fatal(err)
	}
	swapped.Store(true)
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, dockerio.ErrVolumeRootUnproven) || !errdefs.IsUnavailable(err) || !strings.Contains(err.Error(), "not mounted there") {
			t.Fatalf("%s on an unproven root: %v, want ErrVolumeRootUnproven saying why", what, err)
		}
	}
	refused("destroy", g.Destroy(ctx, name))
	refused("destroy again", g.Destroy(ctx, name))
	refused("rename", g.Rename(ctx, name, volName("app", 1)))
	_, err = g.Ensure(ctx, other, 16, nil, 0, 0)
	refused("ensure", err)
	refused("set quota", g.SetQuota(ctx, name, 32))
	_, err = g.Usage(ctx, name)
	refused("usage", err)
	_, err = g.Exists(ctx, name)
	refused("exists", err)
	_, err = g.List(ctx)
	refused("list", err)
	_, err = g.Entries(ctx, name)
	refused("entries", err)
	refused("unnest", g.Unnest(ctx, name, []string{"/var/lib/data"}))
	if unproven, held := g.State(); unproven == nil || held != 9 {
		t.Fatalf("State = %v, %d held; want unproven and 9 distinct held operations", unproven, held)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "data", "f")); err != nil || string(b) != "tenant data" {
		t.Fatalf("the volume changed while its root was unproven: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(root, other)); !os.IsNotExist(err) {
		t.Fatalf("a volume was created on an unproven root: %v", err)
	}
	swapped.Store(false)
	if err := g.Destroy(ctx, name); err != nil {
		t.Fatalf("destroy once the root is back: %v", err)
	}
	if unproven, held := g.State(); unproven != nil || held != 0 {
		t.Fatalf("State once proven = %v, %d held", unproven, held)
	}
	if _, err := os.Stat(vol); !os.IsNotExist(err) {
		t.Fatalf("the volume survived its destroy: %v", err)
	}
}

// The real thing on the test btrfs: the volume root is a bind mount of a
// subdirectory; unmounted, its path is a plain directory on the filesystem
// underneath, and a destroy there is refused (unguarded it would find no entry
// and succeed) while the data stays on btrfs; bound again, it is destroyed.
func TestGuard_BtrfsRootUnmounted_DestroyRefused_DataKept_RemountedDestroyed(t *testing.T) {
	mnt := btrfsMount(t)
	src := filepath.Join(mnt, "volumes-proof-"+randHex(4))
	if err := os.Mkdir(src, 0o711); err != nil {
		t.Fatal(err)
	}
	priv := bindMount(t, src)
	v, err := Open(Options{DataPath: priv, MountPath: priv, Filesystem: FSBtrfs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		entries, _ := os.ReadDir(src)
		for _, e := range entries {
			_ = exec.Command("btrfs", "subvolume", "delete", filepath.Join(src, e.Name())).Run()
		}
		_ = os.RemoveAll(src)
	})
	claim(t, priv, "inst-a")
	g, err := NewGuard(v, "inst-a", zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	name := volName("app", 0)
	vol, err := g.Ensure(ctx, name, 16, []string{"data"}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeRandom(filepath.Join(vol, "data", "f"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("umount", priv).CombinedOutput(); err != nil {
		t.Fatalf("umount %s: %v %s", priv, err, out)
	}
	if err := v.Destroy(ctx, name); err != nil {
		t.Fatalf("unguarded, the destroy on the bare directory does not even fail: %v", err)
	}
	if err := g.Destroy(ctx, name); !errors.Is(err, dockerio.ErrVolumeRootUnproven) {
		t.Fatalf("destroy on the unmounted root: %v, want ErrVolumeRootUnproven", err)
	}
	if _, err := os.Stat(filepath.Join(src, name, "data", "f")); err != nil {
		t.Fatalf("the data is not on btrfs any more: %v", err)
	}
	if out, err := exec.Command("mount", "--bind", src, priv).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind: %v %s", err, out)
	}
	if err := g.Destroy(ctx, name); err != nil {
		t.Fatalf("destroy once mounted again: %v", err)
	}
	if _, err := os.Stat(filepath.Join(src, name)); !os.IsNotExist(err) {
		t.Fatalf("the volume survived its destroy: %v", err)
	}
}

// bindMount bind-mounts src at a fresh private directory (tests run as root)
// and unmounts it, however the test ends.
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
			_ = exec.Command("umount", priv).Run()
		}
		_ = os.Remove(priv)
	})
	if out, err := exec.Command("mount", "--bind", src, priv).CombinedOutput(); err != nil {
		t.Fatalf("mount --bind %s %s: %v %s", src, priv, err, out)
	}
	return priv
}

// BenchmarkGuard_Prove is the cost of one proof (statfs, stat, the marker's
// read), against a read of this process's mount table (what VerifyMount reads).
func BenchmarkGuard_Prove(b *testing.B) {
	root := b.TempDir()
	if err := os.WriteFile(filepath.Join(root, InstallationMarker), []byte("inst-a\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	v, err := NewDir(root)
	if err != nil {
		b.Fatal(err)
	}
	g, err := NewGuard(v, "inst-a", zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	b.Run("proof", func(b *testing.B) {
		for range b.N {
			if err := g.Prove(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mountinfo", func(b *testing.B) {
		for range b.N {
			if _, err := readMountinfo("/proc/self/mountinfo"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
