package registry

import (
	"errors"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// TestActor_SpawnRefused_LeaseHeldUnknownWithItsReservation_RetriedLikeTheStopped:
// when the tree refuses a lease's actor (its name still taken), the Spawn
// effect's executor leaves no lease "respawning" for good: the lease reads
// unknown, keeps its reservation, a deprovision meanwhile is answered "retry
// shortly" (nothing is closed behind its back), and the reconciler's retry of
// stopped leases spawns it once the name is free — it then provisions and
// closes as any lease.
func TestActor_SpawnRefused_LeaseHeldUnknownWithItsReservation_RetriedLikeTheStopped(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	squatter, err := h.tree.System.Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), string(leasePath(id)))
	if err != nil {
		t.Fatalf("take the lease actor's name: %v", err)
	}
	free := h.stats()
	if err := h.admit(leaseRequest(id, "docker-small", 1)); err != nil {
		t.Fatalf("admit: %v", err)
	}
	h.waitStatus(id, messages.StatusUnknown)
	if s := h.stats(); s.AllocatedMemoryMB != free.AllocatedMemoryMB+128 || s.AllocatedCPUCores != free.AllocatedCPUCores+0.1 {
		t.Fatalf("stats %+v while its actor cannot be spawned, want its reservation (0.1 cores, 128 MB) kept over %+v", s, free)
	}
	if err := h.deprovision(id); !errors.Is(err, messages.ErrLifecyclePending) {
		t.Fatalf("deprovision while no actor can own the close: %v, want lifecycle pending (retry shortly)", err)
	}
	h.waitStatus(id, messages.StatusUnknown) // the close's own spawn was refused too: still held, not closed
	if st, _ := h.journal(); st.Leases[id] == nil {
		t.Fatal("the lease was closed in the journal although nothing owned its close")
	}

	if err := h.tree.System.Root.StopFuture(squatter).Wait(); err != nil {
		t.Fatalf("stop the squatter: %v", err)
	}
	h.tree.Send(regPath, messages.RetryStopped{}) // what the reconciler sends after every pass
	h.waitStatus(id, messages.StatusReady)
	if err := h.deprovision(id); err != nil {
		t.Fatalf("deprovision once spawned: %v", err)
	}
	h.eventually("the lease closed", func() bool { st, _ := h.journal(); return st.Leases[id] == nil })
	h.assertPoolInvariant()
}
