package lease_test

import (
	"maps"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// Table tests of the custom-domain reconcile (reconcile_domains.go): every
// status × no drift, add, change, remove, with the DNS gate on and off.

const (
	shop = "shop.example.org"
	www  = "www.example.org"
)

// domainSpec is admission n of the one-service lease whose item names domain ("": none).
func domainSpec(n uint64, domain string) *lease.Spec {
	s := dspec(n)
	s.Items[0].CustomDomain = domain
	return s
}

// jRouted is a Ready lease whose item names shop and whose running release
// routes it (its gate opened: a custom_domain maintenance completed).
func jRouted() *journal {
	s := domainSpec(1, shop)
	j := newJournal(s).provision(s).pin().ready()
	target := *j.st.Running()
	target.Domains = map[string]string{"app": shop}
	return j.maintain(lease.KindCustomDomain, mID3, &target).completes()
}

// rec is a reconcile naming domain for app ("": no custom domain).
func rec(domain string) lease.ReconcileDomains {
	if domain == "" {
		return lease.ReconcileDomains{Domains: map[string]string{}}
	}
	return lease.ReconcileDomains{Domains: map[string]string{"app": domain}}
}

func gated(e *lease.Env)   { e.DomainsGated = true }
func ungated(e *lease.Env) { e.DomainsUngated = true }

// desiredIs checks the journaled domains.desired.
func desiredIs(want map[string]string) wantEvent {
	return evOf(lease.EvDomainsDesired, func(t *testing.T, p lease.DomainsDesired) {
		if p.Admission != 1 || !maps.Equal(p.Domains, want) {
			t.Errorf("domains.desired %+v, want admission 1, %v", p, want)
		}
	})
}

// redeployRoutes checks a custom_domain maintenance whose release routes want.
func redeployRoutes(want map[string]string) wantEvent {
	return evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) {
		if p.Kind != lease.KindCustomDomain || p.Release.Kind != lease.KindCustomDomain || p.ID == "" ||
			p.Release.MaintenanceID != p.ID || !maps.Equal(p.Release.Domains, want) {
			t.Errorf("maintenance %s %s release %s routes %v, want a custom_domain redeploy routing %v",
				p.Kind, p.ID, p.Release.Kind, p.Release.Domains, want)
		}
		if len(p.Release.Images) == 0 {
			t.Errorf("the redeploy's release lost the recorded images: same content, new containers")
		}
	})
}

func desiredNow(want map[string]string) func(t *testing.T, st *lease.State) {
	return func(t *testing.T, st *lease.State) {
		if st.Desired == nil || !maps.Equal(st.Desired.Domains, want) {
			t.Errorf("desired domains %+v, want %v", st.Desired, want)
		}
	}
}

// Outside Ready nothing changes: restarting or updating is 503
// lifecycle_pending (a maintenance in flight), any other status nothing to do
// (204); no drift is a no-op everywhere.
func TestDecide_ReconcileDomains_NotReady_NothingJournaled_BusyWhileMaintaining(t *testing.T) {
	changes := []struct {
		name, desired string
		in            lease.ReconcileDomains
	}{
		{"no drift", shop, rec(shop)},
		{"add", "", rec(shop)},
		{"change", shop, rec(www)},
		{"remove", shop, rec("")},
	}
	statuses := []struct {
		name string
		j    func() *journal
		busy bool
	}{
		{"reserved", jReserved, false}, {"provisioning", jProvisioning, false}, {"failing", jFailing, false},
		{"failed", jFailed, false}, {"restarting", jRestarting, true}, {"updating", jUpdating, true},
		{"deprovisioning", jDeprovisioning, false}, {"closed", jClosed, false},
	}
	var rows []decideRow
	for _, gate := range []func(*lease.Env){gated, ungated} {
		for _, s := range statuses {
			for _, c := range changes {
				r := decideRow{name: s.name + "/" + c.name, j: s.j(), in: c.in, env: fx2(withSpec(domainSpec(1, c.desired)), gate)}
				if s.busy && c.name != "no drift" {
					r.reply, r.replyHas = messages.ErrLifecyclePending, "reconciled once it is ready"
				}
				rows = append(rows, r)
			}
		}
	}
	runDecide(t, rows)
}

func fx2(f ...func(*lease.Env)) []func(*lease.Env) { return f }

