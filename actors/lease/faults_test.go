package lease_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// TestLease_JournalCommitFails_RefusedUnavailableNothingApplied: a restart whose
// journal commit the store fails (supervisors.FaultyStore) is refused "state store
// unavailable", a 503: the lease stays ready with its release history, queues no
// callback and starts no worker. Once the store heals, the next restart is
// accepted and completes.
func TestLease_JournalCommitFails_RefusedUnavailableNothingApplied(t *testing.T) {
	h := newHarness(t, nil)
	faulty := &supervisors.FaultyStore{Store: h.store}
	h.deps.Store = faulty
	l, _ := readyLease(t, h)
	events, rows, releases := l.eventTypes(), len(l.rows()), l.releases()

	faulty.FailCommits(func(w persistence.Write) bool { return slices.Contains(supervisors.Streams(w), lease.Stream(l.id)) }, nil)
	err := l.restart("restart-refused")
	var r *messages.Refusal
	if !errors.As(err, &r) || !errors.Is(err, messages.ErrUnavailable) || r.Msg != "state store unavailable" {
		t.Fatalf("restart on a failing store answered %v, want the 503 refusal \"state store unavailable\"", err)
	}
	if faulty.Failed() != 1 {
		t.Fatalf("%d commits failed, want the restart's one", faulty.Failed())
	}
	if info := l.barrier(); info.Status != messages.StatusReady {
		t.Fatalf("after the refused restart the lease is %s, want ready", info.Status)
	}
	if got := l.eventTypes(); !slices.Equal(got, events) {
		t.Fatalf("journal %v after the refused restart, want %v", got, events)
	}
	if got := l.releases(); !slices.Equal(got, releases) {
		t.Fatalf("release history %v after the refused restart, want %v", got, releases)
	}
	if got := len(l.rows()); got != rows {
		t.Fatalf("%d outbox rows after the refused restart, want %d", got, rows)
	}
	if n := l.node(); strings.Contains(n.State, "worker") || len(n.Tasks) != 0 {
		t.Fatalf("after the refused restart the lease runs %q, tasks %v; want no worker", n.State, n.Tasks)
	}

	faulty.Heal()
	if err := l.restart("restart-healed"); err != nil {
		t.Fatalf("restart after the store healed: %v", err)
	}
	l.waitEvent(lease.EvMaintenanceDone)
	if got := l.releases(); len(got) != len(releases)+1 {
		t.Fatalf("release history %v after the restart, want one release more than %v", got, releases)
	}
}

// restart sends the registry's validated restart with id and returns its answer.
func (l *leaseUnderTest) restart(id string) error {
	l.h.t.Helper()
	reply := make(chan error, 1)
	l.send(&lease.MaintainCommand{Maintain: lease.Maintain{Kind: lease.KindRestart, ID: id, AdmittedAt: time.Now()}, Reply: reply})
	return awaitReply(l.h.t, "the restart's answer", reply, unitWait)
}

// releases is the lease's release history as "version status".
func (l *leaseUnderTest) releases() []string {
	l.h.t.Helper()
	r, err := supervisors.Ask(context.Background(), l.h.tree, l.path, unitWait, func(reply chan<- messages.ReleasesReply) any {
		return &messages.GetReleases{Lease: l.id, Reply: reply}
	})
	if err != nil || r.Err != nil {
		l.h.t.Fatalf("lease %s did not answer GetReleases: %v %v", l.id, err, r.Err)
	}
	out := make([]string, 0, len(r.Releases))
	for _, rel := range r.Releases {
		out = append(out, fmt.Sprintf("%d %s", rel.Version, rel.Status))
	}
	return out
}

// node is the lease actor as it describes itself to /debug/actors.
func (l *leaseUnderTest) node() messages.NodeInfo {
	l.h.t.Helper()
	n, err := supervisors.Ask(context.Background(), l.h.tree, l.path, unitWait, func(reply chan<- messages.NodeInfo) any {
		return &messages.Describe{Reply: reply}
	})
	if err != nil {
		l.h.t.Fatalf("lease %s did not describe itself: %v", l.id, err)
	}
	return n
}
