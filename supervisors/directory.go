package supervisors

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/berth-dev/berth/messages"
)

// Node is the tree's bookkeeping for one live actor: what kind it is, how deep its
// mailbox is and how often it was restarted. It is keyed by PID id, which protoactor
// keeps across restarts, so restart counts survive the actor instance they count.
type Node struct {
	Path  string
	Kind  string
	Limit int // mailbox backlog above which askers get 503 instead of queueing

	depth    atomic.Int64
	restarts atomic.Int64
	handling atomic.Int64 // when the running handler began (unix ns); 0: idle
}

// Stuck is how long the actor's running handler has run (0: idle).
func (n *Node) Stuck(now time.Time) time.Duration {
	if began := n.handling.Load(); began != 0 {
		return max(0, now.Sub(time.Unix(0, began)))
	}
	return 0
}

// Depth is the number of user messages posted and not yet taken for handling.
func (n *Node) Depth() int { return int(n.depth.Load()) }

// Restarts is how many times a supervisor restarted this actor.
func (n *Node) Restarts() int { return int(n.restarts.Load()) }

// Overloaded reports whether an asker should refuse rather than queue.
func (n *Node) Overloaded() bool { return n.Limit > 0 && n.Depth() >= n.Limit }

// mailboxCounter counts user messages into the node's depth. Only the post side is
// counted here; the receiver middleware takes one off as handling begins, so a
// message that panics still leaves the count right.
type mailboxCounter struct{ node *Node }

func (m mailboxCounter) MailboxStarted() {}
func (m mailboxCounter) MessagePosted(msg any) {
	if isUserMessage(msg) {
		m.node.depth.Add(1)
	}
}
func (m mailboxCounter) MessageReceived(any) {}
func (m mailboxCounter) MailboxEmpty()       {}

// isUserMessage tells a posted user message from protoactor's own system and
// mailbox-control messages.
func isUserMessage(msg any) bool {
	switch msg.(type) {
	case actor.SystemMessage, actor.MailboxMessage:
		return false
	}
	return true
}

// Directory is the set of live actors, by path.
type Directory struct {
	mu    sync.RWMutex
	nodes map[string]*Node
}

// NewDirectory returns an empty directory.
func NewDirectory() *Directory { return &Directory{nodes: make(map[string]*Node)} }

// Get returns the node at path.
func (d *Directory) Get(path messages.Address) (*Node, bool) {
	d.mu.RLock()
	n, ok := d.nodes[string(path)]
	d.mu.RUnlock()
	return n, ok
}

func (d *Directory) put(n *Node) {
	d.mu.Lock()
	d.nodes[n.Path] = n
	d.mu.Unlock()
}

// remove drops n only if it is still the node registered at its path: a fresh
// actor may already have taken the name of a stopped one.
func (d *Directory) remove(n *Node) {
	d.mu.Lock()
	if d.nodes[n.Path] == n {
		delete(d.nodes, n.Path)
	}
	d.mu.Unlock()
}

// KindStats is the aggregate of live actors of one kind.
type KindStats struct {
	Live         int
	MailboxDepth int
	Stuck        time.Duration // the oldest handler still running
}

// ByKind aggregates live actors, mailbox depth and the oldest running handler per kind.
func (d *Directory) ByKind() map[string]KindStats {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make(map[string]KindStats)
	now := time.Now()
	for _, n := range d.nodes {
		s := out[n.Kind]
		s.Live++
		s.MailboxDepth += n.Depth()
		s.Stuck = max(s.Stuck, n.Stuck(now))
		out[n.Kind] = s
	}
	return out
}

// Paths lists every live actor path, sorted.
func (d *Directory) Paths() []string {
	d.mu.RLock()
	out := make([]string, 0, len(d.nodes))
	for p := range d.nodes {
		out = append(out, p)
	}
	d.mu.RUnlock()
	sort.Strings(out)
	return out
}

// Len is the number of live actors.
func (d *Directory) Len() int {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return len(d.nodes)
}
