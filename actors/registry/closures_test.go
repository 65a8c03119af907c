package registry

// Batched closes (batches.go): the closes of a mass deprovision share journal
// commits, yet every one is journaled, its capacity is released before any
// later message is answered (an admission right behind the closes fits), and a
// close whose lease was re-admitted meanwhile changes nothing.

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

func TestClosures_MassClose_SharesCommits_AdmissionRightBehindFits(t *testing.T) {
	h := newHarness(t, nil) // 2 cores: twenty docker-small leases fill the pool
	h.recovered()
	const n = 20
	ids := make([]string, n)
	admissions := map[string]uint64{}
	for i := range ids {
		ids[i] = uuid.NewString()
		h.provisionReady(ids[i], "docker-small", 1)
	}
	st0, _ := h.journal()
	for _, id := range ids {
		admissions[id] = st0.Leases[id].Admission
	}
	if s := h.stats(); s.AllocatedCPUCores != 2 {
		t.Fatalf("stats = %+v, want the pool full", s)
	}

	// The leases tell their closes as a mass close's actors do, all at once
	// (in a real close each follows its own teardown: sent here directly, the
	// batching is certain to be exercised).
	// Each close is preceded by a report of the next lease, as a mass close
	// interleaves them: a report of a lease not in the batch does not commit it.
	infos := map[string]messages.ProvisionInfo{}
	for _, id := range ids {
		infos[id] = *h.get(id).Info
	}
	for i, id := range ids {
		if i+1 < n {
			next := ids[i+1]
			h.tree.Send(regPath, messages.LeaseReport{Lease: next, Admission: admissions[next], Status: string(lease.Ready), Info: infos[next], Running: 1})
		}
		h.tree.Send(regPath, messages.LeaseClosed{Lease: id, Admission: admissions[id]})
	}
	// Right behind them: a full pool's worth of new leases. Each must see the
	// released capacity.
	var reqs []messages.ProvisionRequest
	for range n {
		reqs = append(reqs, leaseRequest(uuid.NewString(), "docker-small", 1))
	}
	for i, err := range h.admitAll(reqs) {
		if err != nil {
			t.Fatalf("admission %d behind the closes: %v", i, err)
		}
	}
	st, _ := h.journal()
	for _, id := range ids {
		if st.Leases[id] != nil {
			t.Fatalf("lease %s: close not journaled", id)
		}
	}
	sizes := h.closures.get()
	total := 0
	for _, s := range sizes {
		total += s
	}
	// Sent at once, they reach the registry within a commit or two.
	if total != n || len(sizes) > n/4 {
		t.Fatalf("%d commits carried %d closes (%v): a mass close must share commits", len(sizes), total, sizes)
	}
	t.Logf("%d closes in %d commits: %v", n, len(sizes), sizes)
	h.assertPoolInvariant()
}

func TestClosures_RealDeprovisions_AllJournaled_CloseOfAnOldAdmissionIgnored(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	const n = 10
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
		h.provisionReady(ids[i], "docker-small", 1)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, id := range ids {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = h.deprovision(id) }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	h.eventually("every close journaled", func() bool {
		st, _ := h.journal()
		for _, id := range ids {
			if st.Leases[id] != nil {
				return false
			}
		}
		return true
	})
	if s := h.stats(); s.AllocatedCPUCores != 0 {
		t.Fatalf("stats after the closes = %+v", s)
	}

	// A late close of an admission the registry no longer holds changes nothing
	// (a closed UUID is never admitted again, so no newer admission stands in
	// its place: issue 18).
	_, before := h.journal()
	h.tree.Send(regPath, messages.LeaseClosed{Lease: ids[0], Admission: 1})
	if got := h.get(ids[0]); !errors.Is(got.Err, messages.ErrNotFound) {
		t.Fatalf("after a late close: %+v", got)
	}
	if _, after := h.journal(); after != before {
		t.Fatalf("a late close journaled %d events", after-before)
	}
	h.assertPoolInvariant()
}

// A close commit the store fails (supervisors.FaultyStore) leaves the lease
// unrecorded as closed: live in the journal, its reservation held, listed, its
// actor running, the cleanup passes not told. Once healed, the lease tells its
// close again when its actor next starts, and the close is journaled.
func TestClosures_FaultyStore_FailedCommitLeavesTheLeaseUnrecorded(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	h.provisionReady(id, "docker-small", 1)
	stats0, journal0 := h.stats(), h.journalJSON()
	node, _ := h.tree.Dir.Get(leasePath(id))
	h.faulty.FailCommits(func(w persistence.Write) bool { return slices.Contains(supervisors.Streams(w), Stream) }, nil)
	if err := h.deprovision(id); err != nil {
		t.Fatalf("deprovision: %v", err) // the lease's own journal is healthy: it closed
	}
	h.eventually("the registry's close commit failed", func() bool { return h.faulty.Failed() > 0 })
	if j := h.journalJSON(); j != journal0 {
		t.Fatalf("journal after the failed close:\n%s\nwant\n%s", j, journal0)
	}
	if s := h.stats(); s.AllocatedCPUCores != stats0.AllocatedCPUCores || s.AllocatedDiskMB != stats0.AllocatedDiskMB {
		t.Fatalf("pool after the failed close %+v, want its reservation held (%+v)", s, stats0)
	}
	if r := h.get(id); r.Err != nil || r.Info.Status != messages.StatusDeprovisioning {
		t.Fatalf("after the failed close the lease reads %+v, %v", r.Info, r.Err)
	}
	if n, ok := h.tree.Dir.Get(leasePath(id)); !ok || n != node {
		t.Fatal("the lease actor was stopped though its close is not recorded")
	}
	if got := h.reclaimer.received(); len(got) != 0 {
		t.Fatalf("the reclaimer was told %v", got)
	}
	h.faulty.Heal()
	h.tree.Send(leasePath(id), &messages.Crash{})
	h.eventually("the close journaled", func() bool { st, _ := h.journal(); return st.Leases[id] == nil })
	h.eventually("the lease actor stopped", func() bool { _, ok := h.tree.Dir.Get(leasePath(id)); return !ok })
	h.assertPoolInvariant()
}
