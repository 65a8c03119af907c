package refresh

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

const (
	lA, lB, lC = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002", "cccccccc-0000-4000-8000-000000000003"
)

// env is a decision's env with concurrency n, at t0+after, minting IDs from ids.
func env(n int, after time.Duration, ids func() string) Env {
	return Env{Now: t0.Add(after), Concurrency: n, MaxRun: time.Hour, NewID: ids}
}

// counter mints m1, m2, …
func counter() func() string {
	i := 0
	return func() string { i++; return fmt.Sprintf("m%d", i) }
}

// inv is an inventory: every lease live; stale ones Ready with an old container.
func inv(stale []string, current ...string) Inventory {
	v := Inventory{Live: map[string]bool{lA: true, lB: true, lC: true}, Stale: map[string][]string{}, Current: map[string]bool{}}
	for _, l := range stale {
		v.Stale[l] = []string{"ctr-" + l[:1]}
	}
	for _, l := range current {
		v.Current[l] = true
	}
	return v
}

// built folds the decisions of inputs into a fresh state, failing on any
// event Apply refuses.
func built(t *testing.T, n int, ids func() string, inputs ...any) *State {
	t.Helper()
	st := newState()
	for i, in := range inputs {
		for _, ev := range Decide(st, in, env(n, time.Duration(i)*time.Second, ids)).Events {
			if err := st.Apply(ev); err != nil {
				t.Fatalf("input %d: %v", i, err)
			}
		}
	}
	return st
}

func settled(outcome string, restored bool) messages.RefreshReceipt {
	r := messages.RefreshReceipt{Read: true, Found: true, Settled: true, Outcome: outcome}
	if restored {
		r.Restored = &messages.RestoredRelease{ReleaseVersion: 1, ReleaseDigest: "d"}
	}
	return r
}

