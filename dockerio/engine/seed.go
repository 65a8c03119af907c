package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/berth-dev/berth/dockerio"
)

// Seeding a writable path (seed: "seed them from the image's own tar with
// extraction confined to the target"). The image's content of each path is
// read from an image helper and extracted into <dir>/_wp/<VolumeSubdir(path)>
// through os.Root: no entry — "..", an absolute name, a path through a symlink
// an earlier entry placed — can reach outside that directory. Entries and
// bytes are capped (min_avg_file_bytes, the quota). The content keeps the
// image's modes and owners, minus setuid and setgid on files (the host keeps
// no set-id program of a tenant's image); the mount point belongs to the
// container's user. Devices and FIFOs are never made on the host.
//
// The new tree is staged beside the old one and swapped in by rename: a
// container still running on the old tree (a restart's source) keeps its
// mount of it and never sees it half replaced; the old tree is then removed.
// Nothing outside _wp is touched: a volume's application data stays.

// Staging names: url.QueryEscape escapes ':', so no VOLUME's subdirectory
// (dockerio.VolumeSubdir) is ever named so.
const (
	seedStaging = dockerio.WritableRoot + ":seed"
	seedOld     = dockerio.WritableRoot + ":old"
)

// The archives of writable paths are kept by image ID and path (an ID names
// immutable content) when small: a later instance or launch of the image seeds
// from memory, without a helper or an archive request (each costs dockerd
// about 0.2 s on 20.10). At most maxSeedCache of them: 64 MiB.
const (
	maxSeedArchive = 1 << 20
	maxSeedCache   = 64
)

// errNotCached: a seed from the cache alone met a path it does not hold.
var errNotCached = errors.New("archive not cached")

// seedBudget is what one directory's seed may still write.
type seedBudget struct {
	entries, maxEntries int
	bytes, maxBytes     int64
}

// SeedWritablePaths replaces the _wp tree of every one of req.Dirs with the
// image's content of req.Paths. A failed directory keeps its previous tree.
func (e *Engine) SeedWritablePaths(ctx context.Context, req dockerio.SeedRequest) error {
	if !isImageID(req.ImageID) {
		return fmt.Errorf("seed writable paths: %q is not an image ID", req.ImageID)
	}
	if err := dockerio.CheckSeedRequest(req); err != nil {
		return fmt.Errorf("seed writable paths: %w", err)
	}
	resp, err := e.imageByID(ctx, req.ImageID)
	if err != nil {
		return fmt.Errorf("seed writable paths: %w", err)
	}
	info, err := admit(resp, req.ImageID)
	if err != nil {
		return fmt.Errorf("seed writable paths: %w", err)
	}
	seedAll := func(helper string) error {
		for _, dir := range req.Dirs {
			if err := e.seedDir(ctx, helper, dir, req); err != nil {
				return fmt.Errorf("seed writable paths into %s: %w", dir, err)
			}
		}
		return nil
	}
	if err := seedAll(""); !errors.Is(err, errNotCached) {
		return err
	}
	return e.withHelper(ctx, req.ImageID, info.Volumes, seedAll)
}

