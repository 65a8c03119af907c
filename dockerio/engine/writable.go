package engine

import (
	"archive/tar"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/admission"
)

// Writable-path detection (seed: Image admission). A stock image writes at
// start in directories that are no VOLUME (nginx: /var/lib/nginx); under a
// read-only rootfs it exits. Detection reads the depth-1 directories under the
// usual parents from an image helper and keeps those the container will write:
//
//   - owner: a directory owned by the container's uid when it is not root, or
//     by any non-root uid when it runs as root (a root image whose program
//     switches user: redis's /var/lib/redis belongs to redis);
//   - program: a directory named after the image's program (the basename of
//     the effective entrypoint[0], else cmd[0]; also its part before the first
//     '-', "redis-server" → "redis"; names of 3 bytes or more). Debian's
//     nginx keeps /var/lib/nginx and /var/log/nginx root-owned and drops to
//     www-data for its workers, so the owner rule finds nothing there; a
//     package's state directory carries its program's name.
//
// Never kept: a symlink (/var/lib/x → /etc is refused, never followed), a
// path over or under an image VOLUME or a tmpfs target, a name a tmpfs target
// cannot carry. At most MaxWritablePaths, in scan order; the rest is reported.
// The scan (what the image holds) is cached per image ID; matching it against
// a user and program is cheap.

// writableParents are scanned in this order; the order is the paths' order.
var writableParents = []string{"/var/lib", "/var/log", "/var/run", "/var/cache", "/data", "/home", "/opt", "/srv"}

// Bounds of one parent's scan: the archive Docker sends is the parent's whole
// subtree (file contents included), so reading stops at these and the parent
// is reported cut (its later depth-1 entries were not seen).
const (
	maxScanEntries = 16384
	maxScanBytes   = 64 << 20
	maxScanCache   = 256 // images; the cache starts over when full
	minProgramName = 3
)

// scanEntry is one depth-1 entry under a parent, as the image has it.
type scanEntry struct {
	path   string
	uid    int
	isDir  bool
	isLink bool
	linkTo string
}

// imageScan is what an image holds under the parents.
type imageScan struct {
	entries []scanEntry
	cut     []string // parents whose scan stopped at a bound
}

// scanCache holds image scans by image ID.
type scanCache struct {
	mu sync.Mutex
	m  map[string]imageScan
}

func (c *scanCache) get(id string) (imageScan, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[id]
	return s, ok
}

func (c *scanCache) put(id string, s imageScan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxScanCache {
		c.m = make(map[string]imageScan)
	}
	c.m[id] = s
}

// DetectWritablePaths finds the writable paths of a container of q.ImageID run
// as q.User (else the image's USER) with q's entrypoint and command overrides.
// An error means detection could not be made: the caller launches without
// writable paths and records the launch as degraded.
func (e *Engine) DetectWritablePaths(ctx context.Context, q dockerio.WritableQuery) (dockerio.Writable, error) {
	if !isImageID(q.ImageID) {
		return dockerio.Writable{}, fmt.Errorf("detect writable paths: %q is not an image ID", q.ImageID)
	}
	resp, err := e.imageByID(ctx, q.ImageID)
	if err != nil {
		return dockerio.Writable{}, fmt.Errorf("detect writable paths: %w", err)
	}
	info, err := admit(resp, q.ImageID)
	if err != nil {
		return dockerio.Writable{}, fmt.Errorf("detect writable paths: %w", err)
	}
	uid, gid, err := e.imageUser(ctx, q.ImageID, info.Volumes, cmp.Or(q.User, info.User))
	if err != nil {
		return dockerio.Writable{}, fmt.Errorf("detect writable paths: %w", err)
	}
	scan, err := e.scanImage(ctx, q.ImageID, info.Volumes)
	if err != nil {
		return dockerio.Writable{}, fmt.Errorf("detect writable paths of %s: %w", trimID(q.ImageID), err)
	}
	var entrypoint, cmd []string
	if resp.Config != nil {
		entrypoint, cmd = resp.Config.Entrypoint, resp.Config.Cmd
	}
	w := matchWritable(scan, uid, programName(entrypoint, cmd, q.Command, q.Args), info.Volumes, q.Tmpfs)
	w.UID, w.GID = uid, gid
	return w, nil
}

// scanImage is the image's scan, from the cache or read through a helper;
// concurrent scans of one image share one helper.
func (e *Engine) scanImage(ctx context.Context, imageID string, volumes []string) (imageScan, error) {
	if s, ok := e.scans.get(imageID); ok {
		return s, nil
	}
	ch := e.scanning.DoChan(imageID, func() (any, error) {
		// Not one caller's ctx: its end must not fail the others.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.PullTimeout)
		defer cancel()
		var scan imageScan
		err := e.withHelper(sctx, imageID, volumes, func(id string) error {
			for _, parent := range writableParents {
				entries, cut, err := e.scanParent(sctx, id, parent, volumes)
				if err != nil {
					return err
				}
				scan.entries = append(scan.entries, entries...)
				if cut {
					scan.cut = append(scan.cut, parent)
				}
			}
			return nil
		})
		if err == nil {
			e.scans.put(imageID, scan)
		}
		return scan, err
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return imageScan{}, res.Err
		}
		return res.Val.(imageScan), nil
	case <-ctx.Done():
		return imageScan{}, ctx.Err()
	}
}

