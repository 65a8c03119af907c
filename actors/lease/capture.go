package lease

// Failure captures: a failed attempt's or a dead cohort's diagnostics, written to
// diagnostics.db.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/messages"
)

// Capture is one failure's diagnostics, kept in diagnostics.db (never on-chain,
// never in a callback): exit codes, OOM, health and a bounded log excerpt.
type Capture struct {
	Lease         string `json:"lease_uuid"`
	Kind          string `json:"kind,omitempty"` // provision | runtime | maintenance (absent in captures before it was recorded)
	OperationID   string `json:"operation_id"`
	MaintenanceID string `json:"maintenance_id,omitempty"`
	Release       int    `json:"release,omitempty"` // a failed maintenance target's release
	Stamp
	Cause
	FailCount  int                `json:"fail_count"`
	Degraded   string             `json:"degraded,omitempty"` // why the launch's preparation was degraded: the failure never counts
	Containers []ContainerCapture `json:"containers"`
}

// ContainerCapture is one container of a failed attempt.
type ContainerCapture struct {
	Service     string `json:"service"`
	Index       int    `json:"index"`
	ContainerID string `json:"container_id"`
	State       string `json:"state"`
	Health      string `json:"health,omitempty"`
	ExitCode    int    `json:"exit_code"`
	OOMKilled   bool   `json:"oom_killed"`
	Logs        string `json:"logs"`
	Truncated   bool   `json:"truncated,omitempty"`
}

// Capture bounds: per container and per attempt.
const (
	captureTail         = 500
	captureBytesPerCtr  = 256 << 10
	captureBytesPerTry  = 4 << 20
	logUnavailable      = "<log unavailable>"
	logsResponseCeiling = 12 << 20 // leaves room for JSON escaping and keys under the 16 MiB body cap
)

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
	c.Lease, c.OperationID, c.At, c.FailCount, c.Degraded = j.lease, j.launch.OperationID, j.now(), j.launch.FailCount+1, j.degraded
	budget := captureBytesPerTry
	for _, ctr := range cohort {
		cc := ContainerCapture{Service: ctr.Service, Index: ctr.Index, ContainerID: ctr.ID, State: ctr.State,
			Health: ctr.Health, ExitCode: ctr.ExitCode, OOMKilled: ctr.OOMKilled}
		if full, err := j.eng.Inspect(ctx, ctr.ID); err == nil {
			cc.State, cc.Health, cc.ExitCode, cc.OOMKilled = full.State, full.Health, full.ExitCode, full.OOMKilled
		}
		limit := min(captureBytesPerCtr, budget)
		if limit > 0 {
			text, truncated, err := j.eng.Logs(ctx, ctr.ID, captureTail, limit)
			if err != nil {
				text = logUnavailable
			}
			cc.Logs, cc.Truncated = text, truncated
			budget -= len(text)
		} else {
			cc.Logs, cc.Truncated = "", true
		}
		c.Containers = append(c.Containers, cc)
	}
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

// confirmExited inspects a container the event stream reported dead; it returns
// the container only when Docker confirms it is no longer running.
func (j *job) confirmExited(ctx context.Context, id string) *messages.Container {
	c, err := j.eng.Inspect(ctx, id)
	if errdefs.IsNotFound(err) {
		return &messages.Container{ID: id, State: "removed", ExitCode: -1}
	}
	if err != nil || c.State == "running" || c.State == "restarting" {
		return nil
	}
	return &c
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
