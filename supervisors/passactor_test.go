package supervisors

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
)

type kick struct{}

// A PassActor runs its pass at start and on the message NowOn names; its End
// folds each outcome before the record is made: the Detail it writes is what
// GetPass shows, and an Again it sets runs the next pass at once.
func TestPassActor_NowOnRunsAPass_EndAmendsTheRecordAndAsksAgain(t *testing.T) {
	var passes, folded atomic.Int32
	againOnce := atomic.Bool{}
	againOnce.Store(true)
	tree := newTestTree(t, Options{Children: specs(Spec{Name: "pass", Kind: "pass", Producer: func() actor.Actor {
		return &PassActor{Spec: PassSpec{Name: "p", Interval: time.Hour,
			Begin: func() func(context.Context) Outcome {
				return func(context.Context) Outcome { return Outcome{Value: int(passes.Add(1))} }
			},
			End: func(o *Outcome) {
				folded.Add(1)
				o.Detail = fmt.Sprintf("folded pass %d", o.Value.(int))
				o.Again = againOnce.Swap(false) // the first pass asks for one more
			}}, On: NowOn[kick]}
	}})})
	path := RootPath + "/pass"
	report := func() messages.PassReport {
		t.Helper()
		rep, err := Ask(context.Background(), tree, path, time.Second, func(r chan<- messages.PassReport) any {
			return &messages.GetPass{Reply: r}
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	waitFor(t, "spawned", func() bool { _, ok := tree.Dir.Get(path); return ok })
	waitFor(t, "the pass at start and the one its End asked for", func() bool { return report().Passes == 2 })
	if r := report(); r.Detail != "folded pass 2" || folded.Load() != 2 {
		t.Fatalf("record %+v after %d folds, want End's detail of pass 2", r, folded.Load())
	}
	tree.Send(path, kick{})
	waitFor(t, "the pass NowOn ran", func() bool { return report().Passes == 3 })
	if r := report(); r.Detail != "folded pass 3" {
		t.Fatalf("record %+v", r)
	}
	if info := describe(t, tree, path); info.Tasks["timer:p-interval"] != 1 || info.State != "3 passes, last ok: folded pass 3" {
		t.Fatalf("describe %+v", info)
	}
}
