package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/berth-dev/berth/dockerio"
)

// btrfsSubvolRootIno is the inode number of every btrfs subvolume's root
// directory (BTRFS_FIRST_FREE_OBJECTID): how a subvolume is told from a plain
// directory without a CLI round trip.
const btrfsSubvolRootIno = 256

// btrfsDriver keeps each volume in a subvolume of its own with a qgroup limit.
// It holds no mutable state: safe for concurrent use (callers serialise work
// on one volume).
type btrfsDriver struct {
	volumeRoot // root: the resolved volume_data_path
	cli        btrfsCLI
	mount      string // the mount point the root is on
	fsDev      string // the filesystem's "major:minor" in mountinfo
	fsRoot     string // the path within the filesystem mounted at mount ("/" for the top level)
}

var _ dockerio.Volumes = (*btrfsDriver)(nil)

// NewBtrfs returns the btrfs driver over dataPath on the btrfs mount at
// mountPath: Open with Filesystem "btrfs".
func NewBtrfs(mountPath, dataPath string) (dockerio.Volumes, error) {
	return Open(Options{DataPath: dataPath, MountPath: mountPath, Filesystem: FSBtrfs})
}

// openBtrfs checks the tools, the capabilities and that quotas are enabled.
func openBtrfs(ctx context.Context, mnt mountEntry, data string) (*btrfsDriver, error) {
	bin, err := lookBtrfs()
	if err != nil {
		return nil, err
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return nil, fmt.Errorf("volumes: read capabilities: %w", err)
	}
	missing, err := missingCaps(string(status), capSysAdmin, capChown)
	if err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("volumes: btrfs volumes need %s, which this process lacks (set AmbientCapabilities on the unit): without them no quota could be set and mount points could not be given to the image user",
			strings.Join(missing, " and "))
	}
	d := &btrfsDriver{volumeRoot: volumeRoot{root: data, kind: isSubvolume}, cli: btrfsCLI{bin: bin}, mount: mnt.MountPoint, fsDev: mnt.Dev, fsRoot: mnt.Root}
	if err := checkQuotas(ctx, d.cli, d.mount); err != nil {
		return nil, err
	}
	return d, nil
}

// lookBtrfs finds the btrfs CLI (PATH first: a unit's PATH may lack the sbin dirs).
func lookBtrfs() (string, error) {
	bin, err := exec.LookPath("btrfs")
	if err == nil {
		return bin, nil
	}
	for _, p := range []string{"/usr/bin/btrfs", "/bin/btrfs", "/usr/sbin/btrfs", "/sbin/btrfs"} {
		if _, serr := os.Stat(p); serr == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("volumes: the btrfs command is not installed (Debian package btrfs-progs): %w", err)
}

// Errors of CheckQuotas a caller can act on.
var (
	// ErrQuotasDisabled: the btrfs has quotas (qgroups) switched off, so no limit would hold.
	ErrQuotasDisabled = errors.New("btrfs quotas are not enabled")
	// ErrQuotaCheckNotPermitted: reading qgroups needs CAP_SYS_ADMIN, which the caller lacks.
	ErrQuotaCheckNotPermitted = errors.New("reading btrfs qgroups needs CAP_SYS_ADMIN")
)

// CheckQuotas asks, read-only (`btrfs qgroup show`), whether quotas are enabled
// on the btrfs mounted at mountPath: what Open requires of a btrfs volume root,
// for tools that must not open the root (`berthctl doctor`).
func CheckQuotas(ctx context.Context, mountPath string) error {
	bin, err := lookBtrfs()
	if err != nil {
		return err
	}
	return checkQuotas(ctx, btrfsCLI{bin: bin}, mountPath)
}

func checkQuotas(ctx context.Context, cli btrfsCLI, mount string) error {
	if _, _, err := cli.qgroups(ctx, mount, false); err != nil {
		switch {
		case stderrSays(err, "not enabled", "quotas not enabled"):
			return fmt.Errorf("volumes: %w on %s: run `btrfs quota enable %s` (without them no volume quota is enforced): %w", ErrQuotasDisabled, mount, mount, err)
		case stderrSays(err, "operation not permitted"):
			return fmt.Errorf("volumes: check btrfs quotas on %s: %w: %w", mount, ErrQuotaCheckNotPermitted, err)
		}
		return fmt.Errorf("volumes: check btrfs quotas on %s: %w", mount, err)
	}
	return nil
}

func (d *btrfsDriver) Kind() string   { return FSBtrfs }
func (d *btrfsDriver) Enforced() bool { return true }

// fsPath is p's path within the filesystem ("/exp/fred-…"), as mountinfo's
// root field and (without the leading slash) `btrfs subvolume list` name it.
func (d *btrfsDriver) fsPath(p string) string {
	rel, err := filepath.Rel(d.mount, p)
	if err != nil {
		return ""
	}
	return path.Join("/", d.fsRoot, filepath.ToSlash(rel))
}

// hostPath is the path on this host of a subvolume `btrfs subvolume list`
// named (relative to the top level); "" when it is not below our mount.
func (d *btrfsDriver) hostPath(listed string) string {
	p := path.Join("/", listed)
	if !within(p, path.Clean(d.fsRoot)) {
		return ""
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, path.Clean(d.fsRoot)), "/")
	return filepath.Join(d.mount, filepath.FromSlash(rel))
}

