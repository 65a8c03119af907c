package lease

// A degraded launch: a step the platform could not carry out (steps.Writable)
// degrades the launch instead of failing it: the launch goes on, its
// diagnostics say so, and a death of its cohort never counts against the
// tenant's terminal budget.

import (
	"strings"

	"github.com/berth-dev/berth/actors/lease/steps"
)

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
