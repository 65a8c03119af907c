package supervisors

import "github.com/asynkron/protoactor-go/actor"

// Group is a declared group commit. Every item needs a journal commit (an
// fsync) before it is answered; one at a time, a burst queues behind its own
// fsyncs. So the actor queues items as they come and commits all of them in
// one write when it reaches the flush the group sent it behind the first: that
// message is behind every item already in the mailbox, so a burst shares one
// fsync and a lone item waits for nothing but its own.
//
// The batch is invisible: a message the group declares commuting (it cannot
// observe the batch) passes it; any other message commits the batch first, so
// everything sees what serial commits would have shown. An actor that stops or
// restarts abandons the batch without committing it.
type Group[T any] struct {
	Tasks *Tasks // sends the flush
	// Commutes reports whether msg may pass a pending batch (nil: none may).
	Commutes func(msg any) bool
	// Commit journals the batch in one write and settles each item.
	Commit func(items []T)
	// Abandon answers a batch that will not be committed.
	Abandon func(items []T)

	items []T
	keys  map[string]bool
}

type groupFlush struct{ g any }

// Add queues item under key; the first item of a batch asks for the flush.
func (g *Group[T]) Add(key string, item T) {
	if len(g.items) == 0 {
		g.keys = map[string]bool{}
		g.Tasks.Send(groupFlush{g})
	}
	g.items = append(g.items, item)
	g.keys[key] = true
}

// Holds reports whether key has an item in the pending batch.
func (g *Group[T]) Holds(key string) bool { return g.keys[key] }

// Len is how many items wait for the commit.
func (g *Group[T]) Len() int { return len(g.items) }

// Items are the pending batch (read only).
func (g *Group[T]) Items() []T { return g.items }

// Before is called with every message before the actor handles it: the
// group's own flush commits the batch (and is handled: true); a lifecycle stop
// abandons it; anything not commuting commits it first.
func (g *Group[T]) Before(msg any) (handled bool) {
	if f, ok := msg.(groupFlush); ok && f.g == any(g) {
		g.Flush()
		return true
	}
	if len(g.items) == 0 {
		return false
	}
	switch msg.(type) {
	case *actor.Restarting, *actor.Stopping:
		items := g.take()
		if g.Abandon != nil {
			g.Abandon(items)
		}
		return false
	}
	if g.Commutes == nil || !g.Commutes(msg) {
		g.Flush()
	}
	return false
}

// Flush commits the pending batch now (nothing when empty).
func (g *Group[T]) Flush() {
	if items := g.take(); len(items) > 0 {
		g.Commit(items)
	}
}

func (g *Group[T]) take() []T {
	items := g.items
	g.items, g.keys = nil, nil
	return items
}
