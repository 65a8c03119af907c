package lease

import "sync"

// Preloaded holds lease states replayed before the actor tree started (startup's
// journal verification), each handed to its actor's first Started: a start then
// replays every journal once instead of twice (at 10k leases each replay costs
// about half a second of CPU). Taking an entry removes it, so a restarted actor,
// or a lease without an entry, loads from the store as before. Nothing writes a
// lease's stream before its own actor started, so the entry is what that actor
// would have loaded.
type Preloaded struct {
	mu sync.Mutex
	m  map[string]preloaded
}

type preloaded struct {
	st  *State
	seq uint64
}

// NewPreloaded returns an empty set.
func NewPreloaded() *Preloaded { return &Preloaded{m: map[string]preloaded{}} }

// Put records lease's replayed state and the last sequence it covers.
func (p *Preloaded) Put(lease string, st *State, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]preloaded{}
	}
	p.m[lease] = preloaded{st: st, seq: seq}
}

// Len is how many states are waiting for their actor.
func (p *Preloaded) Len() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// take hands over lease's state once; a nil set holds nothing.
func (p *Preloaded) take(lease string) (*State, uint64, bool) {
	if p == nil {
		return nil, 0, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[lease]
	delete(p.m, lease)
	if len(p.m) == 0 {
		p.m = nil // a map keeps its buckets after deletes: let the last take free them
	}
	return e.st, e.seq, ok
}
