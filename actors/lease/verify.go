package lease

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// verify is the seed's startup verification of a launched cohort of release r
// (steps.Verify): ready when one pass sees every container ready, failed on a
// definite finding, canceled when ctx ends; anything else — a cohort not listed
// whole, a container not running, inspects that keep failing — is pending: the
// attempt stays in flight and the resume settles it.
func (j *job) verify(ctx context.Context, cohort []messages.Container, r *Release, provisionDeadline time.Time) Outcome {
	if !complete(r, cohort) {
		j.log.Warn().Int("containers", len(cohort)).Msg("verification: the launched cohort is not listed whole; left to the resume")
		return pending
	}
	checked := make(map[string]bool)
	for _, svc := range r.Services {
		checked[svc.Name] = svc.Manifest.HealthCheck.Active()
	}
	v := steps.Verify{API: j.eng, Now: j.now, Duration: j.set.VerifyDuration, HealthPoll: j.set.HealthPoll, Log: &j.log}
	pass, err := v.Up(ctx, cohort, checked, provisionDeadline)
	switch {
	case err == nil:
		return Outcome{Kind: OutcomeReady, Containers: instances(r, pass)}
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return canceled
	}
	return failure(err)
}

// complete reports whether cohort is exactly r's instances, each once.
func complete(r *Release, cohort []messages.Container) bool {
	want := r.expected()
	seen := make(map[dockerio.InstanceKey]bool)
	for _, c := range cohort {
		k := dockerio.InstanceKey{Service: c.Service, Index: c.Index}
		if !want[k] || seen[k] {
			return false // foreign or duplicate instance: not a cohort we launched
		}
		seen[k] = true
	}
	return len(seen) == len(want)
}

func allRunning(cohort []messages.Container) bool {
	for _, c := range cohort {
		if c.State != "running" {
			return false
		}
	}
	return true
}

// instances records a verified cohort for the Ready transition.
func instances(r *Release, cohort []messages.Container) []Instance {
	images := serviceImages(r.Services)
	out := make([]Instance, 0, len(cohort))
	for _, c := range cohort {
		inst := Instance{Service: c.Service, Index: c.Index, ContainerID: c.ID, Image: images[c.Service]}
		if len(c.Ports) > 0 {
			inst.Ports = portsOf(c.Ports)
		}
		out = append(out, inst)
	}
	sort.Slice(out, func(i, k int) bool {
		if out[i].Service != out[k].Service {
			return out[i].Service < out[k].Service
		}
		return out[i].Index < out[k].Index
	})
	return out
}
