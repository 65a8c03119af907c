package registry

// Batched admission (batches.go): a burst of concurrent Admits shares journal
// commits, yet every outcome is what serial admission would give — one admission
// number each, no lease twice, no pool overcommit, a later message of any kind
// sees every earlier admission, and a failed commit promises nothing.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// admitAll sends every request at once and returns each one's answer.
func (h *harness) admitAll(reqs []messages.ProvisionRequest) []error {
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, req := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			err, askErr := supervisors.Ask(context.Background(), h.tree, regPath, 30*time.Second,
				func(r chan<- error) any { return &messages.Admit{Req: req, Reply: r} })
			errs[i] = errors.Join(askErr, err)
		}()
	}
	close(start)
	wg.Wait()
	return errs
}

func TestAdmission_ConcurrentBurst_SharesCommitsOneAdmissionNumberEach(t *testing.T) {
	h := newHarness(t, func(s *Settings) { s.Totals = Resources{CPUMilli: CPU(64), MemoryMB: 1 << 20, DiskMB: 1 << 20} })
	h.recovered()
	const n = 100
	var reqs []messages.ProvisionRequest
	for range n {
		reqs = append(reqs, leaseRequest(uuid.NewString(), "docker-small", 1))
	}
	for i, err := range h.admitAll(reqs) {
		if err != nil {
			t.Fatalf("admit %d: %v", i, err)
		}
	}
	st, _ := h.journal()
	var numbers []uint64
	for _, req := range reqs {
		spec := st.Leases[req.LeaseUUID]
		if spec == nil {
			t.Fatalf("lease %s admitted but not journaled", req.LeaseUUID)
		}
		numbers = append(numbers, spec.Admission)
	}
	slices.Sort(numbers)
	for i, a := range numbers {
		if a != uint64(i+1) {
			t.Fatalf("admission numbers %v, want 1..%d once each", numbers, n)
		}
	}
	sizes := h.batches.get()
	total := 0
	for _, s := range sizes {
		total += s
	}
	if total != n || len(sizes) >= n {
		t.Fatalf("%d commits carried %d admissions (%v): a burst must share commits", len(sizes), total, sizes)
	}
	t.Logf("%d concurrent admissions in %d commits: %v", n, len(sizes), sizes)
	if s := h.stats(); s.AllocatedMemoryMB != 128*n {
		t.Fatalf("stats after the burst = %+v", s)
	}
	h.assertPoolInvariant()
}

func TestAdmission_SameLeaseTwiceInOneBurst_AdmittedOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	var reqs []messages.ProvisionRequest
	for range 10 {
		reqs = append(reqs, leaseRequest(id, "docker-small", 1))
	}
	admitted := 0
	for _, err := range h.admitAll(reqs) {
		switch {
		case err == nil:
			admitted++
		case !errors.Is(err, messages.ErrAlreadyProvisioned):
			t.Fatalf("admit: %v", err)
		}
	}
	if admitted != 1 {
		t.Fatalf("%d of 10 identical requests admitted, want 1", admitted)
	}
	if _, seq := h.journal(); seq != 1 {
		t.Fatalf("%d registry events journaled, want 1", seq)
	}
	h.assertPoolInvariant()
}

func TestAdmission_BurstBeyondThePool_ExactlyWhatFits(t *testing.T) {
	h := newHarness(t, nil) // 2 cores: twenty docker-small leases
	h.recovered()
	var reqs []messages.ProvisionRequest
	for range 40 {
		reqs = append(reqs, leaseRequest(uuid.NewString(), "docker-small", 1))
	}
	admitted := 0
	for _, err := range h.admitAll(reqs) {
		switch {
		case err == nil:
			admitted++
		case !errors.Is(err, messages.ErrInsufficientResources):
			t.Fatalf("admit: %v", err)
		}
	}
	if admitted != 20 {
		t.Fatalf("%d of 40 admitted, want the 20 that fit", admitted)
	}
	if s := h.stats(); s.AllocatedCPUCores != 2 {
		t.Fatalf("stats = %+v, want the pool full", s)
	}
	h.assertPoolInvariant()
}

