package reaper

// The reaper in a real supervision tree, against a stub registry that answers
// sweeps with fixed decisions and the fake volume root: it destroys exactly the
// reaping records' volumes, hands a busy one to volumehold, never touches a
// volume nothing explains (it counts it), prunes an orphaned record only after
// the configured consecutive sweeps, and a sweep that cannot list the root
// prunes nothing.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

const (
	regPath  = supervisors.RootPath + "/registry"
	holdPath = supervisors.RootPath + "/volumehold"
	selfPath = supervisors.RootPath + "/reaper"
)

// stubRegistry answers every sweep with reply and records what the reaper tells it.
type stubRegistry struct {
	mu       sync.Mutex
	reply    messages.RetentionSweepReply
	sweeps   int
	reaped   []string
	orphaned []string
	held     []string
}

func (s *stubRegistry) Receive(c actor.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m := c.Message().(type) {
	case *messages.RetentionSweep:
		s.sweeps++
		m.Reply <- s.reply
	case *messages.RetentionReaped:
		s.reaped = append(s.reaped, m.Lease)
	case *messages.RetentionOrphaned:
		s.orphaned = append(s.orphaned, m.Lease)
	case *messages.HoldVolume:
		s.held = append(s.held, m.Name)
	case barrier:
		close(m)
	}
}

// barrier is closed by a stub when it reaches the message: the pass's Tells to
// the stub were enqueued before the pass finished, so once the barrier is
// through, they have been handled.
type barrier chan struct{}

func (s *stubRegistry) set(rep messages.RetentionSweepReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reply = rep
}

func (s *stubRegistry) snapshot() (reaped, orphaned, held []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reaped...), append([]string(nil), s.orphaned...), append([]string(nil), s.held...)
}

type harness struct {
	t        *testing.T
	tree     *supervisors.Tree
	vols     *fake.Volumes
	reg      *stubRegistry
	holdStub *stubRegistry // stands for volumehold: records HoldVolume
	m        *Metrics
}

func newHarness(t *testing.T, confirmations int, initial messages.RetentionSweepReply) *harness {
	t.Helper()
	h := &harness{t: t, vols: fake.NewVolumes("/volumes"), reg: &stubRegistry{reply: initial}, holdStub: &stubRegistry{}}
	h.m = NewMetrics(prometheus.NewRegistry())
	hold := h.holdStub
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			deps := &Deps{Env: supervisors.Env{Tree: tree, Log: zerolog.Nop(), Now: time.Now}, Volumes: h.vols, Metrics: h.m,
				Settings: &Settings{Interval: time.Hour, OrphanConfirmations: confirmations, PassTimeout: 10 * time.Second,
					RegistryPath: regPath, VolumeHoldPath: holdPath}}
			return []supervisors.Spec{
				{Name: "registry", Kind: "stub", Producer: func() actor.Actor { return h.reg }},
				{Name: "volumehold", Kind: "stub", Producer: func() actor.Actor { return hold }},
				{Name: "reaper", Kind: "reaper", Producer: New(deps)},
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.tree = tree
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tree.Stop(ctx)
	})
	h.waitPasses(1) // the pass at start
	return h
}

// sweep runs one more pass and waits for it to finish.
func (h *harness) sweep() {
	h.t.Helper()
	n := h.passes()
	h.tree.Send(selfPath, messages.ReapNow{})
	h.waitPasses(n + 1)
	for _, path := range []messages.Address{regPath, holdPath} {
		b := make(barrier)
		h.tree.Send(path, b)
		select {
		case <-b:
		case <-time.After(10 * time.Second):
			h.t.Fatalf("%s never reached the barrier", path)
		}
	}
}

func (h *harness) passes() int {
	return int(testutil.ToFloat64(h.m.sweeps.WithLabelValues("ok")) + testutil.ToFloat64(h.m.sweeps.WithLabelValues("error")))
}

func (h *harness) waitPasses(n int) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.passes() < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d sweeps finished, want %d", h.passes(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func record(lease string, names ...string) messages.RetentionRecord {
	r := messages.RetentionRecord{Lease: lease}
	for _, n := range names {
		r.Volumes = append(r.Volumes, messages.RetainedVolume{Name: n})
	}
	return r
}

