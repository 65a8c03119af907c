package volumes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/dockerio"
)

// RootIdentity is what proves that a volume root is the one berthd opened at
// start. Open verifies the mount once; the filesystem can be unmounted later,
// and then the root's path is a plain directory on the filesystem underneath
// where every volume is "absent": a destroy would succeed without touching the
// data, which stays on the real disk, unaccounted. So each volume operation
// first proves the root again, with three syscalls (statfs, stat, a read of the
// marker; a few µs against the milliseconds of any btrfs command):
//
//   - FSType and FSID (statfs): an unmount leaves another filesystem type or
//     FSID at the path; btrfs and ext4 derive f_fsid from the filesystem UUID,
//     so it survives a remount of the same filesystem (st_dev does not: btrfs
//     hands out anonymous device numbers at mount time) and tells another
//     filesystem of the same type apart.
//   - Ino: the root directory itself, not a new one made at its path.
//   - Owner: the InstallationMarker names this installation, as at start.
//
// The mount table is not read: /proc/self/mountinfo grows with every container
// and costs far more than this, and the identity above decides without it.
type RootIdentity struct {
	FSType int64    // statfs f_type
	FSID   [2]int32 // statfs f_fsid
	Ino    uint64   // the root directory's inode number
	Owner  string   // the installation ID the marker names ("" when none)
}

// maxMarkerBytes bounds a read of the installation marker (an ID and a newline).
const maxMarkerBytes = 4 << 10

