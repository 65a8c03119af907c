package supervisors

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
)

// command is a ticketed request to the tickets actor: after Wait, it takes the
// ticket (or not) and answers after AnswerAfter (never when negative).
type command struct {
	Take        bool
	Wait        time.Duration
	AnswerAfter time.Duration
	Reply       chan<- error
	Ticket      *messages.Ticket
	Took        chan bool
}

// tickets handles commands off its goroutine, as an actor whose mailbox is
// slow would, without blocking the tree.
type tickets struct{}

func (tickets) Receive(c actor.Context) {
	m, ok := c.Message().(command)
	if !ok {
		return
	}
	go func() {
		time.Sleep(m.Wait)
		took := m.Take && m.Ticket.Take()
		m.Took <- took
		if took && m.AnswerAfter >= 0 {
			time.Sleep(m.AnswerAfter)
			m.Reply <- nil
		}
	}()
}

func TestAskTicketed_AnAnswerIsTheTruth(t *testing.T) {
	tree := newTestTree(t, Options{Children: specs(Spec{Name: "cmd", Kind: "cmd", Producer: func() actor.Actor { return tickets{} }})})
	waitFor(t, "started", func() bool { _, ok := tree.Dir.Get("root/cmd"); return ok })
	// The actor takes a ticket as soon as it has the command (Wait 0), or well
	// after the deadline: no margin a busy machine could eat.
	const timeout = 500 * time.Millisecond
	cases := []struct {
		name     string
		cmd      command
		wantKind error // nil: answered (202)
		wantTook bool
	}{
		{"answered in time", command{Take: true, AnswerAfter: 0}, nil, true},
		{"not reached before the deadline: refused, and the late actor may not take it",
			command{Take: true, Wait: 3 * timeout, AnswerAfter: 0}, messages.ErrBusy, false},
		{"taken in time, answered after the deadline: the answer, not a 503",
			command{Take: true, AnswerAfter: timeout + 300*time.Millisecond}, nil, true},
		{"taken, never answered within settle: pending, never refused as if undone",
			command{Take: true, AnswerAfter: -1}, messages.ErrLifecyclePending, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			took := make(chan bool, 1)
			err, askErr := AskTicketed(context.Background(), tree, "root/cmd", timeout, 2*timeout,
				func(r chan<- error, tk *messages.Ticket) any {
					cmd := c.cmd
					cmd.Reply, cmd.Ticket, cmd.Took = r, tk, took
					return cmd
				})
			err = errors.Join(askErr, err)
			if (c.wantKind == nil) != (err == nil) || (c.wantKind != nil && !errors.Is(err, c.wantKind)) {
				t.Fatalf("answer %v, want %v", err, c.wantKind)
			}
			select {
			case got := <-took:
				if got != c.wantTook {
					t.Fatalf("the actor took it: %t, want %t", got, c.wantTook)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the actor never came")
			}
		})
	}
}
