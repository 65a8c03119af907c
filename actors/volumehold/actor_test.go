package volumehold

// The hold actor in a real supervision tree, on the real store and the fake
// volume root: a held deletion is journaled, retried while the volume is busy,
// survives a crash of the actor (rebuilt from its stream) and, once the volume
// is gone, is journaled done and reported to its owner through the registry
// exactly once.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

const (
	regPath  = supervisors.RootPath + "/registry"
	holdPath = supervisors.RootPath + "/volumehold"
)

// ownerProbe stands for the registry: it records the HoldDone reports.
type ownerProbe struct {
	mu   sync.Mutex
	done []messages.HoldDone
}

func (p *ownerProbe) Receive(c actor.Context) {
	if m, ok := c.Message().(*messages.HoldDone); ok {
		p.mu.Lock()
		p.done = append(p.done, *m)
		p.mu.Unlock()
	}
}

func (p *ownerProbe) reports() []messages.HoldDone {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]messages.HoldDone(nil), p.done...)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestVolumeHold_BusyRetriedAcrossACrash_DoneJournaledAndReportedOnce(t *testing.T) {
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	vols := fake.NewVolumes("/volumes")
	name := messages.VolumeName("77777777-7777-4777-8777-777777777777", "app", 0)
	if _, err := vols.Ensure(context.Background(), name, 64, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	vols.SetBusy(name, -1) // busy until told otherwise
	owner := &ownerProbe{}
	m := NewMetrics(prometheus.NewRegistry())
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
		Chaos:      true,
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{
				{Name: "registry", Kind: "probe", Producer: func() actor.Actor { return owner }},
				{Name: "volumehold", Kind: "volumehold", Producer: New(&Deps{Env: supervisors.Env{Tree: tree, Log: zerolog.Nop(), Now: time.Now},
					Store: store, Volumes: vols, Metrics: m,
					Settings: &Settings{RegistryPath: regPath, BackoffBase: 10 * time.Millisecond, BackoffCap: 40 * time.Millisecond}})},
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tree.Stop(ctx)
	})
	eventually(t, "volumehold spawned", func() bool { _, ok := tree.Dir.Get(holdPath); return ok })

	tree.Send(holdPath, &messages.HoldVolume{Name: name, Owner: "lease:77777777-7777-4777-8777-777777777777"})
	tree.Send(holdPath, &messages.HoldVolume{Name: name, Owner: "lease:77777777-7777-4777-8777-777777777777"}) // asked again: one hold
	eventually(t, "several refused destroys", func() bool { return vols.Calls("destroy") >= 3 })
	st, _, err := Load(store)
	if err != nil || len(st.Holds) != 1 {
		t.Fatalf("journaled holds %+v (%v), want the one", st, err)
	}
	if n := testutil.ToFloat64(m.held); n != 1 {
		t.Fatalf("berth_volume_holds %v, want 1", n)
	}

	// The actor crashes; rebuilt from its stream it keeps retrying.
	tree.Send(holdPath, &messages.Crash{})
	before := vols.Calls("destroy")
	eventually(t, "retries after the restart", func() bool { return vols.Calls("destroy") >= before+2 })
	if len(owner.reports()) != 0 {
		t.Fatalf("reported done while the volume is still busy: %+v", owner.reports())
	}

	vols.SetBusy(name, 0)
	eventually(t, "the hold reported done", func() bool { return len(owner.reports()) == 1 })
	if r := owner.reports()[0]; r.Name != name || r.Owner != "lease:77777777-7777-4777-8777-777777777777" {
		t.Fatalf("report %+v", r)
	}
	if ok, _ := vols.Exists(context.Background(), name); ok {
		t.Fatal("the volume still exists")
	}
	st, _, _ = Load(store)
	if len(st.Holds) != 0 {
		t.Fatalf("holds after done %+v", st.Holds)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(owner.reports()); n != 1 {
		t.Fatalf("%d done reports, want exactly one", n)
	}
	if n := testutil.ToFloat64(m.held); n != 0 {
		t.Fatalf("berth_volume_holds %v after done", n)
	}
}

func TestVolumeHold_CorruptStream_LoadRefuses(t *testing.T) {
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ev := persistence.Event{Type: "hold.unknown", V: eventVersion, At: time.Now(), Data: []byte(`{"name":"x"}`)}
	if _, err := store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: Stream, Events: []persistence.Event{ev}}}}); err != nil {
		t.Fatal(err)
	}
	_, _, err = Load(store)
	if err == nil || !strings.Contains(err.Error(), `"hold.unknown" unknown`) {
		t.Fatalf("an unknown event type: %v, want a refusal naming it", err)
	}
}