func types(evs []persistence.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

func TestDecide_RuntimeRefresh(t *testing.T) {
	started := []any{Start{Inv: inv([]string{lA, lB, lC})}}
	// Two at a time: A and B in flight, C pending.
	running := append(slices.Clone(started), Pass{Inv: inv([]string{lA, lB, lC})})
	rows := []struct {
		name    string
		n       int
		before  []any
		in      any
		after   time.Duration
		events  []string
		asks    []string // lease/maintenance ID
		reply   error
		phases  map[string]Phase
		outcome map[string]string
	}{
		{name: "disabled: 403, nothing journaled", n: 0, in: Start{Inv: inv([]string{lA})}, reply: messages.ErrDisabled},
		{name: "a start journals the run over the stale leases", n: 2, in: Start{Inv: inv([]string{lA, lB})},
			events: []string{EvRunStarted}, phases: map[string]Phase{lA: Pending, lB: Pending}},
		{name: "a second start while one is active: 409", n: 2, before: started, in: Start{Inv: inv([]string{lA})}, reply: messages.ErrInvalidState},
		{name: "a run over nothing ends on its first pass", n: 2, before: []any{Start{Inv: inv(nil)}}, in: Pass{Inv: inv(nil)},
			events: []string{EvRunEnded}},
		{name: "a pass starts leases up to the concurrency, each written ahead with its own ID", n: 2, before: started,
			in: Pass{Inv: inv([]string{lA, lB, lC})}, events: []string{EvLeaseStarted, EvLeaseStarted},
			asks: []string{lA + "/m2", lB + "/m3"}, phases: map[string]Phase{lA: InFlight, lB: InFlight, lC: Pending}},
		{name: "a lease a tenant's restart already brought current is dropped (skipped)", n: 2, before: started,
			in: Pass{Inv: inv([]string{lA, lB}, lC)}, events: []string{EvLeaseStarted, EvLeaseStarted, EvLeaseDropped},
			asks: []string{lA + "/m2", lB + "/m3"}, phases: map[string]Phase{lC: Dropped}},
		{name: "a lease not Ready for now stays pending for a later pass", n: 3, before: started,
			in: Pass{Inv: inv([]string{lA})}, events: []string{EvLeaseStarted}, asks: []string{lA + "/m2"},
			phases: map[string]Phase{lB: Pending, lC: Pending}},
		{name: "a settled lease frees its slot: the next one starts in the same pass", n: 2, before: running,
			in:     Pass{Inv: inv([]string{lB, lC}), Receipts: map[string]messages.RefreshReceipt{lA: settled(messages.RefreshRefreshed, false), lB: {Read: true, Found: true}}},
			events: []string{EvLeaseSettled, EvLeaseStarted}, asks: []string{lC + "/m4"},
			phases: map[string]Phase{lA: Refreshed, lB: InFlight, lC: InFlight}, outcome: map[string]string{lA: "refreshed/m2"}},
		{name: "a rolled-back refresh is failed with restored, and never retried", n: 2, before: running,
			in:     Pass{Inv: inv([]string{lA, lB, lC}), Receipts: map[string]messages.RefreshReceipt{lA: settled(messages.RefreshFailed, true)}},
			events: []string{EvLeaseSettled, EvLeaseStarted}, asks: []string{lC + "/m4"},
			phases: map[string]Phase{lA: Failed}, outcome: map[string]string{lA: "failed/m2/restored"}},
		{name: "an ask the lease never took (a restart lost it): the same ID again", n: 2, before: running,
			in:     Pass{Inv: inv([]string{lA, lB, lC}), Receipts: map[string]messages.RefreshReceipt{lA: {Read: true}, lB: {}}},
			asks:   []string{lA + "/m2"},
			phases: map[string]Phase{lA: InFlight, lB: InFlight, lC: Pending}},
		{name: "a lease closed mid-refresh settles failed; its outcome is pruned on the next pass", n: 2, before: running,
			in:     Pass{Inv: Inventory{Live: map[string]bool{lB: true, lC: true}, Stale: map[string][]string{lC: {"c"}}}},
			events: []string{EvLeaseSettled, EvLeaseStarted}, asks: []string{lC + "/m4"}, outcome: map[string]string{lA: "failed/m2"}},
		{name: "the lease refused (busy fence): pending again", n: 2, before: running,
			in:     Admitted{Lease: lA, MaintenanceID: "m2", Err: messages.Refuse(messages.ErrInvalidState, "busy")},
			events: []string{EvLeaseRefused}, phases: map[string]Phase{lA: Pending}},
		{name: "no answer in time: stays in flight (the next pass reads whether it took it)", n: 2, before: running,
			in: Admitted{Lease: lA, MaintenanceID: "m2", Err: messages.Refuse(messages.ErrBusy, "slow")}, phases: map[string]Phase{lA: InFlight}},
		{name: "an hour in, pending leases are dropped; the run ends once the in-flight ones settle", n: 2, before: running, after: time.Hour,
			in: Pass{Inv: inv([]string{lA, lB, lC}), Receipts: map[string]messages.RefreshReceipt{
				lA: settled(messages.RefreshRefreshed, false), lB: settled(messages.RefreshRefreshed, false)}},
			events: []string{EvLeaseSettled, EvLeaseSettled, EvLeaseDropped, EvRunEnded}, phases: map[string]Phase{lC: Dropped}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			ids := counter()
			st := built(t, r.n, ids, r.before...)
			d := Decide(st, r.in, env(r.n, time.Duration(len(r.before))*time.Second+r.after, ids))
			if !errors.Is(d.Reply, r.reply) || (r.reply == nil) != (d.Reply == nil) {
				t.Fatalf("reply = %v, want %v", d.Reply, r.reply)
			}
			if got := types(d.Events); !slices.Equal(got, r.events) {
				t.Fatalf("events = %v, want %v", got, r.events)
			}
			var asks []string
			for _, a := range d.Asks {
				asks = append(asks, a.Lease+"/"+a.MaintenanceID)
			}
			if !slices.Equal(asks, r.asks) {
				t.Fatalf("asks = %v, want %v", asks, r.asks)
			}
			for _, ev := range d.Events {
				if err := st.Apply(ev); err != nil {
					t.Fatalf("apply %s: %v", ev.Type, err)
				}
			}
			for l, p := range r.phases {
				if got := st.Run.Leases[l].Phase; got != p {
					t.Errorf("%s: phase %s, want %s", l[:1], got, p)
				}
			}
			for l, want := range r.outcome {
				o := st.Outcomes[l]
				got := o.Outcome + "/" + o.MaintenanceID
				if o.Restored != nil {
					got += "/restored"
				}
				if got != want {
					t.Errorf("%s: outcome %s, want %s", l[:1], got, want)
				}
			}
		})
	}
}

