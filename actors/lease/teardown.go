package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	if err := j.eng.Down(ctx, j.lease, dockerio.DownOptions{StopTimeout: j.set.StopTimeout}); err != nil {
		return TornDown{Err: fmt.Errorf("compose down: %w", err)}
	}
	for clean := 0; clean < 2; {
		left, err := j.leftovers(ctx)
		if err != nil {
			return TornDown{Err: err}
		}
		if len(left) == 0 {
			clean++
		} else {
			clean = 0
			if err := j.eng.RemoveContainers(ctx, left); err != nil {
				return TornDown{Err: fmt.Errorf("remove stragglers: %w", err)}
			}
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return TornDown{Err: err}
		}
	}
	return j.closeVolumes(ctx)
}

// leaseVolumes are the managed volumes the lease's stateful services own.
func (j *job) leaseVolumes() []messages.RetainedVolume {
	var out []messages.RetainedVolume
	for _, svc := range j.rel.Services {
		if svc.Profile.DiskMB <= 0 {
			continue
		}
		for i := 0; i < svc.Quantity; i++ {
			out = append(out, messages.RetainedVolume{Name: dockerio.VolumeName(j.lease, svc.Name, i),
				Service: svc.Name, Index: i, QuotaMB: svc.Profile.DiskMB})
		}
	}
	return out
}

func (j *job) closeVolumes(ctx context.Context) TornDown {
	vols := j.leaseVolumes()
	if len(vols) == 0 || j.vols == nil {
		return TornDown{}
	}
	c := j.close
	if c != nil && c.Requarantine {
		if err := j.requarantine(ctx); err != nil {
			return TornDown{Err: err}
		}
		return TornDown{}
	}
	var out TornDown
	for _, v := range vols {
		retained := dockerio.RetainedVolumeName(j.lease, v.Service, v.Index)
		if c != nil && c.Retain {
			err := j.vols.Rename(ctx, v.Name, retained)
			if errors.Is(err, dockerio.ErrNotFound) {
				ok, xerr := j.vols.Exists(ctx, retained)
				if xerr != nil {
					return TornDown{Err: xerr}
				}
				if !ok {
					continue // never created (the lease never launched): nothing to keep
				}
				err = nil // renamed by an earlier attempt of this close
			}
			if err != nil {
				return TornDown{Err: fmt.Errorf("retain %s: %w", v.Name, err)}
			}
			used, err := j.vols.Usage(ctx, retained)
			if err != nil {
				return TornDown{Err: fmt.Errorf("measure %s: %w", retained, err)}
			}
			v.Name, v.UsedBytes = retained, used
			out.Retained = append(out.Retained, v)
			continue
		}
		err := j.vols.Destroy(ctx, v.Name)
		if errors.Is(err, dockerio.ErrVolumeBusy) {
			j.log.Warn().Str("volume", v.Name).Msg("volume busy: its deletion is held and retried")
			if j.hold != nil {
				j.hold(v.Name)
			}
			out.Held = append(out.Held, v.Name)
			continue
		}
		if err != nil {
			return TornDown{Err: fmt.Errorf("destroy %s: %w", v.Name, err)}
		}
	}
	return out
}

func (j *job) leftovers(ctx context.Context) ([]string, error) {
	all, err := j.eng.ListManaged(ctx)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var ids []string
	for _, c := range all {
		if c.Lease == j.lease {
			ids = append(ids, c.ID)
		}
	}
	return ids, nil
}