// isSubvolume is the btrfs volumes' kind: a directory in the root that is not
// a subvolume's root (a plain directory) is refused and left alone.
func isSubvolume(p string, fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Ino != btrfsSubvolRootIno {
		return fmt.Errorf("volumes: %s is a plain directory, not a btrfs subvolume; refusing to use or remove it", p)
	}
	return nil
}

// Ensure creates the subvolume (or reuses it: a re-provision and a maintenance
// keep their data), sets its quota, creates the subdirectories and gives their
// mount points to uid:gid.
func (d *btrfsDriver) Ensure(ctx context.Context, name string, quotaMB int64, subdirs []string, uid, gid int) (string, error) {
	if err := checkRequest(name, quotaMB, subdirs); err != nil {
		return "", err
	}
	return d.ensureVolume(name, subdirs, uid, gid, func(p string) error {
		_, _, err := d.cli.run(ctx, "subvolume", "create", p)
		return err
	}, func(p string) error {
		// Only the daemon walks the volume root; containers see the
		// subdirectories, which are mounted directly.
		if err := os.Chmod(p, 0o700); err != nil {
			return fmt.Errorf("volumes: %w", err)
		}
		return d.setQuota(ctx, name, p, quotaMB)
	})
}

// SetQuota changes the volume's qgroup limit.
func (d *btrfsDriver) SetQuota(ctx context.Context, name string, quotaMB int64) error {
	if err := checkRequest(name, quotaMB, nil); err != nil {
		return err
	}
	p, err := d.existing(name, "set quota of")
	if err != nil {
		return err
	}
	return d.setQuota(ctx, name, p, quotaMB)
}

func (d *btrfsDriver) setQuota(ctx context.Context, name, p string, quotaMB int64) error {
	id, err := d.cli.rootID(ctx, p)
	if err != nil {
		return fmt.Errorf("volumes: quota of %s: %w", name, err)
	}
	bytes := strconv.FormatInt(quotaMB<<20, 10)
	_, _, err = d.cli.run(ctx, "qgroup", "limit", bytes, qgroupID(id), d.mount)
	if err != nil && isNoEntErr(err) {
		// A subvolume made before quotas were enabled may have no qgroup yet.
		if _, _, cerr := d.cli.run(ctx, "qgroup", "create", qgroupID(id), d.mount); cerr != nil {
			return fmt.Errorf("volumes: quota of %s: %w (and creating its qgroup: %w)", name, err, cerr)
		}
		_, _, err = d.cli.run(ctx, "qgroup", "limit", bytes, qgroupID(id), d.mount)
	}
	if err != nil {
		return fmt.Errorf("volumes: quota of %s: %w", name, err)
	}
	return nil
}

// nested lists the subvolumes inside the volume at p (a tenant may create
// them: see the package doc), deepest first.
func (d *btrfsDriver) nested(ctx context.Context, p string) ([]subvolume, error) {
	all, err := d.cli.listSubvolumes(ctx, d.mount)
	if err != nil {
		return nil, err
	}
	prefix := strings.TrimPrefix(d.fsPath(p), "/") + "/"
	var out []subvolume
	for _, s := range all {
		if strings.HasPrefix(s.Path, prefix) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b subvolume) int {
		return strings.Count(b.Path, "/") - strings.Count(a.Path, "/")
	})
	return out, nil
}

