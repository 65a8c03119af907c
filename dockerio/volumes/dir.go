package volumes

import (
	"context"
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
	volumeRoot
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

// Ensure creates (or reuses) the directory and its subdirectories; the quota is
// checked for range and otherwise not enforced.
func (d *dirDriver) Ensure(ctx context.Context, name string, quotaMB int64, subdirs []string, uid, gid int) (string, error) {
	if err := checkRequest(name, quotaMB, subdirs); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return d.ensureVolume(name, subdirs, uid, gid, func(p string) error { return os.Mkdir(p, 0o700) }, nil)
}

// SetQuota only checks that the volume exists: plain directories have no quota.
func (d *dirDriver) SetQuota(ctx context.Context, name string, quotaMB int64) error {
	if err := checkRequest(name, quotaMB, nil); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := d.existing(name, "set quota of")
	return err
}

// Usage walks the tree (never following links) and adds up the allocated
// bytes (st_blocks × 512, what du counts), at most maxUsageEntries entries.
func (d *dirDriver) Usage(ctx context.Context, name string) (int64, error) {
	p, err := d.existing(name, "usage of")
	if err != nil {
		return 0, err
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
	exists, err := d.entry(p)
	if err != nil || !exists {
		return err
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("volumes: destroy %s: %w", name, err)
	}
	return nil
}