// A deprovision queued right behind an admission sees it: it closes the lease
// instead of answering "unknown, gone" for a lease that then lives on.
func TestAdmission_DeprovisionRightBehind_SeesTheAdmission(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	id := uuid.NewString()
	admitted := make(chan error, 1)
	h.tree.Send(regPath, &messages.Admit{Req: leaseRequest(id, "docker-small", 1), Reply: admitted})
	closed := make(chan error, 1)
	h.tree.Send(regPath, &messages.Deprovision{Lease: id, Reply: closed})
	if err := <-admitted; err != nil {
		t.Fatalf("admit: %v", err)
	}
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("deprovision: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("deprovision not answered")
	}
	h.eventually("lease closed", func() bool { st, _ := h.journal(); return st.Leases[id] == nil })
	if s := h.stats(); s.AllocatedMemoryMB != 0 {
		t.Fatalf("stats after the close = %+v", s)
	}
}

// A commit that fails gives every reservation of its batch back and admits none.
func TestAdmission_CommitFails_BatchRefusedPoolUntouched(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	before := h.stats()
	if err := h.store.Close(); err != nil {
		t.Fatal(err)
	}
	var reqs []messages.ProvisionRequest
	for range 10 {
		reqs = append(reqs, leaseRequest(uuid.NewString(), "docker-small", 1))
	}
	for i, err := range h.admitAll(reqs) {
		if !errors.Is(err, messages.ErrUnavailable) {
			t.Fatalf("admit %d with the store closed: %v, want unavailable", i, err)
		}
	}
	if after := h.stats(); after != before {
		t.Fatalf("pool after refused admissions = %+v, want %+v", after, before)
	}
	for _, req := range reqs {
		if r := h.get(req.LeaseUUID); !errors.Is(r.Err, messages.ErrNotFound) {
			t.Fatalf("refused lease %s reads %+v", req.LeaseUUID, r)
		}
	}
}

// Every admission queued marks the burst its provisions' workers wait out.
func TestAdmission_MarksTheBurstForTheWorkers(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	if !h.quiet.LastMark().IsZero() {
		t.Fatal("marked before any admission")
	}
	before := time.Now()
	if err := h.admit(leaseRequest(uuid.NewString(), "docker-small", 1)); err != nil {
		t.Fatal(err)
	}
	if at := h.quiet.LastMark(); at.Before(before) {
		t.Fatalf("last mark %v, before the admission at %v", at, before)
	}
}

