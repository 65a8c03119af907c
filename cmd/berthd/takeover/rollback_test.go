package takeover

import (
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// A store an adoption just made can go back to fred; one event on any lease
// (or a lease berthd admitted) closes the way back, and says which.
func TestRollbackSafe_UntilBerthdJournalsAnything(t *testing.T) {
	ev := host()
	rl := rules()
	w, rec, err := Adopt(ev, Classify(ev, rl), rl, "/var/lib/fred", nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := persistence.InitializeIdentityWith(persistence.Options{Dir: dir}, w); err != nil {
		t.Fatal(err)
	}
	store, _, err := persistence.Open(persistence.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if got, err := LoadRecord(store); err != nil || got == nil || len(got.Leases) != 2 {
		t.Fatalf("record %+v %v", got, err)
	}
	if rb, err := RollbackSafe(store, &rec); err != nil || !rb.Safe || rb.Note != "" {
		t.Fatalf("fresh adoption: %+v %v", rb, err)
	}
	// The owed callback delivered: still safe, and said.
	rows, _ := store.OutboxAll()
	if err := store.DeleteOutbox(rows[0].Key); err != nil {
		t.Fatal(err)
	}
	if rb, _ := RollbackSafe(store, &rec); !rb.Safe || !strings.Contains(rb.Note, "delivered 1 of the callbacks") {
		t.Fatalf("after a delivery: %+v", rb)
	}
	// An adopted lease fails: no longer safe.
	fail := supervisors.NewEvent(lease.EvRuntimeFailing, 1, time.Now(), lease.RuntimeFailing{ContainerID: "x"})
	if _, err := store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: lease.Stream(flat), Events: []persistence.Event{fail}}}}); err != nil {
		t.Fatal(err)
	}
	if rb, _ := RollbackSafe(store, &rec); rb.Safe || len(rb.Why) != 1 || !strings.Contains(rb.Why[0], "lease "+flat+" changed") {
		t.Fatalf("after a change: %+v", rb)
	}
}