// Usage is the referenced bytes of the volume's qgroup plus those of any
// subvolume nested inside it, read after a commit so they are current.
func (d *btrfsDriver) Usage(ctx context.Context, name string) (int64, error) {
	p, err := d.existing(name, "usage of")
	if err != nil {
		return 0, err
	}
	id, err := d.cli.rootID(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("volumes: usage of %s: %w", name, err)
	}
	nested, err := d.nested(ctx, p)
	if err != nil {
		return 0, fmt.Errorf("volumes: usage of %s: %w", name, err)
	}
	rows, inconsistent, err := d.cli.qgroups(ctx, d.mount, true)
	if err == nil && inconsistent {
		if _, _, err = d.cli.run(ctx, "quota", "rescan", "-w", d.mount); err == nil {
			rows, _, err = d.cli.qgroups(ctx, d.mount, true)
		}
	}
	if err != nil {
		return 0, fmt.Errorf("volumes: usage of %s: %w", name, err)
	}
	row, ok := rows[qgroupID(id)]
	if !ok {
		return 0, fmt.Errorf("volumes: usage of %s: btrfs has no qgroup %s for it", name, qgroupID(id))
	}
	total := row.Referenced
	for _, n := range nested {
		total += max(rows[qgroupID(n.ID)].Referenced, 0)
	}
	return total, nil
}

// currentDev is the filesystem's "major:minor" as mounted now: a btrfs
// unmounted and mounted again (the Guard lets operations resume then) may get
// another anonymous device number, and the busy check must look for that one.
func (d *btrfsDriver) currentDev() string {
	if m, err := activeMount(d.mount); err == nil {
		return m.Dev
	}
	return d.fsDev
}

// Destroy deletes the volume's subvolume (nested ones first) and its qgroup,
// unless something still uses it (dockerio.ErrVolumeBusy).
func (d *btrfsDriver) Destroy(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	p := filepath.Join(d.root, name)
	exists, err := d.entry(p)
	if err != nil || !exists {
		return err
	}
	id, err := d.cli.rootID(ctx, p)
	if err != nil {
		return fmt.Errorf("volumes: destroy %s: %w", name, err)
	}
	nested, err := d.nested(ctx, p)
	if err != nil {
		return fmt.Errorf("volumes: destroy %s: %w", name, err)
	}
	u := usage{fsDev: d.currentDev(), subvols: map[uint64]bool{id: true}, devs: map[uint64]bool{}, fsPaths: []string{d.fsPath(p)}}
	targets := []string{}
	ids := []uint64{}
	for _, n := range nested {
		hp := d.hostPath(n.Path)
		if hp == "" {
			return fmt.Errorf("volumes: destroy %s: nested subvolume %s is not below %s", name, n.Path, d.mount)
		}
		u.subvols[n.ID] = true
		targets, ids = append(targets, hp), append(ids, n.ID)
	}
	targets, ids = append(targets, p), append(ids, id)
	for _, t := range targets {
		var st syscall.Stat_t
		if err := syscall.Stat(t, &st); err == nil {
			u.devs[st.Dev] = true
		}
	}
	found, err := inUse(ctx, u)
	if err != nil {
		return fmt.Errorf("volumes: destroy %s: %w", name, err)
	}
	if found != "" {
		return fmt.Errorf("volumes: destroy %s: %w: %s", name, dockerio.ErrVolumeBusy, found)
	}
	for _, t := range targets {
		_, _, err := d.cli.run(ctx, "subvolume", "delete", "--commit-after", t)
		switch {
		case err == nil:
		case t != p && isNoEntErr(err):
			// A nested subvolume removed meanwhile (by its tenant): nothing to do.
		case isBusyErr(err):
			return fmt.Errorf("volumes: destroy %s: %w: %w", name, dockerio.ErrVolumeBusy, err)
		case isNotEmptyErr(err):
			return fmt.Errorf("volumes: destroy %s: %w: a subvolume was created inside it meanwhile: %w", name, dockerio.ErrVolumeBusy, err)
		default:
			return fmt.Errorf("volumes: destroy %s: %w", name, err)
		}
	}
	// The data is gone. Its qgroups can only go once the cleaner has dropped the
	// subvolumes (EBUSY before); kernels since 6.8 then remove them by themselves.
	var errs []error
	args := []string{"subvolume", "sync", d.mount}
	for _, i := range ids {
		args = append(args, strconv.FormatUint(i, 10))
	}
	if _, _, err := d.cli.run(ctx, args...); err != nil {
		errs = append(errs, err)
	} else {
		for _, i := range ids {
			if _, _, err := d.cli.run(ctx, "qgroup", "destroy", qgroupID(i), d.mount); err != nil && !isNoEntErr(err) {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("volumes: destroy %s: the subvolume is deleted, but its qgroup is not removed yet: %w", name, errors.Join(errs...))
	}
	return nil
}
