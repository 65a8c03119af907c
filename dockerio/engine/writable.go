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

	"golang.org/x/sync/errgroup"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages/policy"
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

// writableParents are scanned; their order is the paths' order.
var writableParents = []string{"/var/lib", "/var/log", "/var/run", "/var/cache", "/data", "/home", "/opt", "/srv"}

// scanRequests are the archives a scan reads: /var once for its four parents,
// the others one each. Every archive request costs dockerd about 0.2 s
// whatever its size (measured on 20.10: it re-execs itself to tar in a
// chroot), more than the few MB /var holds beyond the parents.
var scanRequests = []string{"/var", "/data", "/home", "/opt", "/srv"}

// Bounds of a scan, per parent: an archive Docker sends is the whole subtree
// (file contents included), so reading stops at entries or bytes of this many
// times the parents it covers, and the request is reported cut (its later
// entries were not seen).
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
	cut     []string // archives (a parent, or /var) whose read stopped at a bound
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
	// Each reads through a helper of its own: dockerd serves two containers'
	// archives at once, one container's one after another.
	var uid, gid int
	var scan imageScan
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		uid, gid, err = e.imageUser(gctx, q.ImageID, info.Volumes, q.User, info.User)
		return err
	})
	g.Go(func() (err error) {
		scan, err = e.scanImage(gctx, q.ImageID, info.Volumes)
		return err
	})
	if err := g.Wait(); err != nil {
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
			for _, req := range scanRequests {
				entries, cut, err := e.scanRequest(sctx, id, req, volumes)
				if err != nil {
					return err
				}
				scan.entries = append(scan.entries, entries...)
				if cut {
					scan.cut = append(scan.cut, req)
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

// scanRequest lists the depth-1 entries of the parents the archive of req
// holds, in parent order. An absent path, a symlink (never followed), and
// whatever lies in a VOLUME (all of it is the VOLUME's) have none.
func (e *Engine) scanRequest(ctx context.Context, id, req string, volumes []string) ([]scanEntry, bool, error) {
	if inVolume(req, volumes) {
		return nil, false, nil
	}
	rc, stat, err := e.docker.CopyFromContainer(ctx, id, req)
	if isNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dockerErr("read "+req+" from the image helper", err)
	}
	defer rc.Close()
	if stat.Mode&fs.ModeSymlink != 0 || !stat.Mode.IsDir() {
		return nil, false, nil
	}
	n := 0
	for _, p := range writableParents {
		if p == req || strings.HasPrefix(p, req+"/") {
			n++
		}
	}
	return readScan(rc, req, volumes, n*maxScanEntries, int64(n)*maxScanBytes)
}

// inVolume reports whether p is a VOLUME target or lies in one.
func inVolume(p string, volumes []string) bool {
	return slices.ContainsFunc(volumes, func(v string) bool { return v == p || v == "/" || strings.HasPrefix(p, v+"/") })
}

// readScan reads the archive of req (entries named <base(req)>/…) for the
// depth-1 entries of the parents in it, stopping after maxEntries entries or
// maxBytes bytes (cut). Sorted by parent order, then name.
func readScan(r io.Reader, req string, volumes []string, maxEntries int, maxBytes int64) ([]scanEntry, bool, error) {
	tr := tar.NewReader(io.LimitReader(r, maxBytes))
	var out []scanEntry
	cut := false
	for n := 0; ; n++ {
		if n >= maxEntries {
			cut = true
			break
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			cut = true // the byte bound fell inside an entry
			break
		}
		if err != nil {
			return nil, false, fmt.Errorf("read %s from the image: %w", req, err)
		}
		p := path.Join(path.Dir(req), hdr.Name)
		if parent := path.Dir(p); !slices.Contains(writableParents, parent) || inVolume(parent, volumes) {
			continue
		}
		ent := scanEntry{path: p, uid: hdr.Uid, isDir: hdr.Typeflag == tar.TypeDir}
		if hdr.Typeflag == tar.TypeSymlink {
			ent.isLink, ent.linkTo = true, hdr.Linkname
		}
		out = append(out, ent)
	}
	slices.SortStableFunc(out, func(a, b scanEntry) int {
		return cmp.Or(cmp.Compare(slices.Index(writableParents, path.Dir(a.path)), slices.Index(writableParents, path.Dir(b.path))),
			strings.Compare(a.path, b.path))
	})
	return out, cut, nil
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
	if !policy.Canonical(ent.path) || strings.ContainsFunc(ent.path, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ':' }) {
		return "a name a mount target cannot carry"
	}
	for _, b := range blocked {
		if policy.Overlap(ent.path, b) {
			return fmt.Sprintf("over or under %s, an image VOLUME or a tmpfs", b)
		}
	}
	return ""
}
