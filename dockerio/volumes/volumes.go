package volumes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/dockerio"
)

// Filesystem names Detect reports and Open accepts.
const (
	FSBtrfs = "btrfs"
	FSDir   = "dir" // not a filesystem: plain directories, no enforcement
	FSXFS   = "xfs"
	FSZFS   = "zfs"
	FSExt4  = "ext4" // ext2/3/4 share one magic
	FSTmpfs = "tmpfs"
)

// InstallationMarker names the berth installation that owns a volume root.
// Volume names carry the lease, not the installation, so two installations
// sharing a root could adopt, retain or destroy each other's data: berthd
// refuses the second, and the takeover preflight a root berth already claims.
const InstallationMarker = ".berth-installation"

// zfsSuperMagic is ZFS's statfs f_type (not in x/sys/unix: ZFS is out of tree).
const zfsSuperMagic = 0x2fc12fc1

// fsNames maps statfs magics to names.
var fsNames = map[int64]string{
	unix.BTRFS_SUPER_MAGIC:     FSBtrfs,
	unix.XFS_SUPER_MAGIC:       FSXFS,
	zfsSuperMagic:              FSZFS,
	unix.EXT4_SUPER_MAGIC:      FSExt4,
	unix.TMPFS_MAGIC:           FSTmpfs,
	unix.OVERLAYFS_SUPER_MAGIC: "overlay",
	unix.NFS_SUPER_MAGIC:       "nfs",
	unix.RAMFS_MAGIC:           "ramfs",
	unix.F2FS_SUPER_MAGIC:      "f2fs",
	unix.FUSE_SUPER_MAGIC:      "fuse",
}

// Detect reports the filesystem type of path by its statfs magic ("btrfs",
// "xfs", "ext4", "tmpfs", …; "unknown-0x<magic>" for one it has no name for).
func Detect(path string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return "", fmt.Errorf("detect filesystem of %s: %w", path, err)
	}
	if name, ok := fsNames[int64(st.Type)]; ok {
		return name, nil
	}
	return fmt.Sprintf("unknown-%#x", uint64(st.Type)), nil
}

// Options configure Open.
type Options struct {
	DataPath   string // volume_data_path: the volumes live directly under it
	MountPath  string // volume_mount_path: the active mount holding DataPath
	Filesystem string // volume_filesystem: "" = detect; "btrfs"; "dir" (development, no enforcement)
	// AttestTimeout bounds the btrfs commands Open runs to prove the root (the
	// quota check): storage_attestation_timeout; 0 = DefaultAttestTimeout.
	AttestTimeout time.Duration
}

// DefaultAttestTimeout is Open's proof budget when Options gives none (the
// seed's storage_attestation_timeout default).
const DefaultAttestTimeout = 30 * time.Second

// Open checks the volume root and returns its driver: btrfs on a btrfs mount
// with quotas enabled; dir only when Filesystem is "dir". It verifies that
// MountPath is an active mount point holding DataPath (for dir only when
// MountPath is set), creates DataPath (0711) when missing and, for btrfs,
// requires quotas enabled and the capabilities to set them.
func Open(opts Options) (dockerio.Volumes, error) {
	if opts.DataPath == "" {
		return nil, fmt.Errorf("volumes: volume_data_path is required")
	}
	if !filepath.IsAbs(opts.DataPath) || (opts.MountPath != "" && !filepath.IsAbs(opts.MountPath)) {
		return nil, fmt.Errorf("volumes: volume_data_path %q and volume_mount_path %q must be absolute", opts.DataPath, opts.MountPath)
	}
	want := strings.ToLower(strings.TrimSpace(opts.Filesystem))
	switch want {
	case "", FSBtrfs:
	case FSDir:
		return openDir(opts)
	case FSXFS, FSZFS:
		return nil, notSupported(want)
	default:
		return nil, fmt.Errorf("volumes: volume_filesystem %q is not supported: want btrfs, dir, or empty to detect", opts.Filesystem)
	}
	if opts.MountPath == "" {
		return nil, fmt.Errorf("volumes: volume_mount_path is required with volume_data_path %s: the mount holding the volumes is verified at start", opts.DataPath)
	}
	mnt, err := activeMount(opts.MountPath)
	if err != nil {
		return nil, err
	}
	got, err := Detect(mnt.MountPoint)
	if err != nil {
		return nil, fmt.Errorf("volumes: %w", err)
	}
	if got != FSBtrfs {
		if want == FSBtrfs {
			return nil, fmt.Errorf("volumes: volume_filesystem is btrfs but %s is %s", opts.MountPath, got)
		}
		return nil, notSupported(got)
	}
	data, err := makeDataDir(mnt, opts.DataPath)
	if err != nil {
		return nil, err
	}
	if err := VerifyMount(mnt.MountPoint, data); err != nil {
		return nil, err
	}
	budget := cmp.Or(opts.AttestTimeout, DefaultAttestTimeout)
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	d, err := openBtrfs(ctx, mnt, data)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("volumes: proving the volume root %s did not finish within storage_attestation_timeout (%s): %w", data, budget, err)
	case err != nil:
		return nil, err
	}
	return d, nil
}

