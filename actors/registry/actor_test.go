package registry

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

func TestActor_AdmitRefusedUntilRecovered(t *testing.T) {
	h := newHarness(t, nil)
	h.eventually("RecoverNow asked at start", func() bool { return len(h.reconciler.incarnations()) == 1 })
	if hr := h.health(); hr.Ready || hr.Reason == "" {
		t.Fatalf("health before recovery = %+v, want not ready with a reason", hr)
	}
	id := uuid.NewString()
	assertRefusal(t, h.admit(leaseRequest(id, "docker-small", 1)), messages.ErrUnavailable, "recovering")
	if st, seq := h.journal(); seq != 0 || len(st.Leases) != 0 {
		t.Fatalf("a refused admission was journaled: seq %d, %+v", seq, st.Leases)
	}
	if r := h.get(id); !errors.Is(r.Err, messages.ErrNotFound) {
		t.Fatalf("refused lease is known: %+v", r)
	}
	if _, ok := h.tree.Dir.Get(leasePath(id)); ok {
		t.Fatalf("a lease actor was spawned for a refused admission")
	}
	// Until recovery the ledger is not whole: stats are refused, not guessed.
	assertRefusal(t, h.statsReply().Err, messages.ErrUnavailable, "recovered")

	h.recovered()
	h.assertPoolInvariant()
	h.provisionReady(id, "docker-small", 1)
	h.assertPoolInvariant()
}

func TestActor_AdmitJournalsBeforeReplying(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	req := leaseRequest(id, "chain-small", 3)
	if err := h.admit(req); err != nil {
		t.Fatalf("admit: %v", err)
	}
	// Read the store right after the reply: the admission must already be durable.
	st, seq := h.journal()
	spec := st.Leases[id]
	if spec == nil || spec.Admission != 1 || seq != 1 || st.Admissions != 1 {
		t.Fatalf("journal right after the reply: seq %d, %+v", seq, st)
	}
	evs := h.registryEvents()
	if len(evs) != 1 || evs[0].Type != EvLeaseAdmitted {
		t.Fatalf("registry stream = %+v, want one %s", evs, EvLeaseAdmitted)
	}
	if spec.CallbackURL != req.CallbackURL || spec.Services[0].SKU != "chain-small" ||
		spec.Services[0].Profile != (lease.Profile{CPUCores: 0.1, MemoryMB: 128, DiskMB: 256}) || spec.Instances() != 3 {
		t.Fatalf("journaled spec = %+v", spec)
	}
	info := h.waitStatus(id, messages.StatusReady)
	if info.Quantity != 3 || info.FailCount != 0 || info.LeaseUUID != id || !info.CreatedAt.Equal(spec.AdmittedAt) {
		t.Fatalf("ready info = %+v", info)
	}
	if _, ok := h.tree.Dir.Get(leasePath(id)); !ok {
		t.Fatalf("no lease actor at %s", leasePath(id))
	}
	s := h.stats()
	if s.AllocatedCPUCores != 0.3 || s.AllocatedMemoryMB != 384 || s.AllocatedDiskMB != 768 || s.ActiveContainers != 3 {
		t.Fatalf("stats = %+v, want 3 × docker-small allocated and 3 running", s)
	}
	h.assertPoolInvariant()
}

func TestActor_AdmitOfLiveLease_AlreadyProvisioned(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	if err := h.admit(leaseRequest(id, "docker-small", 1)); err != nil {
		t.Fatalf("admit: %v", err)
	}
	// Before the lease has reported anything, and once it is ready.
	assertRefusal(t, h.admit(leaseRequest(id, "docker-small", 1)), messages.ErrAlreadyProvisioned, "already provisioned")
	h.waitStatus(id, messages.StatusReady)
	before := h.stats()
	assertRefusal(t, h.admit(leaseRequest(id, "docker-tiny", 2)), messages.ErrAlreadyProvisioned, "already provisioned")
	if st, seq := h.journal(); seq != 1 || st.Admissions != 1 || st.Leases[id].Services[0].SKU != "docker-small" {
		t.Fatalf("a refused re-admission changed the journal: seq %d, %+v", seq, st)
	}
	if after := h.stats(); after != before {
		t.Fatalf("a refused re-admission changed the pool: %+v → %+v", before, after)
	}
	h.assertPoolInvariant()
}

