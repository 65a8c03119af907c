package registry

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// stateSpec is a minimal admitted spec.
func stateSpec(id string, admission uint64) *lease.Spec {
	return &lease.Spec{Lease: id, Tenant: "t", Admission: admission, AdmittedAt: t0,
		Services: []lease.ServiceSpec{{Name: "app", SKU: "s", Quantity: 1, Profile: lease.Profile{CPUCores: 0.1, MemoryMB: 64}}}}
}

func mustApply(t *testing.T, s *State, evs ...persistence.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := s.Apply(ev); err != nil {
			t.Fatalf("apply %s: %v", ev.Type, err)
		}
	}
}

// openStore opens a fresh state.db in a temp dir, closed at cleanup.
func openStore(t *testing.T) *persistence.Store {
	t.Helper()
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	return store
}

func commitTo(t *testing.T, store *persistence.Store, stream string, evs ...persistence.Event) uint64 {
	t.Helper()
	res, err := store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: stream, Events: evs}}})
	if err != nil {
		t.Fatalf("commit to %s: %v", stream, err)
	}
	return res.LastSeq[stream]
}

func TestStateApply_AdmittedThenClosed(t *testing.T) {
	a, b := uuid.NewString(), uuid.NewString()
	s := newState()
	mustApply(t, s, AdmittedEvent(stateSpec(a, 1), t0), AdmittedEvent(stateSpec(b, 2), t0))
	if len(s.Leases) != 2 || s.Admissions != 2 || s.Leases[a].Admission != 1 {
		t.Fatalf("state after two admissions: %+v", s)
	}
	mustApply(t, s, ClosedEvent(messages.LeaseClosed{Lease: a, Admission: 1}, t0))
	if _, ok := s.Leases[a]; ok || s.Leases[b] == nil || s.Admissions != 2 {
		t.Fatalf("closed a: %+v", s)
	}
	if got := s.Sorted(); !reflect.DeepEqual(got, []string{b}) {
		t.Fatalf("sorted = %v", got)
	}
	// A closed of a lease the state does not hold changes nothing.
	mustApply(t, s, ClosedEvent(messages.LeaseClosed{Lease: uuid.NewString(), Admission: 7}, t0))
	if len(s.Leases) != 1 {
		t.Fatalf("closed of an unknown lease changed the state: %+v", s)
	}
}

func TestStateApply_ClosedOfOlderAdmissionKeepsNewer(t *testing.T) {
	id := uuid.NewString()
	s := newState()
	// Admission 1 failed and was replaced by admission 2; the close of 1 arrives late.
	mustApply(t, s, AdmittedEvent(stateSpec(id, 1), t0), AdmittedEvent(stateSpec(id, 2), t0), ClosedEvent(messages.LeaseClosed{Lease: id, Admission: 1}, t0))
	if got := s.Leases[id]; got == nil || got.Admission != 2 {
		t.Fatalf("closed of admission 1 removed admission 2: %+v", s.Leases)
	}
	mustApply(t, s, ClosedEvent(messages.LeaseClosed{Lease: id, Admission: 2}, t0))
	if _, ok := s.Leases[id]; ok {
		t.Fatalf("closed of the current admission kept the lease")
	}
	// The lease UUID may be admitted again later, with a new number.
	mustApply(t, s, AdmittedEvent(stateSpec(id, 3), t0))
	if s.Leases[id].Admission != 3 {
		t.Fatalf("re-admission after close: %+v", s.Leases[id])
	}
}

func TestStateApply_AdmissionNumbersMustIncrease(t *testing.T) {
	s := newState()
	mustApply(t, s, AdmittedEvent(stateSpec(uuid.NewString(), 5), t0))
	before, _ := json.Marshal(s)
	for _, n := range []uint64{5, 4, 0} {
		err := s.Apply(AdmittedEvent(stateSpec(uuid.NewString(), n), t0))
		if err == nil || !strings.Contains(err.Error(), "not after") {
			t.Errorf("admission %d after 5: err = %v, want refused", n, err)
		}
	}
	after, _ := json.Marshal(s)
	if string(before) != string(after) {
		t.Fatalf("a refused event changed the state:\n%s\n%s", before, after)
	}
	mustApply(t, s, AdmittedEvent(stateSpec(uuid.NewString(), 9), t0)) // gaps are fine
	if s.Admissions != 9 {
		t.Fatalf("admissions = %d", s.Admissions)
	}
}