// notSupported is Open's refusal of a filesystem this build has no driver for.
func notSupported(fsType string) error {
	switch fsType {
	case FSXFS:
		return fmt.Errorf("volumes: xfs is not supported: this build ships no xfs driver (project quotas need the pquota mount option and xfs_quota, and the kernel berth is tested on has XFS without quota support, so such a driver could not be proven); use btrfs with quotas enabled")
	case FSZFS:
		return fmt.Errorf("volumes: zfs is not supported: this build ships no zfs driver; use btrfs with quotas enabled")
	}
	return fmt.Errorf("volumes: %s is not supported: it has no per-volume quota berth can enforce; use btrfs with quotas enabled, or volume_filesystem: dir for development (quotas not enforced)", fsType)
}

// openDir opens the development driver: no quota, and a mount check only when
// a mount path is given.
func openDir(opts Options) (dockerio.Volumes, error) {
	data := filepath.Clean(opts.DataPath)
	if opts.MountPath != "" {
		mnt, err := activeMount(opts.MountPath)
		if err != nil {
			return nil, err
		}
		if data, err = makeDataDir(mnt, data); err != nil {
			return nil, err
		}
		if err := VerifyMount(mnt.MountPoint, data); err != nil {
			return nil, err
		}
	} else {
		if err := os.MkdirAll(data, 0o711); err != nil {
			return nil, fmt.Errorf("volumes: create volume_data_path: %w", err)
		}
		resolved, err := filepath.EvalSymlinks(data)
		if err != nil {
			return nil, fmt.Errorf("volumes: resolve volume_data_path: %w", err)
		}
		data = resolved
	}
	if err := requireDir(data); err != nil {
		return nil, err
	}
	return &dirDriver{volumeRoot{root: data}}, nil
}

// makeDataDir creates dataPath (0711: the daemon reaches the volumes, nobody
// lists them) when missing, but only after proving that its deepest existing
// ancestor is on mnt, so a missing mount never gets the directories created on
// the filesystem underneath. Returns the resolved data path.
func makeDataDir(mnt mountEntry, dataPath string) (string, error) {
	dataPath = filepath.Clean(dataPath)
	existing := deepestExisting(dataPath)
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", fmt.Errorf("volumes: resolve %s: %w", existing, err)
	}
	if !within(resolved, mnt.MountPoint) {
		return "", fmt.Errorf("volumes: volume_data_path %s is not inside volume_mount_path %s (its existing part %s resolves to %s)",
			dataPath, mnt.MountPoint, existing, resolved)
	}
	if existing != dataPath {
		if err := os.MkdirAll(dataPath, 0o711); err != nil {
			return "", fmt.Errorf("volumes: create volume_data_path: %w", err)
		}
	}
	out, err := filepath.EvalSymlinks(dataPath)
	if err != nil {
		return "", fmt.Errorf("volumes: resolve volume_data_path %s: %w", dataPath, err)
	}
	return out, nil
}