// seedDir stages every path's content under dir and swaps it in as dir/_wp.
func (e *Engine) seedDir(ctx context.Context, helper, dir string, req dockerio.SeedRequest) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.RemoveAll(seedStaging); err != nil {
		return err
	}
	if err := root.Mkdir(seedStaging, 0o755); err != nil {
		return err
	}
	budget := &seedBudget{entries: req.MaxEntries, maxEntries: req.MaxEntries, bytes: req.MaxBytes, maxBytes: req.MaxBytes}
	for _, p := range req.Paths {
		if err := e.seedPath(ctx, helper, root, req.ImageID, p, req.UID, req.GID, budget); err != nil {
			_ = root.RemoveAll(seedStaging)
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	if err := root.RemoveAll(seedOld); err != nil {
		return err
	}
	if err := root.Rename(dockerio.WritableRoot, seedOld); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := root.Rename(seedStaging, dockerio.WritableRoot); err != nil {
		return err
	}
	if err := root.RemoveAll(seedOld); err != nil {
		e.log.Warn().Err(err).Str("dir", dir).Msg("previous writable-path tree not removed; the next seed retries")
	}
	return nil
}

// seedPath extracts the image's content of p into the staging tree.
func (e *Engine) seedPath(ctx context.Context, helper string, root *os.Root, imageID, p string, uid, gid int, budget *seedBudget) error {
	archive, done, err := e.pathArchive(ctx, helper, imageID, p)
	if err != nil {
		return err
	}
	defer done()
	top := path.Join(seedStaging, dockerio.VolumeSubdir(p))
	if err := root.Mkdir(top, 0o700); err != nil {
		return err
	}
	dst, err := root.OpenRoot(top)
	if err != nil {
		return err
	}
	defer dst.Close()
	return extract(tar.NewReader(archive), dst, path.Base(p), uid, gid, budget)
}

// pathArchive is the image's archive of directory p: from the cache, else
// read through the helper ("" = none: errNotCached) and kept when small.
func (e *Engine) pathArchive(ctx context.Context, helper, imageID, p string) (io.Reader, func(), error) {
	key := imageID + "\x00" + p
	if b, ok := e.seeds.get(key); ok {
		return bytes.NewReader(b), func() {}, nil
	}
	if helper == "" {
		return nil, nil, errNotCached
	}
	rc, stat, err := e.docker.CopyFromContainer(ctx, helper, p)
	if err != nil {
		return nil, nil, dockerErr("read it from the image helper", err)
	}
	if !stat.Mode.IsDir() {
		rc.Close()
		return nil, nil, fmt.Errorf("not a directory in the image (%v)", stat.Mode.Type())
	}
	head, err := io.ReadAll(io.LimitReader(rc, maxSeedArchive+1))
	if err != nil {
		rc.Close()
		return nil, nil, fmt.Errorf("read it from the image helper: %w", err)
	}
	if len(head) <= maxSeedArchive {
		rc.Close()
		e.seeds.put(key, head)
		return bytes.NewReader(head), func() {}, nil
	}
	return io.MultiReader(bytes.NewReader(head), rc), func() { rc.Close() }, nil
}

// extract writes the archive of one directory (entries <base>, <base>/…) into
// dst, confined to it; the top directory gets the image's mode and uid:gid.
func extract(tr *tar.Reader, dst *os.Root, base string, uid, gid int, budget *seedBudget) error {
	topMode := fs.FileMode(0o755)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the image's archive: %w", err)
		}
		if budget.entries--; budget.entries < 0 {
			return fmt.Errorf("more than %d entries (the quota over min_avg_file_bytes)", budget.maxEntries)
		}
		rel, err := entryName(hdr.Name, base)
		if err != nil {
			return err
		}
		if rel == "." {
			if hdr.Typeflag != tar.TypeDir {
				return fmt.Errorf("archive entry %q: the top is not a directory", hdr.Name)
			}
			topMode = dirMode(hdr)
			continue
		}
		if err := writeEntry(dst, tr, hdr, rel, base, budget); err != nil {
			return fmt.Errorf("archive entry %q: %w", hdr.Name, err)
		}
	}
	if err := dst.Chmod(".", topMode); err != nil {
		return err
	}
	return dst.Lchown(".", uid, gid)
}

// entryName is an archive entry's name relative to the extracted directory
// ("." for the directory itself); a name outside it, absolute or not clean is
// refused (Docker never sends one: it would be a hostile archive).
func entryName(name, base string) (string, error) {
	n := strings.TrimSuffix(name, "/")
	if n == base {
		return ".", nil
	}
	rest, ok := strings.CutPrefix(n, base+"/")
	if !ok || rest == "" || path.IsAbs(rest) || path.Clean(rest) != rest || rest == ".." || strings.HasPrefix(rest, "../") {
		return "", fmt.Errorf("archive entry %q is not a clean path inside %s; refusing to extract it", name, base)
	}
	return rest, nil
}

// writeEntry makes one entry below the top, owned as in the image.
func writeEntry(dst *os.Root, r io.Reader, hdr *tar.Header, rel, base string, budget *seedBudget) error {
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := dst.Mkdir(rel, 0o700); err != nil {
			return err
		}
		if err := dst.Chmod(rel, dirMode(hdr)); err != nil {
			return err
		}
	case tar.TypeReg:
		if budget.bytes -= hdr.Size; budget.bytes < 0 {
			return fmt.Errorf("more than %d bytes (the quota)", budget.maxBytes)
		}
		if err := writeFile(dst, rel, r, hdr.Size); err != nil {
			return err
		}
		// No set-id program of a tenant's image on the host.
		if err := dst.Chmod(rel, hdr.FileInfo().Mode()&(fs.ModePerm|fs.ModeSticky)); err != nil {
			return err
		}
	case tar.TypeSymlink:
		// Made as is: the link is resolved inside the container, never here.
		if err := dst.Symlink(hdr.Linkname, rel); err != nil {
			return err
		}
	case tar.TypeLink:
		old, err := entryName(hdr.Linkname, base)
		if err != nil || old == "." {
			return fmt.Errorf("hard link to %q outside the directory", hdr.Linkname)
		}
		return dst.Link(old, rel) // one inode: it has its owner already
	default:
		return nil // devices and FIFOs are never made on the host
	}
	return dst.Lchown(rel, hdr.Uid, hdr.Gid)
}

// writeFile creates rel (never replacing an entry, never through a final
// symlink) with exactly size bytes of r.
func writeFile(dst *os.Root, rel string, r io.Reader, size int64) error {
	f, err := dst.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, r, size)
	return errors.Join(err, f.Close())
}

// dirMode is a directory entry's permissions with its setgid and sticky bits
// (a setgid log directory keeps its group for new files).
func dirMode(hdr *tar.Header) fs.FileMode {
	return hdr.FileInfo().Mode() & (fs.ModePerm | fs.ModeSetgid | fs.ModeSticky)
}
