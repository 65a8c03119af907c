package main

// Issue 18, "Lifecycle truth": berthd tells providerd nothing untrue. Each test
// is named for the rule it keeps, on real Docker.

import (
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// TestClosedLease_ReplayedProvision_409NothingCreated_AlsoAfterRestart: the close
// is a permanent fence. A replayed /provision of a closed lease (providerd's
// retry inside the signature window) is refused 409 already_provisioned and
// launches nothing — also after a restart, when the registry no longer holds
// the lease and only its lease stream's closed receipt remembers it.
func TestClosedLease_ReplayedProvision_409NothingCreated_AlsoAfterRestart(t *testing.T) {
	t.Parallel()
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

// inspectFaultProxy stands between berthd and Docker: once a container start has
// gone through, every container inspect is answered 500 for window — Docker's
// inspect failing at verification.
type inspectFaultProxy struct {
	sock    string
	window  time.Duration
	mu      sync.Mutex
	until   time.Time
	refused int
}

var inspectPath = regexp.MustCompile(`^(/v[0-9.]+)?/containers/[^/]+/json$`)
var startPath = regexp.MustCompile(`^(/v[0-9.]+)?/containers/[^/]+/start$`)

func startInspectFaultProxy(t *testing.T, window time.Duration) *inspectFaultProxy {
	t.Helper()
	p := &inspectFaultProxy{window: window}
	p.sock = startDockerProxy(t, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if r.Method == http.MethodGet && inspectPath.MatchString(r.URL.Path) && p.faulting() {
			http.Error(w, `{"message":"injected: inspect failed"}`, http.StatusInternalServerError)
			return
		}
		next.ServeHTTP(w, r)
		if r.Method == http.MethodPost && startPath.MatchString(r.URL.Path) {
			p.mu.Lock()
			if p.until.IsZero() {
				p.until = time.Now().Add(p.window)
			}
			p.mu.Unlock()
		}
	})
	return p
}

func (p *inspectFaultProxy) started() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.until.IsZero()
}

func (p *inspectFaultProxy) faulting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	on := !p.until.IsZero() && time.Now().Before(p.until)
	if on {
		p.refused++
	}
	return on
}

// TestUncertainty_DockerInspectFaultAtVerify_StaysProvisioningSettlesByResume:
// Docker failing every container inspect while a provision verifies is no
// finding. The lease stays provisioning — no failed callback, its container
// kept — and once Docker answers again the resume verifies it: ready, one
// success callback, within the 30-second bound.
func TestUncertainty_DockerInspectFaultAtVerify_StaysProvisioningSettlesByResume(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	fault := startInspectFaultProxy(t, 20*time.Second)
	d := newDaemonDir(t, "docker_host: unix://"+fault.sock).startInProcess()
	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	// From the container's start, past verification's inspect patience (10 s)
	// and inside the fault window.
	deadline := time.Now().Add(2 * time.Minute)
	for !fault.started() {
		if time.Now().After(deadline) {
			t.Fatalf("the lease's container never started\n%s", tail(d.log.String(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(13 * time.Second)
	if n := len(cb.forLease(lease)); n != 0 {
		t.Fatalf("callbacks while Docker could not be inspected: %+v", cb.forLease(lease))
	}
	if pi := d.provisionInfo(lease); pi.Status != "provisioning" {
		t.Fatalf("lease reads %+v while Docker could not be inspected, want provisioning", pi)
	}
	if cs := leaseContainers(t, dc, lease); len(cs) != 1 {
		t.Fatalf("%d containers while Docker could not be inspected, want the one launched kept", len(cs))
	}
	got := cb.waitFor(lease, 1, 30*time.Second)
	if got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("callback after the fault %+v, want success", got[0].Body)
	}
	d.waitStatus(lease, "ready", 10*time.Second)
	fault.mu.Lock()
	refused := fault.refused
	fault.mu.Unlock()
	if refused == 0 {
		t.Fatal("no inspect was refused: the fault was never injected")
	}
	d.closeAll(dc, lease)
}