// Apply refuses what the run does not permit: the journal is not trusted.
func TestApply_RefusesEventsTheRunDoesNotPermit(t *testing.T) {
	st := built(t, 2, counter(), Start{Inv: inv([]string{lA})})
	for _, ev := range []persistence.Event{
		event(EvLeaseSettled, t0, leaseEvent{Lease: lA, Outcome: &Outcome{Outcome: messages.RefreshRefreshed}}), // pending, not in flight
		event(EvLeaseStarted, t0, leaseEvent{Lease: lB, MaintenanceID: "m"}),                                    // not of the run
		event(EvLeaseStarted, t0, leaseEvent{Lease: lA}),                                                        // no maintenance ID
		event(EvRunStarted, t0, runStarted{ID: "r2", Concurrency: 1}),                                           // one is active
		event("lease.vanished", t0, leaseEvent{Lease: lA}),
	} {
		if err := st.Apply(ev); err == nil {
			t.Errorf("%s applied", ev.Type)
		}
	}
}

// Classify: stale is a Ready lease's running container under an older
// contract; a newer one anywhere in the lease keeps it from being refreshed;
// leases sharing a network are listed, in any state.
func TestClassify_StaleCurrentNewerAndSharedNetworks(t *testing.T) {
	old, cur, newer := dockerio.RuntimeContract-1, dockerio.RuntimeContract, dockerio.RuntimeContract+1
	ctr := func(id, lease string, contract int, state string, nets ...string) messages.Container {
		return messages.Container{ID: id, Lease: lease, Contract: contract, State: state, Networks: nets}
	}
	live := map[string]bool{lA: true, lB: true, lC: true}
	got := Classify(live, map[string]bool{lA: true, lB: true}, []messages.Container{
		ctr("a1", lA, old, "running", "n1"), ctr("a2", lA, cur, "running", "n1"),
		ctr("b1", lB, old, "running", "n2"), ctr("b2", lB, newer, "running", "n2"),
		ctr("c1", lC, old, "running", "n1"), // not Ready
		ctr("x", "", old, "running", "n2"),
	})
	if !slices.Equal(got.Stale[lA], []string{"a1"}) || len(got.Stale) != 1 {
		t.Errorf("stale = %v, want only A's a1", got.Stale)
	}
	if !got.Current[lB] || got.Current[lA] || got.Current[lC] {
		t.Errorf("current = %v, want B (it runs a newer contract's container)", got.Current)
	}
	if !slices.Equal(got.Shared, []string{lA, lC}) {
		t.Errorf("shared = %v, want A and C (network n1)", got.Shared)
	}
}

// Status: rows from the durable outcomes and the run's skipped leases, only
// for live leases, with counts equal to the rows.
func TestStatus_RowsAndCounts(t *testing.T) {
	st := built(t, 1, counter(), Start{Inv: inv([]string{lA, lB, lC})}, Pass{Inv: inv([]string{lA, lB, lC})},
		Pass{Inv: inv([]string{lB, lC}, lA), Receipts: map[string]messages.RefreshReceipt{lA: settled(messages.RefreshFailed, true)}})
	_ = st.Apply(event(EvLeaseDropped, t0, leaseEvent{Lease: lC}))
	got := Status(st, inv([]string{lA, lB}))
	if got.Contract != dockerio.RuntimeContract || !got.Active || got.Stale != 2 || got.InFlight != 1 ||
		got.Failed != 1 || got.Restored != 1 || got.Skipped != 1 || got.Refreshed != 0 || len(got.Leases) != 2 {
		t.Fatalf("status = %+v", got)
	}
	if got.Leases[0].LeaseUUID != lA || got.Leases[0].MaintenanceID == "" || got.Leases[1].Outcome != messages.RefreshSkipped {
		t.Errorf("rows = %+v", got.Leases)
	}
	if got.SharedNetworkLeases == nil || got.StaleLeases == nil {
		t.Error("lists must never be null")
	}
}
