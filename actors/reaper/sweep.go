package reaper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// run is one sweep, off the actor goroutine.
func (a *Actor) run(ctx context.Context) (Result, error) {
	var res Result
	rep, err := supervisors.Ask(ctx, a.Tree, a.Settings.RegistryPath, 30*time.Second,
		func(r chan<- messages.RetentionSweepReply) any {
			return &messages.RetentionSweep{Now: a.Now(), Reply: r}
		})
	if err != nil {
		return res, fmt.Errorf("ask the registry: %w", err)
	}
	a.Metrics.observe(rep)
	if a.Volumes == nil {
		return res, nil
	}
	errs := a.reap(ctx, rep.Reaping, &res)
	names, err := a.Volumes.List(ctx)
	if err != nil {
		// Fail safe: a root that cannot be listed — or is not the one berthd
		// opened, where every volume looks absent — prunes nothing.
		reason := "list_error"
		if errors.Is(err, dockerio.ErrVolumeRootUnproven) {
			reason = "root_unproven"
		}
		a.Metrics.orphanSkips.WithLabelValues(reason).Inc()
		errs = append(errs, fmt.Errorf("list the volume root: %w", err))
		return res, errors.Join(errs...)
	}
	present := make(map[string]bool, len(names))
	for _, n := range names {
		present[n] = true
	}
	a.pruneOrphans(rep.Active, present, &res)
	explained := make(map[string]bool, len(names))
	for _, n := range rep.Live {
		explained[n] = true
	}
	for _, rec := range append(append([]messages.RetentionRecord(nil), rep.Reaping...), rep.Active...) {
		for _, v := range rec.Volumes {
			explained[v.Name] = true
		}
	}
	for _, n := range names {
		if !explained[n] {
			res.Unaccounted++
			a.Log.Warn().Str("volume", n).Msg("managed volume no lease or retention record explains; left for an operator")
		}
	}
	a.Metrics.unaccounted.Set(float64(res.Unaccounted))
	return res, errors.Join(errs...)
}

// reap destroys the volumes of the reaping records: a record whose volumes
// are all gone is reaped, a busy volume goes to the hold actor.
func (a *Actor) reap(ctx context.Context, reaping []messages.RetentionRecord, res *Result) (errs []error) {
	for _, rec := range reaping {
		gone := true
		for _, v := range rec.Volumes {
			err := a.Volumes.Destroy(ctx, v.Name)
			switch {
			case err == nil:
			case errdefs.IsConflict(err):
				gone = false
				res.Held++
				a.Tree.Send(a.Settings.VolumeHoldPath, &messages.HoldVolume{Name: v.Name, Owner: "retention:" + rec.Lease})
			case errors.Is(err, dockerio.ErrVolumeRootUnproven):
				// Not destroyed and not leaked: the record stays reaping and the
				// sweep fails, so the pass backs off and tries again.
				gone = false
				errs = append(errs, fmt.Errorf("destroy %s of retained lease %s: %w", v.Name, rec.Lease, err))
			default:
				gone = false
				a.Metrics.leaked.Inc()
				errs = append(errs, fmt.Errorf("destroy %s of retained lease %s: %w", v.Name, rec.Lease, err))
			}
		}
		if gone {
			res.Reaped++
			a.Tree.Send(a.Settings.RegistryPath, &messages.RetentionReaped{Lease: rec.Lease})
		}
	}
	return errs
}

// pruneOrphans prunes an active record once its volumes were all missing for
// OrphanConfirmations consecutive sweeps.
func (a *Actor) pruneOrphans(active []messages.RetentionRecord, present map[string]bool, res *Result) {
	seen := map[string]bool{}
	for _, rec := range active {
		seen[rec.Lease] = true
		missing := len(rec.Volumes) > 0
		for _, v := range rec.Volumes {
			if present[v.Name] {
				missing = false
			}
		}
		if !missing {
			delete(a.misses, rec.Lease)
			continue
		}
		a.misses[rec.Lease]++
		if n := a.Settings.OrphanConfirmations; n > 0 && a.misses[rec.Lease] >= n {
			res.Pruned++
			a.Metrics.orphansPruned.Inc()
			delete(a.misses, rec.Lease)
			a.Tree.Send(a.Settings.RegistryPath, &messages.RetentionOrphaned{Lease: rec.Lease})
		}
	}
	for l := range a.misses {
		if !seen[l] {
			delete(a.misses, l)
		}
	}
}
