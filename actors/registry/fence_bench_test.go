package registry

// What the close fence costs at 10,000 closed leases (issue 18). A closed UUID
// is refused by reading its lease stream at admission (Actor.used): the closed
// receipt is already permanent there — snapshots keep it, nothing deletes a
// lease stream — so the fence adds no state. The alternative, a set of closed
// UUIDs in the registry's folded state, would hold every close ever made in
// memory and in every registry snapshot, and decode it at every start.
//
//	go test ./actors/registry -run '^$' -bench Fence -benchtime 2000x
//
// Measured on this 2-core machine (go1.26, load average 8–13 from other work):
//
//	look-up at admission, UUID never seen          8–29 µs/op, 0 bytes held
//	look-up at admission, UUID closed (4 events)  50–110 µs/op, 0 bytes held
//	set in state: 0.9 MB heap, +390 KB in every registry snapshot, ~10 ms to
//	decode at every start (and growing with every close, forever)
//
// The look-up costs a fresh admission microseconds (a burst of 100 shares a few
// milliseconds) and nothing at restart; the set costs every start, every
// registry snapshot and the resident heap in proportion to history.

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

const fenceClosedLeases = 10_000

// closedStore is a state store holding fenceClosedLeases closed lease streams,
// each the journal of a lease that became ready and closed.
func closedStore(b *testing.B) (*persistence.Store, []string) {
	b.Helper()
	store, _, err := persistence.Open(persistence.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	set := actorSettings()
	ids := make([]string, 0, fenceClosedLeases)
	for len(ids) < fenceClosedLeases {
		var w persistence.Write
		for range 1000 {
			id := uuid.NewString()
			ids = append(ids, id)
			spec, err := set.prepare(leaseRequest(id, "docker-small", 1), t0)
			if err != nil {
				b.Fatal(err)
			}
			rel := lease.Release{Kind: lease.KindProvision, OperationID: spec.OperationID, CreatedAt: t0,
				Manifest: spec.Manifest, Items: spec.Items, Services: spec.Services}
			ev := func(typ string, p any) persistence.Event { return supervisors.NewEvent(typ, 1, t0, p) }
			w.Appends = append(w.Appends, persistence.Append{Stream: lease.Stream(id), Events: []persistence.Event{
				ev(lease.EvProvisionStarted, lease.ProvisionStarted{Admission: 1, Generation: 1, OperationID: spec.OperationID,
					At: t0, Deadline: t0.Add(10 * time.Minute), Release: &rel}),
				ev(lease.EvProvisionSucceeded, lease.ProvisionSucceeded{Stamp: lease.Stamp{Generation: 1, At: t0},
					Containers: []lease.Instance{{Service: "app", ContainerID: "c-" + id}}}),
				ev(lease.EvCloseRequested, lease.CloseRequested{Admission: 1, At: t0}),
				ev(lease.EvClosed, lease.ClosedEv{Admission: 1, At: t0}),
			}})
		}
		if _, err := store.Commit(w); err != nil {
			b.Fatal(err)
		}
	}
	return store, ids
}

func BenchmarkFence_LookupAtAdmission(b *testing.B) {
	store, ids := closedStore(b)
	a := &Actor{deps: &Deps{Store: store}}
	b.Run("never-seen", func(b *testing.B) {
		for b.Loop() {
			if used, err := a.used(uuid.NewString()); used || err != nil {
				b.Fatal(used, err)
			}
		}
	})
	b.Run("closed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if used, err := a.used(ids[i%len(ids)]); !used || err != nil {
				b.Fatal(used, err)
			}
			i++
		}
	})
}

// BenchmarkFence_ClosedSetInState measures the alternative berth does not take:
// the closed UUIDs as a set in the registry's state.
func BenchmarkFence_ClosedSetInState(b *testing.B) {
	ids := make([]string, fenceClosedLeases)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	set := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		set[string([]byte(id))] = struct{}{}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	raw, err := json.Marshal(ids)
	if err != nil {
		b.Fatal(err)
	}
	runtime.KeepAlive(set)
	for b.Loop() {
		var back []string
		if err := json.Unmarshal(raw, &back); err != nil {
			b.Fatal(err)
		}
		m := make(map[string]struct{}, len(back))
		for _, id := range back {
			m[id] = struct{}{}
		}
		if len(m) != fenceClosedLeases {
			b.Fatal(fmt.Sprint(len(m)))
		}
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc), "heap-bytes")
	b.ReportMetric(float64(len(raw)), "snapshot-bytes")
}
