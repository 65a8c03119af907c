package main

// Issue 18, "Lifecycle truth": berthd tells providerd nothing untrue. Each test
// is named for the rule it keeps, on real Docker.

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestClosedLease_ReplayedProvision_409NothingCreated_AlsoAfterRestart: the close
// is a permanent fence. A replayed /provision of a closed lease (providerd's
// retry inside the signature window) is refused 409 already_provisioned and
// launches nothing — also after a restart, when the registry no longer holds
// the lease and only its lease stream's closed receipt remembers it.
func TestClosedLease_ReplayedProvision_409NothingCreated_AlsoAfterRestart(t *testing.T) {
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := uuid.NewString()
	readyLease(t, d, cb, lease)
	d.closeAll(dc, lease)
	callbacks := len(cb.forLease(lease))

	replay := func(when string) {
		t.Helper()
		r := d.provision(lease, cb.callbackURL(), flatManifest(nil))
		if r.Status != 409 || !strings.Contains(string(r.Body), `"code":"already_provisioned"`) {
			t.Fatalf("%s: replayed provision of a closed lease: %d %s, want 409 already_provisioned", when, r.Status, r.Body)
		}
		time.Sleep(3 * time.Second) // time enough for a launch to show
		if cs := leaseContainers(t, dc, lease); len(cs) != 0 {
			t.Fatalf("%s: the refused provision launched %d containers", when, len(cs))
		}
		if r := d.get("/provisions/" + lease); r.Status != 404 {
			t.Fatalf("%s: the closed lease reads %d %s", when, r.Status, r.Body)
		}
		if n := len(cb.forLease(lease)); n != callbacks {
			t.Fatalf("%s: %d callbacks after the refused provision, want %d", when, n, callbacks)
		}
		assertPoolEmpty(t, d)
	}
	replay("same process")
	if code := d.stop(); code != 0 {
		t.Fatalf("stop: %d", code)
	}
	d.startInProcess()
	replay("after a restart")
	// A close of the closed lease is still answered: it is provably closed.
	if r := d.deprovision(lease); r.Status != 200 {
		t.Fatalf("deprovision of the closed lease: %d %s", r.Status, r.Body)
	}
}