func ensure(t *testing.T, v *fake.Volumes, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := v.Ensure(context.Background(), n, 64, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReaper_DestroysExactlyTheReapingVolumes_BusyHeld_UnaccountedCountedNeverTouched(t *testing.T) {
	const (
		gone, busy, kept = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222", "33333333-3333-4333-8333-333333333333"
		live             = "44444444-4444-4444-8444-444444444444"
	)
	h := newHarness(t, 3, messages.RetentionSweepReply{})
	goneVol, busyVol := messages.RetainedVolumeName(gone, "app", 0), messages.RetainedVolumeName(busy, "app", 0)
	keptVol, liveVol := messages.RetainedVolumeName(kept, "app", 0), messages.VolumeName(live, "app", 0)
	stray := messages.VolumeName("55555555-5555-4555-8555-555555555555", "db", 1) // nothing explains it
	ensure(t, h.vols, goneVol, busyVol, keptVol, liveVol, stray)
	h.vols.SetBusy(busyVol, -1)
	h.reg.set(messages.RetentionSweepReply{
		Reaping: []messages.RetentionRecord{record(gone, goneVol), record(busy, busyVol)},
		Active:  []messages.RetentionRecord{record(kept, keptVol)},
		Live:    []string{liveVol},
	})
	h.sweep()

	want := map[string]bool{busyVol: true, keptVol: true, liveVol: true, stray: true}
	got := h.vols.Names()
	if len(got) != len(want) {
		t.Fatalf("volumes %v, want exactly %v", got, want)
	}
	for _, n := range got {
		if !want[n] {
			t.Fatalf("volumes %v, want exactly %v", got, want)
		}
	}
	reaped, orphaned, _ := h.reg.snapshot()
	if len(reaped) != 1 || reaped[0] != gone || len(orphaned) != 0 {
		t.Fatalf("reaped %v orphaned %v: only the record whose volumes are all gone is reaped", reaped, orphaned)
	}
	if _, _, held := h.holdStub.snapshot(); len(held) != 1 || held[0] != busyVol {
		t.Fatalf("held %v, want the busy %s", held, busyVol)
	}
	if n := testutil.ToFloat64(h.m.unaccounted); n != 1 {
		t.Fatalf("berth_unaccounted_volumes %v, want 1 (the stray)", n)
	}
}

func TestReaper_OrphanPrunedAfterConsecutiveSweeps_ListFailureSkips_ReappearanceResets(t *testing.T) {
	const orphan = "66666666-6666-4666-8666-666666666666"
	vol := messages.RetainedVolumeName(orphan, "app", 0)
	h := newHarness(t, 3, messages.RetentionSweepReply{Active: []messages.RetentionRecord{record(orphan, vol)}})
	// The pass at start saw it missing once; a second sweep makes two.
	h.sweep()
	// The root cannot be listed: nothing is pruned, the count does not move.
	h.vols.SetListDown(true)
	h.sweep()
	h.sweep()
	if _, orphaned, _ := h.reg.snapshot(); len(orphaned) != 0 {
		t.Fatalf("pruned %v while the root could not be listed", orphaned)
	}
	if n := testutil.ToFloat64(h.m.sweeps.WithLabelValues("error")); n != 2 {
		t.Fatalf("failed sweeps %v, want 2", n)
	}
	h.vols.SetListDown(false)
	// The volume reappears: the count starts over.
	ensure(t, h.vols, vol)
	h.sweep()
	h.vols.Remove(vol)
	h.sweep()
	h.sweep()
	if _, orphaned, _ := h.reg.snapshot(); len(orphaned) != 0 {
		t.Fatalf("pruned %v after two misses since the volume was last seen", orphaned)
	}
	h.sweep()
	if _, orphaned, _ := h.reg.snapshot(); len(orphaned) != 1 || orphaned[0] != orphan {
		t.Fatalf("orphaned %v after three consecutive misses, want %s", orphaned, orphan)
	}
}

// An unproven volume root (unmounted: every volume looks absent) destroys
// nothing, reaps no record, counts no leak and prunes no orphan; the sweep
// fails (the pass backs off). Once the root is proven again the same record is
// reaped.
func TestReaper_UnprovenRoot_NothingReapedOrPruned_ThenReapedOnceProven(t *testing.T) {
	const expired, active = "77777777-7777-4777-8777-777777777777", "88888888-8888-4888-8888-888888888888"
	expiredVol, activeVol := messages.RetainedVolumeName(expired, "app", 0), messages.RetainedVolumeName(active, "app", 0)
	h := newHarness(t, 1, messages.RetentionSweepReply{})
	ensure(t, h.vols, expiredVol, activeVol)
	h.vols.SetRootUnproven(true)
	h.reg.set(messages.RetentionSweepReply{
		Reaping: []messages.RetentionRecord{record(expired, expiredVol)},
		Active:  []messages.RetentionRecord{record(active, activeVol)},
	})
	h.sweep()
	h.sweep()
	if reaped, orphaned, _ := h.reg.snapshot(); len(reaped)+len(orphaned) != 0 {
		t.Fatalf("reaped %v orphaned %v on an unproven root", reaped, orphaned)
	}
	if got := h.vols.Names(); len(got) != 2 {
		t.Fatalf("volumes %v: an unproven root lost one", got)
	}
	if n := testutil.ToFloat64(h.m.leaked); n != 0 {
		t.Fatalf("berth_retention_leaked_total %v: a held destroy is no leak", n)
	}
	if n := testutil.ToFloat64(h.m.orphanSkips.WithLabelValues("root_unproven")); n != 2 {
		t.Fatalf("orphan skips (root_unproven) %v, want 2", n)
	}
	if n := testutil.ToFloat64(h.m.sweeps.WithLabelValues("error")); n != 2 {
		t.Fatalf("failed sweeps %v, want 2", n)
	}
	h.vols.SetRootUnproven(false)
	h.sweep()
	if reaped, orphaned, _ := h.reg.snapshot(); len(reaped) != 1 || reaped[0] != expired || len(orphaned) != 0 {
		t.Fatalf("once proven: reaped %v orphaned %v, want %s reaped", reaped, orphaned, expired)
	}
	if got := h.vols.Names(); len(got) != 1 || got[0] != activeVol {
		t.Fatalf("volumes %v, want only the active record's", got)
	}
}
