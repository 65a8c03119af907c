package reconciler

import (
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// standInRegistry answers ListLeases (with none) — except the first, which it
// keeps unanswered, as a registry that restarted under the ask would — and
// records every Recovered.
type standInRegistry struct {
	mu        *sync.Mutex
	recovered *[]messages.Recovered
	asked     *int
}

func (r *standInRegistry) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *messages.ListLeases:
		r.mu.Lock()
		*r.asked++
		first := *r.asked == 1
		r.mu.Unlock()
		if !first {
			m.Reply <- messages.LeasesReply{}
		}
	case messages.Recovered:
		r.mu.Lock()
		*r.recovered = append(*r.recovered, m)
		r.mu.Unlock()
	}
}

// TestRecoverNow_ANewIncarnationRestartsTheRunningPass_ItsRecoveredNamesIt: a
// pass that began before the registry's new incarnation asked is canceled (its
// answer would vouch for the predecessor's accounting, and it may wait out its
// ack timeout on actors that stopped); the pass run instead answers For that
// incarnation, within a moment rather than the 30 s ack timeout.
func TestRecoverNow_ANewIncarnationRestartsTheRunningPass_ItsRecoveredNamesIt(t *testing.T) {
	var mu sync.Mutex
	var got []messages.Recovered
	asked := 0
	reg := &standInRegistry{mu: &mu, recovered: &got, asked: &asked}
	set := DefaultSettings()
	set.Interval, set.RegistryPath = time.Hour, "root/registry"
	deps := &Deps{Engine: fake.New(fake.Options{InstallationID: installation}), Settings: &set, Metrics: NewMetrics(nil)}
	tree, err := supervisors.Start(supervisors.Options{Logger: zerolog.Nop(), Children: func(tr *supervisors.Tree) []supervisors.Spec {
		deps.Env = supervisors.Env{Tree: tr, Log: zerolog.Nop(), Now: time.Now}
		return []supervisors.Spec{
			{Name: "registry", Kind: "registry", Producer: func() actor.Actor { return reg }},
			{Name: "reconciler", Kind: "reconciler", Producer: New(deps)},
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Stop(t.Context())
	waitUntil(t, "the start pass asks the registry", func() bool { mu.Lock(); defer mu.Unlock(); return asked == 1 })

	at := time.Now()
	tree.Send("root/reconciler", messages.RecoverNow{For: 7})
	waitUntil(t, "a Recovered", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) > 0 })
	if took := time.Since(at); took > 5*time.Second {
		t.Fatalf("the new incarnation waited %s: the stale pass was not canceled", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].For != 7 {
		t.Fatalf("Recovered %+v, want exactly one, For 7 (the stale pass answers nothing)", got)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