// Ready: a change journals the desired domains; a removed or changed router
// goes through the custom_domain redeploy, a new domain too with the gate
// off, and waits for its gate with it on.
func TestDecide_ReconcileDomains_Ready_AddChangeRemove_GatedAndUngated(t *testing.T) {
	none := map[string]string{}
	runDecide(t, []decideRow{
		{name: "no drift, routed", j: jRouted(), in: rec(shop), env: fx2(ungated)},
		{name: "no drift, routed, gated", j: jRouted(), in: rec(shop), env: fx2(gated)},
		{name: "no drift, none", j: jReady(), in: rec(""), env: fx2(gated)},
		{name: "no drift, fenced: the fence is not in the way", j: jRouted(), in: rec(shop), env: fx2(ungated, fenced)},

		{name: "add, ungated: redeployed with the router", j: jReady(), in: rec(shop), env: fx2(ungated),
			events:  []wantEvent{desiredIs(map[string]string{"app": shop}), redeployRoutes(map[string]string{"app": shop})},
			effects: fx(lease.SyncGate{}, workReplace), status: lease.Restarting, check: desiredNow(map[string]string{"app": shop})},
		{name: "add, gated: journaled, the gate watches it", j: jReady(), in: rec(shop), env: fx2(gated),
			events:  []wantEvent{desiredIs(map[string]string{"app": shop})},
			effects: fx(lease.SyncGate{}), check: desiredNow(map[string]string{"app": shop})},
		{name: "add, gated, fenced: no redeploy, so no fence", j: jReady(), in: rec(shop), env: fx2(gated, fenced),
			events: []wantEvent{desiredIs(map[string]string{"app": shop})}, effects: fx(lease.SyncGate{})},
		{name: "add, ungated, fenced: busy", j: jReady(), in: rec(shop), env: fx2(ungated, fenced),
			reply: messages.ErrLifecyclePending, replyHas: "still being delivered"},

		{name: "change, ungated: the new router at once", j: jRouted(), in: rec(www), env: fx2(ungated),
			events:  []wantEvent{desiredIs(map[string]string{"app": www}), redeployRoutes(map[string]string{"app": www})},
			effects: fx(lease.SyncGate{Forget: []string{shop}}, workReplace), status: lease.Restarting},
		{name: "change, gated: the old router goes now, the new waits for its gate", j: jRouted(), in: rec(www), env: fx2(gated),
			events:  []wantEvent{desiredIs(map[string]string{"app": www}), redeployRoutes(none)},
			effects: fx(lease.SyncGate{Forget: []string{shop}}, workReplace), status: lease.Restarting},
		{name: "change, fenced: busy", j: jRouted(), in: rec(www), env: fx2(gated, fenced),
			reply: messages.ErrLifecyclePending, replyHas: "still being delivered"},
		{name: "change, history full: refused", j: jRouted(), in: rec(www), env: fx2(ungated, withHistoryBytes(1)),
			reply: messages.ErrInvalidState, replyHas: "history"},

		{name: "remove, ungated", j: jRouted(), in: rec(""), env: fx2(ungated),
			events:  []wantEvent{desiredIs(none), redeployRoutes(none)},
			effects: fx(lease.SyncGate{Forget: []string{shop}}, workReplace), status: lease.Restarting, check: desiredNow(none)},
		{name: "remove, gated", j: jRouted(), in: rec(""), env: fx2(gated),
			events:  []wantEvent{desiredIs(none), redeployRoutes(none)},
			effects: fx(lease.SyncGate{Forget: []string{shop}}, workReplace), status: lease.Restarting},
		{name: "remove a domain never routed (gated): journaled, its gate forgotten", j: jReady(), in: rec(""),
			env: fx2(gated, withSpec(domainSpec(1, shop))), events: []wantEvent{desiredIs(none)},
			effects: fx(lease.SyncGate{Forget: []string{shop}})},
	})
}

// decideOn decides in on j's state and applies the decision to it, as the
// actor does; the journal's later steps build on it.
func decideOn(t *testing.T, j *journal, in lease.Input, env lease.Env) lease.Decision {
	t.Helper()
	env.Now, env.Spec, env.Limits = j.tick(), j.spec, testLimits
	d := lease.Decide(j.st, in, env)
	for _, ev := range d.Events {
		if err := j.st.Apply(ev); err != nil {
			t.Fatalf("%s does not apply: %v", ev.Type, err)
		}
		j.evs = append(j.evs, ev)
	}
	return d
}

func nothing(t *testing.T, what string, d lease.Decision) {
	t.Helper()
	if len(d.Events) > 0 || len(d.Effects) > 0 || d.Reply != nil {
		t.Fatalf("%s: %+v, want nothing (no events, no effects, 204)", what, d)
	}
}

