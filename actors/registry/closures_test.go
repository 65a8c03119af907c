package registry

// Batched closes (closures.go): the closes of a mass deprovision share journal
// commits, yet every one is journaled, its capacity is released before any
// later message is answered (an admission right behind the closes fits), and a
// close whose lease was re-admitted meanwhile changes nothing.

import (
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
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

	// Re-admitted, then a late close of its first admission: nothing changes.
	again := ids[0]
	h.provisionReady(again, "docker-small", 1)
	stA, before := h.journal()
	h.tree.Send(regPath, messages.LeaseClosed{Lease: again, Admission: stA.Leases[again].Admission - 1})
	if got := h.get(again); got.Err != nil || got.Info.Status != messages.StatusReady {
		t.Fatalf("after a late close of an old admission: %+v", got)
	}
	if _, after := h.journal(); after != before {
		t.Fatalf("a late close of an old admission journaled %d events", after-before)
	}
	h.assertPoolInvariant()
}
