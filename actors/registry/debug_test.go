package registry

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

func (h *harness) debugLeases(q messages.DebugLeases) []messages.LeaseRow {
	h.t.Helper()
	return ask(h, 10*time.Second, func(r chan<- messages.DebugLeasesReply) any { q.Reply = r; return &q }).Rows
}

func (h *harness) transitionsSince(since uint64) messages.TransitionsReply {
	h.t.Helper()
	return ask(h, 10*time.Second, func(r chan<- messages.TransitionsReply) any {
		return &messages.DebugTransitions{Since: since, Reply: r}
	})
}

// pathOf is the from→to path of lease in rep, with the reasons of failures.
func pathOf(rep messages.TransitionsReply, lease string) []string {
	out := []string{}
	for _, tr := range rep.Transitions {
		if tr.LeaseUUID == lease {
			s := tr.From + "→" + tr.To
			if tr.Reason != "" {
				s += " (" + tr.Reason + ")"
			}
			out = append(out, s)
		}
	}
	return out
}

func TestDebug_TransitionsAreTheReportsStatusChanges(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	ready, failed := uuid.NewString(), uuid.NewString()
	h.provisionReady(ready, "docker-small", 1)
	h.provisionFailed(failed, "docker-small", 1)
	rep := h.transitionsSince(0)
	if got, want := pathOf(rep, ready), []string{"→reserved", "reserved→provisioning", "provisioning→ready"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("ready lease: %v, want %v", got, want)
	}
	if got, want := pathOf(rep, failed), []string{"→reserved", "reserved→provisioning", "provisioning→failed (ContainerStartFailed)"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("failed lease: %v, want %v", got, want)
	}
	for i, tr := range rep.Transitions {
		if tr.Seq != uint64(i+1) || tr.At.IsZero() {
			t.Fatalf("transition %d = %+v", i, tr)
		}
	}

	// A registry restart keeps the ring and its seq; the reports of the respawned
	// leases only say where they are, which is no transition.
	last := rep.Next
	node, _ := h.tree.Dir.Get(regPath)
	h.tree.Send(regPath, &messages.Crash{})
	h.eventually("registry restarted", func() bool { return node.Restarts() == 1 })
	h.recovered()
	// Until a respawned lease reports, its row reads provisioning: these waits are
	// for the reports themselves.
	h.waitStatus(ready, messages.StatusReady)
	h.waitStatus(failed, messages.StatusFailed)
	if after := h.transitionsSince(last); len(after.Transitions) != 0 || after.Next != last {
		t.Fatalf("after the registry restart: %+v, want nothing new after %d", after, last)
	}
	again := uuid.NewString()
	h.provisionReady(again, "docker-small", 1)
	after := h.transitionsSince(last)
	if got := pathOf(after, again); len(got) != 3 || after.Transitions[0].Seq != last+1 {
		t.Fatalf("after the restart a new lease's transitions are %v from seq %d, want 3 from %d", got, after.Transitions[0].Seq, last+1)
	}
}

func TestDebug_ALeaseActorStoppedPastItsLimitIsAnUnknownTransition(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	h.provisionReady(id, "docker-small", 1)
	node, ok := h.tree.Dir.Get(leasePath(id))
	if !ok {
		t.Fatal("no lease actor")
	}
	for i := 0; i < 6; i++ { // OneForOne: 5 restarts a minute, then stopped
		h.tree.Send(leasePath(id), &messages.Crash{})
		if i < 5 {
			h.eventually("lease restarted", func() bool { return node.Restarts() == i+1 })
		}
	}
	h.waitStatus(id, messages.StatusUnknown)
	got := pathOf(h.transitionsSince(0), id)
	if want := "ready→unknown (lease actor stopped after repeated failures)"; got[len(got)-1] != want {
		t.Fatalf("transitions %v, want the last %q", got, want)
	}
	rows := h.debugLeases(messages.DebugLeases{Lease: id})
	if len(rows) != 1 || rows[0].Status != messages.StatusUnknown || rows[0].LeaseStatus != messages.StatusUnknown || rows[0].Actor != "" {
		t.Fatalf("row of a stopped lease = %+v, want unknown without an actor", rows)
	}
}

func TestDebug_LeaseRowsFromTheReadModel(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	ids := sortedIDs(2)
	h.provisionReady(ids[0], "docker-small", 2)
	h.provisionFailed(ids[1], "docker-tiny", 1)

	rows := h.debugLeases(messages.DebugLeases{})
	if len(rows) != 2 {
		t.Fatalf("rows = %+v", rows)
	}
	byID := map[string]messages.LeaseRow{}
	for _, r := range rows {
		byID[r.LeaseUUID] = r
	}
	r := byID[ids[0]]
	if r.Status != "ready" || r.LeaseStatus != "ready" || r.Tenant != "fred1tenant" || r.ProviderUUID != "provider-test" ||
		r.Actor != string(leasePath(ids[0])) || r.CreatedAt.IsZero() || r.TerminalBudget.Verdict != "retry" ||
		!reflect.DeepEqual(r.Items, []messages.DebugItem{{SKU: "docker-small", Quantity: 2, ServiceName: "app"}}) ||
		len(r.Services) != 1 || r.Services[0].Name != "app" || len(r.Services[0].Instances) != 0 {
		t.Fatalf("ready row = %+v (instances are the lease actor's to fill)", r)
	}
	f := byID[ids[1]]
	if f.Status != "failed" || f.LeaseStatus != "failed" || f.FailCount != 1 || f.Reason != messages.ReasonContainerStartFailed ||
		f.Message != "container could not be started" || f.Actor != string(leasePath(ids[1])) {
		t.Fatalf("failed row = %+v", f)
	}

	for _, c := range []struct {
		q    messages.DebugLeases
		want []string
	}{
		{messages.DebugLeases{Status: "ready"}, []string{ids[0]}},
		{messages.DebugLeases{Status: "failed"}, []string{ids[1]}},
		{messages.DebugLeases{Status: "provisioning"}, nil},
		{messages.DebugLeases{Tenant: "fred1tenant"}, ids},
		{messages.DebugLeases{Tenant: "someone-else"}, nil},
		{messages.DebugLeases{Lease: ids[1]}, []string{ids[1]}},
		{messages.DebugLeases{Lease: uuid.NewString()}, nil},
	} {
		var got []string
		for _, r := range h.debugLeases(c.q) {
			got = append(got, r.LeaseUUID)
		}
		sortStrings(got)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.q, got, c.want)
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for k := i; k > 0 && s[k] < s[k-1]; k-- {
			s[k], s[k-1] = s[k-1], s[k]
		}
	}
}
