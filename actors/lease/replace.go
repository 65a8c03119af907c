package lease

import (
	"cmp"
	"context"
	"time"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/messages"
)

// The maintenance worker: a restart or update replaces the lease's source cohort
// with a target cohort of a new release, and a failed target never leaves the
// tenant worse off than before it. The phases, timed in
// berth_replace_phase_duration_seconds{operation,phase}:
//
//	capture  — the source cohort as Docker has it (its IDs were journaled at admission)
//	images   — the target's images: recorded content for unchanged references, the
//	           registry's answer for new ones (update)
//	network  — the lease network, kept from the source
//	launch   — compose up of the target under its own generation and maintenance ID;
//	           Compose retires the source service by service as it recreates it
//	verify   — startup verification of the target, both paths
//	compensate — only after a failed target: its logs captured, its containers
//	           removed, the source release recreated from its recorded image IDs
//	           (never by resolving a tag) under the compensation generation, verified
//
// A failure before anything of the source was retired reports ReplaceIntact: the
// source still runs with the same container IDs. An activated target release is
// never rolled back: activation is the journal's maintenance.completed.

// compensationBudget is the source's own budget, separate from the target's
// deadline (seed: "the source's separate two-minute compensation budget").
const compensationBudget = 2 * time.Minute

// replace runs a maintenance from its start.
func (j *job) replace(parent context.Context) ReplaceResult {
	m := j.maint
	ctx, cancel := j.until(parent, m.Deadline)
	defer cancel()
	phase := j.phases(m.Kind)

	done := phase("capture")
	cohort, err := j.eng.Cohort(ctx, j.lease)
	done()
	if err != nil {
		return j.unsettled(parent, err, "maintenance: list the source cohort")
	}
	if !j.sourceIntact(cohort) && m.SourceStatus == Ready {
		j.log.Warn().Msg("maintenance: the source cohort is not the one journaled; replacing it anyway")
	}

	done = phase("images")
	l := launch{Generation: m.Generation, MaintenanceID: m.ID, FailCount: j.launch.FailCount}
	p, out, ok := j.prepare(ctx, j.rel, l)
	done()
	if !ok {
		if parent.Err() != nil {
			return ReplaceResult{Kind: ReplaceCanceled}
		}
		// Nothing of the source was touched.
		return ReplaceResult{Kind: ReplaceIntact, Reason: out.Reason, Message: out.Message}
	}

	done = phase("launch")
	_, upErr := j.compose().Up(ctx, p)
	done()
	if parent.Err() != nil {
		return ReplaceResult{Kind: ReplaceCanceled}
	}
	lctx, lcancel := context.WithTimeout(context.Background(), time.Minute)
	after, err := j.eng.Cohort(lctx, j.lease)
	lcancel()
	if err != nil {
		j.log.Warn().Err(err).Msg("maintenance: list the target cohort")
		return ReplaceResult{Kind: ReplacePending}
	}
	target := ofGeneration(after, m.Generation)
	if upErr != nil {
		j.log.Warn().Err(upErr).Msg("maintenance: compose up of the target failed")
		if len(target) == 0 && j.sourceIntact(after) {
			reason := failure(steps.Rejected(upErr, after)).Reason
			return ReplaceResult{Kind: ReplaceIntact, Reason: reason, Message: "the target could not be launched; the lease is unchanged"}
		}
		out := failure(steps.Rejected(upErr, target))
		if out.Kind == OutcomePending {
			return ReplaceResult{Kind: ReplacePending} // no definite finding: the resume classifies the target
		}
		return j.compensate(parent, out, after)
	}

	done = phase("verify")
	out = j.verify(ctx, target, &j.rel, m.Deadline)
	done()
	return j.verdict(parent, out, nil)
}

// verdict settles a verified target: completed when ready, else compensated (a
// verification the deadline cut off failed the target).
func (j *job) verdict(parent context.Context, out Outcome, cohort []messages.Container) ReplaceResult {
	switch {
	case out.Kind == OutcomeReady:
		markDegraded(out.Containers, j.degraded)
		return ReplaceResult{Kind: ReplaceCompleted, Generation: j.maint.Generation, Containers: out.Containers}
	case out.Kind == OutcomeCanceled && parent.Err() != nil:
		return ReplaceResult{Kind: ReplaceCanceled}
	case out.Kind == OutcomePending:
		return ReplaceResult{Kind: ReplacePending} // no definite finding: the resume classifies the target
	case out.Kind == OutcomeCanceled:
		out = fail(messages.ReasonInternal, "the target did not become ready in time")
	}
	return j.compensate(parent, out, cohort)
}

// replaceResume classifies a maintenance whose worker never reported (a restart of
// the actor or the process) against a fresh inventory — never by rerunning the
// target's Compose: a complete running target is verified and committed; a partial
// one is removed by exact ID, then the source is kept when intact or recreated.
func (j *job) replaceResume(ctx context.Context) ReplaceResult {
	m := j.maint
	cohort, err := j.eng.Cohort(ctx, j.lease)
	if err != nil {
		return j.unsettled(ctx, err, "maintenance resume: list containers")
	}
	target := ofGeneration(cohort, m.Generation)
	compensating := ofGeneration(cohort, m.CompensateGen)
	if len(compensating) == 0 && len(target) > 0 && complete(&j.rel, target) && allRunning(target) {
		vctx, cancel := j.until(ctx, maxTime(m.Deadline, j.now().Add(j.set.VerifyDuration+time.Minute)))
		out := j.verify(vctx, target, &j.rel, m.Deadline)
		cancel()
		return j.verdict(ctx, out, cohort)
	}
	if len(target) == 0 && len(compensating) == 0 && j.sourceIntact(cohort) {
		return ReplaceResult{Kind: ReplaceIntact, Message: "the target was never launched; the lease is unchanged"}
	}
	return j.compensate(ctx, fail(messages.ReasonInternal, "the maintenance was interrupted"), cohort)
}