func TestActor_FailedLeaseReplaced_KeepsFailCountAndSwapsReservation(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	failed := h.provisionFailed(id, "docker-big", 1)
	if failed.FailCount != 1 {
		t.Fatalf("failed info = %+v, want fail_count 1", failed)
	}
	// A failed lease keeps its reservation until it is replaced or closed.
	if s := h.stats(); s.AllocatedCPUCores != 1.5 || s.AllocatedMemoryMB != 1024 {
		t.Fatalf("stats of a failed lease = %+v, want its 1.5 cores held", s)
	}
	h.assertPoolInvariant()
	assertRefusal(t, h.admit(leaseRequest(uuid.NewString(), "docker-tiny", 3)), messages.ErrInsufficientResources, "pool")

	// The replacement needs 1.8 cores: it fits only with the failed 1.5 counted as freed.
	req := leaseRequest(id, "docker-huge", 1)
	if err := h.admit(req); err != nil {
		t.Fatalf("replacement of a failed lease refused: %v", err)
	}
	s := h.stats()
	if s.AllocatedCPUCores != 1.8 || s.AllocatedMemoryMB != 2048 || s.AllocatedDiskMB != 1024 {
		t.Fatalf("stats right after replacement = %+v, want exactly the new 1.8 cores (swapped, not added)", s)
	}
	st, seq := h.journal()
	if seq != 2 || st.Admissions != 2 || st.Leases[id].Admission != 2 || st.Leases[id].CallbackURL != req.CallbackURL ||
		st.Leases[id].Services[0].SKU != "docker-huge" {
		t.Fatalf("journal after replacement: seq %d, %+v", seq, st.Leases[id])
	}
	h.assertPoolInvariant()
	if r := h.get(id); r.Err != nil || r.Info.FailCount != 1 ||
		(r.Info.Status != messages.StatusProvisioning && r.Info.Status != messages.StatusReady) {
		t.Fatalf("replacing lease reads %+v (err %v), want provisioning with fail_count 1", r.Info, r.Err)
	}
	info := h.waitStatus(id, messages.StatusReady)
	if info.FailCount != 1 || info.Quantity != 1 {
		t.Fatalf("replaced lease = %+v, want fail_count kept at 1", info)
	}
	ls, _, err := lease.Load(h.store, id)
	if err != nil || ls.Status != lease.Ready || ls.Admission != 2 || ls.Generation != 2 || ls.FailCount != 1 {
		t.Fatalf("lease journal after replacement: %+v, %v", ls, err)
	}
	assertRefusal(t, h.admit(leaseRequest(id, "docker-small", 1)), messages.ErrAlreadyProvisioned, "already provisioned")
	h.assertPoolInvariant()
}

// Two provision requests for a failed lease queued back to back: the first replaces
// it; the second finds the lease provisioning again and must get 409, not a second
// admission whose spec (callback URL, operation) the running attempt never started.
func TestActor_BackToBackReplacementsOfFailedLease_SecondIsAlreadyProvisioned(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	h.provisionFailed(id, "docker-small", 1)

	r1, r2 := make(chan error, 1), make(chan error, 1)
	h.tree.Send(regPath, &messages.Admit{Req: leaseRequest(id, "docker-small", 1), Reply: r1})
	h.tree.Send(regPath, &messages.Admit{Req: leaseRequest(id, "docker-small", 1), Reply: r2})
	var errs [2]error
	for i, r := range []chan error{r1, r2} {
		select {
		case errs[i] = <-r:
		case <-time.After(patience):
			t.Fatalf("no reply to admit %d", i+1)
		}
	}
	if errs[0] != nil {
		t.Fatalf("first replacement refused: %v", errs[0])
	}
	h.waitStatus(id, messages.StatusReady)
	if !errors.Is(errs[1], messages.ErrAlreadyProvisioned) {
		st, _ := h.journal()
		ls, _, _ := lease.Load(h.store, id)
		t.Errorf("second request for a lease already being re-provisioned: err = %v, want ErrAlreadyProvisioned "+
			"(registry journal: %d admissions, lease spec at admission %d; the lease's own journal ran admission %d, generation %d)",
			errs[1], st.Admissions, st.Leases[id].Admission, ls.Admission, ls.Generation)
	}
	h.assertPoolInvariant()
}

