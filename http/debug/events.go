package debug

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/berth-dev/berth/messages"
)

// The event stream (GET /debug/events): Server-Sent Events carrying
//
//	event: transition   id: <seq>   data: a Transition, as GET /debug/transitions has it
//	event: gap                      data: {"missed": n} — transitions the ring dropped before they were sent
//	event: tree                     data: the actor tree as GET /debug/actors has it (bounded: see maxTreeChildren)
//	: ping                          every tree period when ?tree=0
//
// The stream polls the registry for transitions after the last one sent (never
// the other way round), so no actor ever waits on a client. What one connection
// has in flight is bounded — at most transitionBatch transitions and one tree
// per period — and a client that does not take a write within StreamWriteGrace
// is dropped. The stream ends when the client goes, the listener shuts down, or
// after StreamLifetime (the client reconnects, with ?since= or Last-Event-ID).

const (
	transitionBatch = 256
	// maxTreeChildren bounds the children of one node in a streamed tree (10,000
	// lease actors would be megabytes every two seconds); the most telling are kept.
	maxTreeChildren = 256
)

func (s *server) events(w http.ResponseWriter, r *http.Request) {
	since, err := streamSince(r)
	if err != nil {
		writeError(w, err)
		return
	}
	rc := http.NewResponseController(w)
	// A stream outlives the server's ReadTimeout, which would otherwise cancel the
	// request mid-stream; the write deadlines below bound a dead client instead.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// The retry hint first, so a browser EventSource reconnects after 2 s.
	if _, err := fmt.Fprint(w, "retry: 2000\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.StreamLifetime)
	defer cancel()
	st := &stream{s: s, w: w, rc: rc, ctx: ctx, since: since, withTree: r.URL.Query().Get("tree") != "0"}
	st.run()
}

// stream is one client's event stream.
type stream struct {
	s        *server
	w        http.ResponseWriter
	rc       *http.ResponseController
	ctx      context.Context
	since    uint64
	withTree bool
}

// run sends the backlog and a tree, then polls until the client goes, is too
// slow, or the stream's lifetime ends.
func (st *stream) run() {
	poll := time.NewTicker(st.s.opts.TransitionPoll)
	defer poll.Stop()
	treeTick := time.NewTicker(st.s.opts.TreeEvery)
	defer treeTick.Stop()
	if st.transitions() != nil || st.tree() != nil {
		return
	}
	for {
		var err error
		select {
		case <-st.ctx.Done():
			return
		case <-poll.C:
			err = st.transitions()
		case <-treeTick.C:
			err = st.tree()
		}
		if err != nil {
			return // the client went or is too slow: drop it
		}
	}
}

// send writes one event (an empty event is a ping) within the write grace.
func (st *stream) send(event, id string, v any) error {
	data, err := json.Marshal(v) // a ping's "null" is not sent
	if err != nil {
		return err
	}
	if err := st.rc.SetWriteDeadline(time.Now().Add(st.s.opts.StreamWriteGrace)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	switch {
	case event == "":
		_, err = fmt.Fprint(st.w, ": ping\n\n")
	case id != "":
		_, err = fmt.Fprintf(st.w, "event: %s\nid: %s\ndata: %s\n\n", event, id, data)
	default:
		_, err = fmt.Fprintf(st.w, "event: %s\ndata: %s\n\n", event, data)
	}
	if err != nil {
		return err
	}
	return st.rc.Flush()
}

// transitions sends what the registry's ring holds after the last one sent.
func (st *stream) transitions() error {
	rep, err := ask(st.s, st.ctx, st.s.opts.RegistryPath, func(c chan<- messages.TransitionsReply) any {
		return &messages.DebugTransitions{Since: st.since, Limit: transitionBatch, Reply: c}
	})
	if err != nil {
		return nil // the registry is busy or restarting: the next poll asks again
	}
	if rep.Missed > 0 {
		if err := st.send("gap", "", map[string]uint64{"missed": rep.Missed}); err != nil {
			return err
		}
	}
	for _, tr := range rep.Transitions {
		if err := st.send("transition", strconv.FormatUint(tr.Seq, 10), tr); err != nil {
			return err
		}
	}
	st.since = rep.Next
	return nil
}

// tree sends the bounded actor tree, or a ping when the client asked for none.
func (st *stream) tree() error {
	if !st.withTree {
		return st.send("", "", nil)
	}
	return st.send("tree", "", boundTree(st.s.tree.DescribeTree(st.ctx), maxTreeChildren))
}

// streamSince is where the stream starts: ?since=, else a reconnecting
// EventSource's Last-Event-ID, else 0 (the ring's backlog first).
func streamSince(r *http.Request) (uint64, error) {
	v := r.URL.Query().Get("since")
	if v == "" {
		v = r.Header.Get("Last-Event-ID")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, messages.Refuse(messages.ErrBadRequest, "since must be a non-negative integer (a transition seq)")
	}
	return n, nil
}

// boundTree keeps at most limit children per node: unresponsive, restarted,
// busy and non-lease actors first, then by path; the rest are counted in
// OmittedChildren.
func boundTree(n messages.NodeInfo, limit int) messages.NodeInfo {
	if len(n.Children) > limit {
		kids := slices.Clone(n.Children)
		slices.SortStableFunc(kids, func(a, b messages.NodeInfo) int {
			return cmp.Or(cmp.Compare(interest(b), interest(a)), cmp.Compare(a.Path, b.Path))
		})
		n.OmittedChildren += len(kids) - limit
		n.Children = kids[:limit]
	}
	for i := range n.Children {
		n.Children[i] = boundTree(n.Children[i], limit)
	}
	return n
}

// interest ranks a node for boundTree.
func interest(n messages.NodeInfo) int {
	score := 0
	if n.Status != "ok" {
		score += 8
	}
	if n.Restarts > 0 {
		score += 4
	}
	if n.InFlight > 0 || n.MailboxDepth > 0 {
		score += 2
	}
	if n.Kind != "lease" {
		score++
	}
	return score
}
