package lease

// Failure captures: a failed attempt's or a dead cohort's diagnostics, written to
// diagnostics.db.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/messages"
)

// Capture is one failure's diagnostics, kept in diagnostics.db (never on-chain,
// never in a callback): exit codes, OOM, health and a bounded log excerpt.
type Capture struct {
	Lease         string `json:"lease_uuid"`
	Kind          string `json:"kind,omitempty"` // provision | runtime | maintenance (absent in captures before it was recorded)
	OperationID   string `json:"operation_id"`
	MaintenanceID string `json:"maintenance_id,omitempty"`
	Release       int    `json:"release,omitempty"`       // a failed maintenance target's release
	ProviderUUID  string `json:"provider_uuid,omitempty"` // for GET /provisions/{id} once the lease is gone
	Stamp
	Cause
	FailCount  int                `json:"fail_count"`
	Detail     string             `json:"detail,omitempty"`   // an operator's detail (fred's error text of an adopted capture); never a tenant's
	Degraded   string             `json:"degraded,omitempty"` // why the launch's preparation was degraded: the failure never counts
	Containers []ContainerCapture `json:"containers"`
}

// ContainerCapture is one container of a failed attempt.
type ContainerCapture = steps.ContainerCapture

// Diagnostics is where failure captures are kept: *persistence.Diagnostics (in
// tests, one whose writes fail on demand).
type Diagnostics interface {
	Put(lease string, at time.Time, blob json.RawMessage) error
	Latest(lease string) (json.RawMessage, bool, error)
}

// capture writes the attempt's diagnostics: c says which attempt failed and why,
// capture adds the lease's identity and the cohort's state and logs. It reports a
// failure to write (the caller keeps what the diagnostics would have described).
func (j *job) capture(ctx context.Context, c Capture, cohort []messages.Container) error {
	if j.spec != nil {
		c.ProviderUUID = j.spec.ProviderUUID
	}
	c.Lease, c.OperationID, c.At, c.FailCount, c.Degraded = j.lease, j.launch.OperationID, j.now(), j.launch.FailCount+1, j.degraded
	c.Containers = steps.Capture{API: j.eng}.Up(ctx, cohort)
	blob, err := json.Marshal(c)
	if err == nil {
		err = j.diag.Put(j.lease, c.At, blob)
	}
	if err != nil {
		j.log.Warn().Err(err).Msg("write diagnostics")
	}
	return err
}

// LatestCapture reads the newest diagnostics of a lease.
func LatestCapture(j interface {
	Latest(string) (json.RawMessage, bool, error)
}, lease string) (*Capture, error) {
	blob, ok, err := j.Latest(lease)
	if err != nil || !ok {
		return nil, err
	}
	var c Capture
	if err := json.Unmarshal(blob, &c); err != nil {
		return nil, fmt.Errorf("decode diagnostics of %s: %w", lease, err)
	}
	return &c, nil
}

// captureRuntimeFailure records the dead cohort's state and logs for diagnostics.
func (j *job) captureRuntimeFailure(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	f := j.pending
	if f == nil {
		return
	}
	cohort, _ := j.eng.Cohort(ctx, j.lease)
	msg := fmt.Sprintf("container %s/%d exited with code %d", f.Service, f.Index, f.ExitCode)
	if f.OOMKilled {
		msg += " (out of memory)"
	}
	_ = j.capture(ctx, Capture{Kind: CaptureRuntime, Stamp: Stamp{Generation: j.launch.Generation}, Cause: Cause{messages.ReasonContainerExited, msg}}, cohort) // a dead cohort stays anyway
}

// cleanFailed retries a failed attempt's cleanup (its containers were kept): the
// diagnostics first, unless the newest capture already is this attempt's (a
// retry after a refused removal), then — only once they are written — the
// containers. It reports whether containers are still kept.
func (j *job) cleanFailed(ctx context.Context) (kept bool) {
	ctx, cancel := context.WithTimeout(ctx, j.set.StopTimeout+time.Minute)
	defer cancel()
	cohort, err := j.eng.Cohort(ctx, j.lease)
	if err != nil {
		j.log.Warn().Err(err).Msg("cleanup of the failed attempt: list containers")
		return true
	}
	if len(cohort) == 0 {
		return false
	}
	if !j.captured(CaptureProvision) {
		if err := j.capture(ctx, Capture{Kind: CaptureProvision, Stamp: Stamp{Generation: j.launch.Generation}, Cause: j.failure}, cohort); err != nil {
			return true // the evidence stays; retried
		}
	}
	if err := j.compose().Down(ctx); err != nil {
		j.log.Warn().Err(err).Msg("cleanup of the failed attempt: remove its containers")
		return true
	}
	return false
}

// captured reports whether the lease's newest stored capture is of kind and of
// this attempt's generation (a read that fails says no: capturing twice is the
// lesser harm).
func (j *job) captured(kind string) bool {
	c, err := LatestCapture(j.diag, j.lease)
	return err == nil && c != nil && c.Kind == kind && c.Generation == j.launch.Generation
}