func TestStateApply_UnknownTypeNewerVersionOrMalformed_Refused(t *testing.T) {
	good := AdmittedEvent(stateSpec(uuid.NewString(), 1), t0)
	newer := good
	newer.V = eventVersion + 1
	older := good
	older.V = 0
	closedNewer := ClosedEvent(messages.LeaseClosed{Lease: uuid.NewString(), Admission: 1}, t0)
	closedNewer.V = 2
	for _, tc := range []struct {
		name string
		ev   persistence.Event
		want string
	}{
		{"unknown type", persistence.Event{Type: "lease.teleported", V: 1, At: t0, Data: json.RawMessage(`{}`)}, "unknown"},
		{"newer admitted", newer, "version"},
		{"version 0", older, "version"},
		{"newer closed", closedNewer, "version"},
		{"admitted without spec", persistence.Event{Type: EvLeaseAdmitted, V: 1, At: t0, Data: json.RawMessage(`{}`)}, "malformed"},
		{"admitted without lease", persistence.Event{Type: EvLeaseAdmitted, V: 1, At: t0, Data: json.RawMessage(`{"spec":{"admission":3}}`)}, "malformed"},
		{"admitted not JSON", persistence.Event{Type: EvLeaseAdmitted, V: 1, At: t0, Data: json.RawMessage(`"x"`)}, "malformed"},
		{"closed not an object", persistence.Event{Type: EvLeaseClosed, V: 1, At: t0, Data: json.RawMessage(`[1]`)}, EvLeaseClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState()
			err := s.Apply(tc.ev)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a refusal mentioning %q", err, tc.want)
			}
			if len(s.Leases) != 0 || s.Admissions != 0 {
				t.Fatalf("a refused event changed the state: %+v", s)
			}
		})
	}
}

func TestLoadState_IsSnapshotPlusLaterEvents(t *testing.T) {
	store := openStore(t)
	st, seq, err := LoadState(store)
	if err != nil || seq != 0 || len(st.Leases) != 0 || st.Admissions != 0 {
		t.Fatalf("empty store: %+v, %d, %v", st, seq, err)
	}

	a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
	events := []persistence.Event{
		AdmittedEvent(stateSpec(a, 1), t0),
		AdmittedEvent(stateSpec(b, 2), t0),
		ClosedEvent(messages.LeaseClosed{Lease: a, Admission: 1}, t0),
		AdmittedEvent(stateSpec(c, 3), t0),
		AdmittedEvent(stateSpec(b, 4), t0),                            // b replaced
		ClosedEvent(messages.LeaseClosed{Lease: b, Admission: 2}, t0), // late close of b's old admission: no effect
	}
	want := newState()
	mustApply(t, want, events...)

	// Snapshot the first three, as the actor does, then journal the rest.
	commitTo(t, store, Stream, events[:3]...)
	snapState := newState()
	mustApply(t, snapState, events[:3]...)
	data, _ := json.Marshal(snapState)
	if err := store.SaveSnapshot(Stream, persistence.Snapshot{Seq: 3, V: eventVersion, At: t0, Data: data}); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	last := commitTo(t, store, Stream, events[3:]...)

	got, seq, err := LoadState(store)
	if err != nil {
		t.Fatalf("LoadState: %v", err)
	}
	if seq != last || seq != 6 {
		t.Fatalf("seq = %d, want %d", seq, last)
	}
	if !reflect.DeepEqual(stateJSON(t, got), stateJSON(t, want)) {
		t.Fatalf("LoadState = %s\nwant       %s", stateJSON(t, got), stateJSON(t, want))
	}
	if got.Leases[b] == nil || got.Leases[b].Admission != 4 || got.Leases[a] != nil || got.Admissions != 4 {
		t.Fatalf("unexpected fold: %s", stateJSON(t, got))
	}

	// A snapshot covering everything loads without events.
	data, _ = json.Marshal(want)
	if err := store.SaveSnapshot(Stream, persistence.Snapshot{Seq: 6, V: eventVersion, At: t0, Data: data}); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	got, seq, err = LoadState(store)
	if err != nil || seq != 6 || stateJSON(t, got) != stateJSON(t, want) {
		t.Fatalf("snapshot-only load: %s, %d, %v", stateJSON(t, got), seq, err)
	}
	// Admission numbers keep increasing across the snapshot.
	commitTo(t, store, Stream, AdmittedEvent(stateSpec(a, 4), t0))
	if _, _, err := LoadState(store); err == nil || !strings.Contains(err.Error(), "not after") {
		t.Fatalf("an admission number reused after a snapshot loaded: %v", err)
	}
}

func stateJSON(t *testing.T, s *State) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoadState_UnknownEventRefused(t *testing.T) {
	store := openStore(t)
	commitTo(t, store, Stream, AdmittedEvent(stateSpec(uuid.NewString(), 1), t0),
		persistence.Event{Type: "lease.resized", V: 1, At: t0, Data: json.RawMessage(`{}`)})
	if _, _, err := LoadState(store); err == nil || !strings.Contains(err.Error(), "seq 2") || !strings.Contains(err.Error(), "lease.resized") {
		t.Fatalf("LoadState = %v, want a refusal naming seq 2 and the type", err)
	}
	if err := Verify(store); err == nil {
		t.Fatalf("Verify accepted a registry stream with an unknown event")
	}
}

