package lease

// Failure captures: a failed attempt's or a dead cohort's diagnostics, written to
// diagnostics.db.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/dockerio"
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

// capture writes the attempt's diagnostics: c says which attempt failed and why,
// capture adds the lease's identity and the cohort's state and logs. A failure to
// write is logged, never fatal.
func (j *job) capture(ctx context.Context, c Capture, cohort []messages.Container) {
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
	if err != nil {
		return
	}
	if err := j.diag.Put(j.lease, c.At, blob); err != nil {
		j.log.Warn().Err(err).Msg("write diagnostics")
	}
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
	if errors.Is(err, dockerio.ErrNotFound) {
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
	j.capture(ctx, Capture{Kind: CaptureRuntime, Stamp: Stamp{Generation: j.launch.Generation}, Cause: Cause{messages.ReasonContainerExited, msg}}, cohort)
}
