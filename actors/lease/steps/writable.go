package steps

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Writable mounts the paths a container writes at start outside its VOLUMEs
// under a read-only rootfs (issue 17: nginx writes /var/lib/nginx): detected
// as soon as the images are admitted, then seeded with the image's content
// into the instance's managed volume (stateful) or a quota-capped scratch
// volume (diskless), else mounted as tmpfs. A step the platform could not carry
// out degrades the launch (Degrade) instead of failing it. It has no Down: the
// scratch volumes are the Volumes step's.
type Writable struct {
	API             ImagesAPI
	Volumes         Volumes
	ReadonlyRootfs  bool
	TmpfsSizeMB     int   // a diskless instance's scratch allowance, unless its profile pins one
	MinAvgFileBytes int64 // a seed's entries are its quota over this
	Degrade         func(reason string, err error)
	Log             *zerolog.Logger
}

// Detection is a plan's detection in flight.
type Detection struct {
	cancel context.CancelFunc
	done   chan struct{}
	found  map[string]*Detected
	log    *zerolog.Logger
}

// Detected is one service's detection of its image: what it found, or why it
// could not.
type Detected struct {
	image string
	found dockerio.Writable
	err   error
}

// Detect starts the detection of the writable paths of every service of p,
// its images admitted (none when the rootfs is writable: nothing needs them);
// done is called when it ends.
func (s Writable) Detect(ctx context.Context, p *dockerio.Plan, done func()) *Detection {
	ctx, cancel := context.WithCancel(ctx)
	d := &Detection{cancel: cancel, done: make(chan struct{}), found: map[string]*Detected{}, log: s.Log}
	if !s.ReadonlyRootfs {
		close(d.done)
		return d
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, sp := range p.Services {
		q := dockerio.WritableQuery{Service: sp.Service, ImageID: sp.ImageID}
		wg.Go(func() {
			w, err := s.API.DetectWritablePaths(ctx, q)
			mu.Lock()
			d.found[sp.Name] = &Detected{q.ImageID, w, err}
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

// Wait is the detection's answer per service (nil: none made). An image that
// cannot run as asked (the manifest's user is not in it) is refused, never
// degraded: a *Failed.
func (d *Detection) Wait() (map[string]*Detected, error) {
	<-d.done
	d.cancel()
	for _, found := range d.found {
		if errors.Is(found.err, dockerio.ErrImageNotAdmissible) {
			d.log.Warn().Err(found.err).Msg("writable-path detection")
			return nil, fail(messages.ReasonImagePullFailed, userNotInImage, found.err)
		}
	}
	return d.found, nil
}

const userNotInImage = "image metadata is not admissible: the manifest's user is not in the image"

// Abandon ends the detection unread.
func (d *Detection) Abandon() { d.cancel(); <-d.done }

// Up mounts sp's detected writable paths (d; nil: none detected): seeded into
// each instance's directory — its managed volume, or for a diskless service a
// scratch volume of scratchMB (0: the host's allowance) — else tmpfs: no
// volume root (by design), or a step failed (degraded).
func (s Writable) Up(ctx context.Context, sp *dockerio.ServicePlan, d *Detected, scratchMB int64) {
	if d == nil {
		return
	}
	if d.err != nil {
		s.Degrade(sp.Name+": writable-path detection failed", d.err)
		return
	}
	sp.WritablePaths, sp.UID, sp.GID = d.found.Paths, d.found.UID, d.found.GID
	if len(sp.WritablePaths) > 0 && sp.Quantity > 0 {
		sp.WritableDirs = s.seed(ctx, sp, d, scratchMB)
	}
}

func (s Writable) seed(ctx context.Context, sp *dockerio.ServicePlan, d *Detected, scratchMB int64) []string {
	quotaMB, dirs := sp.DiskMB, sp.VolumeDirs
	if quotaMB <= 0 {
		if s.Volumes.API == nil {
			return nil
		}
		quotaMB, dirs = cmp.Or(scratchMB, int64(s.TmpfsSizeMB)), nil
		for i := range sp.Quantity {
			p, err := s.Volumes.scratch(ctx, sp.Name, i, quotaMB)
			if err != nil {
				s.Degrade(fmt.Sprintf("%s/%d: scratch volume for writable paths not created", sp.Name, i), err)
				return nil
			}
			dirs = append(dirs, p)
		}
	}
	maxBytes := quotaMB << 20
	req := dockerio.SeedRequest{ImageID: d.image, Paths: d.found.Paths, Dirs: dirs, UID: d.found.UID, GID: d.found.GID,
		MaxEntries: int(maxBytes / max(s.MinAvgFileBytes, 1)), MaxBytes: maxBytes}
	if err := s.API.SeedWritablePaths(ctx, req); err != nil {
		s.Degrade(sp.Name+": writable paths not seeded (empty tmpfs instead)", err)
		return nil
	}
	return dirs
}