// A hold whose commit fails is neither journaled nor retried, and its owner is
// not told; once the store heals, the same hold is journaled, retried and
// reported as before.
func TestVolumeHold_FailedHoldCommit_NotRetriedNotReported_HealedWorksAgain(t *testing.T) {
	plain, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	store := &supervisors.FaultyStore{Store: plain}
	vols := fake.NewVolumes("/volumes")
	name := messages.VolumeName("88888888-8888-4888-8888-888888888888", "app", 0)
	if _, err := vols.Ensure(context.Background(), name, 64, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	vols.SetBusy(name, -1)
	owner := &ownerProbe{}
	m := NewMetrics(prometheus.NewRegistry())
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{
				{Name: "registry", Kind: "probe", Producer: func() actor.Actor { return owner }},
				{Name: "volumehold", Kind: "volumehold", Producer: New(&Deps{Env: supervisors.Env{Tree: tree, Log: zerolog.Nop(), Now: time.Now},
					Store: store, Volumes: vols, Metrics: m,
					Settings: &Settings{RegistryPath: regPath, BackoffBase: 10 * time.Millisecond, BackoffCap: 40 * time.Millisecond}})},
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tree.Stop(ctx)
	})
	eventually(t, "volumehold spawned", func() bool { _, ok := tree.Dir.Get(holdPath); return ok })
	describe := func() messages.NodeInfo {
		t.Helper()
		info, err := supervisors.Ask(context.Background(), tree, holdPath, 5*time.Second, func(r chan<- messages.NodeInfo) any {
			return &messages.Describe{Reply: r}
		})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}

	store.FailCommits(nil, nil)
	hold := &messages.HoldVolume{Name: name, Owner: "retention:88888888-8888-4888-8888-888888888888"}
	tree.Send(holdPath, hold)
	info := describe() // in mailbox order: the hold has been handled
	if store.Failed() != 1 || info.InFlight != 0 || len(info.Tasks) != 0 || info.State != "0 held deletions" {
		t.Fatalf("after a failed hold commit: %d failed commits, %+v; want no hold and no retry loop", store.Failed(), info)
	}
	time.Sleep(100 * time.Millisecond) // ten backoffs' worth: a retry loop would have tried by now
	if n := vols.Calls("destroy"); n != 0 {
		t.Fatalf("%d destroys of a hold that was never journaled", n)
	}
	if st, _, err := Load(store); err != nil || len(st.Holds) != 0 {
		t.Fatalf("journal after the failed commit: %+v %v", st, err)
	}
	if n := testutil.ToFloat64(m.held); n != 0 || len(owner.reports()) != 0 {
		t.Fatalf("held gauge %v, owner told %+v: a failed hold half-applied", n, owner.reports())
	}

	store.Heal()
	tree.Send(holdPath, hold)
	eventually(t, "the healed hold retried", func() bool { return vols.Calls("destroy") >= 2 })
	if st, _, err := Load(store); err != nil || st.Holds[name] != hold.Owner {
		t.Fatalf("journal after heal: %+v %v", st, err)
	}
	vols.SetBusy(name, 0)
	eventually(t, "the hold reported done", func() bool { return len(owner.reports()) == 1 })
}
