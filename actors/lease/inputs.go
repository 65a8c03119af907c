package lease

// Decide's vocabulary: the inputs that move a lease, the workers' reports, the
// effects the actor runs, the callbacks a decision queues, and its environment.

import (
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Input is anything that can move a lease: a command, a worker's completion, an
// observation of Docker, a timer.
type Input interface{ isInput() }

type (
	// Recover: the actor (re)started with its journal loaded; settle what the
	// journal left unfinished before taking commands.
	Recover struct{}
	// Reprovision: the registry admitted a newer spec (Env.Spec) for this lease.
	Reprovision struct{}
	// Close: a deprovision request; Retain is the registry's decision to keep the
	// lease's durable volumes as a retention record.
	Close struct{ Retain bool }
	// Maintain: a restart or runtime refresh (Target nil) or an update (Target:
	// the validated new manifest, items and services, with the lease's frozen
	// profiles). Stale (runtime refresh): containers seen under an older contract.
	Maintain struct {
		Kind       string
		ID         string
		AdmittedAt time.Time
		Target     *Release
		Stale      []string
	}
	// Pinned: a worker resolved the images of a deploying release.
	Pinned struct {
		Version int
		Images  []ServiceImage
	}
	// Attempted: a provision or resume worker finished.
	Attempted struct {
		Generation uint64
		Outcome    Outcome
	}
	// TornDown: the teardown worker finished. Retained are the volumes it moved into
	// the retention namespace; Held those whose destruction is busy and handed to the
	// volumehold actor (the close waits for them). Judged: a retaining close's
	// containers are gone and its volumes judged, none touched yet — the verdict
	// is journaled before it is carried out. Attempt: which retry of a
	// teardown held by an unproven volume root this was (0: not such a retry).
	TornDown struct {
		Err      error
		Retained []messages.RetainedVolume
		Held     []string
		Judged   *CloseJudged
		Attempt  int
	}
	// HoldDone: a held volume of this lease is gone.
	HoldDone struct{ Name string }
	// Captured: a runtime failure's capture, or a failed attempt's cleanup
	// (failed-cleanup), finished. Kept: the cleanup left the attempt's
	// containers (diagnostics unwritten, or their removal refused); Attempt:
	// which retry of it this was (0: one the inventory asked for).
	Captured struct {
		Generation uint64
		Kept       bool
		Attempt    int
	}
	// Replaced: a maintenance worker finished.
	Replaced struct {
		ID     string
		Result ReplaceResult
	}
	// Listed: the containers Docker lists for this lease (reconciliation).
	Listed struct{ Containers []messages.Container }
	// Died: the live event stream saw a container of this lease die.
	Died struct {
		ContainerID string
		Generation  uint64
		Counted     bool // the stream saw this run start and no kill before the death
	}
	// Confirmed: an inspect's answer about a reported death (Exited nil: it runs).
	Confirmed struct {
		Generation uint64
		Death      Died
		Exited     *messages.Container
	}
	// Timer: a wait scheduled by a Wait or Backoff effect ran out.
	Timer struct {
		What    string
		Attempt int // a Backoff's
	}
)

func (Recover) isInput()     {}
func (Reprovision) isInput() {}
func (Close) isInput()       {}
func (Maintain) isInput()    {}
func (Pinned) isInput()      {}
func (Attempted) isInput()   {}
func (TornDown) isInput()    {}
func (HoldDone) isInput()    {}
func (Captured) isInput()    {}
func (Replaced) isInput()    {}
func (Listed) isInput()      {}
func (Died) isInput()        {}
func (Confirmed) isInput()   {}
func (Timer) isInput()       {}

// OutcomeKind is how a provision attempt (or its resumption) ended.
type OutcomeKind string

const (
	OutcomeReady    OutcomeKind = "ready"
	OutcomeFailed   OutcomeKind = "failed"   // definite; diagnostics captured, containers removed
	OutcomeRetry    OutcomeKind = "retry"    // interrupted with an incomplete cohort, now removed: start again
	OutcomePending  OutcomeKind = "pending"  // no definite finding (Docker unreachable, a launch unanswered): the resume settles it
	OutcomeCanceled OutcomeKind = "canceled" // a close or a drain canceled it
)

// Outcome is a provision worker's report.
type Outcome struct {
	Kind       OutcomeKind
	Containers []Instance
	Reason     string
	Message    string
	// Kept: a failed attempt's containers were kept — its diagnostics could not
	// be written (they are the evidence) or their removal failed; cleanup is
	// retried (WorkCleanup).
	Kept bool
}

// pending is an attempt without a definite finding: it stays in flight and the
// resume settles it.
var pending = Outcome{Kind: OutcomePending}

// ReplaceKind is how a maintenance worker ended — the seed's three Replace*
// outcomes, plus the source never having been touched, and undecided.
type ReplaceKind string

const (
	ReplaceCompleted ReplaceKind = "completed" // the target is ready: activate it
	ReplaceRecovered ReplaceKind = "recovered" // the target failed; the source was recreated and is ready
	ReplaceIntact    ReplaceKind = "intact"    // failed before the source was retired; the source runs unchanged
	ReplaceFailed    ReplaceKind = "failed"    // the target failed and so did compensation
	ReplacePending   ReplaceKind = "pending"   // undecidable right now: look again soon
	ReplaceCanceled  ReplaceKind = "canceled"
)

// ReplaceResult is a maintenance worker's report.
type ReplaceResult struct {
	Kind       ReplaceKind
	Generation uint64     // the cohort that runs now
	Containers []Instance // its containers (completed, recovered, intact)
	Reason     string     // the failure's curated reason (RestartFailed/UpdateFailed or a cause)
	Message    string
}

// WorkKind names the one worker a lease may run.
type WorkKind string

const (
	WorkProvision     WorkKind = "provision"     // one attempt: images, network, compose up, verify
	WorkResume        WorkKind = "resume"        // classify an interrupted provision against Docker
	WorkTeardown      WorkKind = "teardown"      // remove everything of the lease
	WorkCloseVolumes  WorkKind = "close-volumes" // a judged close, its containers gone: its volumes as journaled
	WorkCapture       WorkKind = "failure-capture"
	WorkCleanup       WorkKind = "failed-cleanup" // a failed attempt's kept containers: captured, then removed
	WorkReplace       WorkKind = "replace"        // a restart or update, from capture to verdict
	WorkReplaceResume WorkKind = "replace-resume" // classify an interrupted maintenance against Docker
)

// Effect is something the actor does after journaling a decision.
type Effect interface{ isEffect() }

type (
	// Work starts the lease's worker; Attempt numbers a retried cleanup, or a
	// teardown retried while the volume root is unproven.
	Work struct {
		Kind    WorkKind
		Attempt int
	}
	// Cancel cancels the running worker; its completion comes back as an input.
	Cancel struct{}
	// Wait schedules Timer{What} after D.
	Wait struct {
		D    time.Duration
		What string
	}
	// Backoff schedules Timer{What, Attempt} after the kit's backoff before
	// that attempt (Settings.CleanupRetry, jittered).
	Backoff struct {
		What    string
		Attempt int
	}
	// Confirm inspects a reported death's container off the actor.
	Confirm struct{ Death Died }
	// Sweep hands containers of settled generations to automatic (gentle, bounded)
	// cleanup.
	Sweep struct{ IDs []string }
	// Answer replies to every close request waiting for the closed receipt: nil
	// when the lease closed, ErrLifecyclePending when its teardown is held (and
	// every close asked until an attempt succeeds is answered so at once).
	Answer struct {
		Err       error
		OnVolumes bool // held only on volume deletions the volumehold actor retries
	}
	// TellClosed tells the registry the closed receipt is journaled.
	TellClosed struct{}
)

func (Work) isEffect()       {}
func (Cancel) isEffect()     {}
func (Wait) isEffect()       {}
func (Backoff) isEffect()    {}
func (Confirm) isEffect()    {}
func (Sweep) isEffect()      {}
func (Answer) isEffect()     {}
func (TellClosed) isEffect() {}

// Callback is a callback row a decision queues, in the transaction of its events.
type Callback struct {
	Status        string // success | failed | deprovisioned
	Error         string // curated, on-chain safe
	Retained      bool   // a deprovisioned callback whose volumes were retained
	Lifecycle     bool   // to the lifecycle URL (else the exact completion URL)
	MaintenanceID string
	AdmittedAt    time.Time
}

// Outbox row kinds: the maintenance fence looks for "maintenance" rows.
const (
	RowOperation   = "operation"
	RowLifecycle   = "lifecycle"
	RowMaintenance = "maintenance"
)

// Kind is the outbox row kind of the callback.
func (c Callback) Kind() string {
	switch {
	case c.MaintenanceID != "":
		return RowMaintenance
	case c.Lifecycle:
		return RowLifecycle
	}
	return RowOperation
}

// Decision is what Decide returns.
type Decision struct {
	Events    []persistence.Event // journaled with Callbacks in one transaction
	Callbacks []Callback
	Effects   []Effect
	Reply     error // a command's answer: nil accepts it
	Hold      bool  // a Close whose answer waits for the closed receipt
}

// Limits are the durations and bounds Decide applies (from the config).
type Limits struct {
	ProvisionTimeout time.Duration
	ResumePoll       time.Duration
	TeardownRetry    time.Duration
	ReleasesMaxAge   time.Duration // superseded/failed releases older than this are pruned
	HistoryBytes     int           // per-lease cap on the encoded release history
	RetentionMaxAge  time.Duration // a retention record's grace (0: kept until evicted)
}

// Env is what Decide may know beyond the state.
type Env struct {
	Now    time.Time
	Spec   *Spec    // the latest admission
	Worker WorkKind // the worker running now ("" none)
	Fenced bool     // a maintenance completion of this lease is still in the outbox
	Limits Limits
	// DomainsUngated: ingress on with custom_domain_dns_check_disabled — a
	// provision routes its items' custom domains at once.
	DomainsUngated bool
	// DomainsGated: ingress on with the DNS gate — a new custom domain waits for it.
	DomainsGated bool
	// CloseHeld says why the running close's teardown is held (its last attempt
	// failed and is retried); nil while it makes progress.
	CloseHeld error
}