func TestActor_InsufficientResources_LeavesPoolAndJournalUnchanged(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	ids := sortedIDs(3)
	h.provisionReady(ids[0], "docker-small", 1) // 0.1 of 2 cores
	before, st0, evs0 := h.stats(), h.journalJSON(), len(h.registryEvents())

	// 20 more instances of 0.1 would need 2.1 cores: none of them is admitted.
	assertRefusal(t, h.admit(leaseRequest(ids[1], "docker-small", 20)), messages.ErrInsufficientResources, "pool")
	if after := h.stats(); after != before {
		t.Fatalf("refusal changed the pool: %+v → %+v", before, after)
	}
	if st := h.journalJSON(); st != st0 || len(h.registryEvents()) != evs0 {
		t.Fatalf("refusal changed the journal:\n%s\n%s", st0, st)
	}
	if r := h.get(ids[1]); !errors.Is(r.Err, messages.ErrNotFound) {
		t.Fatalf("refused lease reads %+v", r)
	}
	if _, ok := h.tree.Dir.Get(leasePath(ids[1])); ok {
		t.Fatalf("a lease actor was spawned for a refused admission")
	}
	h.assertPoolInvariant()

	// 19 fill the pool to exactly 2.0 cores (a float sum of twenty 0.1s would not).
	h.provisionReady(ids[1], "docker-small", 19)
	if s := h.stats(); s.AllocatedCPUCores != 2 || s.AvailableCPUCores != 0 || s.ActiveContainers != 20 {
		t.Fatalf("stats = %+v, want exactly 2 cores allocated", s)
	}
	assertRefusal(t, h.admit(leaseRequest(ids[2], "docker-tiny", 1)), messages.ErrInsufficientResources, "pool")
	h.assertPoolInvariant()
}

func TestActor_TenantQuota(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.TenantQuota = Resources{CPUMilli: CPU(0.3)} })
	h.recovered()
	a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
	h.provisionReady(a, "docker-tiny", 1) // 0.2 of the tenant's 0.3
	assertRefusal(t, h.admit(leaseRequest(b, "docker-tiny", 1)), messages.ErrInsufficientResources, "quota")
	other := leaseRequest(c, "docker-tiny", 1)
	other.Tenant = "fred1othertenant"
	if err := h.admit(other); err != nil {
		t.Fatalf("another tenant's lease refused: %v", err)
	}
	if err := h.admit(leaseRequest(b, "docker-small", 1)); err != nil {
		t.Fatalf("0.2 + 0.1 fits the 0.3 quota exactly: %v", err)
	}
	h.waitStatus(b, messages.StatusReady)
	h.waitStatus(c, messages.StatusReady)
	h.assertPoolInvariant()
}

