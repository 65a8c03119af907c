package registry

import (
	"time"

	"github.com/berth-dev/berth/messages"
)

// Transitions is the bounded record of recent lease status changes behind GET
// /debug/transitions, fed by the LeaseReports the registry receives anyway.
// Only the registry goroutine touches it. It lives in Deps rather than in the
// actor instance, so a registry restart keeps the history and seq stays
// monotonic for the whole process (a berthd restart starts again at 1).
type Transitions struct {
	buf  []messages.Transition // ring; buf[(head+i)%cap] is the i-th oldest
	head int
	n    int
	seq  uint64 // last seq handed out
}

// NewTransitions returns an empty ring holding at most capacity transitions.
func NewTransitions(capacity int) *Transitions {
	return &Transitions{buf: make([]messages.Transition, max(capacity, 1))}
}

// Add records one transition, evicting the oldest when full.
func (t *Transitions) Add(at time.Time, lease, from, to, reason string) messages.Transition {
	t.seq++
	tr := messages.Transition{Seq: t.seq, At: at.UTC(), LeaseUUID: lease, From: from, To: to, Reason: reason}
	if t.n < len(t.buf) {
		t.buf[(t.head+t.n)%len(t.buf)] = tr
		t.n++
	} else {
		t.buf[t.head] = tr
		t.head = (t.head + 1) % len(t.buf)
	}
	return tr
}

// Since returns the transitions with seq > since, oldest first, at most limit
// (limit ≤ 0: all held). A since beyond the last seq handed out comes from
// another process (berthd restarted under the client): it reads from the start.
func (t *Transitions) Since(since uint64, limit int) messages.TransitionsReply {
	if since > t.seq {
		since = 0
	}
	out := messages.TransitionsReply{Transitions: []messages.Transition{}, Next: since}
	if t.n == 0 {
		return out
	}
	// The ring holds the contiguous seqs oldest…t.seq.
	oldest := t.buf[t.head].Seq
	skip := 0
	if since >= oldest {
		skip = int(since - oldest + 1)
	} else {
		out.Missed = oldest - since - 1
	}
	for i := skip; i < t.n; i++ {
		if limit > 0 && len(out.Transitions) >= limit {
			break
		}
		tr := t.buf[(t.head+i)%len(t.buf)]
		out.Transitions = append(out.Transitions, tr)
		out.Next = tr.Seq
	}
	return out
}

// Last is the last seq handed out (0: none yet).
func (t *Transitions) Last() uint64 { return t.seq }