// VerifyMount checks that mountPath is an active mount point (per
// /proc/self/mountinfo) and that dataPath lies on that very mount: both are
// resolved first (a symlink cannot point the data outside the mount), and a
// mount stacked between them (dataPath on another filesystem) is refused.
func VerifyMount(mountPath, dataPath string) error {
	mnt, err := activeMount(mountPath)
	if err != nil {
		return err
	}
	data, err := filepath.EvalSymlinks(dataPath)
	if err != nil {
		return fmt.Errorf("volumes: volume_data_path %s: %w", dataPath, err)
	}
	if !within(data, mnt.MountPoint) {
		return fmt.Errorf("volumes: volume_data_path %s (resolved %s) is not inside the mount %s", dataPath, data, mnt.MountPoint)
	}
	table, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	holder, ok := table.holding(data)
	if !ok || holder.ID != mnt.ID {
		return fmt.Errorf("volumes: volume_data_path %s (resolved %s) is on the mount %s (%s), not on %s: another filesystem is mounted in between",
			dataPath, data, holder.MountPoint, holder.FSType, mnt.MountPoint)
	}
	return nil
}

// activeMount resolves path and returns the mount whose mount point it is.
func activeMount(path string) (mountEntry, error) {
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		return mountEntry{}, fmt.Errorf("volumes: volume_mount_path %s: %w", path, err)
	}
	table, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return mountEntry{}, err
	}
	m, ok := table.at(resolved)
	if !ok {
		return mountEntry{}, fmt.Errorf("volumes: volume_mount_path %s (resolved %s) is not an active mount point", path, resolved)
	}
	return m, nil
}

// within reports whether p is dir or below it (both clean and absolute).
func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// requireDir refuses a path that is a symlink or not a directory.
func requireDir(p string) error {
	fi, err := os.Lstat(p)
	if err != nil {
		return fmt.Errorf("volumes: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("volumes: %s is not a directory (%s)", p, fi.Mode().Type())
	}
	return nil
}

// Managed names: fred-<uuid>-<svc>-<idx>, fred-retained-<uuid>-<svc>-<idx>
// and a diskless instance's scratch volume fred-scratch-<uuid>-<svc>-<idx>
// (messages.ScratchVolumeName), with the canonical lower-case UUID of a lease
// and a manifest service name.
var managedName = regexp.MustCompile(`^fred-(retained-|scratch-)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?-(0|[1-9][0-9]{0,5})$`)

// ValidName reports whether name is a managed volume name.
func ValidName(name string) bool { return managedName.MatchString(name) }

func checkName(name string) error {
	if !ValidName(name) {
		return fmt.Errorf("volumes: %q is not a managed volume name (fred-<lease uuid>-<service>-<index>, fred-retained-… or fred-scratch-…)", name)
	}
	return nil
}

// checkSubdir refuses anything but one plain path element (what
// dockerio.VolumeSubdir produces).
func checkSubdir(sub string) error {
	if sub == "" || sub == "." || sub == ".." || strings.ContainsAny(sub, "/\x00") || len(sub) > 255 {
		return fmt.Errorf("volumes: %q is not a volume subdirectory name", sub)
	}
	return nil
}

// ensureSubdirs creates each subdirectory of the volume at vol (0755) and gives
// only that directory to uid:gid: never recursive, never through a link. An
// existing entry that is a symlink or not a directory is refused, untouched.
func ensureSubdirs(vol string, subdirs []string, uid, gid int) error {
	if uid < 0 || gid < 0 {
		return fmt.Errorf("volumes: owner %d:%d is not a numeric uid:gid", uid, gid)
	}
	for _, sub := range subdirs {
		if err := checkSubdir(sub); err != nil {
			return err
		}
		p := filepath.Join(vol, sub)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := os.Mkdir(p, 0o755); err != nil {
				return fmt.Errorf("volumes: create %s: %w", p, err)
			}
		case err != nil:
			return fmt.Errorf("volumes: %w", err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("volumes: %s is a symlink, not a volume subdirectory; refusing to use it", p)
		case !fi.IsDir():
			return fmt.Errorf("volumes: %s is a %s, not a volume subdirectory; refusing to use it", p, typeName(fi))
		}
		if err := os.Lchown(p, uid, gid); err != nil {
			return fmt.Errorf("volumes: give %s to %d:%d: %w", p, uid, gid, err)
		}
	}
	return nil
}

func typeName(fi fs.FileInfo) string {
	switch t := fi.Mode().Type(); {
	case t == 0:
		return "regular file"
	case t&fs.ModeSymlink != 0:
		return "symlink"
	case t&fs.ModeDir != 0:
		return "directory"
	default:
		return t.String()
	}
}

// listManaged names every entry of root with the managed prefix "fred-",
// sorted (os.ReadDir sorts).
func listManaged(root string) ([]string, error) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("volumes: list %s: %w", root, err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "fred-") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// renameNoReplace renames from to to, failing when to exists (atomically: no
// check-then-rename window); a missing from is errdefs.ErrNotFound.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("volumes: rename %s: %w", filepath.Base(from), errdefs.ErrNotFound)
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("volumes: rename %s to %s: the target already exists", filepath.Base(from), filepath.Base(to))
	}
	return fmt.Errorf("volumes: rename %s to %s: %w", filepath.Base(from), filepath.Base(to), err)
}