func TestActor_ListProvisions_PagingAndLookup(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	if got := h.list(messages.ListProvisions{}); got.Provisions == nil || len(got.Provisions) != 0 || got.Continue != "" {
		t.Fatalf("empty list = %+v, want a non-nil empty list", got)
	}
	ids := sortedIDs(5)
	for _, id := range []string{ids[3], ids[0], ids[4], ids[2], ids[1]} {
		h.provisionReady(id, "docker-small", 1)
	}
	page := func(limit int, cont string) ([]string, string) {
		r := h.list(messages.ListProvisions{Limit: limit, Continue: cont})
		var got []string
		for _, p := range r.Provisions {
			if p.Status != messages.StatusReady || p.Quantity != 1 {
				t.Fatalf("listed %+v", p)
			}
			got = append(got, p.LeaseUUID)
		}
		return got, r.Continue
	}
	eq := func(a, b []string) bool { return mustJSON(t, a) == mustJSON(t, b) }

	got, cont := page(2, "")
	if !eq(got, ids[:2]) || cont != ids[1] {
		t.Fatalf("page 1 = %v, continue %q", got, cont)
	}
	got, cont = page(2, cont)
	if !eq(got, ids[2:4]) || cont != ids[3] {
		t.Fatalf("page 2 = %v, continue %q", got, cont)
	}
	got, cont = page(2, cont)
	if !eq(got, ids[4:]) || cont != "" {
		t.Fatalf("last page = %v, continue %q", got, cont)
	}
	if got, cont = page(0, ""); !eq(got, ids) || cont != "" {
		t.Fatalf("limit 0 = %v, continue %q, want all", got, cont)
	}
	if got, cont = page(5, ""); !eq(got, ids) || cont != "" {
		t.Fatalf("limit exactly the total = %v, continue %q, want all and no continue", got, cont)
	}
	if got, cont = page(10, ids[4]); len(got) != 0 || cont != "" {
		t.Fatalf("after the last = %v, %q", got, cont)
	}

	// Lookup: in the asked order, unknown leases left out, never paged.
	unknown := uuid.NewString()
	r := h.list(messages.ListProvisions{Leases: []string{ids[3], unknown, ids[0]}, Limit: 1, Continue: ids[4]})
	if len(r.Provisions) != 2 || r.Provisions[0].LeaseUUID != ids[3] || r.Provisions[1].LeaseUUID != ids[0] || r.Continue != "" {
		t.Fatalf("lookup = %+v", r)
	}

	// A closed lease is no longer listed.
	if err := h.deprovision(ids[2]); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	h.eventually("closed lease unlisted", func() bool {
		var got []string
		for _, p := range h.list(messages.ListProvisions{}).Provisions {
			got = append(got, p.LeaseUUID) // the closing lease reads deprovisioning until it is gone
		}
		return eq(got, []string{ids[0], ids[1], ids[3], ids[4]})
	})
	if r := h.list(messages.ListProvisions{Leases: []string{ids[2]}}); len(r.Provisions) != 0 {
		t.Fatalf("lookup of a closed lease = %+v", r)
	}
	h.assertPoolInvariant()
}

func TestActor_GetProvision_UnknownLease_DiagnosticsFallback(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	unknown := uuid.NewString()
	r := h.get(unknown)
	assertRefusal(t, r.Err, messages.ErrNotFound, "not found")

	at := time.Date(2030, 4, 5, 6, 7, 8, 0, time.UTC)
	blob, _ := json.Marshal(lease.Capture{Lease: unknown, OperationID: "op-9", Stamp: lease.Stamp{Generation: 2, At: at},
		Cause: lease.Cause{Reason: messages.ReasonContainerExited, Message: "container app/0 exited with code 3"}, FailCount: 4})
	if err := h.diag.Put(unknown, at, blob); err != nil {
		t.Fatalf("put capture: %v", err)
	}
	r = h.get(unknown)
	if r.Err != nil || r.Info == nil {
		t.Fatalf("get with a stored capture: %+v", r)
	}
	want := messages.ProvisionInfo{LeaseUUID: unknown, Status: messages.StatusFailed, CreatedAt: at, FailCount: 4,
		Reason: messages.ReasonContainerExited, Message: "container app/0 exited with code 3", LifecycleGeneration: 2}
	if mustJSON(t, r.Info) != mustJSON(t, want) {
		t.Fatalf("fallback = %s\nwant       %s", mustJSON(t, r.Info), mustJSON(t, want))
	}
	if l := h.list(messages.ListProvisions{}); len(l.Provisions) != 0 {
		t.Fatalf("a diagnostics-only lease is listed: %+v", l)
	}

	// A failed lease that was then closed reads its last failure from
	// diagnostics; lifecycle_generation is the same observation before and after.
	id := uuid.NewString()
	h.provisionFailed(id, "docker-small", 1)
	live := h.get(id)
	if live.Err != nil || live.Info.LifecycleGeneration != 1 {
		t.Fatalf("failed lease reads %+v, %v; want lifecycle_generation 1", live.Info, live.Err)
	}
	if err := h.deprovision(id); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	h.eventually("closed lease falls back to its capture", func() bool {
		r := h.get(id)
		return r.Err == nil && r.Info.Status == messages.StatusFailed && r.Info.FailCount == 1 && r.Info.TerminalBudget == nil &&
			r.Info.LifecycleGeneration == live.Info.LifecycleGeneration
	})
	h.assertPoolInvariant()
}