// ReadRootIdentity reads the identity of the volume root at root now.
func ReadRootIdentity(root string) (RootIdentity, error) {
	var sfs unix.Statfs_t
	if err := unix.Statfs(root, &sfs); err != nil {
		return RootIdentity{}, fmt.Errorf("statfs %s: %w", root, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(root, &st); err != nil {
		return RootIdentity{}, fmt.Errorf("stat %s: %w", root, err)
	}
	id := RootIdentity{FSType: int64(sfs.Type), FSID: sfs.Fsid.Val, Ino: st.Ino}
	f, err := os.Open(filepath.Join(root, InstallationMarker))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return id, nil
	case err != nil:
		return RootIdentity{}, fmt.Errorf("read %s: %w", InstallationMarker, err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxMarkerBytes))
	if err != nil {
		return RootIdentity{}, fmt.Errorf("read %s: %w", InstallationMarker, err)
	}
	id.Owner = strings.TrimSpace(string(raw))
	return id, nil
}

// fsName names a statfs magic for a message.
func fsName(magic int64) string {
	if n, ok := fsNames[magic]; ok {
		return n
	}
	return fmt.Sprintf("unknown-%#x", uint64(magic))
}

// Mismatch says how got differs from want ("" when it is the same root).
func (want RootIdentity) Mismatch(got RootIdentity) string {
	switch {
	case got.FSType != want.FSType:
		return fmt.Sprintf("it is on %s now, not on the %s it was on at start: that filesystem is not mounted there", fsName(got.FSType), fsName(want.FSType))
	case got.FSID != want.FSID:
		return fmt.Sprintf("another %s filesystem is mounted there (fsid %x:%x, %x:%x at start)", fsName(got.FSType),
			uint32(got.FSID[0]), uint32(got.FSID[1]), uint32(want.FSID[0]), uint32(want.FSID[1]))
	case got.Ino != want.Ino:
		return fmt.Sprintf("it is another directory now (inode %d, %d at start)", got.Ino, want.Ino)
	case got.Owner != want.Owner:
		if got.Owner == "" {
			return fmt.Sprintf("its %s is gone", InstallationMarker)
		}
		return fmt.Sprintf("its %s names installation %s, not %s", InstallationMarker, got.Owner, want.Owner)
	}
	return ""
}

// Guard is a volume driver that proves its root (RootIdentity) before every
// operation on it and refuses with dockerio.ErrVolumeRootUnproven when the root
// is not the one it was at start: nothing is created, renamed, measured, listed
// or destroyed on the wrong filesystem. A refused operation is held by its owner
// (the lease's teardown, the reaper's sweep, the volumehold retries), each
// retrying on the kit's backoff, so it completes by itself once the root is back.
// Safe for concurrent use.
type Guard struct {
	dockerio.Volumes
	want RootIdentity
	read func(root string) (RootIdentity, error)
	log  zerolog.Logger

	mu   sync.Mutex
	last error               // the latest proof's failure; nil: proven
	held map[string]struct{} // "<op> <volume>" refused since the root was last proven
}

// NewGuard reads v's root identity now (after Open verified the mount and the
// installation claimed the root) and returns v guarded by it. A root whose
// marker does not name installationID is refused.
func NewGuard(v dockerio.Volumes, installationID string, log zerolog.Logger) (*Guard, error) {
	return newGuard(v, installationID, ReadRootIdentity, log)
}

func newGuard(v dockerio.Volumes, installationID string, read func(string) (RootIdentity, error), log zerolog.Logger) (*Guard, error) {
	want, err := read(v.Root())
	if err != nil {
		return nil, fmt.Errorf("volumes: identity of the volume root: %w", err)
	}
	if want.Owner != installationID {
		return nil, fmt.Errorf("volumes: the volume root %s is not claimed by installation %s (its %s says %q)", v.Root(), installationID, InstallationMarker, want.Owner)
	}
	return &Guard{Volumes: v, want: want, read: read, log: log, held: map[string]struct{}{}}, nil
}

// Prove checks the root now: nil, or an error wrapping
// dockerio.ErrVolumeRootUnproven that says why. A proof that succeeds clears
// the held count (their owners retry on their own backoff).
func (g *Guard) Prove() error {
	root := g.Volumes.Root()
	got, err := g.read(root)
	var cause error
	switch {
	case err != nil:
		cause = fmt.Errorf("%w: %s: %w", dockerio.ErrVolumeRootUnproven, root, err)
	default:
		if why := g.want.Mismatch(got); why != "" {
			cause = fmt.Errorf("%w: %s: %s", dockerio.ErrVolumeRootUnproven, root, why)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case cause != nil && g.last == nil:
		g.log.Error().Err(cause).Msg("volume root unproven: volume operations are held until it is mounted again")
	case cause == nil && g.last != nil:
		g.log.Info().Int("held", len(g.held)).Str("volume_data_path", root).Msg("volume root proven again: held volume operations resume")
		clear(g.held)
	}
	g.last = cause
	return cause
}

// State is the latest proof's failure (nil: proven) and how many distinct
// operations were refused since the root was last proven.
func (g *Guard) State() (unproven error, held int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.last, len(g.held)
}

// prove proves the root before op on name; a refusal is counted as held.
func (g *Guard) prove(op, name string) error {
	err := g.Prove()
	if err == nil {
		return nil
	}
	g.mu.Lock()
	g.held[op+" "+name] = struct{}{}
	g.mu.Unlock()
	if name == "" {
		return fmt.Errorf("volumes: %s: %w", op, err)
	}
	return fmt.Errorf("volumes: %s %s: %w", op, name, err)
}

func (g *Guard) Ensure(ctx context.Context, name string, quotaMB int64, subdirs []string, uid, gid int) (string, error) {
	if err := g.prove("ensure", name); err != nil {
		return "", err
	}
	return g.Volumes.Ensure(ctx, name, quotaMB, subdirs, uid, gid)
}

func (g *Guard) SetQuota(ctx context.Context, name string, quotaMB int64) error {
	if err := g.prove("set quota of", name); err != nil {
		return err
	}
	return g.Volumes.SetQuota(ctx, name, quotaMB)
}

func (g *Guard) Usage(ctx context.Context, name string) (int64, error) {
	if err := g.prove("usage of", name); err != nil {
		return 0, err
	}
	return g.Volumes.Usage(ctx, name)
}

func (g *Guard) Rename(ctx context.Context, from, to string) error {
	if err := g.prove("rename", from+" to "+to); err != nil {
		return err
	}
	return g.Volumes.Rename(ctx, from, to)
}

func (g *Guard) Destroy(ctx context.Context, name string) error {
	if err := g.prove("destroy", name); err != nil {
		return err
	}
	return g.Volumes.Destroy(ctx, name)
}

func (g *Guard) Exists(ctx context.Context, name string) (bool, error) {
	if err := g.prove("look up", name); err != nil {
		return false, err
	}
	return g.Volumes.Exists(ctx, name)
}

func (g *Guard) List(ctx context.Context) ([]string, error) {
	if err := g.prove("list", ""); err != nil {
		return nil, err
	}
	return g.Volumes.List(ctx)
}

// Entries is the driver's Entries once the root is proven: an unmounted root
// judged "empty" would reclaim what it never read.
func (g *Guard) Entries(ctx context.Context, name string) ([]dockerio.VolumeEntry, error) {
	if err := g.prove("read", name); err != nil {
		return nil, err
	}
	return g.Volumes.Entries(ctx, name)
}

// Unnest is the driver's Unnest once the root is proven.
func (g *Guard) Unnest(ctx context.Context, name string, targets []string) error {
	if err := g.prove("unnest", name); err != nil {
		return err
	}
	return g.Volumes.Unnest(ctx, name, targets)
}
