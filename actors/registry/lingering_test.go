package registry

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// TestStateApply_ClosedUseRemembered_SettledForgets_SurvivesASnapshot: a close
// of the live admission remembers what the lease held (tenant, need, when), a
// snapshot keeps it, closed.settled forgets it, and a settle of a lease not
// remembered refuses (startup refuses such a journal rather than guess).
func TestStateApply_ClosedUseRemembered_SettledForgets_SurvivesASnapshot(t *testing.T) {
	a, b := uuid.NewString(), uuid.NewString()
	s := newState()
	evs := []persistence.Event{AdmittedEvent(stateSpec(a, 1), t0), AdmittedEvent(stateSpec(b, 2), t0),
		ClosedEvent(messages.LeaseClosed{Lease: a, Admission: 1}, t0.Add(time.Minute)),
		ClosedEvent(messages.LeaseClosed{Lease: b, Admission: 1}, t0)} // an older admission of b: nothing closed
	mustApply(t, s, evs...)
	want := ClosedUse{At: t0.Add(time.Minute), Tenant: "t", CPUMilli: 100, MemoryMB: 64}
	if c := s.Closed[a]; c == nil || *c != want || len(s.Closed) != 1 {
		t.Fatalf("closed uses %+v, want only %s: %+v", s.Closed, a, want)
	}

	store := openStore(t)
	commitTo(t, store, Stream, evs...)
	data, _ := json.Marshal(s)
	if err := store.SaveSnapshot(Stream, persistence.Snapshot{Seq: 4, V: eventVersion, At: t0, Data: data}); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	loaded, _, err := LoadState(store)
	if err != nil || loaded.Closed[a] == nil || *loaded.Closed[a] != want {
		t.Fatalf("after a snapshot: %+v (%v), want %s remembered", loaded.Closed, err, a)
	}

	if err := s.Apply(closedSettledEvent([]string{a, b}, t0)); err == nil || !strings.Contains(err.Error(), "not a closed lease remembered") {
		t.Fatalf("a settle naming a lease not remembered: %v", err)
	}
	if s.Closed[a] == nil {
		t.Fatal("a refused settle forgot a lease")
	}
	mustApply(t, s, closedSettledEvent([]string{a}, t0.Add(time.Hour)))
	if len(s.Closed) != 0 {
		t.Fatalf("after closed.settled: %+v", s.Closed)
	}
	loaded = newState()
	loaded.Closed = nil
	loaded.repair()
	if loaded.Closed == nil {
		t.Fatal("a snapshot without closed uses (written before them) leaves a nil map")
	}
}

// TestActor_LingeringAfterRegistryRestart_ClosedLeaseStillHoldsThePool: a
// lease closed before the registry restarts still holds its reservation when
// the first pass after the restart lists a container of it, and frees it when
// a pass no longer does.
func TestActor_LingeringAfterRegistryRestart_ClosedLeaseStillHoldsThePool(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	h.provisionReady(id, "docker-small", 1)
	if err := h.deprovision(id); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	h.eventually("closed journaled", func() bool { st, _ := h.journal(); return st.Leases[id] == nil })
	free := h.stats()

	node, _ := h.tree.Dir.Get(regPath)
	restarts := node.Restarts()
	h.tree.Send(regPath, &messages.Crash{})
	h.eventually("registry restarted", func() bool { return node.Restarts() == restarts+1 })
	h.eventually("the new incarnation asked", func() bool { return len(h.reconciler.incarnations()) == 2 })
	h.tree.Send(regPath, messages.Recovered{For: h.asking(), Lingering: []string{id}})
	held := h.stats()
	if held.LingeringMemoryMB != 128 || held.LingeringCPUCores != 0.1 || held.AllocatedMemoryMB != free.AllocatedMemoryMB+128 {
		t.Fatalf("after the restart with its container listed %+v, want its 0.1 cores / 128 MB held over %+v", held, free)
	}
	h.tree.Send(regPath, messages.Recovered{})
	if got := h.stats(); got != free {
		t.Fatalf("once no pass lists it %+v, want %+v", got, free)
	}
	if st, _ := h.journal(); st.Closed[id] == nil {
		t.Fatal("forgotten within the grace: a late container of it would no longer be held")
	}
}