func TestActor_DeprovisionOfUnknownLease_RepliesNil(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	if err := h.deprovision(uuid.NewString()); err != nil {
		t.Fatalf("deprovision of an unknown lease = %v, want nil", err)
	}
	assertRefusal(t, h.deprovision("NOT-A-UUID"), messages.ErrBadRequest, "lease_uuid")
	if _, seq := h.journal(); seq != 0 {
		t.Fatalf("deprovision of nothing journaled %d events", seq)
	}
	if got := h.reclaimer.received(); len(got) != 0 {
		t.Fatalf("reclaimer told about %v", got)
	}
	h.assertPoolInvariant()
}

func TestActor_LeaseClosed_ReleasesPoolAndJournalsClosed(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	h.provisionReady(id, "docker-tiny", 2) // 0.4 cores, 128 MB, 2 × 32 MB scratch
	if s := h.stats(); s.AllocatedCPUCores != 0.4 || s.AllocatedMemoryMB != 128 || s.AllocatedDiskMB != 64 {
		t.Fatalf("stats = %+v", s)
	}
	if err := h.deprovision(id); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	h.eventually("lease.closed journaled", func() bool { st, _ := h.journal(); return st.Leases[id] == nil })
	var closed []leaseClosed
	for _, r := range h.registryEvents() {
		if r.Type == EvLeaseClosed {
			var c leaseClosed
			if err := json.Unmarshal(r.Data, &c); err != nil {
				t.Fatalf("closed event: %v", err)
			}
			closed = append(closed, c)
		}
	}
	if len(closed) != 1 || closed[0] != (leaseClosed{Lease: id, Admission: 1}) {
		t.Fatalf("closed events = %+v, want one for admission 1", closed)
	}
	if s := h.stats(); s.AllocatedCPUCores != 0 || s.AllocatedMemoryMB != 0 || s.AllocatedDiskMB != 0 || s.ActiveContainers != 0 {
		t.Fatalf("pool after close = %+v, want empty", s)
	}
	h.assertPoolInvariant()
	h.eventually("reclaimer told", func() bool {
		got := h.reclaimer.received()
		return len(got) == 1 && got[0].(*messages.LeaseGone).Lease == id
	})
	h.eventually("lease actor stopped", func() bool { _, ok := h.tree.Dir.Get(leasePath(id)); return !ok })
	if r := h.get(id); !errors.Is(r.Err, messages.ErrNotFound) {
		t.Fatalf("closed lease reads %+v", r)
	}
	ls, _, err := lease.Load(h.store, id)
	if err != nil || ls.Status != lease.Closed || ls.ClosedAdmission != 1 {
		t.Fatalf("lease journal: %+v, %v", ls, err)
	}
	left, err := h.eng.ListManaged(context.Background())
	if err != nil || len(left) != 0 {
		t.Fatalf("containers left: %v, %v", left, err)
	}
	if err := h.deprovision(id); err != nil {
		t.Fatalf("repeated deprovision = %v, want nil", err)
	}

	// The UUID is never admitted again (issue 18: it was, under a new admission
	// number): 409 already_provisioned, nothing journaled, nothing reserved —
	// also once its actor is gone and after a registry restart.
	_, before := h.journal()
	if err := h.admit(leaseRequest(id, "docker-small", 1)); !errors.Is(err, messages.ErrAlreadyProvisioned) {
		t.Fatalf("provision of the closed UUID = %v, want already provisioned", err)
	}
	h.tree.Send(regPath, &messages.Crash{})
	h.recovered()
	if err := h.admit(leaseRequest(id, "docker-small", 1)); !errors.Is(err, messages.ErrAlreadyProvisioned) {
		t.Fatalf("provision of the closed UUID after a registry restart = %v, want already provisioned", err)
	}
	if _, after := h.journal(); after != before {
		t.Fatalf("refused provisions of a closed UUID journaled %d events", after-before)
	}
	if s := h.stats(); s.AllocatedCPUCores != 0 {
		t.Fatalf("pool after the refused provisions = %+v", s)
	}
	h.assertPoolInvariant()
}