// scanParent lists the depth-1 entries of parent in the helper. A parent that
// is absent, a symlink (never followed), or inside a VOLUME (all of it is the
// VOLUME's) has none.
func (e *Engine) scanParent(ctx context.Context, id, parent string, volumes []string) ([]scanEntry, bool, error) {
	for _, v := range volumes {
		if v == parent || strings.HasPrefix(parent, v+"/") || v == "/" {
			return nil, false, nil
		}
	}
	rc, stat, err := e.docker.CopyFromContainer(ctx, id, parent)
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dockerErr("read "+parent+" from the image helper", err)
	}
	defer rc.Close()
	if stat.Mode&fs.ModeSymlink != 0 || !stat.Mode.IsDir() {
		return nil, false, nil
	}
	return readScan(rc, parent, maxScanEntries, maxScanBytes)
}

// readScan reads a parent's archive (entries named <base>/…) for its depth-1
// entries, stopping after maxEntries entries or maxBytes bytes (cut).
func readScan(r io.Reader, parent string, maxEntries int, maxBytes int64) ([]scanEntry, bool, error) {
	base := path.Base(parent)
	tr := tar.NewReader(io.LimitReader(r, maxBytes))
	var out []scanEntry
	for n := 0; ; n++ {
		if n >= maxEntries {
			return out, true, nil
		}
		hdr, err := tr.Next()
		switch {
		case errors.Is(err, io.EOF):
			return out, false, nil
		case errors.Is(err, io.ErrUnexpectedEOF):
			return out, true, nil // the byte bound fell inside an entry
		case err != nil:
			return nil, false, fmt.Errorf("read %s from the image: %w", parent, err)
		}
		rest, ok := strings.CutPrefix(strings.TrimSuffix(hdr.Name, "/"), base+"/")
		if !ok || rest == "" || strings.Contains(rest, "/") {
			continue // the parent itself, or deeper
		}
		ent := scanEntry{path: parent + "/" + rest, uid: hdr.Uid, isDir: hdr.Typeflag == tar.TypeDir}
		if hdr.Typeflag == tar.TypeSymlink {
			ent.isLink, ent.linkTo = true, hdr.Linkname
		}
		out = append(out, ent)
	}
}

// programName is the name the program rule matches: the basename of the
// effective entrypoint's first word, else of the command's. Docker drops the
// image's command when the entrypoint is overridden.
func programName(imageEntrypoint, imageCmd, command, args []string) string {
	entrypoint, cmd := imageEntrypoint, imageCmd
	if command != nil {
		entrypoint, cmd = command, nil
	}
	if args != nil {
		cmd = args
	}
	argv := entrypoint
	if len(argv) == 0 {
		argv = cmd
	}
	if len(argv) == 0 {
		return ""
	}
	return path.Base(argv[0])
}

// programNames are the directory names the program rule accepts for program.
func programNames(program string) []string {
	var out []string
	for _, n := range []string{program, strings.SplitN(program, "-", 2)[0]} {
		if len(n) >= minProgramName && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// matchWritable applies the rules to a scan for a container running as uid
// the program, with these VOLUME and tenant tmpfs targets.
func matchWritable(scan imageScan, uid int, program string, volumes, tmpfs []string) dockerio.Writable {
	w := dockerio.Writable{Program: program, Cut: scan.cut}
	names := programNames(program)
	blocked := slices.Concat([]string{"/tmp", "/run"}, volumes, tmpfs)
	for _, ent := range scan.entries {
		if !ent.isDir && !ent.isLink {
			continue
		}
		owner := (uid != 0 && ent.uid == uid) || (uid == 0 && ent.uid != 0)
		if !owner && !slices.Contains(names, path.Base(ent.path)) {
			continue
		}
		if why := refusal(ent, blocked); why != "" {
			w.Refused = append(w.Refused, ent.path+": "+why)
			continue
		}
		if len(w.Paths) == dockerio.MaxWritablePaths {
			w.Dropped = append(w.Dropped, ent.path)
			continue
		}
		w.Paths = append(w.Paths, ent.path)
	}
	return w
}

// refusal says why a matching entry cannot be a writable path ("" = it can).
func refusal(ent scanEntry, blocked []string) string {
	if ent.isLink {
		return fmt.Sprintf("a symlink to %q, never followed", ent.linkTo)
	}
	if !admission.Canonical(ent.path) || strings.ContainsFunc(ent.path, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ':' }) {
		return "a name a mount target cannot carry"
	}
	for _, b := range blocked {
		if admission.Overlap(ent.path, b) {
			return fmt.Sprintf("over or under %s, an image VOLUME or a tmpfs", b)
		}
	}
	return ""
}
