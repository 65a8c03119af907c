package supervisors

import (
	"context"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Background runs fn on its own goroutine, tracked by wg, and sends what it
// returns to the actor: how actors keep blocking work (Docker, HTTP) off their
// mailbox. The actor waits on wg when it stops or restarts.
func Background(c actor.Context, wg *sync.WaitGroup, fn func() any) {
	self, sys := c.Self(), c.ActorSystem()
	wg.Add(1)
	go func() {
		defer wg.Done()
		sys.Root.Send(self, fn())
	}()
}

// Tick sends msg to the actor every interval until ctx ends.
func Tick(c actor.Context, ctx context.Context, wg *sync.WaitGroup, interval time.Duration, msg any) {
	self, sys := c.Self(), c.ActorSystem()
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sys.Root.Send(self, msg)
			}
		}
	}()
}
