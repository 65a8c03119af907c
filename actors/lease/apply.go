package lease

import (
	"fmt"
	"slices"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Apply folds one journaled event into the state. An event the state machine does
// not permit from the current status means the journal is not ours to trust: it is
// an error, and startup refuses rather than guess.
func (s *State) Apply(ev persistence.Event) error {
	if ev.V != eventVersion {
		return fmt.Errorf("event %s: version %d not supported (this berthd reads %d)", ev.Type, ev.V, eventVersion)
	}
	apply, ok := appliers[ev.Type]
	if !ok {
		return fmt.Errorf("event type %q unknown to this berthd", ev.Type)
	}
	if err := apply(s, ev); err != nil {
		return err
	}
	if ev.At.After(s.LastAt) {
		s.LastAt = ev.At
	}
	return nil
}

// appliers are the lease's events: each with the statuses it may follow (nil: any)
// and its fold, which checks the rest and changes the state.
var appliers = map[string]func(*State, persistence.Event) error{
	EvProvisionStarted:    applier(from(Reserved, Provisioning, Failing, Failed), (*State).onProvisionStarted),
	EvReleasePinned:       applier(nil, (*State).onReleasePinned),
	EvProvisionSucceeded:  applier(from(Provisioning), (*State).onProvisionSucceeded),
	EvProvisionFailed:     applier(from(Provisioning), (*State).onProvisionFailed),
	EvRuntimeFailing:      applier(from(Ready), (*State).onRuntimeFailing),
	EvRuntimeFailed:       applier(from(Failing), (*State).onRuntimeFailed),
	EvCohortDiverged:      applier(from(Ready), (*State).onCohortDiverged),
	EvMaintenanceStarted:  applier(from(Ready, Failing, Failed), (*State).onMaintenanceStarted),
	EvMaintenanceDone:     applier(from(Restarting, Updating), (*State).onMaintenanceDone),
	EvMaintenanceRestored: applier(from(Restarting, Updating), (*State).onMaintenanceRestored),
	EvMaintenanceFailed:   applier(from(Restarting, Updating), (*State).onMaintenanceFailed),
	EvReleasesPruned:      applier(nil, (*State).onReleasesPruned),
	EvCloseRequested:      applier(nil, (*State).onCloseRequested),
	EvCloseJudged:         applier(from(Deprovisioning), (*State).onCloseJudged),
	EvClosed:              applier(from(Deprovisioning), (*State).onClosed),
	EvAdopted:             applier(from(Reserved), (*State).onAdopted),
	EvDomainsDesired:      applier(from(Ready), (*State).onDomainsDesired),
}

func from(statuses ...Status) []Status { return statuses }

// applier decodes an event's payload, then refuses it unless the state's status is
// one of from (nil: any) and fold, which checks the payload and applies it, permits it.
func applier[T any](from []Status, fold func(*State, *T) bool) func(*State, persistence.Event) error {
	return func(s *State, ev persistence.Event) error {
		e := new(T)
		if err := persistence.DecodeValid(ev.Data, e); err != nil {
			return fmt.Errorf("event %s: %w", ev.Type, err)
		}
		if from != nil && !slices.Contains(from, s.Status) || !fold(s, e) {
			return fmt.Errorf("event %s not permitted from status %s", ev.Type, s.Status)
		}
		return nil
	}
}

// onProvisionStarted: a lease's first attempt, a retry of the same admission under
// a new generation, or a re-provision (a new admission) of a failed or failing
// lease. A closed lease never starts again: the close is a permanent fence on its
// UUID.
func (s *State) onProvisionStarted(e *ProvisionStarted) bool {
	retry := s.Status == Provisioning && e.Admission == s.Admission && e.Generation > s.Generation && e.Release == nil
	switch {
	case retry:
	case s.Status == Reserved:
	case s.Status == Failed || s.Status == Failing:
		if e.Admission <= s.Admission {
			return false // a re-provision is a new admission
		}
		if s.Status == Failing {
			s.FailCount++ // the death it replaces is a recorded failure, never reported failed
		}
	default:
		return false
	}
	if e.Generation <= max(s.LastGeneration, s.Generation) {
		return false // generations are never reused
	}
	s.Status, s.Admission, s.Generation = Provisioning, e.Admission, e.Generation
	s.LastGeneration = max(s.LastGeneration, e.Generation)
	s.OperationID, s.Deadline = e.OperationID, e.Deadline
	s.Reason, s.Message, s.Containers, s.PendingFailure, s.Kept = "", "", nil, nil, false
	s.Budget.Exhausted = false
	if !retry {
		r := Release{Kind: KindProvision, OperationID: e.OperationID, CreatedAt: e.At}
		if e.Release != nil {
			r = *e.Release
		}
		r.Version = s.nextVersion()
		r.Status = messages.ReleaseDeploying
		s.Releases = append(s.Releases, r)
	}
	return true
}

func (s *State) onReleasePinned(e *ReleasePinned) bool {
	r := s.Release(e.Version)
	if r == nil || r.Status != messages.ReleaseDeploying {
		return false
	}
	r.Images = e.Images
	return true
}

func (s *State) onProvisionSucceeded(e *ProvisionSucceeded) bool {
	if e.Generation != s.Generation {
		return false
	}
	s.Status, s.Containers, s.ReadyAt = Ready, e.Containers, e.At
	s.activate(s.Latest())
	return true
}

func (s *State) onProvisionFailed(e *ProvisionFailed) bool {
	if e.Generation != s.Generation {
		return false
	}
	s.fail(e.Reason, e.Message)
	s.failRelease(s.Latest(), e.Reason, e.Message)
	s.Kept = e.Kept
	return true
}

// onRuntimeFailing counts a confirmed death against the failure budget.
func (s *State) onRuntimeFailing(e *RuntimeFailing) bool {
	if e.Generation != s.Generation {
		return false
	}
	s.exitReady(e.At)
	if e.Counted {
		if s.Budget.Streak == 0 {
			s.Budget.StreakStart = e.At
		}
		s.Budget.Streak++
		s.Budget.Exhausted = s.Budget.Streak >= budgetStreak && e.At.Sub(s.Budget.StreakStart) >= budgetSpan
	} else {
		s.Budget.Exhausted = false
	}
	s.Status, s.PendingFailure = Failing, e
	return true
}

func (s *State) onRuntimeFailed(e *RuntimeFailed) bool {
	if e.Generation != s.Generation {
		return false
	}
	s.fail(e.Reason, e.Message)
	return true
}

func (s *State) onCohortDiverged(e *CohortDiverged) bool {
	if e.Generation != s.Generation {
		return false
	}
	s.exitReady(e.At)
	s.Budget.Exhausted = false // a platform finding never counts
	s.fail(messages.ReasonInternal, e.Message)
	return true
}

// onMaintenanceStarted admits a restart or update with its target release.
func (s *State) onMaintenanceStarted(e *MaintenanceStarted) bool {
	if e.Generation <= max(s.LastGeneration, s.Generation) || e.CompensateGen <= e.Generation || s.hasMaintenance(e.ID) {
		return false
	}
	m := e.Maintenance
	s.Status = Restarting
	if m.Kind == KindUpdate {
		s.Status = Updating
	}
	s.Maintenance = &m
	s.LastGeneration = m.CompensateGen
	s.PendingFailure, s.Kept = nil, false
	if m.Kind == KindRestart || m.Kind == KindUpdate {
		s.Budget = Budget{} // an accepted restart or update resets the streak; a refresh or a custom-domain redeploy does not (seed)
	}
	r := e.Release
	r.Version, r.Status = s.nextVersion(), messages.ReleaseDeploying
	s.Maintenance.Version = r.Version
	s.Releases = append(s.Releases, r)
	return true
}

func (s *State) onMaintenanceDone(e *MaintenanceDone) bool {
	m := s.Maintenance
	if m == nil || e.ID != m.ID || e.Generation != m.Generation {
		return false
	}
	s.activate(s.Release(m.Version))
	s.Status, s.Generation, s.Containers, s.ReadyAt = Ready, e.Generation, e.Containers, e.At
	s.Reason, s.Message, s.Maintenance = "", "", nil
	return true
}

func (s *State) onMaintenanceRestored(e *MaintenanceRestored) bool {
	m := s.Maintenance
	if m == nil || e.ID != m.ID || (e.Generation != m.SourceGen && e.Generation != m.CompensateGen) {
		return false
	}
	s.failRelease(s.Release(m.Version), e.Reason, e.Message)
	s.Status, s.Generation, s.Containers = Ready, e.Generation, e.Containers
	if e.Compensated || s.ReadyAt.IsZero() {
		s.ReadyAt = e.At
	}
	// A ready lease keeps the cause of its last failed maintenance (seed: GET
	// /provisions); a rolled-back runtime refresh leaves no error on it.
	if m.Kind != KindRuntimeRefresh {
		s.Reason, s.Message = e.Reason, e.Message
	}
	s.Maintenance = nil
	return true
}

func (s *State) onMaintenanceFailed(e *MaintenanceFailed) bool {
	m := s.Maintenance
	if m == nil || e.ID != m.ID || (e.Generation != m.SourceGen && e.Generation != m.CompensateGen && e.Generation != m.Generation) {
		return false
	}
	s.failRelease(s.Release(m.Version), e.Reason, e.Message)
	s.Generation, s.Maintenance = e.Generation, nil
	s.fail(e.Reason, e.Message)
	return true
}

func (s *State) onReleasesPruned(e *ReleasesPruned) bool {
	if len(e.Versions) == 0 || s.Status == Closed {
		return false
	}
	for _, v := range e.Versions {
		if r := s.Release(v); r == nil || !droppable(r, nil, s.Latest()) {
			return false
		}
	}
	s.Releases = slices.DeleteFunc(s.Releases, func(r Release) bool { return slices.Contains(e.Versions, r.Version) })
	return true
}

// onCloseRequested journals the close intent; the operation it pre-empts fails.
func (s *State) onCloseRequested(e *CloseRequested) bool {
	switch s.Status {
	case Deprovisioning:
		return true // a repeated intent changes nothing
	case Closed:
		return false // closed for good
	case Provisioning:
		s.failRelease(s.Latest(), reasonCanceled, "closed before the provision completed")
	case Restarting, Updating:
		s.failRelease(s.Release(s.Maintenance.Version), reasonCanceled, "closed before the "+s.Maintenance.Kind+" completed")
		s.Maintenance = nil
	}
	s.Status, s.Close, s.Kept = Deprovisioning, e, false
	if e.Admission > s.Admission {
		s.Admission = e.Admission
	}
	return true
}

// onCloseJudged records a retaining close's verdict, once: a close judged
// twice could retain on one run what it destroys on another.
func (s *State) onCloseJudged(e *CloseJudged) bool {
	c := s.Close
	if c == nil || !c.Retain || c.Judged {
		return false
	}
	j := *c // the close.requested payload stays as journaled
	j.Judged, j.Reclaim = true, e.Reclaim
	s.Close = &j
	return true
}

func (s *State) onClosed(e *ClosedEv) bool {
	s.Status, s.ClosedAdmission = Closed, e.Admission
	s.Containers, s.PendingFailure, s.Maintenance, s.Close = nil, nil, nil, nil
	s.Releases = nil // a closed lease has no history to serve
	if e.Retention != nil || e.Requarantined != "" {
		s.Closed = e
	}
	return true
}

// onAdopted starts a lease where fred v0.13 left it: one active release, the
// newest, and a cohort.
func (s *State) onAdopted(e *Adopted) bool {
	if len(e.Releases) == 0 || len(e.Containers) == 0 {
		return false
	}
	for i, r := range e.Releases {
		if i > 0 && r.Version <= e.Releases[i-1].Version || r.Status == messages.ReleaseDeploying {
			return false
		}
	}
	s.Admission, s.OperationID, s.Releases, s.Containers = e.Admission, e.OperationID, e.Releases, e.Containers
	s.Status, s.ReadyAt, s.FailCount, s.FredLayout, s.FredScratch = Ready, e.At, e.FailCount, e.FredLayout, e.FredScratch
	if e.Failed != nil {
		s.Status, s.Reason, s.Message = Failed, e.Failed.Reason, e.Failed.Message
	}
	return s.Active() != nil
}

// fail moves the lease to failed with its cause; its cohort is gone.
func (s *State) fail(reason, message string) {
	s.Status, s.Reason, s.Message, s.Containers = Failed, reason, message, nil
	s.FailCount++
}

// exitReady applies the Ready-exit rule of the budget: ten minutes of Ready reset
// the streak before the exit is counted.
func (s *State) exitReady(at time.Time) {
	if !s.ReadyAt.IsZero() && at.Sub(s.ReadyAt) >= budgetReadyReset {
		s.Budget = Budget{}
	}
}
