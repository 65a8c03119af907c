package reconciler

// Unit tests of the reconciler's automatic cleanup (gentle, bounded, never
// capping the inventory) and of its diagnostics housekeeping, on the in-memory
// fake engine and a real diagnostics.db. Whole passes against real Docker run in
// cmd/berthd (late containers of closed leases, the crash suite).

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

const installation = "6f7a3c1e-2b4d-4e8f-9a0b-1c2d3e4f5a6b"

// launch runs n single-container leases in the fake and returns their container IDs.
func launch(t *testing.T, e *fake.Engine, n int) []string {
	t.Helper()
	ctx := context.Background()
	img := e.AddImage("127.0.0.1:5000/app:1", dockerio.ImageInfo{})
	var ids []string
	for i := 0; i < n; i++ {
		l := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		net, err := e.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: l, Tenant: "t", BackendName: "docker", InstallationID: installation})
		if err != nil {
			t.Fatal(err)
		}
		plan := dockerio.Plan{Lease: l, Tenant: "t", BackendName: "docker", InstallationID: installation, OperationID: "op",
			Generation: 1, NetworkID: net, HostBindIP: "127.0.0.1", Services: []dockerio.ServicePlan{{Name: "app", SKU: "s",
				Quantity: 1, CPUCores: 0.1, MemoryMB: 16, Service: manifest.Service{Image: "127.0.0.1:5000/app:1"}, ImageID: img.ID}}}
		if err := e.Up(ctx, plan); err != nil {
			t.Fatal(err)
		}
		cs, err := e.Cohort(ctx, l)
		if err != nil || len(cs) != 1 {
			t.Fatalf("cohort of %s: %v %v", l, cs, err)
		}
		ids = append(ids, cs[0].ID)
	}
	return ids
}

func newTestActor(e Docker, diag *persistence.Diagnostics, now func() time.Time) *Actor {
	return &Actor{Deps: &Deps{Env: supervisors.Env{Log: zerolog.Nop(), Now: now}, Engine: e, Diag: diag, Metrics: NewMetrics(nil),
		Settings: &Settings{StopTimeout: time.Second, MaxRemovals: 100, RemoveTimeout: 30 * time.Second,
			DiagnosticsMaxAge: time.Hour, PruneEvery: time.Hour}}}
}

// TestRemoveBounded_AtMost100PerPass_GentleAndTheRestLeftForTheNext: 150
// candidates; one pass stops and removes exactly 100 of them through StopRemove
// (exact ID, never forced), reports 50 as backlog, and the next pass the rest.
func TestRemoveBounded_AtMost100PerPass_GentleAndTheRestLeftForTheNext(t *testing.T) {
	e := fake.New(fake.Options{InstallationID: installation})
	ids := launch(t, e, 150)
	a := newTestActor(e, nil, time.Now)
	removed, rest := a.removeBounded(context.Background(), ids)
	backlog := len(rest)
	if removed != 100 || backlog != 50 {
		t.Fatalf("first pass removed %d, left %d; want 100 and 50", removed, backlog)
	}
	if n := e.Calls(fake.OpStopRemove); n != 100 {
		t.Fatalf("%d gentle removals, want 100", n)
	}
	if n := e.Calls(fake.OpRemoveContainers); n != 0 {
		t.Fatalf("%d forced removals: automatic cleanup must never force", n)
	}
	left, err := e.ListManaged(context.Background())
	if err != nil || len(left) != 50 {
		t.Fatalf("after the first pass %d containers listed (%v), want 50: the inventory itself is never capped", len(left), err)
	}
	removed, rest = a.removeBounded(context.Background(), ids[100:])
	backlog = len(rest)
	if removed != 50 || backlog != 0 {
		t.Fatalf("second pass removed %d, left %d; want 50 and 0", removed, backlog)
	}
}

// TestRemoveBounded_AnotherInstallationsContainer_RefusedAndKept: a candidate the
// engine refuses (another installation's, or any failure) is backlog, not removed.
func TestRemoveBounded_AnotherInstallationsContainer_RefusedAndKept(t *testing.T) {
	e := fake.New(fake.Options{InstallationID: installation})
	ours := launch(t, e, 1)
	foreign := e.AddForeignContainer("00000000-0000-4000-8000-999999999999", "app", 0, "11111111-2222-4333-8444-555555555555")
	a := newTestActor(e, nil, time.Now)
	removed, left := a.removeBounded(context.Background(), []string{foreign, ours[0]})
	backlog := len(left)
	if removed != 1 || backlog != 1 {
		t.Fatalf("removed %d, left %d; want the foreign one refused and kept", removed, backlog)
	}
	if _, err := e.Inspect(context.Background(), foreign); err != nil {
		t.Fatalf("the foreign container is gone: %v", err)
	}
}

