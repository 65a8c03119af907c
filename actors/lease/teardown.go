package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// teardown removes every container of the lease (our own, by exact ID, then the
// stragglers) and checks twice that none is left, so a create that was in flight
// when the close won is caught too. Only then are the volumes dealt with, as the
// journaled close decided: handed back to a restore's record, retained, or
// destroyed (a busy one handed to the volumehold actor; the close waits for it).
func (j *job) teardown(ctx context.Context) TornDown {
	ctx, cancel := context.WithTimeout(ctx, j.set.StopTimeout+2*time.Minute)
	defer cancel()
	if err := j.compose().Down(ctx); err != nil {
		return TornDown{Err: fmt.Errorf("compose down: %w", err)}
	}
	if err := j.compose().Sweep(ctx); err != nil {
		return TornDown{Err: err}
	}
	if c := j.close; c != nil && c.Retain && !c.Judged {
		if managed, _ := j.leaseVolumes(); len(managed) > 0 {
			verdict, err := j.judge(ctx, managed)
			return TornDown{Judged: verdict, Err: err}
		}
	}
	return j.closeVolumes(ctx)
}

// closeVolumesOf is closeVolumes on its own (a judged close whose containers
// this process just removed), bounded like a teardown.
func (j *job) closeVolumesOf(ctx context.Context) TornDown {
	ctx, cancel := context.WithTimeout(ctx, j.set.StopTimeout+2*time.Minute)
	defer cancel()
	return j.closeVolumes(ctx)
}

// judge is a retaining close's verdict, its containers gone: the managed
// volumes that hold only writable-path copies (restore reseeds them from the
// image) are reclaimed. A volume that cannot be read is retained (any doubt
// retains); an absent one is neither (nothing to keep). A judgement cut off
// (ctx ended), or of a volume root not proven, is no verdict: an error.
func (j *job) judge(ctx context.Context, managed []messages.RetainedVolume) (*CloseJudged, error) {
	v := &CloseJudged{Reclaim: []string{}}
	if j.vols == nil {
		return v, nil
	}
	for _, m := range managed {
		entries, err := j.vols.Entries(ctx, m.Name)
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, dockerio.ErrVolumeRootUnproven):
			return nil, err // not the volumes berthd opened: no verdict, the close is held
		case errdefs.IsNotFound(err):
		case err != nil:
			j.log.Warn().Err(err).Str("volume", m.Name).Msg("volume not judged: retained")
		case dockerio.WritablePathOnly(entries):
			v.Reclaim = append(v.Reclaim, m.Name)
		}
	}
	return v, nil
}

// leaseVolumes are the managed volumes the lease's stateful services own, and
// the scratch volumes its diskless instances may hold their seeded writable
// paths in (most never made one: destroying an absent volume is success) —
// an adopted lease's diskless instances' fred volumes among them.
func (j *job) leaseVolumes() (managed []messages.RetainedVolume, scratch []string) {
	for _, svc := range j.rel.Services {
		for i := 0; i < svc.Quantity; i++ {
			if svc.Profile.DiskMB <= 0 {
				scratch = append(scratch, messages.ScratchVolumeName(j.lease, svc.Name, i))
				continue
			}
			managed = append(managed, messages.RetainedVolume{Name: messages.VolumeName(j.lease, svc.Name, i),
				Service: svc.Name, Index: i, QuotaMB: svc.Profile.DiskMB})
		}
	}
	return managed, append(scratch, j.fredScratch...)
}

// closeVolumes deals with the lease's volumes as the close decided: a restore's
// handed back to its record, else retained or destroyed. Scratch volumes are
// always destroyed: they hold only what an image seeded, nothing a restore
// could use.
func (j *job) closeVolumes(ctx context.Context) TornDown {
	managed, scratch := j.leaseVolumes()
	c, vols := j.close, j.volumes()
	handBack := c != nil && c.Requarantine
	if handBack {
		// The adopted volumes go back to their record; those the restore made
		// itself (writable-path-only ones its record did not keep) are destroyed.
		managed = slices.DeleteFunc(managed, func(v messages.RetainedVolume) bool {
			return j.spec.Restore == nil || slices.ContainsFunc(j.spec.Restore.Volumes, func(r steps.RestoreVolume) bool {
				return r.Service == v.Service && r.Index == v.Index
			})
		})
	}
	var reclaim []string
	if c != nil && c.Judged {
		reclaim = c.Reclaim
	}
	retained, held, err := vols.Down(ctx, scratch, managed, c != nil && c.Retain, reclaim)
	if err == nil && handBack && j.spec.Restore != nil {
		err = vols.HandBack(ctx, j.spec.Restore.Volumes)
	}
	if err != nil {
		return TornDown{Err: err}
	}
	return TornDown{Retained: retained, Held: held}
}