// sourceIntact reports whether the journaled source cohort still runs exactly:
// every captured container present and running, nothing of another generation
// beside it. A failed source (nothing ran) is intact while no target exists.
func (j *job) sourceIntact(cohort []messages.Container) bool {
	m := j.maint
	for _, c := range cohort {
		if c.Generation != m.SourceGen {
			return false
		}
	}
	if m.SourceStatus != Ready {
		return true
	}
	for _, inst := range m.Source {
		c, ok := findContainer(cohort, inst.ContainerID)
		if !ok || c.State != "running" {
			return false
		}
	}
	return len(cohort) == len(m.Source)
}

// compensate handles a target that failed after Docker started replacing the
// source: capture the target's logs (GET /logs serves them as failed/<svc>/<i>),
// remove every container of the lease by exact ID, and recreate the source release
// from its recorded images under the compensation generation.
func (j *job) compensate(parent context.Context, cause Outcome, cohort []messages.Container) ReplaceResult {
	m := j.maint
	ctx, cancel := context.WithTimeout(parent, compensationBudget+j.set.VerifyDuration)
	defer cancel()
	phase := j.phases(m.Kind)
	done := phase("compensate")
	defer done()
	failed := func(gen uint64, msg string) ReplaceResult {
		return ReplaceResult{Kind: ReplaceFailed, Generation: gen, Reason: maintenanceReason(m.Kind), Message: msg}
	}
	if cohort == nil {
		var err error
		if cohort, err = j.eng.Cohort(ctx, j.lease); err != nil {
			return j.unsettled(parent, err, "maintenance: list the cohort to compensate")
		}
	}
	if target := ofGeneration(cohort, m.Generation); len(target) > 0 {
		j.capture(ctx, Capture{Kind: CaptureMaintenance, Stamp: Stamp{Generation: m.Generation}, Cause: Cause{cause.Reason, cause.Message},
			Release: j.rel.Version, MaintenanceID: m.ID}, target)
	}
	if err := j.compose().RemoveExact(ctx, cohort); err != nil {
		return j.unsettled(parent, err, "maintenance: remove the failed target")
	}
	msg := "the " + m.Kind + " failed: " + cmp.Or(cause.Message, "the target did not become ready")
	if j.source == nil || m.SourceStatus != Ready {
		// Nothing ran before (a failed lease): there is no working source to return to.
		return failed(m.Generation, msg)
	}
	pinned := true
	for _, svc := range j.source.Services {
		if pin, ok := j.source.Pin(svc.Name); !ok || pin.ID == "" {
			pinned = false
		}
	}
	if !pinned {
		j.log.Error().Int("release", j.source.Version).Msg("maintenance: the source release has no recorded images; not recreating it from a tag")
		return failed(m.Generation, msg+"; the previous deployment could not be restored")
	}
	l := launch{Generation: m.CompensateGen, OperationID: j.source.OperationID, FailCount: j.launch.FailCount}
	p, out, ok := j.prepare(ctx, *j.source, l)
	if !ok {
		if parent.Err() != nil {
			return ReplaceResult{Kind: ReplaceCanceled}
		}
		j.log.Error().Str("reason", out.Reason).Str("message", out.Message).Msg("maintenance: the source cannot be recreated")
		return failed(m.Generation, msg+"; the previous deployment could not be restored")
	}
	_, upErr := j.compose().Up(ctx, p)
	recreated, err := j.eng.Cohort(ctx, j.lease)
	if parent.Err() != nil {
		return ReplaceResult{Kind: ReplaceCanceled}
	}
	if upErr == nil && err == nil {
		out := j.verify(ctx, ofGeneration(recreated, m.CompensateGen), j.source, time.Now().Add(compensationBudget+time.Minute))
		if out.Kind == OutcomeReady {
			markDegraded(out.Containers, j.degraded)
			j.log.Warn().Str("cause", cause.Message).Msg("maintenance failed; the previous deployment was recreated and is ready")
			return ReplaceResult{Kind: ReplaceRecovered, Generation: m.CompensateGen, Containers: out.Containers,
				Reason: cause.Reason, Message: msg}
		}
		j.log.Error().Str("reason", out.Reason).Msg("maintenance: the recreated source did not become ready")
	} else {
		j.log.Error().Err(cmp.Or(upErr, err)).Msg("maintenance: recreating the source failed")
	}
	cctx, ccancel := context.WithTimeout(context.Background(), j.set.StopTimeout+time.Minute)
	defer ccancel()
	left, _ := j.eng.Cohort(cctx, j.lease)
	_ = j.compose().RemoveExact(cctx, left)
	return failed(m.CompensateGen, msg+"; the previous deployment could not be restored")
}

// unsettled is a maintenance whose Docker step failed without a finding:
// canceled with parent, else pending (the resume classifies from Docker).
func (j *job) unsettled(parent context.Context, err error, step string) ReplaceResult {
	if parent.Err() != nil {
		return ReplaceResult{Kind: ReplaceCanceled}
	}
	j.log.Warn().Err(err).Msg(step)
	return ReplaceResult{Kind: ReplacePending}
}

// phases returns a timer factory for berth_replace_phase_duration_seconds.
func (j *job) phases(operation string) func(phase string) func() {
	return func(phase string) func() {
		start := time.Now()
		return func() { j.metrics.replacePhaseDone(operation, phase, time.Since(start)) }
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
