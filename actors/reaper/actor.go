// Package reaper is the retention reaper: every retention_reap_interval (and when
// asked) it asks the registry to mark expired records reaping — a finalizer
// tombstone: the bytes stay counted until the volumes are gone — and destroys the
// volumes of every reaping record, exactly the names the record lists; a busy one
// is handed to the volumehold actor. Only then is the record deleted. An active
// record whose volumes all vanished out of band is pruned after
// retention_orphan_confirmations consecutive sweeps that saw it so; a sweep that
// cannot list the volume root skips that. Managed volumes no live lease, record
// or hold explains are counted (berth_unaccounted_volumes) and never touched: a
// name never establishes ownership.
package reaper

import (
	"context"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Actor is the reaper's pass and what it remembers between sweeps;
// supervisors.PassActor runs it.
type Actor struct {
	*Deps
	misses map[string]int // active records seen volume-less, consecutive sweeps (pass goroutine only)
}

// New returns the producer of the reaper: a sweep at start, every Interval
// and on ReapNow.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor {
		a := &Actor{Deps: deps, misses: map[string]int{}}
		return &supervisors.PassActor{Spec: supervisors.PassSpec{Name: "reaper", Interval: a.Settings.Interval,
			Timeout: a.Settings.PassTimeout, Begin: a.begin, End: a.end}, On: supervisors.NowOn[messages.ReapNow]}
	}
}

// Result summarises one sweep.
type Result struct {
	Reaped      int // records whose volumes are all gone
	Held        int // volumes handed to the hold actor
	Pruned      int // orphan records pruned
	Unaccounted int
}

func (a *Actor) begin() func(ctx context.Context) supervisors.Outcome {
	return func(ctx context.Context) supervisors.Outcome {
		res, err := a.run(ctx)
		return supervisors.Outcome{Err: err, Value: res, Detail: fmt.Sprintf("%d reaped, %d held, %d pruned, %d unaccounted",
			res.Reaped, res.Held, res.Pruned, res.Unaccounted)}
	}
}

// end counts the sweep: the sum of its outcomes is the reaper's heartbeat.
func (a *Actor) end(out *supervisors.Outcome) {
	if out.Err != nil {
		a.Metrics.sweeps.WithLabelValues("error").Inc()
		a.Log.Warn().Err(out.Err).Msg("retention sweep failed")
		return
	}
	a.Metrics.sweeps.WithLabelValues("ok").Inc()
}
