package supervisors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/berth-dev/berth/messages"
)

// Ask sends the message build makes around a fresh, buffered reply channel to the
// actor at path and waits for the reply, ctx, or timeout. An actor whose backlog is
// over its limit is refused at once (ErrBusy → 503) instead of being queued on.
// This replaces protoactor's RequestFuture, which races upstream.
func Ask[R any](ctx context.Context, t *Tree, path messages.Address, timeout time.Duration, build func(reply chan<- R) any) (R, error) {
	return ask(ctx, t, path, timeout, true, build)
}

// askable is the node at path, or why it is not asked: absent, or (when the
// backlog counts) over its backlog limit.
func askable(t *Tree, path messages.Address, checkBacklog bool) (*Node, error) {
	node, ok := t.Dir.Get(path)
	if !ok {
		return nil, fmt.Errorf("ask %s: no such actor: %w", path, messages.ErrUnavailable)
	}
	if checkBacklog && node.Overloaded() {
		return nil, messages.Refuse(messages.ErrBusy, "%s is busy, retry later", node.Kind)
	}
	return node, nil
}

func ask[R any](ctx context.Context, t *Tree, path messages.Address, timeout time.Duration, checkBacklog bool, build func(reply chan<- R) any) (R, error) {
	return send(ctx, t, request{path: path, timeout: timeout, checkBacklog: checkBacklog},
		func(reply chan<- R, _ *messages.Ticket) any { return build(reply) })
}

// AskTicketed is Ask for a request that changes state: the message carries a
// ticket with the ask's deadline. When the actor does not answer in time the
// ticket is dropped and the request refused (ErrBusy: nothing was changed) — the
// actor that reaches it later finds it dropped and changes nothing. When the
// actor took the ticket first, its answer is awaited up to settle longer; past
// that the request is pending (ErrLifecyclePending: it was taken and may still
// take effect), never refused as if it had not happened.
func AskTicketed[R any](ctx context.Context, t *Tree, path messages.Address, timeout, settle time.Duration,
	build func(reply chan<- R, ticket *messages.Ticket) any) (R, error) {
	return send(ctx, t, request{path: path, timeout: timeout, checkBacklog: true,
		ticket: messages.NewTicket(time.Now().Add(timeout)), settle: settle}, build)
}

// request is one ask: to whom, for how long, and for a request that changes
// state its ticket and how long a taken one is still awaited.
type request struct {
	path         messages.Address
	timeout      time.Duration
	checkBacklog bool             // false: the tree's own Describe walk (bounded at 200 ms, not an open wait)
	ticket       *messages.Ticket // nil: a read, or a write without one
	settle       time.Duration
}

// send sends the message build makes around a fresh, buffered reply channel and
// waits for the reply, ctx or the timeout — then, for a ticket its actor took,
// up to settle longer.
func send[R any](ctx context.Context, t *Tree, q request, build func(reply chan<- R, ticket *messages.Ticket) any) (R, error) {
	var zero R
	node, err := askable(t, q.path, q.checkBacklog)
	if err != nil {
		return zero, err
	}
	reply := make(chan R, 1)
	msg := build(reply, q.ticket)
	if q.checkBacklog {
		defer t.Awaits.Begin("ask", node.Kind)()
	}
	t.Send(q.path, msg)
	timer := time.NewTimer(q.timeout)
	defer timer.Stop()
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		if q.ticket == nil || q.ticket.Drop() {
			return zero, fmt.Errorf("ask %s: %w", q.path, ctx.Err())
		}
	case <-timer.C:
		if q.ticket == nil {
			t.log.Warn().Str("actor", string(q.path)).Str("asked", t.Metrics.typeName(msg)).Dur("waited", q.timeout).
				Msg("no answer in time: the actor is restarting, stuck or its backlog too long")
			return zero, messages.Refuse(messages.ErrBusy, "%s did not answer in time, retry later", node.Kind)
		}
		if q.ticket.Drop() {
			t.log.Warn().Str("actor", string(q.path)).Str("asked", t.Metrics.typeName(msg)).Dur("waited", q.timeout).
				Msg("no answer in time: the request is refused and will not take effect")
			return zero, messages.Refuse(messages.ErrBusy, "%s did not answer in time; nothing was changed, retry later", node.Kind)
		}
	}
	// Taken: the actor carries it out and answers.
	timer.Reset(q.settle)
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return zero, fmt.Errorf("ask %s: %w", q.path, ctx.Err())
	case <-timer.C:
		return zero, messages.Refuse(messages.ErrLifecyclePending, "the request was taken and is still being carried out, retry later")
	}
}

// DescribeTimeout is how long an actor has to describe itself before it is shown
// as unresponsive.
const DescribeTimeout = 200 * time.Millisecond

// DescribeTree walks the live tree from the root, asking every actor to describe
// itself (in parallel, bounded); an actor that does not answer within
// DescribeTimeout is shown from the directory's bookkeeping as "unresponsive".
func (t *Tree) DescribeTree(ctx context.Context) messages.NodeInfo {
	sem := make(chan struct{}, 32)
	return t.describe(ctx, RootPath, sem)
}

func (t *Tree) describe(ctx context.Context, path messages.Address, sem chan struct{}) messages.NodeInfo {
	sem <- struct{}{}
	info, err := ask(ctx, t, path, DescribeTimeout, false, func(r chan<- messages.NodeInfo) any {
		return &messages.Describe{Reply: r}
	})
	<-sem
	if err != nil {
		info = messages.NodeInfo{Path: string(path), Status: "unresponsive"}
		if n, ok := t.Dir.Get(path); ok {
			info.Kind, info.Restarts, info.MailboxDepth = n.Kind, n.Restarts(), n.Depth()
		}
		return info
	}
	if len(info.ChildPaths) == 0 {
		return info
	}
	info.Children = make([]messages.NodeInfo, len(info.ChildPaths))
	var wg sync.WaitGroup
	for i, p := range info.ChildPaths {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info.Children[i] = t.describe(ctx, messages.Address(p), sem)
		}()
	}
	wg.Wait()
	return info
}

// LiveLeases asks the registry at path for its live leases, as a set (background
// passes compare Docker's inventory with it).
func LiveLeases(ctx context.Context, t *Tree, path messages.Address, timeout time.Duration) (map[string]bool, error) {
	rep, err := Ask(ctx, t, path, timeout, func(r chan<- messages.LeasesReply) any { return &messages.ListLeases{Reply: r} })
	if err != nil {
		return nil, fmt.Errorf("list leases: %w", err)
	}
	live := make(map[string]bool, len(rep.Leases))
	for _, id := range rep.Leases {
		live[id] = true
	}
	return live, nil
}
