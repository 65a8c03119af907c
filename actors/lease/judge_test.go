package lease_test

import (
	"testing"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// A retaining close's verdict on its volumes is journaled (close.judged) before
// any volume is touched, once; the closed receipt names what it reclaimed.

func (j *journal) closeRetaining() *journal {
	when := j.tick()
	return j.put(lease.EvCloseRequested, lease.CloseRequested{Admission: max(j.st.Admission, j.spec.Admission), At: when, Retain: true})
}

func (j *journal) judged(reclaim ...string) *journal {
	j.tick()
	return j.put(lease.EvCloseJudged, lease.CloseJudged{Reclaim: reclaim})
}

var workCloseVolumes = lease.Work{Kind: lease.WorkCloseVolumes}

func TestDecide_RetainingClose_VerdictJournaledOnceThenCarriedOut(t *testing.T) {
	vol := messages.VolumeName("L", "app", 0)
	runDecide(t, []decideRow{
		{name: "the verdict: journaled, then the volumes dealt with as it says", j: jReady().closeRetaining(),
			in:      lease.TornDown{Judged: &lease.CloseJudged{Reclaim: []string{vol}}},
			events:  []wantEvent{evOf(lease.EvCloseJudged, func(t *testing.T, p lease.CloseJudged) { eq(t, "reclaim", len(p.Reclaim), 1) })},
			effects: fx(workCloseVolumes),
			check: func(t *testing.T, st *lease.State) {
				eq(t, "judged", st.Close.Judged, true)
				eq(t, "reclaim", st.Close.Reclaim[0], vol)
				eq(t, "retain", st.Close.Retain, true)
			}},
		{name: "an empty verdict is journaled too: every volume retained", j: jReady().closeRetaining(),
			in: lease.TornDown{Judged: &lease.CloseJudged{Reclaim: []string{}}}, events: []wantEvent{evType(lease.EvCloseJudged)},
			effects: fx(workCloseVolumes)},
		{name: "judged already (a stale verdict): never judged twice, the journaled one carried out", j: jReady().closeRetaining().judged(vol),
			in: lease.TornDown{Judged: &lease.CloseJudged{}}, effects: fx(workTeardown),
			check: func(t *testing.T, st *lease.State) { eq(t, "reclaim kept", st.Close.Reclaim[0], vol) }},
		{name: "a non-retaining close has no verdict to journal", j: jDeprovisioning(),
			in: lease.TornDown{Judged: &lease.CloseJudged{Reclaim: []string{vol}}}, effects: fx(workTeardown)},
		{name: "recovery of a judged close: teardown, which carries out the verdict", j: jReady().closeRetaining().judged(vol),
			in: lease.Recover{}, effects: fx(workTeardown)},
		{name: "every volume reclaimed: closed without a retention record, callback not retained", j: jReady().closeRetaining().judged(vol),
			in: lease.TornDown{},
			events: []wantEvent{evOf(lease.EvClosed, func(t *testing.T, p lease.ClosedEv) {
				eq(t, "retention", p.Retention == nil, true)
				eq(t, "reclaimed", len(p.Reclaimed), 1)
			})},
			cbs: []wantCB{lifeCB(messages.CallbackDeprovisioned, "")}, effects: fx(lease.TellClosed{}, lease.Answer{}), status: lease.Closed},
		{name: "some retained: the record keeps those", j: jReady().closeRetaining().judged(vol),
			in: lease.TornDown{Retained: []messages.RetainedVolume{{Name: messages.RetainedVolumeName("L", "db", 0), Service: "db", QuotaMB: 64}}},
			events: []wantEvent{evOf(lease.EvClosed, func(t *testing.T, p lease.ClosedEv) {
				eq(t, "retained volumes", len(p.Retention.Volumes), 1)
				eq(t, "reclaimed", p.Reclaimed[0], vol)
			})},
			cbs: []wantCB{lifeCB(messages.CallbackDeprovisioned, "")}, effects: fx(lease.TellClosed{}, lease.Answer{}), status: lease.Closed},
	})
}

// A second verdict, or one for a close that retains nothing, is not ours to
// replay: the journal is refused rather than a close judged twice.
func TestApply_CloseJudged_OnlyOnceAndOnlyForARetainingClose(t *testing.T) {
	for name, j := range map[string]*journal{
		"judged twice":         jReady().closeRetaining().judged(),
		"a destroying close":   jDeprovisioning(),
		"no close in progress": jReady(),
	} {
		ev := mkEvent(lease.EvCloseJudged, j.now, lease.CloseJudged{})
		if err := j.st.Apply(ev); err == nil {
			t.Errorf("%s: close.judged applied", name)
		}
	}
}