func TestActor_RegistryCrash_RestartsInPlaceAndRebuilds(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.SnapshotEvery = 2 })
	h.recovered()
	ids := sortedIDs(4)
	h.provisionReady(ids[0], "docker-small", 2)
	h.provisionReady(ids[1], "docker-tiny", 1)
	h.provisionFailed(ids[2], "docker-big", 1)
	h.provisionReady(ids[3], "chain-small", 1)
	if err := h.deprovision(ids[3]); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	h.eventually("closed journaled", func() bool { st, _ := h.journal(); return st.Leases[ids[3]] == nil })
	h.eventually("closed lease actor gone", func() bool { _, ok := h.tree.Dir.Get(leasePath(ids[3])); return !ok })
	if l, err := h.store.Load(Stream); err != nil || l.Snapshot == nil {
		t.Fatalf("registry stream has no snapshot to rebuild from: %+v, %v", l, err)
	}

	stats0 := h.stats()
	list0 := mustJSON(t, h.list(messages.ListProvisions{}))
	st0, seq0 := h.journal()
	node, ok := h.tree.Dir.Get(regPath)
	if !ok {
		t.Fatalf("no registry node")
	}
	restarts0 := node.Restarts()
	leaseNodes := map[string]*supervisors.Node{}
	for _, id := range ids[:3] {
		n, ok := h.tree.Dir.Get(leasePath(id))
		if !ok {
			t.Fatalf("no lease actor for %s", id)
		}
		leaseNodes[id] = n
	}

	h.tree.Send(regPath, &messages.Crash{})
	h.eventually("registry restarted by its supervisor", func() bool { return node.Restarts() == restarts0+1 })
	if n, ok := h.tree.Dir.Get(regPath); !ok || n != node {
		t.Fatalf("registry was replaced, not restarted at the same path")
	}
	h.eventually("RecoverNow asked again", func() bool { return len(h.reconciler.incarnations()) == 2 })
	if hr := h.health(); hr.Ready {
		t.Fatalf("restarted registry reads ready before recovery")
	}
	assertRefusal(t, h.admit(leaseRequest(uuid.NewString(), "docker-small", 1)), messages.ErrUnavailable, "recovering")
	assertRefusal(t, h.statsReply().Err, messages.ErrUnavailable, "recovered")
	h.recovered()

	for _, id := range ids[:3] {
		h.eventually("lease "+id+" respawned", func() bool {
			n, ok := h.tree.Dir.Get(leasePath(id))
			return ok && n != leaseNodes[id]
		})
	}
	if _, ok := h.tree.Dir.Get(leasePath(ids[3])); ok {
		t.Fatalf("closed lease respawned")
	}
	h.eventually("provision list rebuilt identical", func() bool {
		return mustJSON(t, h.list(messages.ListProvisions{})) == list0
	})
	h.eventually("pool rebuilt identical", func() bool { return h.stats() == stats0 })
	if st, seq := h.journal(); seq != seq0 || mustJSON(t, st) != mustJSON(t, st0) {
		t.Fatalf("restart changed the journal")
	}
	h.assertPoolInvariant()

	// Admission numbering continues where it stopped.
	id := uuid.NewString()
	h.provisionReady(id, "docker-small", 1)
	if st, _ := h.journal(); st.Leases[id].Admission != st0.Admissions+1 {
		t.Fatalf("admission after restart = %d, want %d", st.Leases[id].Admission, st0.Admissions+1)
	}
	h.assertPoolInvariant()
}