// Capabilities (linux/capability.h) the drivers need.
const (
	capChown       = 0
	capDACOverride = 1
	capFowner      = 3
	capSysPtrace   = 19
	capSysAdmin    = 21
)

var capNames = map[int]string{capChown: "CAP_CHOWN", capDACOverride: "CAP_DAC_OVERRIDE", capFowner: "CAP_FOWNER",
	capSysPtrace: "CAP_SYS_PTRACE", capSysAdmin: "CAP_SYS_ADMIN"}

// missingCaps reads this process's effective capabilities from status (the
// text of /proc/self/status) and names those of want it lacks.
func missingCaps(status string, want ...int) ([]string, error) {
	for _, line := range strings.Split(status, "\n") {
		hexCaps, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		var eff uint64
		if _, err := fmt.Sscanf(strings.TrimSpace(hexCaps), "%x", &eff); err != nil {
			return nil, fmt.Errorf("volumes: parse CapEff %q: %w", strings.TrimSpace(hexCaps), err)
		}
		var missing []string
		for _, c := range want {
			if eff&(1<<uint(c)) == 0 {
				missing = append(missing, capNames[c])
			}
		}
		return missing, nil
	}
	return nil, fmt.Errorf("volumes: no CapEff line in /proc/self/status")
}

// volumeRoot is what both drivers share: the directory holding one entry per
// volume, and kind, which refuses a directory there that is not a volume of
// the driver's kind (nil: every directory is one).
type volumeRoot struct {
	root string
	kind func(p string, fi fs.FileInfo) error
}

func (v volumeRoot) Root() string { return v.root }

// entry checks the volume entry at p: a symlink, a non-directory or a
// directory of the wrong kind is refused and left alone; ok is false when p
// does not exist.
func (v volumeRoot) entry(p string) (ok bool, err error) {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("volumes: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return false, fmt.Errorf("volumes: %s is a symlink, not a volume; refusing to use or remove it", p)
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("volumes: %s is a %s, not a volume; refusing to use or remove it", p, typeName(fi))
	}
	if v.kind != nil {
		if err := v.kind(p, fi); err != nil {
			return false, err
		}
	}
	return true, nil
}

// existing is the path of the volume name, which must be a managed name and
// exist: absent is errdefs.ErrNotFound, said as "<doing> <name>".
func (v volumeRoot) existing(name, doing string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	p := filepath.Join(v.root, name)
	ok, err := v.entry(p)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("volumes: %s %s: %w", doing, name, errdefs.ErrNotFound)
	}
	return p, nil
}