// TestPruneDiagnostics_OldEntriesGoOnTheHourlyTick: entries older than
// diagnostics_max_age are deleted by the first pass; a pass within the hour does
// not prune again; a pass after it does.
func TestPruneDiagnostics_OldEntriesGoOnTheHourlyTick(t *testing.T) {
	diag, err := persistence.OpenDiagnostics(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer diag.Close()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := now
	blob := json.RawMessage(`{"reason":"ContainerExited"}`)
	lease := "00000000-0000-4000-8000-000000000001"
	put := func(at time.Time) {
		t.Helper()
		if err := diag.Put(lease, at, blob); err != nil {
			t.Fatal(err)
		}
	}
	put(now.Add(-3 * time.Hour)) // old
	put(now.Add(-10 * time.Minute))
	a := newTestActor(fake.New(fake.Options{InstallationID: installation}), diag, func() time.Time { return clock })

	a.pruneDiagnostics()
	if got := countEntries(t, diag, lease); got != 1 {
		t.Fatalf("%d entries after the first prune, want the young one only", got)
	}
	put(now.Add(-2 * time.Hour)) // old again, but the next prune is an hour away
	clock = now.Add(30 * time.Minute)
	a.pruneDiagnostics()
	if got := countEntries(t, diag, lease); got != 2 {
		t.Fatalf("%d entries: a pass within the hour pruned again", got)
	}
	clock = now.Add(61 * time.Minute)
	put(clock.Add(-time.Minute)) // young at that time; everything else is over an hour old by then
	a.pruneDiagnostics()
	if got := countEntries(t, diag, lease); got != 1 {
		t.Fatalf("%d entries after the hourly prune, want 1", got)
	}
}

// countEntries is how many diagnostics entries the lease has.
func countEntries(t *testing.T, diag *persistence.Diagnostics, lease string) int {
	t.Helper()
	n, err := diag.Count(lease)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSweepHelpers_EveryPassAsksTheEngine_AFailureFailsNothing: the pass asks
// the engine to sweep the image helpers a killed daemon left (the real sweep is
// tested in dockerio/engine); Docker down only leaves them for the next pass.
func TestSweepHelpers_EveryPassAsksTheEngine_AFailureFailsNothing(t *testing.T) {
	e := fake.New(fake.Options{InstallationID: installation})
	a := newTestActor(e, nil, time.Now)
	var res Result
	a.sweepHelpers(context.Background(), &res)
	e.SetUnavailable(true)
	a.sweepHelpers(context.Background(), &res)
	if got := e.Calls(fake.OpSweepHelpers); got != 2 || res.Helpers != 0 {
		t.Errorf("SweepHelpers called %d times (want 2), %d removed", got, res.Helpers)
	}
}

// TestGuardIsolation_EveryPassChecks_ReinstallsAMissingGuard_ReportsAFailure:
// each pass asks the engine to keep the isolation guard in place (the real
// guard is tested in dockerio/engine); a guard found missing is put back and
// reported, one that cannot be checked is reported failed and fails nothing.
func TestGuardIsolation_EveryPassChecks_ReinstallsAMissingGuard_ReportsAFailure(t *testing.T) {
	e := fake.New(fake.Options{InstallationID: installation})
	a := newTestActor(e, nil, time.Now)
	var res Result
	a.guardIsolation(context.Background(), &res)
	if res.Guard != "ok" {
		t.Fatalf("guard %q with the guard in place, want ok", res.Guard)
	}
	e.RemoveGuard()
	a.guardIsolation(context.Background(), &res)
	if res.Guard != "reinstalled" {
		t.Fatalf("guard %q after it was removed, want reinstalled", res.Guard)
	}
	e.SetUnavailable(true)
	a.guardIsolation(context.Background(), &res)
	if res.Guard != "failed" {
		t.Fatalf("guard %q with Docker's host unreachable, want failed", res.Guard)
	}
	if got := e.Calls(fake.OpGuardIsolation); got != 3 {
		t.Errorf("GuardIsolation called %d times, want 3", got)
	}
}

// TestWatchBridge_BridgedLeases_ABridgeThatStopsIsolatingIsReported: with
// leases on the default bridge each pass proves it still isolates; once it does
// not (icc back on, dockerd without iptables) the pass says why and the gauge
// drops to 0; without bridged leases nothing is asked.
func TestWatchBridge_BridgedLeases_ABridgeThatStopsIsolatingIsReported(t *testing.T) {
	e := fake.New(fake.Options{InstallationID: installation})
	a := newTestActor(e, nil, time.Now)
	var res Result
	a.watchBridge(context.Background(), &res)
	if n := e.Calls(fake.OpDefaultBridge); n != 0 {
		t.Fatalf("the bridge read %d times with no bridged leases", n)
	}
	a.Settings.Bridged = true
	e.SetBridge(dockerio.BridgeFacts{Isolated: true, Subnet: "10.200.0.0/20", Capacity: 100})
	a.watchBridge(context.Background(), &res)
	if res.Bridge != "" || testutil.ToFloat64(a.Metrics.bridge) != 1 {
		t.Fatalf("an isolating bridge: %q, gauge %v", res.Bridge, testutil.ToFloat64(a.Metrics.bridge))
	}
	e.SetBridge(dockerio.BridgeFacts{Reason: "dockerd drops nothing between containers on the default bridge"})
	a.watchBridge(context.Background(), &res)
	if !strings.Contains(res.Bridge, "drops nothing") || testutil.ToFloat64(a.Metrics.bridge) != 0 {
		t.Fatalf("a bridge that stopped isolating: %q, gauge %v", res.Bridge, testutil.ToFloat64(a.Metrics.bridge))
	}
}

// TestCountFredV013_EveryPassCounts_AnUnlistedOneKeepsTheLastFigure: each pass
// counts fred v0.13's unadopted containers (the real listing is tested against
// a real fred host in cmd/berthd); one Docker would not list leaves the gauge
// at its last figure rather than claiming none.
func TestCountFredV013_EveryPassCounts_AnUnlistedOneKeepsTheLastFigure(t *testing.T) {
	e := fake.New(fake.Options{InstallationID: installation})
	a := newTestActor(e, nil, time.Now)
	var res Result
	a.countFredV013(context.Background(), &res)
	if res.UnaccountedFred != 0 {
		t.Fatalf("counted %d of fred's on a host without any", res.UnaccountedFred)
	}
	a.Metrics.unaccounted.WithLabelValues("fred_v013").Set(2) // a figure from an earlier pass
	e.SetUnavailable(true)
	a.countFredV013(context.Background(), &res)
	a.Metrics.observe(res, nil, time.Now())
	if res.UnaccountedFred != -1 || testutil.ToFloat64(a.Metrics.unaccounted.WithLabelValues("fred_v013")) != 2 {
		t.Fatalf("with Docker unreachable: result %d, gauge %v", res.UnaccountedFred, testutil.ToFloat64(a.Metrics.unaccounted.WithLabelValues("fred_v013")))
	}
	if got := e.Calls(fake.OpUnadoptedFredV013); got != 2 {
		t.Errorf("UnadoptedFredV013 called %d times, want 2", got)
	}
}

// TestSettleClosed_HourlyNeverTouchingWhatIsHeld: the pass settles closed
// leases' journals at most once per PruneEvery, compacting those closed
// CompactAfter ago and forgetting those closed releases_max_age ago, and the
// leases it keeps are exactly the live ones and those Docker still lists.
func TestSettleClosed_HourlyNeverTouchingWhatIsHeld(t *testing.T) {
	clock := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	a := newTestActor(fake.New(fake.Options{InstallationID: installation}), nil, func() time.Time { return clock })
	a.Settings.CompactAfter, a.Settings.ClosedMaxAge, a.Settings.MaxClosedChanges = time.Hour, 90*24*time.Hour, 7
	var calls int
	a.ClosedStreams = func(compactBefore, forgetBefore time.Time, keep func(string) bool, max int) (int, int, error) {
		calls++
		if !compactBefore.Equal(clock.Add(-time.Hour)) || !forgetBefore.Equal(clock.Add(-90*24*time.Hour)) || max != 7 {
			t.Errorf("cutoffs %s %s max %d", compactBefore, forgetBefore, max)
		}
		if !keep("live") || !keep("lingering") || keep("closed") {
			t.Errorf("keeps live %v, lingering %v, closed %v", keep("live"), keep("lingering"), keep("closed"))
		}
		return 2, 1, nil
	}
	res := Result{holding: map[string]bool{"live": true, "lingering": true}}
	a.settleClosed(&res)
	if calls != 1 || res.Compacted != 2 || res.Forgotten != 1 {
		t.Fatalf("first pass: %d calls, result %+v", calls, res)
	}
	clock = clock.Add(30 * time.Minute)
	a.settleClosed(&res)
	clock = clock.Add(31 * time.Minute)
	a.settleClosed(&Result{}) // a pass whose accounting failed holds nothing: no call
	if calls != 1 {
		t.Fatalf("%d calls within the hour or without an accounting, want 1", calls)
	}
	a.settleClosed(&res)
	if calls != 2 {
		t.Fatalf("%d calls after the hour, want 2", calls)
	}
}
