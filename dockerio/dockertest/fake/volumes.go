package fake

import (
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio"
)

// Volumes is an in-memory dockerio.Volumes for unit tests of actor logic: the
// same names, quotas, renames and idempotence as the real drivers, with controls
// to make a volume busy, fill it, or make the root unreadable. Every behaviour a
// user relies on is also proven on a real btrfs root (dockerio/volumes).
type Volumes struct {
	mu       sync.Mutex
	root     string
	vols     map[string]*fakeVolume
	busy     map[string]int // name → destroys still refused
	listDown bool
	unproven bool
	calls    map[string]int
}

type fakeVolume struct {
	quotaMB  int64
	used     int64
	subdirs  []string
	extra    []dockerio.VolumeEntry // PutEntry's
	uid, gid int
}

var _ dockerio.Volumes = (*Volumes)(nil)

// NewVolumes is an empty volume root at root (only used in paths).
func NewVolumes(root string) *Volumes {
	return &Volumes{root: root, vols: map[string]*fakeVolume{}, busy: map[string]int{}, calls: map[string]int{}}
}

func (v *Volumes) enter(op string, ctx context.Context) error {
	v.calls[op]++
	if v.unproven {
		return fmt.Errorf("%s: %w: %s: it is on ext4 now", op, dockerio.ErrVolumeRootUnproven, v.root)
	}
	return ctx.Err()
}

// volume counts a call of op and finds name (v.mu held); absent is
// errdefs.ErrNotFound, said as "<doing> <name>".
func (v *Volumes) volume(ctx context.Context, op, doing, name string) (*fakeVolume, error) {
	if err := v.enter(op, ctx); err != nil {
		return nil, err
	}
	if fv := v.vols[name]; fv != nil {
		return fv, nil
	}
	return nil, fmt.Errorf("%s %s: %w", doing, name, errdefs.ErrNotFound)
}

// Kind is "fake".
func (v *Volumes) Kind() string { return "fake" }

// Enforced is true: the fake refuses nothing, but plays an enforcing driver.
func (v *Volumes) Enforced() bool { return true }

// Root is the configured root.
func (v *Volumes) Root() string { return v.root }

// Ensure creates or reuses name with its quota and subdirectories.
func (v *Volumes) Ensure(ctx context.Context, name string, quotaMB int64, subdirs []string, uid, gid int) (string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.enter("ensure", ctx); err != nil {
		return "", err
	}
	if !strings.HasPrefix(name, "fred-") {
		return "", fmt.Errorf("ensure %s: not a managed volume name", name)
	}
	fv := v.vols[name]
	if fv == nil {
		fv = &fakeVolume{}
		v.vols[name] = fv
	}
	fv.quotaMB, fv.uid, fv.gid = quotaMB, uid, gid
	for _, s := range subdirs {
		if !slices.Contains(fv.subdirs, s) {
			fv.subdirs = append(fv.subdirs, s)
		}
	}
	return path.Join(v.root, name), nil
}

// SetQuota changes an existing volume's quota.
func (v *Volumes) SetQuota(ctx context.Context, name string, quotaMB int64) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv, err := v.volume(ctx, "set_quota", "set quota of", name)
	if err != nil {
		return err
	}
	fv.quotaMB = quotaMB
	return nil
}

// Usage is the bytes written with Fill.
func (v *Volumes) Usage(ctx context.Context, name string) (int64, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv, err := v.volume(ctx, "usage", "usage of", name)
	if err != nil {
		return 0, err
	}
	return fv.used, nil
}

// Entries is the volume's subdirectories (directories) and what PutEntry added.
func (v *Volumes) Entries(ctx context.Context, name string) ([]dockerio.VolumeEntry, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv, err := v.volume(ctx, "entries", "read", name)
	if err != nil {
		return nil, err
	}
	var out []dockerio.VolumeEntry
	for _, s := range fv.subdirs {
		out = append(out, dockerio.VolumeEntry{Name: s, Dir: true})
	}
	return append(out, fv.extra...), nil
}

// Unnest checks the volume exists: the fake keeps no nested layout.
func (v *Volumes) Unnest(ctx context.Context, name string, targets []string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, err := v.volume(ctx, "unnest", "unnest", name)
	return err
}

// PutEntry adds an entry at the top of an existing volume (a seeded _wp tree, a
// tenant's file), as Entries reports it.
func (v *Volumes) PutEntry(name string, e dockerio.VolumeEntry) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if fv := v.vols[name]; fv != nil {
		fv.extra = append(fv.extra, e)
	}
}

// Rename moves from to to.
func (v *Volumes) Rename(ctx context.Context, from, to string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv, err := v.volume(ctx, "rename", "rename", from)
	if err != nil {
		return err
	}
	if _, taken := v.vols[to]; taken {
		return fmt.Errorf("rename %s to %s: the target exists", from, to)
	}
	delete(v.vols, from)
	v.vols[to] = fv
	return nil
}

// Destroy removes name; a busy one (SetBusy) is refused with ErrVolumeBusy.
func (v *Volumes) Destroy(ctx context.Context, name string) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.enter("destroy", ctx); err != nil {
		return err
	}
	if _, ok := v.vols[name]; !ok {
		return nil
	}
	if n := v.busy[name]; n != 0 {
		if n > 0 {
			v.busy[name] = n - 1
		}
		return fmt.Errorf("destroy %s: %w", name, dockerio.ErrVolumeBusy)
	}
	delete(v.vols, name)
	return nil
}

// Exists reports whether name exists.
func (v *Volumes) Exists(ctx context.Context, name string) (bool, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.enter("exists", ctx); err != nil {
		return false, err
	}
	_, ok := v.vols[name]
	return ok, nil
}

// List names every volume, sorted.
func (v *Volumes) List(ctx context.Context) ([]string, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.enter("list", ctx); err != nil {
		return nil, err
	}
	if v.listDown {
		return nil, fmt.Errorf("list %s: root unreadable", v.root)
	}
	return slices.Sorted(maps.Keys(v.vols)), nil
}

// --- test controls ------------------------------------------------------------

// SetBusy makes the next n destroys of name fail busy (n < 0: until SetBusy(name, 0)).
func (v *Volumes) SetBusy(name string, n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.busy[name] = n
}

// Fill sets the bytes name holds.
func (v *Volumes) Fill(name string, bytes int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if fv := v.vols[name]; fv != nil {
		fv.used = bytes
	}
}

// Remove deletes name behind berth's back (an operator, a prune).
func (v *Volumes) Remove(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.vols, name)
}

// SetRootUnproven makes every operation fail as volumes.Guard does while the
// root is not the one opened at start (dockerio.ErrVolumeRootUnproven).
func (v *Volumes) SetRootUnproven(unproven bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.unproven = unproven
}

// SetListDown makes List fail (an unreadable root).
func (v *Volumes) SetListDown(down bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.listDown = down
}

// Quota is name's quota, and whether it exists.
func (v *Volumes) Quota(name string) (int64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv := v.vols[name]
	if fv == nil {
		return 0, false
	}
	return fv.quotaMB, true
}

// Names lists every volume, sorted.
func (v *Volumes) Names() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Sorted(maps.Keys(v.vols))
}

// Calls is how often op (ensure, rename, destroy, …) was called.
func (v *Volumes) Calls(op string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls[op]
}

// Owner is the uid:gid name's mount points were last given, and whether it exists.
func (v *Volumes) Owner(name string) (uid, gid int, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	fv := v.vols[name]
	if fv == nil {
		return 0, 0, false
	}
	return fv.uid, fv.gid, true
}
