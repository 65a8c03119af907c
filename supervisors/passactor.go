package supervisors

import "github.com/asynkron/protoactor-go/actor"

// PassActor is an actor that is one periodic pass and nothing more (the
// reconciler, the reclaimer, the reaper): it starts the pass with the actor,
// answers GetPass and Describe from the pass's record, and hands every other
// message to On, which may ask for a pass (Now, Soon). A restart builds a new
// PassActor from the producer, so its pass starts afresh.
type PassActor struct {
	Spec PassSpec
	On   func(loop *Periodic, msg any)

	tasks *Tasks
	loop  *Periodic
}

// Tasks are the pass's goroutines and timers.
func (a *PassActor) Tasks() *Tasks { return a.tasks }

// Describe is the pass's record (Periodic.Describe).
func (a *PassActor) Describe() (string, int) { return a.loop.Describe() }

// Receive starts the pass and routes messages to it and to On.
func (a *PassActor) Receive(c actor.Context) {
	if _, ok := c.Message().(*actor.Started); ok {
		a.tasks = NewTasks(c, 0)
		a.loop = StartPeriodic(a.tasks, a.Spec)
		return
	}
	if !a.loop.Receive(c.Message()) && a.On != nil {
		a.On(a.loop, c.Message())
	}
}

// NowOn is an On that runs a pass at once on every message of type T.
func NowOn[T any](loop *Periodic, msg any) {
	if _, ok := msg.(T); ok {
		loop.Now()
	}
}