// A commit the store fails (supervisors.FaultyStore) gives every reservation of
// its batch back — a replaced failed lease's too — and answers each "state
// store unavailable": nothing is half applied in the directory, the pool or the
// journal, and once healed the failed lease is replaced under the next number.
func TestAdmission_FaultyStore_FailedCommitHalfAppliesNothing(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	failed := uuid.NewString()
	h.provisionFailed(failed, "docker-small", 1)
	stats0, journal0, list0 := h.stats(), h.journalJSON(), mustJSON(t, h.list(messages.ListProvisions{}))
	h.faulty.FailCommits(func(w persistence.Write) bool { return slices.Contains(supervisors.Streams(w), Stream) }, nil)
	reqs := []messages.ProvisionRequest{leaseRequest(failed, "docker-tiny", 2)}
	for range 9 {
		reqs = append(reqs, leaseRequest(uuid.NewString(), "docker-small", 1))
	}
	for _, err := range h.admitAll(reqs) {
		assertRefusal(t, err, messages.ErrUnavailable, "state store unavailable")
	}
	if h.faulty.Failed() == 0 {
		t.Fatal("no commit was failed")
	}
	if s := h.stats(); s != stats0 {
		t.Fatalf("pool after the failed commit %+v, want %+v", s, stats0)
	}
	if j := h.journalJSON(); j != journal0 {
		t.Fatalf("journal after the failed commit:\n%s\nwant\n%s", j, journal0)
	}
	if l := mustJSON(t, h.list(messages.ListProvisions{})); l != list0 {
		t.Fatalf("directory after the failed commit:\n%s\nwant\n%s", l, list0)
	}
	for _, req := range reqs[1:] {
		if _, ok := h.tree.Dir.Get(leasePath(req.LeaseUUID)); ok {
			t.Fatalf("a lease actor was spawned for %s", req.LeaseUUID)
		}
	}
	h.faulty.Heal()
	if err := h.admit(leaseRequest(failed, "docker-tiny", 2)); err != nil {
		t.Fatalf("the failed lease is no longer replaceable: %v", err)
	}
	if st, _ := h.journal(); st.Leases[failed].Admission != 2 {
		t.Fatalf("the replacement was admitted as %d, want 2", st.Leases[failed].Admission)
	}
	if info := h.waitStatus(failed, messages.StatusReady); info.Quantity != 2 || info.FailCount != 1 {
		t.Fatalf("replaced lease %+v", info)
	}
	h.assertPoolInvariant()
}

// givenUpTicket is a ticket whose asker already answered an error.
func givenUpTicket() *messages.Ticket {
	tk := messages.NewTicket(time.Now().Add(time.Hour))
	tk.Drop()
	return tk
}

// TestAdmission_GivenUpByItsAsker_NeverAdmitted: an Admit that reaches the
// registry after its asker answered 503 (the registry restarting with it in its
// mailbox, the facade's timeout) is not decided — nothing journaled, nothing
// reserved, no actor — and the same UUID is admitted when asked again: it was
// never a lease here.
func TestAdmission_GivenUpByItsAsker_NeverAdmitted(t *testing.T) {
	h := newHarness(t, nil)
	h.recovered()
	free := h.stats()
	id := uuid.NewString()
	reply := make(chan error, 1)
	h.tree.Send(regPath, &messages.Admit{Req: leaseRequest(id, "docker-small", 1), Reply: reply, Ticket: givenUpTicket()})
	if got := h.stats(); got != free { // stats is behind the Admit in the mailbox
		t.Fatalf("pool %+v after a given-up admission, want %+v", got, free)
	}
	if st, seq := h.journal(); seq != 0 || st.Leases[id] != nil {
		t.Fatalf("a given-up admission was journaled: seq %d", seq)
	}
	if _, ok := h.tree.Dir.Get(leasePath(id)); ok {
		t.Fatal("a lease actor was spawned for a given-up admission")
	}
	h.provisionReady(id, "docker-small", 1)
}

// TestTakeTickets_GivenUpWhileQueued_LeftOutOfTheCommit: an admission whose
// asker gave up while it waited in the batch is left out of the commit; the
// rest are taken — their askers then wait for the commit's answer.
func TestTakeTickets_GivenUpWhileQueued_LeftOutOfTheCommit(t *testing.T) {
	open := messages.NewTicket(time.Now().Add(time.Hour))
	late := messages.NewTicket(time.Now().Add(time.Hour))
	expired := messages.NewTicket(time.Now().Add(-time.Second))
	items := []admission{{ticket: open}, {ticket: givenUpTicket()}, {ticket: nil}, {ticket: late}, {ticket: expired}}
	late.Drop() // its asker's timer fired while the batch waited
	taken, dropped := takeTickets(items)
	if len(taken) != 2 || taken[0].ticket != open || taken[1].ticket != nil || len(dropped) != 3 {
		t.Fatalf("taken %d, dropped %d; want the open and the unticketed taken, three dropped", len(taken), len(dropped))
	}
	if open.Drop() {
		t.Fatal("a taken ticket could still be dropped: its asker would answer 503 for a committed admission")
	}
}
