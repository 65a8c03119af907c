package steps

import (
	"context"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/messages"
)

// Capture gathers a failed cohort's evidence for its diagnostics. It has no
// Down: it changes nothing.
type Capture struct{ API ContainersAPI }

// ContainerCapture is one container of a failed cohort.
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

// Capture bounds: per container and per cohort.
const (
	captureTail        = 500
	captureBytesPerCtr = 256 << 10
	captureBytesPerTry = 4 << 20
	// LogUnavailable stands for a container's logs Docker did not give.
	LogUnavailable = "<log unavailable>"
)

// Up captures each container of cohort: its state, health, exit code and OOM
// as Docker has them now (else as listed), and a bounded excerpt of its logs.
func (s Capture) Up(ctx context.Context, cohort []messages.Container) []ContainerCapture {
	var out []ContainerCapture
	budget := captureBytesPerTry
	for _, ctr := range cohort {
		cc := ContainerCapture{Service: ctr.Service, Index: ctr.Index, ContainerID: ctr.ID, State: ctr.State,
			Health: ctr.Health, ExitCode: ctr.ExitCode, OOMKilled: ctr.OOMKilled}
		if full, err := s.API.Inspect(ctx, ctr.ID); err == nil {
			cc.State, cc.Health, cc.ExitCode, cc.OOMKilled = full.State, full.Health, full.ExitCode, full.OOMKilled
		}
		limit := min(captureBytesPerCtr, budget)
		if limit > 0 {
			text, truncated, err := s.API.Logs(ctx, ctr.ID, captureTail, limit)
			if err != nil {
				text = LogUnavailable
			}
			cc.Logs, cc.Truncated = text, truncated
			budget -= len(text)
		} else {
			cc.Logs, cc.Truncated = "", true
		}
		out = append(out, cc)
	}
	return out
}

// Exited inspects a container the event stream reported dead; it returns the
// container only when Docker confirms it is no longer running.
func (s Capture) Exited(ctx context.Context, id string) *messages.Container {
	c, err := s.API.Inspect(ctx, id)
	if errdefs.IsNotFound(err) {
		return &messages.Container{ID: id, State: "removed", ExitCode: -1}
	}
	if err != nil || c.State == "running" || c.State == "restarting" {
		return nil
	}
	return &c
}