// A snapshot written by a newer berthd may lay its state out differently; reading
// it as version 1 would rebuild a wrong pool. Like events, it must be refused.
func TestLoadState_SnapshotOfNewerVersion_Refused(t *testing.T) {
	store := openStore(t)
	st := newState()
	ev := AdmittedEvent(stateSpec(uuid.NewString(), 1), t0)
	mustApply(t, st, ev)
	commitTo(t, store, Stream, ev)
	data, _ := json.Marshal(st)
	if err := store.SaveSnapshot(Stream, persistence.Snapshot{Seq: 1, V: eventVersion + 1, At: t0, Data: data}); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if _, _, err := LoadState(store); err == nil {
		t.Fatalf("LoadState accepted a snapshot of version %d (this berthd reads %d)", eventVersion+1, eventVersion)
	}
}

// leaseEvent is a lease-stream event with a JSON payload.
func leaseEvent(t *testing.T, typ string, payload any) persistence.Event {
	t.Helper()
	data, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return persistence.Event{Type: typ, V: 1, At: t0, Data: data}
}

func TestVerify_RefusesLeaseStreamWithUnknownEvent(t *testing.T) {
	store := openStore(t)
	live, orphan := uuid.NewString(), uuid.NewString()
	commitTo(t, store, Stream, AdmittedEvent(stateSpec(live, 1), t0))
	started := leaseEvent(t, lease.EvProvisionStarted, lease.ProvisionStarted{Admission: 1, Generation: 1,
		OperationID: "op", At: t0, Deadline: t0.Add(time.Minute)})
	commitTo(t, store, lease.Stream(live), started)
	if err := Verify(store); err != nil {
		t.Fatalf("Verify of a well-formed store: %v", err)
	}

	// An unknown event in a live lease's stream.
	commitTo(t, store, lease.Stream(live), leaseEvent(t, "provision.teleported", map[string]int{"generation": 1}))
	err := Verify(store)
	if err == nil || !strings.Contains(err.Error(), "provision.teleported") || !strings.Contains(err.Error(), live) {
		t.Fatalf("Verify = %v, want a refusal naming the event and the lease", err)
	}

	// A stream of a lease the registry no longer holds is verified too.
	store2 := openStore(t)
	commitTo(t, store2, lease.Stream(orphan), started, leaseEvent(t, "closed.twice", map[string]int{}))
	if err := Verify(store2); err == nil || !strings.Contains(err.Error(), "closed.twice") {
		t.Fatalf("Verify of an orphan lease stream = %v, want refused", err)
	}

	// An event the lease machine does not permit from its status is refused as well.
	store3 := openStore(t)
	commitTo(t, store3, Stream, AdmittedEvent(stateSpec(live, 1), t0))
	commitTo(t, store3, lease.Stream(live), leaseEvent(t, lease.EvProvisionSucceeded, lease.ProvisionSucceeded{Stamp: lease.Stamp{Generation: 1, At: t0}}))
	if err := Verify(store3); err == nil || !strings.Contains(err.Error(), "not permitted") {
		t.Fatalf("Verify of provision.succeeded before provision.started = %v, want refused", err)
	}
}

func TestVerifyInto_KeepsOnlyLiveLeasesStates(t *testing.T) {
	store := openStore(t)
	live, bare, orphan := uuid.NewString(), uuid.NewString(), uuid.NewString()
	commitTo(t, store, Stream, AdmittedEvent(stateSpec(live, 1), t0), AdmittedEvent(stateSpec(bare, 2), t0))
	started := leaseEvent(t, lease.EvProvisionStarted, lease.ProvisionStarted{Admission: 1, Generation: 1,
		OperationID: "op", At: t0, Deadline: t0.Add(time.Minute)})
	commitTo(t, store, lease.Stream(live), started)
	commitTo(t, store, lease.Stream(orphan), started) // a stream the registry holds no lease for

	into := NewReplayed()
	if err := VerifyInto(store, into); err != nil {
		t.Fatalf("VerifyInto: %v", err)
	}
	// The two live leases (one without a stream yet) wait for their actors; the
	// orphan was verified but has no actor to hand a state to.
	if n := into.Leases.Len(); n != 2 {
		t.Fatalf("%d preloaded states, want 2 (the live leases only)", n)
	}
	st, seq, ok := into.takeState()
	if !ok || seq != 2 || len(st.Leases) != 2 {
		t.Fatalf("registry state handed over: ok=%t seq=%d leases=%d, want true, 2, 2", ok, seq, len(st.Leases))
	}
	if _, _, ok := into.takeState(); ok {
		t.Fatal("the registry state was handed over twice (a restarted registry must load its journal)")
	}
}