// ensureVolume is both drivers' Ensure after the request checks: the volume
// made by create when missing (one made meanwhile by a concurrent call is no
// error) and checked like any entry, then set up (nil: nothing to do), then
// its subdirectories made for uid:gid. Returns the volume's path.
func (v volumeRoot) ensureVolume(name string, subdirs []string, uid, gid int, create, setup func(p string) error) (string, error) {
	p := filepath.Join(v.root, name)
	exists, err := v.entry(p)
	if err != nil {
		return "", err
	}
	if !exists {
		if err := create(p); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("volumes: create %s: %w", name, err)
		}
		if _, err := v.entry(p); err != nil {
			return "", err
		}
	}
	if setup != nil {
		if err := setup(p); err != nil {
			return "", err
		}
	}
	if err := ensureSubdirs(p, subdirs, uid, gid); err != nil {
		return "", err
	}
	return p, nil
}

// checkRequest refuses a bad volume name, quota or subdirectory before any work.
func checkRequest(name string, quotaMB int64, subdirs []string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := checkQuota(quotaMB); err != nil {
		return err
	}
	for _, s := range subdirs {
		if err := checkSubdir(s); err != nil {
			return err
		}
	}
	return nil
}

func checkQuota(quotaMB int64) error {
	if quotaMB <= 0 || quotaMB > 1<<40 {
		return fmt.Errorf("volumes: quota %d MiB is out of range: a managed volume always has a positive quota", quotaMB)
	}
	return nil
}

// Rename renames the volume's entry (for btrfs its qgroup, keyed by the
// subvolume ID, follows it); the target is never replaced.
func (v volumeRoot) Rename(ctx context.Context, from, to string) error {
	if err := checkName(from); err != nil {
		return err
	}
	if err := checkName(to); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	src, err := v.existing(from, "rename")
	if err != nil {
		return err
	}
	return renameNoReplace(src, filepath.Join(v.root, to))
}

// Exists reports whether the volume exists; an entry of that name that is not
// a volume of the driver's kind is an error, never "absent".
func (v volumeRoot) Exists(ctx context.Context, name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return v.entry(filepath.Join(v.root, name))
}

// Entries lists the top of the volume: at most dockerio.MaxVolumeEntries
// entries, each a directory or not as lstat says (a symlink is not one).
func (v volumeRoot) Entries(ctx context.Context, name string) ([]dockerio.VolumeEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := v.existing(name, "read")
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("volumes: read %s: %w", name, err)
	}
	defer f.Close()
	des, err := f.ReadDir(dockerio.MaxVolumeEntries + 1)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("volumes: read %s: %w", name, err)
	}
	if len(des) > dockerio.MaxVolumeEntries {
		return nil, fmt.Errorf("volumes: %s holds more than %d entries at its top", name, dockerio.MaxVolumeEntries)
	}
	out := make([]dockerio.VolumeEntry, 0, len(des))
	for _, de := range des {
		out = append(out, dockerio.VolumeEntry{Name: de.Name(), Dir: de.Type().IsDir()})
	}
	return out, nil
}

// List names the root's entries with the managed prefix.
func (v volumeRoot) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return listManaged(v.root)
}

// deepestExisting is path itself when it exists, else its deepest existing ancestor.
func deepestExisting(path string) string {
	existing := filepath.Clean(path)
	for {
		if _, err := os.Lstat(existing); err == nil {
			return existing
		}
		parent := filepath.Dir(existing)
		if parent == existing {
			return existing
		}
		existing = parent
	}
}

// Containing is the active mount that holds path (or, when path does not exist
// yet, its deepest existing ancestor), and that mount's filesystem type as the
// mount table names it: what a daemon with volume_mount_path unset verifies.
func Containing(path string) (mountPoint, fsType string, err error) {
	existing := deepestExisting(path)
	resolved, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return "", "", fmt.Errorf("volumes: resolve %s: %w", existing, err)
	}
	table, err := readMountinfo("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	m, ok := table.holding(resolved)
	if !ok {
		return "", "", fmt.Errorf("volumes: no mount holds %s", resolved)
	}
	return m.MountPoint, m.FSType, nil
}
