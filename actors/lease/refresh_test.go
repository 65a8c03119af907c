package lease_test

import (
	"testing"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// The runtime refresh's maintenance kind: restart-shaped, taken only by a Ready
// lease whose cohort still holds a container seen under an older contract, and
// without any failure-budget effect — its start keeps the streak, a rollback
// leaves no error on the lease.

func refreshCmd(id string, stale ...string) lease.Maintain {
	return lease.Maintain{Kind: lease.KindRuntimeRefresh, ID: id, AdmittedAt: admittedAt, Stale: stale}
}

// jRefreshing is a ready lease (with a counted failure in its streak) whose
// runtime refresh is in flight.
func jRefreshing() *journal { return jStreak().maintain(lease.KindRuntimeRefresh, mID1, nil) }

// jStreak is a ready lease re-provisioned after a counted death: streak 1.
func jStreak() *journal { return jReady().dies(true).fails().provision(dspec(2)).pin().ready() }

func TestDecide_RuntimeRefresh(t *testing.T) {
	spec := dspec(2)
	stale := ctrID("app", 0, 2) // the re-provisioned cohort's container
	recreated := cohortOf(spec.Services, 5)
	runDecide(t, []decideRow{
		{name: "a ready lease running a stale container: restart-shaped, the streak kept", j: jStreak(), in: refreshCmd(mID1, "other", stale),
			events: []wantEvent{evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) {
				eq(t, "kind", p.Kind, lease.KindRuntimeRefresh)
				eq(t, "target kind", p.Release.Kind, lease.KindRuntimeRefresh)
				eq(t, "target manifest", string(p.Release.Manifest), string(spec.Manifest))
				eq(t, "target pins", p.Release.Images, pinsOf(spec.Services))
			})},
			effects: fx(workReplace), status: lease.Restarting,
			check: func(t *testing.T, st *lease.State) {
				eq(t, "streak", st.Budget.Streak, 1)
				wantReleases(t, st, "v1:superseded", "v2:active", "v3:deploying")
			}},
		{name: "none of the stale containers is the cohort: a tenant's restart won", j: jStreak(), in: refreshCmd(mID1, ctrID("app", 0, 1)),
			reply: messages.ErrInvalidState, replyHas: "no container under an older runtime contract"},
		{name: "failing: refused", j: jStreak().dies(false), in: refreshCmd(mID1, stale),
			reply: messages.ErrInvalidState, replyHas: "failing"},
		{name: "failed: refused", j: jStreak().dies(false).fails(), in: refreshCmd(mID1, stale), reply: messages.ErrInvalidState},
		{name: "restarting: refused", j: jRefreshing(), in: refreshCmd(mID2, stale), reply: messages.ErrInvalidState},
		{name: "the fence holds a refresh too", j: jStreak(), in: refreshCmd(mID1, stale), env: []func(*lease.Env){fenced},
			reply: messages.ErrInvalidState, replyHas: "still being delivered"},
		{name: "completed: the target is active, one success completion", j: jRefreshing(),
			in:     lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceCompleted, Generation: 4, Containers: cohortOf(spec.Services, 4)}},
			events: []wantEvent{evType(lease.EvMaintenanceDone)}, cbs: []wantCB{maintCB(messages.CallbackSuccess, "", mID1)}, status: lease.Ready,
			check: func(t *testing.T, st *lease.State) {
				wantReleases(t, st, "v1:superseded", "v2:superseded", "v3:active")
			}},
		{name: "rolled back: ready on its release, no error, fail_count and streak unchanged", j: jRefreshing(),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceRecovered, Generation: 5, Containers: recreated,
				Reason: messages.ReasonHealthCheckFailed}},
			events: []wantEvent{evType(lease.EvMaintenanceRestored)},
			cbs:    []wantCB{{status: messages.CallbackFailed, errPrefix: "RestartFailed: ", errHas: "restored", lifecycle: true, maintenanceID: mID1, admittedAt: admittedAt}},
			status: lease.Ready,
			check: func(t *testing.T, st *lease.State) {
				wantReleases(t, st, "v1:superseded", "v2:active", "v3:failed")
				eq(t, "reason", st.Reason, "")
				eq(t, "fail_count", st.FailCount, 1)
				eq(t, "streak", st.Budget.Streak, 1)
				eq(t, "containers", st.Containers, recreated)
			}},
	})
}

// RefreshReceipt: how a runtime_refresh maintenance stands, as the refresh
// actor reads it — never admitted, in flight, refreshed, or failed with the
// release the rollback restored (its version and manifest digest).
func TestRefreshReceipt_NotFoundInFlightRefreshedRestored(t *testing.T) {
	for _, c := range []struct {
		name            string
		j               *journal
		found, settled  bool
		outcome         string
		restoredVersion int
	}{
		{"never admitted", jStreak(), false, false, "", 0},
		{"in flight", jRefreshing(), true, false, "", 0},
		{"completed", jRefreshing().completes(), true, true, messages.RefreshRefreshed, 0},
		{"rolled back: restored v2", jRefreshing().rollsBack(), true, true, messages.RefreshFailed, 2},
		{"failed without a restore", jRefreshing().maintenanceFails(), true, true, messages.RefreshFailed, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := lease.RefreshReceipt(replay(t, c.j.evs...), mID1)
			if !rec.Read || rec.Found != c.found || rec.Settled != c.settled || rec.Outcome != c.outcome {
				t.Fatalf("receipt = %+v", rec)
			}
			if got := 0; rec.Restored != nil {
				got = rec.Restored.ReleaseVersion
				if len(rec.Restored.ReleaseDigest) != 64 {
					t.Errorf("digest %q", rec.Restored.ReleaseDigest)
				}
				eq(t, "restored version", got, c.restoredVersion)
			} else if c.restoredVersion != 0 {
				t.Errorf("no restored release, want v%d", c.restoredVersion)
			}
		})
	}
}
