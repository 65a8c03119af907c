package imagegc

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

func TestState_PulledAndForgottenImagesReplayFromTheStream(t *testing.T) {
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock := t0
	j := &supervisors.Journal[*State]{Store: store, Stream: Stream, Version: eventVersion, Every: 2, Now: func() time.Time { return clock }, Log: zerolog.Nop()}
	j.Resume(newState(), 0)
	commit := func(typ string, e any) {
		t.Helper()
		if err := j.Commit([]persistence.Event{j.Event(typ, e)}); err != nil {
			t.Fatal(err)
		}
	}
	commit(EvPulled, pulledEvent{ID: "sha256:a", Ref: "r/a@sha256:1"})
	clock = t0.Add(time.Hour)
	commit(EvPulled, pulledEvent{ID: "sha256:b", Ref: "r/b@sha256:2"})
	commit(EvPulled, pulledEvent{ID: "sha256:a", Ref: "r/a2@sha256:1"}) // the same content again, by another name
	commit(EvForgotten, forgottenEvent{IDs: []string{"sha256:b"}})

	st, _, err := Load(store)
	if err != nil {
		t.Fatal(err)
	}
	a := st.Images["sha256:a"]
	if len(st.Images) != 1 || a == nil || len(a.Refs) != 2 || !a.PulledAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("replayed %+v (a: %+v): want only a, by both names, pulled last an hour in", st.Images, a)
	}
	// Forgetting an image never recorded is a journal this berthd cannot read.
	if err := st.Apply(j.Event(EvForgotten, forgottenEvent{IDs: []string{"sha256:zz"}})); err == nil || !strings.Contains(err.Error(), "not recorded") {
		t.Fatalf("forgetting an unknown image: %v", err)
	}
	if err := st.Apply(persistence.Event{Type: "image.renamed", V: eventVersion, Data: []byte(`{}`)}); err == nil {
		t.Fatal("an unknown event type applied")
	}
	if err := st.Apply(j.Event(EvPulled, pulledEvent{ID: "sha256:c"})); err == nil {
		t.Fatal("a pull without its reference applied")
	}
}

func TestEnd_ForgetsCollectedImages_ButNotOnePulledAgainDuringThePass(t *testing.T) {
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock := t0
	now := func() time.Time { return clock }
	set := DefaultSettings()
	a := &Actor{Deps: &Deps{Env: supervisors.Env{Log: zerolog.Nop(), Now: now}, Store: store, Settings: &set, Metrics: NewMetrics(nil)}}
	a.journal = &supervisors.Journal[*State]{Store: store, Stream: Stream, Version: eventVersion, Now: now, Log: zerolog.Nop()}
	a.journal.Resume(newState(), 0)
	a.pulled(&messages.ImagePulled{ID: "sha256:a", Ref: "r/a@sha256:1"})
	a.pulled(&messages.ImagePulled{ID: "sha256:b", Ref: "r/b@sha256:2"})
	began := t0.Add(time.Minute)
	clock = t0.Add(2 * time.Minute) // b is pulled again while the pass that removed it runs
	a.pulled(&messages.ImagePulled{ID: "sha256:b", Ref: "r/b@sha256:2"})
	res := &result{began: began, removed: []Removal{{ID: "sha256:a", Bytes: 1}, {ID: "sha256:b", Bytes: 1}}, inhibited: map[string]int{}}
	a.end(&supervisors.Outcome{Value: res})
	st, _, err := Load(store)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.Images["sha256:a"]; ok || st.Images["sha256:b"] == nil || len(st.Images) != 1 {
		t.Fatalf("recorded after the pass: %v; want a forgotten, b (pulled again) kept", st.Images)
	}
}
