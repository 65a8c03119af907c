package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/containerd/errdefs"

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
	return j.closeVolumes(ctx)
}

// leaseVolumes are the managed volumes the lease's stateful services own, and
// the scratch volumes its diskless instances may hold their seeded writable
// paths in (most never made one: destroying an absent volume is success).
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
	return managed, scratch
}

// closeVolumes deals with the lease's volumes as the close decided. Scratch
// volumes are always destroyed: they hold only what an image seeded, nothing
// a restore could use.
func (j *job) closeVolumes(ctx context.Context) TornDown {
	vols, scratch := j.leaseVolumes()
	if j.vols == nil {
		return TornDown{}
	}
	var out TornDown
	for _, name := range scratch {
		if err := j.destroyOrHold(ctx, name, &out); err != nil {
			return TornDown{Err: err}
		}
	}
	c := j.close
	if c != nil && c.Requarantine {
		if err := j.requarantine(ctx); err != nil {
			return TornDown{Err: err}
		}
		return out
	}
	for _, v := range vols {
		if c == nil || !c.Retain {
			if err := j.destroyOrHold(ctx, v.Name, &out); err != nil {
				return TornDown{Err: err}
			}
			continue
		}
		retained, ok, err := j.retain(ctx, v)
		if err != nil {
			return TornDown{Err: err}
		}
		if ok {
			out.Retained = append(out.Retained, retained)
		}
	}
	return out
}

// retain moves a volume into the retention namespace and measures it; ok is
// false when it was never created (the lease never launched): nothing to keep.
func (j *job) retain(ctx context.Context, v messages.RetainedVolume) (messages.RetainedVolume, bool, error) {
	retained := messages.RetainedVolumeName(j.lease, v.Service, v.Index)
	err := j.vols.Rename(ctx, v.Name, retained)
	if errdefs.IsNotFound(err) {
		ok, xerr := j.vols.Exists(ctx, retained)
		if xerr != nil || !ok {
			return v, false, xerr
		}
		err = nil // renamed by an earlier attempt of this close
	}
	if err != nil {
		return v, false, fmt.Errorf("retain %s: %w", v.Name, err)
	}
	used, err := j.vols.Usage(ctx, retained)
	if err != nil {
		return v, false, fmt.Errorf("measure %s: %w", retained, err)
	}
	v.Name, v.UsedBytes = retained, used
	return v, true, nil
}

// destroyOrHold destroys a volume; a busy one is handed to the volumehold
// actor and listed in out.Held (the close waits for it).
func (j *job) destroyOrHold(ctx context.Context, name string, out *TornDown) error {
	err := j.vols.Destroy(ctx, name)
	if errdefs.IsConflict(err) {
		j.log.Warn().Str("volume", name).Msg("volume busy: its deletion is held and retried")
		if j.hold != nil {
			j.hold(name)
		}
		out.Held = append(out.Held, name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("destroy %s: %w", name, err)
	}
	return nil
}
