package engine

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio"
)

// bridgeDockerd answers the network list (the default bridge), the containers
// on it (one of this installation's, one another's) and docker info as a
// daemon configured with icc (true or false) and the given warnings would; it
// counts the requests for docker info.
type bridgeDockerd struct {
	state        atomic.Pointer[bridgeState]
	installation string
	infos        atomic.Int64
	gate         atomic.Pointer[func()] // run (once) inside the next docker info
}

type bridgeState struct {
	icc      string
	warnings []string
}

func newBridgeDockerd(icc string, warnings ...string) *bridgeDockerd {
	d := &bridgeDockerd{}
	d.set(icc, warnings...)
	return d
}

func (d *bridgeDockerd) set(icc string, warnings ...string) {
	d.state.Store(&bridgeState{icc: icc, warnings: warnings})
}

func (d *bridgeDockerd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := d.state.Load()
	w.Header().Set("Api-Version", "1.41")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/_ping":
		fmt.Fprint(w, "OK")
	case strings.HasSuffix(r.URL.Path, "/networks"): // as listed: no endpoints; the name filter matches substrings
		fmt.Fprintf(w, `[{"Name":"bridge-lookalike","Id":"%s","Driver":"bridge","Options":{"%s":"true"}},
			{"Name":"bridge","Id":"%s","Driver":"bridge","Scope":"local",
			"IPAM":{"Config":[{"Subnet":"10.200.0.0/20","Gateway":"10.200.0.1"}]},
			"Options":{"com.docker.network.bridge.default_bridge":"true","%s":"%s"}}]`,
			strings.Repeat("c", 64), iccOption, strings.Repeat("b", 64), iccOption, st.icc)
	case strings.HasSuffix(r.URL.Path, "/containers/json"): // on the bridge: one ours, one another's
		fmt.Fprintf(w, `[{"Id":"a","Names":["/fred-x-app-1"],"State":"running","Labels":{"%s":"true","%s":"%s"}},
			{"Id":"b","Names":["/someone-else"],"State":"running"}]`, dockerio.LabelManaged, dockerio.LabelInstallation, d.installation)
	case strings.HasSuffix(r.URL.Path, "/info"):
		d.infos.Add(1)
		if g := d.gate.Swap(nil); g != nil {
			(*g)()
		}
		q := make([]string, len(st.warnings))
		for i, s := range st.warnings {
			q[i] = fmt.Sprintf("%q", s)
		}
		fmt.Fprintf(w, `{"ID":"x","Warnings":[%s]}`, strings.Join(q, ","))
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"not here"}`)
	}
}

func newBridgeEngine(t *testing.T, d *bridgeDockerd) *Engine {
	t.Helper()
	d.installation = newInstallation()
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	e, err := New(Options{Host: "tcp://" + strings.TrimPrefix(srv.URL, "http://"), InstallationID: d.installation, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// DefaultBridge reports the bridge isolated only with icc off and bridged
// traffic through iptables, and its capacity as the /20's hosts less the
// network, broadcast and gateway addresses, the attached containers that are
// not ours (the pool counts its own) and the reserve.
func TestDefaultBridge_IsolatedOnlyWithIccOffAndBridgeNF_CapacityFromSubnet(t *testing.T) {
	d := newBridgeDockerd("false")
	e := newBridgeEngine(t, d)
	ctx := testCtx(t, 30*time.Second)
	f, err := e.DefaultBridge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Isolated || f.Reason != "" || f.Subnet != "10.200.0.0/20" || f.ID != strings.Repeat("b", 64) || f.Capacity != 4096-3-1-bridgeReserve {
		t.Fatalf("facts %+v: want isolated, 10.200.0.0/20, capacity %d", f, 4096-3-1-bridgeReserve)
	}
	d.set("false", "WARNING: bridge-nf-call-iptables is disabled")
	if f, err = e.DefaultBridge(ctx); err != nil || f.Isolated || !strings.Contains(f.Reason, "bridge-nf-call-iptables") {
		t.Fatalf("with br_netfilter off: %+v, %v", f, err)
	}
	d.set("true")
	if f, err = e.DefaultBridge(ctx); err != nil || f.Isolated || !strings.Contains(f.Reason, "inter-container communication is on") {
		t.Fatalf("with icc on: %+v, %v", f, err)
	}
}

// A bridged launch is refused, before Compose creates anything, once the
// default bridge no longer isolates (an operator turned icc back on and
// restarted dockerd): a tenant is never started on a shared network.
func TestVerifyLaunchNetwork_BridgedPlan_RefusedWhenBridgeNotIsolated(t *testing.T) {
	d := newBridgeDockerd("false")
	e := newBridgeEngine(t, d)
	ctx := testCtx(t, 30*time.Second)
	plan := unitPlan(unitService("web", 1))
	plan.NetworkBridged, plan.NetworkName = true, dockerio.DefaultBridgeName
	n, err := e.verifyLaunchNetwork(ctx, plan)
	if err != nil || n.Name != "bridge" || n.ID != strings.Repeat("b", 64) {
		t.Fatalf("isolated bridge: %+v, %v", n, err)
	}
	d.set("true")
	if _, err := e.verifyLaunchNetwork(ctx, plan); !errors.Is(err, dockerio.ErrBridgeNotIsolated) {
		t.Fatalf("icc on: %v, want ErrBridgeNotIsolated", err)
	}
}

// Startup's readers of docker info (seccomp, the bridge, the address pools)
// asking at once share one request: at a thousand containers each answer costs
// dockerd a tenth to a third of a second of a restart.
func TestInfo_ConcurrentReaders_OneRequest(t *testing.T) {
	d := newBridgeDockerd("false")
	e := newBridgeEngine(t, d)
	ctx := testCtx(t, 30*time.Second)
	release := make(chan struct{})
	blocked := make(chan struct{})
	gate := func() { close(blocked); <-release }
	d.gate.Store(&gate)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Add(3)
	go func() { defer wg.Done(); _, errs[0] = e.SeccompEnabled(ctx) }()
	<-blocked // the first request is at dockerd; the others join it
	go func() { defer wg.Done(); _, errs[1] = e.DefaultBridge(ctx) }()
	go func() { defer wg.Done(); _, errs[2] = e.NetworkCapacity(ctx) }()
	time.Sleep(500 * time.Millisecond)
	close(release)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := d.infos.Load(); n != 1 {
		t.Fatalf("%d docker info requests for three concurrent readers, want 1", n)
	}
	if _, err := e.SeccompEnabled(ctx); err != nil || d.infos.Load() != 2 {
		t.Fatalf("a later reader: %v, %d requests; want a fresh one (2)", err, d.infos.Load())
	}
}

// This host's real dockerd runs with iptables and "icc": false (make
// docker-up): its rules read as isolating, and the default bridge with them.
// A dockerd with --iptables=false programs neither (dockerio/isolation reads an
// empty table so), and the bridge is then not used.
func TestDockerFirewall_ThisHostsDockerd_ProgramsIsolationAndTheIccDrop(t *testing.T) {
	e := newTestEngine(t)
	ctx := testCtx(t, 30*time.Second)
	r, err := e.DockerFirewall(ctx)
	if err != nil || !r.Isolation || !r.ICCDrop {
		t.Fatalf("dockerd's rules: %+v %v, want its isolation chain and the docker0 DROP", r, err)
	}
	if f, err := e.DefaultBridge(ctx); err != nil || !f.Isolated {
		t.Fatalf("the default bridge: %+v %v, want isolated", f, err)
	}
}
