package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"

	"github.com/berth-dev/berth/messages"
)

// quietWindow is how long the adopted host is watched: 10 minutes, as the
// takeover's acceptance asks (BERTH_QUIET_WINDOW shortens it for a quick run).
func quietWindow(t *testing.T) time.Duration {
	if v := os.Getenv("BERTH_QUIET_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("BERTH_QUIET_WINDOW=%q: %v", v, err)
		}
		return d
	}
	return 10 * time.Minute
}

// After the adoption, for the whole quiet window: no adopted container is
// created, started, stopped, killed, restarted or removed (Docker's own event
// log, from the adoption on), each keeps its ID, PID and start time, and no
// callback arrives but the one fred owed, delivered once. The host is made and
// adopted while the package's sequential tests still run, then the test turns
// parallel: the window elapses beside the others, sampled every 30 s.
func TestFredV013Host_AnAdoptedHostStaysQuietThroughTheWindow(t *testing.T) {
	cb := newCallbackReceiver(t)
	fred := startFred(t)
	micro := func(svc string, n int) messages.LeaseItem {
		return messages.LeaseItem{SKU: "docker-micro", Quantity: n, ServiceName: svc}
	}
	stack := fred.provisionAs([]messages.LeaseItem{micro("web", 2), micro("cache", 1)},
		map[string]any{"services": map[string]any{"web": flatManifest(nil), "cache": flatManifest(nil)}}, cb.callbackURL())
	owed := fred.provisionAs([]messages.LeaseItem{micro("", 1)}, flatManifest(nil), cb.callbackURL())
	cb.failNext(owed, 1_000_000)
	fred.waitFor(stack, "/provisions/", `"status":"ready"`)
	fred.waitFor(owed, "/provisions/", `"status":"ready"`)
	fred.stop()
	lives := containerLives(t, fred.name)

	adoptedAt := time.Now()
	berth := fred.adoptInto([]string{"adopted 2 leases", "1 undelivered callbacks"},
		"sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}", fredTotals)
	berth.startInProcess()
	for _, l := range []string{stack, owed} {
		berth.waitStatus(l, messages.StatusReady, 30*time.Second)
	}
	cb.failNext(owed, 0)
	cb.waitFor(owed, 1, time.Minute)
	cb.mu.Lock()
	delivered := len(cb.got)
	cb.mu.Unlock()

	// The sampler: the first moment anything differed, if one did.
	end := adoptedAt.Add(quietWindow(t))
	var mu sync.Mutex
	var broke string
	sample := func() {
		if now := containerLives(t, fred.name); now != lives {
			mu.Lock()
			broke = cmp.Or(broke, fmt.Sprintf("an adopted container changed %s after the adoption:\nbefore:\n%s\nnow:\n%s", time.Since(adoptedAt), lives, now))
			mu.Unlock()
		}
		for _, l := range []string{stack, owed} {
			if info := berth.provisionInfo(l); info.Status != messages.StatusReady {
				mu.Lock()
				broke = cmp.Or(broke, fmt.Sprintf("adopted lease %s %s after the adoption: %+v", l, time.Since(adoptedAt), info))
				mu.Unlock()
			}
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for time.Now().Before(end) {
			sample()
			time.Sleep(min(30*time.Second, time.Until(end)+time.Millisecond))
		}
	}()
	t.Logf("watching the adopted host until %s", end.Format(time.TimeOnly))
	t.Parallel()
	<-done
	sample()
	if broke != "" {
		t.Fatal(broke)
	}
	cb.mu.Lock()
	got := cb.got[delivered:]
	cb.mu.Unlock()
	if len(got) > 0 {
		t.Fatalf("callbacks in the quiet window: %+v", got)
	}
	if n := len(cb.forLease(owed)); n != 1 {
		t.Fatalf("the owed callback arrived %d times", n)
	}
	// Docker's own record, from the adoption to now.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, errs := dockerClient(t).Events(ctx, events.ListOptions{Since: adoptedAt.Format(time.RFC3339Nano), Until: time.Now().Format(time.RFC3339Nano),
		Filters: filters.NewArgs(filters.Arg("type", "container"), filters.Arg("label", "fred.backend_name="+fred.name))})
	for done := false; !done; {
		select {
		case m := <-msgs:
			switch m.Action {
			case events.ActionCreate, events.ActionStart, events.ActionStop, events.ActionKill, events.ActionDie,
				events.ActionRestart, events.ActionDestroy, events.ActionPause, events.ActionOOM:
				t.Fatalf("Docker saw %s of %s (%s) after the adoption", m.Action, m.Actor.ID[:12], m.Actor.Attributes["name"])
			}
		case err := <-errs:
			if err != nil && ctx.Err() == nil && err.Error() != "EOF" {
				t.Fatalf("docker events: %v", err)
			}
			done = true
		}
	}
	for _, l := range []string{stack, owed} {
		berth.deprovisionUntilGone(l)
	}
}
