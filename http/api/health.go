package api

import (
	"cmp"
	"context"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// HealthVerdict is what GET /health answers, for the handler and for berthd's
// systemd watchdog (which pets while berthd itself is live: Live, not Healthy).
type HealthVerdict struct {
	Reason         string   // "" = healthy; else why not, as /health's "error"
	Detail         []string // findings a healthy daemon reports
	RegistryErr    error    // the registry did not answer (for the log)
	WatcherErr     error    // the watcher did not answer (for the log)
	DiagnosticsErr error    // diagnostics.db failed its probe (for the log)
	VolumeRootErr  error    // the volume root is not the one berthd opened (volume operations held)
}

// Healthy reports whether /health would answer 200.
func (v HealthVerdict) Healthy() bool { return v.Reason == "" }

// Live reports whether berthd's own actors answered, whatever they found: a
// Docker outage or a bad store makes berthd unhealthy, not dead, and restarting
// it would not bring Docker back.
func (v HealthVerdict) Live() bool { return v.RegistryErr == nil && v.WatcherErr == nil }

// CheckHealth asks the registry (recovery finished, accounting whole, its store
// healthy) and the watcher (Docker reachable) at once, each bounded by timeout,
// and probes diagnostics.db and the volume root (nil: not probed); neither
// actor's check runs here.
func CheckHealth(ctx context.Context, tree *supervisors.Tree, registryPath, watcherPath messages.Address,
	diagnostics, volumeRoot func() error, timeout time.Duration) HealthVerdict {
	type registryAnswer struct {
		rep messages.HealthReply
		err error
	}
	fromRegistry := make(chan registryAnswer, 1)
	go func() {
		rep, err := supervisors.Ask(ctx, tree, registryPath, timeout, func(c chan<- messages.HealthReply) any {
			return &messages.GetHealth{Reply: c}
		})
		fromRegistry <- registryAnswer{rep, err}
	}()
	docker, dockerErr := supervisors.Ask(ctx, tree, watcherPath, timeout, func(c chan<- messages.DockerHealthReply) any {
		return &messages.GetDockerHealth{Reply: c}
	})
	reg := <-fromRegistry

	v := HealthVerdict{RegistryErr: reg.err, WatcherErr: dockerErr}
	if diagnostics != nil {
		v.DiagnosticsErr = diagnostics()
	}
	if volumeRoot != nil {
		v.VolumeRootErr = volumeRoot()
	}
	switch {
	case reg.err != nil:
		v.Reason = "registry not answering"
	case !reg.rep.Ready:
		v.Reason = cmp.Or(reg.rep.Reason, "not ready")
	case dockerErr != nil:
		v.Reason = "docker watcher not answering"
	case !docker.Reachable:
		v.Reason = cmp.Or(docker.Reason, "docker engine unreachable")
	case v.DiagnosticsErr != nil:
		v.Reason = "diagnostics store unhealthy"
	case v.VolumeRootErr != nil:
		// Fail closed: tenant data cannot be created, retained or destroyed on a
		// root that is not the one berthd opened; closes wait for it.
		v.Reason = v.VolumeRootErr.Error()
	}
	if v.Reason == "" {
		v.Detail = reg.rep.Detail
	}
	return v
}
