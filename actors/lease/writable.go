package lease

// Writable paths of a launch (issue 17): under a read-only rootfs a stock image
// writes at start outside its VOLUMEs (nginx: /var/lib/nginx). Detection runs
// as soon as the images are admitted, beside the network phase; the paths are
// then seeded with the image's content into the instance's managed volume
// (stateful) or a quota-capped scratch volume (diskless), else mounted as
// tmpfs. A step the platform could not carry out degrades the launch instead
// of failing it: the launch goes on, its diagnostics say so, and a death of
// its cohort never counts against the tenant's terminal budget.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// writableService is one service's writable paths as its launch mounts them.
type writableService struct {
	paths    []string
	dirs     []string // per instance, the seeded volume; nil: tmpfs
	uid, gid int
}

// detected is one service's detection of image: what it found, or why it could not.
type detected struct {
	image string
	w     dockerio.Writable
	err   error
}

// detection is a release's detection in flight.
type detection struct {
	cancel context.CancelFunc
	done   chan struct{}
	found  map[string]detected
}

// detectWritable starts the detection of every service's writable paths (none
// when the rootfs is writable: nothing needs them).
func (j *job) detectWritable(ctx context.Context, r Release, images map[string]dockerio.ImageInfo) *detection {
	ctx, cancel := context.WithCancel(ctx)
	d := &detection{cancel: cancel, done: make(chan struct{}), found: map[string]detected{}}
	if !j.set.ReadonlyRootfs {
		close(d.done)
		return d
	}
	done := j.provisionPhase("detect")
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, svc := range r.Services {
		q := dockerio.WritableQuery{Service: *svc.Manifest, ImageID: images[svc.Name].ID}
		wg.Go(func() {
			w, err := j.eng.DetectWritablePaths(ctx, q)
			mu.Lock()
			d.found[svc.Name] = detected{q.ImageID, w, err}
			mu.Unlock()
		})
	}
	go func() {
		wg.Wait()
		done()
		close(d.done)
	}()
	return d
}

// wait is the detection's answer per service; abandon ends it unread.
func (d *detection) wait() map[string]detected {
	<-d.done
	d.cancel()
	return d.found
}

func (d *detection) abandon() { d.cancel(); <-d.done }

// notAdmissible is the first detection refused because the image cannot run
// as asked (the manifest's user is not in it): a refusal, never degraded.
func notAdmissible(found map[string]detected) error {
	for _, d := range found {
		if errors.Is(d.err, dockerio.ErrImageNotAdmissible) {
			return d.err
		}
	}
	return nil
}

// owner is the uid:gid a stateful service's volume mount points get: the
// detected user, else (no detection, or a failed one) the image's user
// resolved for the manifest's override.
func (j *job) owner(ctx context.Context, svc ServiceSpec, img dockerio.ImageInfo, d detected, ok bool) (int, int, error) {
	if ok && d.err == nil {
		return d.w.UID, d.w.GID, nil
	}
	if u := svc.Manifest.User; u != "" && len(img.Volumes) > 0 {
		return j.eng.ImageUser(ctx, img.ID, u)
	}
	return img.UID, img.GID, nil
}

// seedWritable seeds every service's detected paths and says how each is
// mounted. dirs are the stateful instances' volumes.
func (j *job) seedWritable(ctx context.Context, r Release, found map[string]detected, dirs map[string][]string) map[string]writableService {
	done := j.provisionPhase("seed")
	defer done()
	out := map[string]writableService{}
	for _, svc := range r.Services {
		d, ok := found[svc.Name]
		if !ok {
			continue
		}
		if d.err != nil {
			j.degrade(svc.Name+": writable-path detection failed", d.err)
			continue
		}
		ws := writableService{paths: d.w.Paths, uid: d.w.UID, gid: d.w.GID}
		if len(ws.paths) > 0 && svc.Quantity > 0 {
			ws.dirs = j.seedDirs(ctx, svc, d, dirs[svc.Name])
		}
		out[svc.Name] = ws
	}
	return out
}

// seedDirs seeds the detected paths into each instance's directory: its managed volume,
// or for a diskless service a scratch volume capped at its scratch allowance.
// nil: tmpfs — no volume root (by design), or a step failed (degraded).
func (j *job) seedDirs(ctx context.Context, svc ServiceSpec, d detected, volumeDirs []string) []string {
	quotaMB, dirs := svc.Profile.DiskMB, volumeDirs
	if quotaMB <= 0 {
		if j.vols == nil {
			return nil
		}
		quotaMB, dirs = cmp.Or(svc.Profile.ScratchMB, int64(j.set.TmpfsSizeMB)), nil
		for i := range svc.Quantity {
			p, err := j.vols.Ensure(ctx, messages.ScratchVolumeName(j.lease, svc.Name, i), quotaMB, nil, 0, 0)
			if err != nil {
				j.degrade(fmt.Sprintf("%s/%d: scratch volume for writable paths not created", svc.Name, i), err)
				return nil
			}
			dirs = append(dirs, p)
		}
	}
	maxBytes := quotaMB << 20
	req := dockerio.SeedRequest{ImageID: d.image, Paths: d.w.Paths, Dirs: dirs, UID: d.w.UID, GID: d.w.GID,
		MaxEntries: int(maxBytes / max(j.set.MinAvgFileBytes, 1)), MaxBytes: maxBytes}
	if err := j.eng.SeedWritablePaths(ctx, req); err != nil {
		j.degrade(svc.Name+": writable paths not seeded (empty tmpfs instead)", err)
		return nil
	}
	return dirs
}

// degrade records a step of the launch's preparation the platform skipped.
func (j *job) degrade(reason string, err error) {
	j.log.Warn().Err(err).Msg("launch degraded: " + reason)
	j.degraded = strings.TrimPrefix(j.degraded+"; "+steps.Bounded(reason+": "+err.Error()), "; ")
}

// markDegraded stamps a ready cohort of a degraded launch: Decide never
// counts a death of it, the debug view shows why.
func markDegraded(insts []Instance, why string) {
	for i := range insts {
		insts[i].Degraded = why
	}
}

// degradedOf is why the cohort's launch was degraded ("" = it was not).
func degradedOf(insts []Instance) string {
	for _, inst := range insts {
		if inst.Degraded != "" {
			return inst.Degraded
		}
	}
	return ""
}