// A lease actor its supervisor restarts right after the re-provision of its
// failed lease is rebuilt by its producer: it must run the new admission (the
// lease keeps the spec the registry handed it, and so does its producer), not
// the one it was spawned with.
func TestActor_LeaseRestartedAfterReprovision_RunsTheNewAdmission(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	h.provisionFailed(id, "docker-small", 1)
	node, ok := h.tree.Dir.Get(leasePath(id))
	if !ok {
		t.Fatal("no lease actor")
	}
	req := leaseRequest(id, "docker-tiny", 2)
	if err := h.admit(req); err != nil {
		t.Fatalf("replacement refused: %v", err)
	}
	// The registry sent the ReprovisionCommand before answering: the crash
	// lands behind it, once the lease has taken the new spec.
	h.tree.Send(leasePath(id), &messages.Crash{})
	h.eventually("the lease actor restarted", func() bool { return node.Restarts() == 1 })
	info := h.waitStatus(id, messages.StatusReady)
	if info.Quantity != 2 || info.FailCount != 1 || info.Items[0].SKU != "docker-tiny" {
		t.Fatalf("after the restart the lease runs %+v, want the new admission's 2 × docker-tiny", info)
	}
	ls, _, err := lease.Load(h.store, id)
	if err != nil || ls.Status != lease.Ready || ls.Admission != 2 || len(ls.Containers) != 2 {
		t.Fatalf("lease journal after the restart: %+v, %v", ls, err)
	}
	rows, err := h.store.OutboxOf(id)
	if err != nil {
		t.Fatal(err)
	}
	ready := false
	for _, r := range rows {
		ready = ready || r.Row.URL == req.CallbackURL && strings.Contains(string(r.Row.Body), `"status":"success"`)
	}
	if !ready {
		t.Fatalf("no ready callback to the new admission's %s in %+v", req.CallbackURL, rows)
	}
	h.assertPoolInvariant()
}

// TestActor_OnlyAPassForThisIncarnation_MakesItReady: a Recovered of a pass
// that began before this incarnation asked (For another, or none) is only a
// pass — it vouches for accounting done against the predecessor's actors.
func TestActor_OnlyAPassForThisIncarnation_MakesItReady(t *testing.T) {
	h := newHarness(t, nil)
	mine := h.asking()
	for _, other := range []uint64{0, mine + 1000} {
		h.tree.Send(regPath, messages.Recovered{For: other})
		if hr := h.health(); hr.Ready {
			t.Fatalf("ready after a Recovered for incarnation %d (this one is %d)", other, mine)
		}
	}
	h.tree.Send(regPath, messages.Recovered{For: mine})
	if hr := h.health(); !hr.Ready {
		t.Fatalf("not ready after the Recovered for this incarnation: %+v", hr)
	}
}

// TestActor_UnansweredRecoveryAsk_IsAskedAgainUntilAnswered: a RecoverNow lost
// (the reconciler between incarnations) is asked again every second, the wait
// shown on berth_actor_awaiting_seconds; once answered the asking stops.
func TestActor_UnansweredRecoveryAsk_IsAskedAgainUntilAnswered(t *testing.T) {
	h := newHarness(t, nil)
	mine := h.asking()
	asks := func() int {
		n := 0
		for _, m := range h.reconciler.received() {
			if r, ok := m.(messages.RecoverNow); ok && r.For == mine {
				n++
			}
		}
		return n
	}
	h.eventually("asked three times", func() bool { return asks() >= 3 })
	if h.tree.Awaits.Oldest("registry", awaitsRecovery) < time.Second {
		t.Fatalf("the wait for the recovery pass is not shown")
	}
	h.recovered()
	if h.tree.Awaits.Oldest("registry", awaitsRecovery) != 0 {
		t.Fatalf("the wait is still shown once answered")
	}
	n := asks()
	time.Sleep(2500 * time.Millisecond)
	if asks() != n {
		t.Fatalf("still asking once ready: %d asks, then %d", n, asks())
	}
}
