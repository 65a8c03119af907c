// Package imagegc is the image collector: it records the images this
// installation pulled (absent before; stream "imagegc") and, every
// image_gc_interval (and when asked), removes those no pin needs and no
// container uses, oldest pulled first, while the installation's images exceed
// image_store_budget_mb or free space on Docker's data root is below
// image_store_min_free_mb. An image is this installation's only when it pulled
// it; one the operator or anyone else tagged or pulled under another name is
// left alone, and Docker itself refuses to remove one a container uses.
//
// Pins are derived, never stored twice: the registry answers the image IDs of
// every live lease's release history (journaled release.pinned, as each lease
// last reported it) and of every retention record; admissions in flight hold
// their images in dockerio.ImageHolds from before their first look at one until
// their launch ended. A pass marks the holds before it asks for the pins, and
// removes each image through ImageHolds.Remove, which refuses one held at any
// moment since: an admission racing the pass either holds first (the image
// stays) or waits for the removal and pulls again.
package imagegc

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Actor is the image collector.
type Actor struct {
	*Deps
	tasks   *supervisors.Tasks
	journal *supervisors.Journal[*State]
	loop    *supervisors.Periodic
}

// Tasks are the collector's pass and timers.
func (a *Actor) Tasks() *supervisors.Tasks { return a.tasks }

// New returns the producer of the collector.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor { return &Actor{Deps: deps} }
}

// Receive handles the collector's messages.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.started(c)
	case *messages.ImagePulled:
		a.pulled(m)
	case *messages.CollectImagesNow:
		if a.loop != nil {
			a.loop.Now()
		}
	default:
		if a.loop != nil {
			a.loop.Receive(m)
		}
	}
}

// Describe summarises the collector for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.journal == nil {
		return "loading", 0
	}
	inFlight := 0
	if a.loop != nil {
		_, inFlight = a.loop.Describe()
	}
	return fmt.Sprintf("%d images of this installation recorded", len(a.journal.State.Images)), inFlight
}

func (a *Actor) started(c actor.Context) {
	a.tasks = supervisors.NewTasks(c, 0)
	a.journal = &supervisors.Journal[*State]{Store: a.Store, Stream: Stream, Version: eventVersion, Every: 64, Now: a.Now, Log: a.Log}
	st, seq, err := Load(a.Store)
	if err != nil {
		// Without the record nothing is known to be ours: collect nothing.
		a.Tree.Fail(fmt.Errorf("imagegc: %w", err))
		a.journal.Resume(newState(), 0)
		return
	}
	a.journal.Resume(st, seq)
	a.Metrics.budget.Set(float64(a.Settings.BudgetBytes))
	if a.Docker == nil {
		return
	}
	a.loop = supervisors.StartPeriodic(a.tasks, supervisors.PassSpec{Name: "imagegc", Interval: a.Settings.Interval,
		Timeout: a.Settings.PassTimeout, Retry: supervisors.Retry{Base: 5 * time.Second, Cap: a.Settings.Interval},
		Begin: a.begin, End: a.end})
}

// pulled records an image this installation pulled (each pull: one pulled
// again after a pass removed it must outlive that pass's forgetting). A
// record lost to a crash before it commits leaves the image uncollected,
// never the other way round.
func (a *Actor) pulled(m *messages.ImagePulled) {
	if m.ID == "" || m.Ref == "" {
		return
	}
	if err := a.journal.Commit([]persistence.Event{a.journal.Event(EvPulled, pulledEvent{ID: m.ID, Ref: m.Ref})}); err != nil {
		a.Log.Warn().Err(err).Str("image", m.ID).Msg("pulled image not recorded; it will not be collected")
	}
}

// result is one pass's findings.
type result struct {
	began     time.Time
	plan      Plan
	removed   []Removal
	gone      []string // removed meanwhile by someone else
	inhibited map[string]int
	pins      int
}

