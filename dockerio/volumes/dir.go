package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/berth-dev/berth/dockerio"
)

// dirDriver keeps each volume in a plain directory: development and the
// embedded default config only. Quotas are not enforced (Enforced is false, so
// berthd can say so); Destroy is never busy. Safe for concurrent use.
type dirDriver struct {
	root string
}

var _ dockerio.Volumes = (*dirDriver)(nil)

// maxUsageEntries bounds Usage's walk: a volume with more entries is an error
// rather than a walk that never ends (the dir driver is for development).
const maxUsageEntries = 1_000_000

// NewDir returns the dir driver over root (created 0711 when missing), without
// a mount check: Open with Filesystem "dir" is what berthd uses.
func NewDir(root string) (dockerio.Volumes, error) {
	return openDir(Options{DataPath: root, Filesystem: FSDir})
}

func (d *dirDriver) Kind() string   { return FSDir }
func (d *dirDriver) Enforced() bool { return false }
func (d *dirDriver) Root() string   { return d.root }

// dir checks the volume entry at p: a symlink or non-directory is refused and
// left alone; ok is false when p does not exist.
func (d *dirDriver) dir(p string) (bool, error) {
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
	return true, nil
}

// Ensure creates (or reuses) the directory and its subdirectories; the quota is
// checked for range and otherwise not enforced.
func (d *dirDriver) Ensure(ctx context.Context, name string, quotaMB int64, subdirs []string, uid, gid int) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if err := checkQuota(quotaMB); err != nil {
		return "", err
	}
	for _, s := range subdirs {
		if err := checkSubdir(s); err != nil {
			return "", err
		}
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p := filepath.Join(d.root, name)
	exists, err := d.dir(p)
	if err != nil {
		return "", err
	}
	if !exists {
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("volumes: create %s: %w", name, err)
		}
		if _, err := d.dir(p); err != nil {
			return "", err
		}
	}
	if err := ensureSubdirs(p, subdirs, uid, gid); err != nil {
		return "", err
	}
	return p, nil
}

// SetQuota only checks that the volume exists: plain directories have no quota.
func (d *dirDriver) SetQuota(ctx context.Context, name string, quotaMB int64) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := checkQuota(quotaMB); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	exists, err := d.dir(filepath.Join(d.root, name))
	if err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("volumes: set quota of %s: %w", name, dockerio.ErrNotFound)
	}
	return nil
}

// Usage walks the tree (never following links) and adds up the allocated
// bytes (st_blocks × 512, what du counts), at most maxUsageEntries entries.
func (d *dirDriver) Usage(ctx context.Context, name string) (int64, error) {
	if err := checkName(name); err != nil {
		return 0, err
	}
	p := filepath.Join(d.root, name)
	exists, err := d.dir(p)
	if err != nil {
		return 0, err
	}
	if !exists {
		return 0, fmt.Errorf("volumes: usage of %s: %w", name, dockerio.ErrNotFound)
	}
	var total int64
	entries := 0
	err = filepath.WalkDir(p, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		entries++
		if entries > maxUsageEntries {
			return fmt.Errorf("more than %d entries", maxUsageEntries)
		}
		if entries%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("volumes: usage of %s: %w", name, err)
	}
	return total, nil
}

// Rename renames the directory; the target must not exist.
func (d *dirDriver) Rename(ctx context.Context, from, to string) error {
	return renameVolume(ctx, d.root, from, to, d.dir)
}

// Destroy removes the directory tree; absent is success. Never busy: a plain
// directory gives no way to tell that a container still mounts it.
func (d *dirDriver) Destroy(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := filepath.Join(d.root, name)
	exists, err := d.dir(p)
	if err != nil || !exists {
		return err
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("volumes: destroy %s: %w", name, err)
	}
	return nil
}

// Exists reports whether the volume's directory exists.
func (d *dirDriver) Exists(ctx context.Context, name string) (bool, error) {
	if err := checkName(name); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return d.dir(filepath.Join(d.root, name))
}

// List names the root's entries with the managed prefix.
func (d *dirDriver) List(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return listManaged(d.root)
}
