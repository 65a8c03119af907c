// Package volumehold holds the deletions of managed volumes that could not be
// destroyed when asked (busy: a process holds a file open, a mount lingers): a
// held volume is never forgotten. Each hold is journaled in the "volumehold"
// stream before it is retried, retried with backoff (1 s doubling to 1 min, jittered) while
// the daemon serves, and survives a restart; when the volume is gone the hold is
// journaled done and its owner told (through the registry): a close waiting on it
// finishes, a reaped retention record is deleted. While a hold lasts its owner
// keeps counting the volume's disk (the closing lease's reservation, the reaping
// record's footprint), so admission never double-books it.
package volumehold

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// gone is a retry loop's report that its volume is destroyed.
type gone struct{ name string }

// Actor is the volume hold actor.
type Actor struct {
	*Deps
	tasks   *supervisors.Tasks
	journal *supervisors.Journal[*State]
	running map[string]bool // holds with a retry loop
}

// Tasks are the hold actor's retry loops.
func (a *Actor) Tasks() *supervisors.Tasks { return a.tasks }

// New returns the producer of the hold actor.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		return &Actor{Deps: deps}
	}
}

// Receive handles the hold actor's messages.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case *messages.HoldVolume:
		a.hold(m)
	case gone:
		a.done(m.name)
	}
}

// Describe summarises the holds for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.journal == nil {
		return "loading", 0
	}
	return fmt.Sprintf("%d held deletions", len(a.journal.State.Holds)), len(a.running)
}

func (a *Actor) started(c actor.Context) {
	a.tasks = supervisors.NewTasks(c, 0)
	a.running = map[string]bool{}
	a.journal = &supervisors.Journal[*State]{Store: a.Store, Stream: Stream, Version: eventVersion, Now: a.Now, Log: a.Log}
	st, seq, err := Load(a.Store)
	if err != nil {
		a.Tree.Fail(fmt.Errorf("volumehold: %w", err))
		a.journal.Resume(newState(), 0)
		return
	}
	a.journal.Resume(st, seq)
	for _, n := range slices.Sorted(maps.Keys(st.Holds)) {
		a.retry(n)
	}
	a.Metrics.held.Set(float64(len(st.Holds)))
}

// hold journals a new held deletion and starts retrying it; a volume already held
// keeps its retry loop (the owner asked again after a restart). A hold whose
// commit fails is neither retried nor reported (nothing half-applied).
func (a *Actor) hold(m *messages.HoldVolume) {
	if a.journal == nil || m.Name == "" {
		return
	}
	if _, ok := a.journal.State.Holds[m.Name]; !ok {
		if err := a.commit(EvHeld, holdEvent{Name: m.Name, Owner: m.Owner}); err != nil {
			return
		}
		a.Log.Warn().Str("volume", m.Name).Str("owner", m.Owner).Msg("volume deletion held; retried until it is gone")
		a.Metrics.outcomes.WithLabelValues("held").Inc()
	}
	a.retry(m.Name)
}

// retry starts the volume's retry loop unless one runs: the kit's jittered
// backoff from BackoffBase to BackoffCap while the actor lives.
func (a *Actor) retry(name string) {
	if a.running[name] {
		return
	}
	if a.Volumes == nil {
		// Journaled holds outlive a config that dropped volume_data_path: keep
		// them (and say so) until a daemon with the volume root can finish them.
		a.Log.Error().Str("volume", name).Msg("held volume deletion cannot be retried: no volume_data_path configured")
		return
	}
	a.running[name] = true
	vols, backoff, log := a.Volumes, supervisors.Retry{Base: a.Settings.BackoffBase, Cap: a.Settings.BackoffCap}, a.Log
	a.tasks.Go("hold-retry", func(ctx context.Context) any {
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff.Jittered(n)):
			}
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := vols.Destroy(dctx, name)
			cancel()
			if err == nil {
				return gone{name: name}
			}
			if !errdefs.IsConflict(err) && ctx.Err() == nil {
				log.Warn().Err(err).Str("volume", name).Msg("held volume deletion failed; retried")
			}
		}
	})
}

// done journals a finished hold and tells its owner through the registry.
func (a *Actor) done(name string) {
	owner, ok := a.journal.State.Holds[name]
	delete(a.running, name)
	if !ok {
		return
	}
	if err := a.commit(EvDone, holdEvent{Name: name}); err != nil {
		return
	}
	a.Log.Info().Str("volume", name).Str("owner", owner).Msg("held volume deletion completed")
	a.Metrics.outcomes.WithLabelValues("completed").Inc()
	a.Tree.Send(a.Settings.RegistryPath, &messages.HoldDone{Name: name, Owner: owner})
}
