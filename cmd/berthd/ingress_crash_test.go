package main

// kill -9 of berthd between the custom-domain DNS gate opening and the
// custom_domain redeploy settling (while its target runs unverified; killed
// before the target exists is a known gap, below). A Docker-socket proxy lands the kill in the
// window deterministically: it holds one Docker request of the redeploy open
// (the daemon is killed while waiting on it), and lets everything pass again
// for the restarted daemon. The gate's opening is journaled before the kill
// (GET /debug/domains says open); after the restart the gate tells the lease
// again, and the redeploy settles with exactly one completion: one maintenance
// callback, one new release, the custom-domain router on every instance once,
// the gate forgotten — and nothing more after a while.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/messages"
)

var createPath = regexp.MustCompile(`^(/v[0-9.]+)?/containers/create$`)

// redeployCatch holds one Docker request of the custom_domain redeploy: the
// create of its first container (catchCreate: nothing of the target launched
// yet) or, once every target container started, the next container inspect
// (catchVerify: the target runs, unverified). The redeploy's containers are the
// first whose create carries fred.custom_domain.
type redeployCatch struct {
	sock      string
	mode      string
	instances int
	mu        sync.Mutex
	armed     bool
	labeled   int // creates carrying fred.custom_domain
	started   int // container starts since the first of them
	held      chan string
}

const (
	catchCreate = "create"
	catchVerify = "verify"
)

func startRedeployCatch(t *testing.T, mode string, instances int) *redeployCatch {
	t.Helper()
	p := &redeployCatch{mode: mode, instances: instances, armed: true, held: make(chan string, 1)}
	p.sock = startDockerProxy(t, func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if p.hold(r) {
			select {
			case p.held <- r.Method + " " + r.URL.Path:
			default:
			}
			<-r.Context().Done() // until the daemon is killed
			return
		}
		next.ServeHTTP(w, r)
		if r.Method == http.MethodPost && startPath.MatchString(r.URL.Path) {
			p.mu.Lock()
			if p.armed && p.labeled > 0 {
				p.started++
			}
			p.mu.Unlock()
		}
	})
	return p
}

// hold reports whether r is the request to hold; a create's body is read and
// put back for Docker.
func (p *redeployCatch) hold(r *http.Request) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.armed {
		return false
	}
	switch {
	case r.Method == http.MethodPost && createPath.MatchString(r.URL.Path):
		body, _ := io.ReadAll(r.Body)
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		if bytes.Contains(body, []byte(`"fred.custom_domain"`)) {
			p.labeled++
			return p.mode == catchCreate
		}
	case r.Method == http.MethodGet && inspectPath.MatchString(r.URL.Path):
		return p.mode == catchVerify && p.started >= p.instances
	}
	return false
}

func (p *redeployCatch) disarm() {
	p.mu.Lock()
	p.armed = false
	p.mu.Unlock()
}

func TestIngressCrash_Kill9WhileTheRedeployVerifies_OneCompletion(t *testing.T) {
	t.Parallel()
	kill9InRedeploy(t, catchVerify, []string{messages.CallbackSuccess}, "v1:superseded v2:active")
}

// Killed before the target's first container exists, the resume finds the
// source intact and fails the custom_domain maintenance (the lease unchanged,
// its failure reported); Ready again, the lease asks the open gate again and
// starts the next attempt under a new ID, which routes the domain.
func TestIngressCrash_Kill9BeforeTheTargetIsCreated_FailedAttemptThenRoutedByTheNext(t *testing.T) {
	t.Parallel()
	kill9InRedeploy(t, catchCreate, []string{messages.CallbackFailed, messages.CallbackSuccess}, "v1:superseded v2:failed v3:active")
}

// kill9InRedeploy kills berthd in the custom_domain redeploy (at mode) and
// checks what follows the restart: the maintenance callbacks wantAfter, in
// order, and the releases wantReleases, with the domain routed once.
func kill9InRedeploy(t *testing.T, mode string, wantAfter []string, wantReleases string) {
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	const domain = "crash.example.org"
	// The resolvers see the domain at this host from the start: the gate opens
	// at the lease's first Ready.
	z1, z2 := startTestZone(t, "127.0.0.2", "127.0.0.1"), startTestZone(t, "127.0.0.3", "127.0.0.1")
	catch := startRedeployCatch(t, mode, 2)
	// No warm pool: a kill -9 test leaves no pool network to the stop's trim.
	d := newDaemonDir(t, gatedIngressConfig(z1.addr, z2.addr), "docker_host: unix://"+catch.sock, "network_pool_size: 0").startChild(true)
	lease := provisionReady(t, d, cb, flatManifest(map[string]any{"args": []string{"serve"}}),
		messages.LeaseItem{SKU: "docker-micro", Quantity: 2, CustomDomain: domain})

	select {
	case req := <-catch.held:
		t.Logf("held %s; killing berthd", req)
	case <-time.After(2 * time.Minute):
		t.Fatalf("the redeploy never reached its %s\n%s", mode, tail(d.log.String(), 4000))
	}
	var gates messages.DomainsSummary
	d.debugJSON("/debug/domains?lease="+lease, &gates)
	if len(gates.Gates) != 1 || gates.Gates[0].State != messages.GateOpen {
		t.Fatalf("before the kill the gate is %+v, want open (journaled)", gates.Gates)
	}
	d.kill9()
	catch.disarm()
	d.startChild(true)

	got := cb.waitFor(lease, 1+len(wantAfter), 3*time.Minute)
	for i, want := range wantAfter {
		if got[1+i].Body.Status != want {
			t.Fatalf("maintenance callback %d after the restart: %+v, want %s\n%s", i+1, got[1+i].Body, want, tail(d.log.String(), 4000))
		}
	}
	d.waitStatus(lease, messages.StatusReady, time.Minute)
	eventually(t, 30*time.Second, func() string {
		d.debugJSON("/debug/domains?lease="+lease, &gates)
		if len(gates.Gates) != 0 {
			return fmt.Sprintf("the gate still holds %+v", gates.Gates)
		}
		return ""
	})
	time.Sleep(5 * time.Second) // anything told twice would have started by now
	if n := len(cb.forLease(lease)); n != 1+len(wantAfter) {
		t.Fatalf("%d callbacks, want the provision's and %v: %+v", n, wantAfter, cb.forLease(lease))
	}
	if rs := releaseStatuses(d.releases(lease)); rs != wantReleases {
		t.Fatalf("releases %s, want %s", rs, wantReleases)
	}
	custom := "traefik.http.routers.fred-" + strings.ReplaceAll(lease, "-", "") + "-app-custom.rule"
	labels := ingressLabels(t, dc, lease)
	if len(labels) != 2 {
		t.Fatalf("%d containers, want 2: %v", len(labels), labels)
	}
	for key, l := range labels {
		if l["fred.custom_domain"] != domain || l[custom] != "Host(`"+domain+"`)" {
			t.Fatalf("%s after the restart: %v", key, l)
		}
	}
	var info messages.LeaseInfo
	d.get("/info/"+lease).json(t, &info)
	if info.Services["app"].FQDN != domain {
		t.Fatalf("service fqdn %q", info.Services["app"].FQDN)
	}
	d.closeAll(dc, lease)
}