// A second identical call is a no-op while the redeploy runs and after it;
// the same change decided twice from one release names one maintenance.
func TestDecide_ReconcileDomains_IdenticalCalls_NoOp_OneMaintenanceID(t *testing.T) {
	env := lease.Env{DomainsUngated: true}
	a, b := jReady(), jReady()
	if d := decideOn(t, a, rec(shop), env); len(d.Events) != 2 {
		t.Fatalf("the first call: %v", d.Events)
	}
	decideOn(t, b, rec(shop), env)
	if a.st.Maintenance == nil || b.st.Maintenance == nil || a.st.Maintenance.ID != b.st.Maintenance.ID {
		t.Fatalf("the same change from the same release: %+v / %+v", a.st.Maintenance, b.st.Maintenance)
	}
	nothing(t, "again while restarting", decideOn(t, a, rec(shop), env))
	a.completes()
	nothing(t, "again once ready", decideOn(t, a, rec(shop), env))
	if got := a.st.Running().Domains; !maps.Equal(got, map[string]string{"app": shop}) {
		t.Fatalf("the running release routes %v", got)
	}
}

// A redeploy that failed (rolled back) is not tried again from the same
// release on every tick; after the tenant's restart the next call retries it
// under a new ID, and the desired domains are not journaled again.
func TestDecide_ReconcileDomains_FailedRedeploy_RetriedUnderANewID_ThreeTimes_ThenFromANewRelease(t *testing.T) {
	env := lease.Env{DomainsUngated: true}
	j := jReady()
	seen := map[string]bool{}
	for attempt := 1; attempt <= 3; attempt++ {
		d := decideOn(t, j, rec(shop), env)
		if j.st.Status != lease.Restarting || seen[j.st.Maintenance.ID] {
			t.Fatalf("attempt %d: %v, %s, maintenance %+v (IDs so far %v)", attempt, d.Events, j.st.Status, j.st.Maintenance, seen)
		}
		seen[j.st.Maintenance.ID] = true
		nothing(t, "the same call while it runs", decideOn(t, j, rec(shop), env))
		j.rollsBack()
		if j.st.Status != lease.Ready || len(j.st.Running().Domains) != 0 {
			t.Fatalf("after rollback %d: %s routing %v", attempt, j.st.Status, j.st.Running().Domains)
		}
	}
	nothing(t, "a fourth call from the same release", decideOn(t, j, rec(shop), env))
	j.restart(mID1).completes()
	d := decideOn(t, j, rec(shop), env)
	if len(d.Events) != 1 || d.Events[0].Type != lease.EvMaintenanceStarted || seen[j.st.Maintenance.ID] {
		t.Fatalf("after a restart: %v, maintenance %+v (earlier %v)", d.Events, j.st.Maintenance, seen)
	}
}

// A custom-domain redeploy does not reset the failure streak (seed: only a
// tenant's restart or update does).
func TestDecide_ReconcileDomains_Redeploy_KeepsTheFailureStreak(t *testing.T) {
	j := jReady().dies(true).fails()
	j.provision(dspec(2)).pin().ready()
	if j.st.Budget.Streak != 1 {
		t.Fatalf("fixture streak %d, want 1", j.st.Budget.Streak)
	}
	d := decideOn(t, j, rec(shop), lease.Env{DomainsUngated: true})
	if len(d.Events) != 2 || j.st.Status != lease.Restarting || j.st.Budget.Streak != 1 {
		t.Fatalf("%s, streak %d after the redeploy's admission, want restarting with streak 1", j.st.Status, j.st.Budget.Streak)
	}
}

// domains.desired applies only to a Ready lease, for its own admission.
func TestApply_DomainsDesired_OnlyReady_OnlyItsAdmission(t *testing.T) {
	ev := func(adm uint64) lease.DomainsDesired {
		return lease.DomainsDesired{Admission: adm, Domains: map[string]string{"app": shop}}
	}
	for _, tc := range []struct {
		name string
		j    *journal
		p    lease.DomainsDesired
		ok   bool
	}{
		{"ready, its admission", jReady(), ev(1), true},
		{"ready, another admission", jReady(), ev(2), false},
		{"restarting", jRestarting(), ev(1), false},
		{"failed", jFailed(), ev(1), false},
		{"closed", jClosed(), ev(1), false},
	} {
		err := tc.j.st.Apply(mkEvent(lease.EvDomainsDesired, t0.Add(time.Hour), tc.p))
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v, want applied %t", tc.name, err, tc.ok)
		}
	}
}