func (a *Actor) begin() func(ctx context.Context) supervisors.Outcome {
	owned := make(map[string]*Owned, len(a.journal.State.Images))
	for id, o := range a.journal.State.Images {
		c := *o
		c.Refs = append([]string(nil), o.Refs...)
		owned[id] = &c
	}
	began := a.Now()
	return func(ctx context.Context) supervisors.Outcome {
		res, err := a.collect(ctx, owned)
		res.began = began
		if err != nil {
			return supervisors.Outcome{Err: err, Value: res}
		}
		return supervisors.Outcome{Value: res, Detail: fmt.Sprintf("%d images, %d MB (budget %d MB), %d pinned, %d removed, %d left over budget",
			res.plan.Images, res.plan.StoreBytes>>20, a.Settings.BudgetBytes>>20, res.plan.Pinned, len(res.removed), sum(res.inhibited))}
	}
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// collect is one pass: the holds marked, then the pins, Docker's store and its
// users read, the plan decided and each removal made under the holds.
func (a *Actor) collect(ctx context.Context, owned map[string]*Owned) (*result, error) {
	res := &result{inhibited: map[string]int{}}
	mark, done := a.Holds.Mark()
	defer done()
	pins, err := a.pins(ctx)
	if err != nil {
		pins = messages.ImagePins{} // not whole: nothing is removed
	}
	res.pins = len(pins.IDs)
	store, err := a.Docker.StoreImages(ctx)
	if err != nil {
		return res, err
	}
	in := Input{Owned: owned, Store: store, Pins: pins, BudgetBytes: a.Settings.BudgetBytes,
		MinFreeBytes: a.Settings.MinFreeBytes, FreeBytes: -1}
	if in.MinFreeBytes > 0 {
		if free, _, err := a.Docker.DataRootSpace(ctx); err != nil {
			a.Log.Warn().Err(err).Msg("free space on Docker's data root unknown; only image_store_budget_mb applies")
		} else {
			in.FreeBytes = int64(free)
		}
	}
	// Within budget and above the floor the pass ends here: the container
	// listing (what dockerd answers slowest with many containers) only when
	// something may go.
	if res.plan = Decide(in); res.plan.Excess > 0 && len(in.Owned) > 0 {
		if in.InUse, err = a.Docker.ImagesInUse(ctx); err != nil {
			return res, err
		}
		res.plan = Decide(in)
	}
	maps.Copy(res.inhibited, res.plan.Inhibited)
	for _, r := range res.plan.Remove {
		if ctx.Err() != nil {
			break
		}
		ran, err := a.Holds.Remove(mark, dockerio.ImageKeys(append([]string{r.ID}, r.Refs...)...), func() error {
			return a.remove(ctx, r)
		})
		switch {
		case !ran:
			res.inhibited[InhibitHeld]++
		case err == nil:
			res.removed = append(res.removed, r)
			a.Log.Info().Str("image", r.ID).Strs("refs", r.Refs).Int64("bytes", r.Bytes).Msg("image collected")
		case errdefs.IsNotFound(err):
			res.gone = append(res.gone, r.ID)
		case errdefs.IsConflict(err):
			res.inhibited[InhibitInUse]++
		default:
			a.Log.Warn().Err(err).Str("image", r.ID).Msg("image removal failed; tried again next pass")
		}
	}
	return res, nil
}

// pins asks the registry for the pins its durable state derives.
func (a *Actor) pins(ctx context.Context) (messages.ImagePins, error) {
	if a.Pins != nil {
		return a.Pins(ctx)
	}
	return supervisors.Ask(ctx, a.Tree, a.Settings.RegistryPath, a.Settings.AskTimeout, func(reply chan<- messages.ImagePins) any {
		return &messages.GetImagePins{Reply: reply}
	})
}

// remove removes every reference the image was pulled by; the last one
// removes the image. Docker refuses the last while a container uses it.
func (a *Actor) remove(ctx context.Context, r Removal) error {
	for i, ref := range r.Refs {
		rctx, cancel := context.WithTimeout(ctx, a.Settings.RemoveWait)
		err := a.Docker.RemoveImageRef(rctx, ref)
		cancel()
		if err != nil && !(errdefs.IsNotFound(err) && i < len(r.Refs)-1) {
			return err
		}
	}
	return nil
}

// end forgets the images gone from the store (collected, or removed out of
// band) that were pulled before the pass began: one pulled again meanwhile is
// recorded anew and stays.
func (a *Actor) end(out *supervisors.Outcome) {
	res, _ := out.Value.(*result)
	if out.Err != nil {
		a.Metrics.passes.WithLabelValues("error").Inc()
		a.Log.Warn().Err(out.Err).Msg("image collection pass failed")
	} else {
		a.Metrics.passes.WithLabelValues("ok").Inc()
	}
	if res == nil {
		return
	}
	a.Metrics.pinned.Set(float64(res.pins))
	for why, n := range res.inhibited {
		a.Metrics.inhibited.WithLabelValues(why).Add(float64(n))
	}
	if out.Err != nil {
		return
	}
	var freed int64
	for _, r := range res.removed {
		a.Metrics.collected.Inc()
		a.Metrics.collectedBytes.Add(float64(r.Bytes))
		freed += r.Bytes
	}
	a.Metrics.images.Set(float64(res.plan.Images - len(res.removed)))
	a.Metrics.storeBytes.Set(float64(res.plan.StoreBytes - freed))
	var forget []string
	for _, id := range append(append(append([]string(nil), res.plan.Gone...), res.gone...), removedIDs(res.removed)...) {
		if o := a.journal.State.Images[id]; o != nil && !o.PulledAt.After(res.began) && !slices.Contains(forget, id) {
			forget = append(forget, id)
		}
	}
	if len(forget) == 0 {
		return
	}
	if err := a.journal.Commit([]persistence.Event{a.journal.Event(EvForgotten, forgottenEvent{IDs: forget})}); err != nil {
		a.Log.Warn().Err(err).Msg("collected images not recorded; forgotten at a later pass")
	}
}

func removedIDs(rs []Removal) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}
