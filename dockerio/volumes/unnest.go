package volumes

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/berth-dev/berth/dockerio"
)

// Unnest moves a fred v0.13 volume's data onto berthd's layout: fred keeps an
// image VOLUME target /var/lib/data at <volume>/var/lib/data, berthd at
// <volume>/var%2Flib%2Fdata (dockerio.VolumeSubdir), so without it a
// relaunch would mount an empty directory over the tenant's data. Each move is
// one rename on the volume's own filesystem, idempotent: the nested directory
// absent means done (or nothing to move); both present refuses, unless
// berthd's is an empty directory. The empty parents fred made go too. Only
// through os.Root: nothing outside the volume is reached.
func (v volumeRoot) Unnest(ctx context.Context, name string, targets []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p, err := v.existing(name, "unnest")
	if err != nil {
		return err
	}
	root, err := os.OpenRoot(p)
	if err != nil {
		return fmt.Errorf("volumes: unnest %s: %w", name, err)
	}
	defer root.Close()
	for _, target := range targets {
		nested := strings.TrimPrefix(path.Clean("/"+target), "/")
		if !strings.Contains(nested, "/") {
			continue // one element: both layouts agree
		}
		if err := unnestOne(root, nested, dockerio.VolumeSubdir(target)); err != nil {
			return fmt.Errorf("volumes: unnest %s of %s: %w", target, name, err)
		}
	}
	return nil
}

func unnestOne(root *os.Root, nested, escaped string) error {
	fi, err := root.Lstat(nested)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory (%s)", nested, fi.Mode().Type())
	}
	if efi, err := root.Lstat(escaped); err == nil {
		// An empty directory (made before the data was found) gives way; anything
		// else is data on both sides: an operator decides.
		if !efi.IsDir() {
			return fmt.Errorf("both %s and %s exist (%s)", nested, escaped, efi.Mode().Type())
		}
		if err := root.Remove(escaped); err != nil {
			return fmt.Errorf("both %s and %s hold data: %w", nested, escaped, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := root.Rename(nested, escaped); err != nil {
		return err
	}
	for dir := path.Dir(nested); dir != "."; dir = path.Dir(dir) {
		if err := root.Remove(dir); err != nil {
			if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
				break // another target's, or the tenant's: kept
			}
			return err
		}
	}
	return nil
}
