package domaingate

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

const (
	l1 = "11111111-1111-4111-8111-111111111111"
	l2 = "22222222-2222-4222-8222-222222222222"
	d1 = "shop.example.org"
	d2 = "blog.example.org"
)

// states the table starts from.
func watching(misses int) *State {
	return &State{Gates: map[string]*Gate{key(l1, d1): {Lease: l1, Domain: d1, Misses: misses}}}
}

func opened() *State {
	return &State{Gates: map[string]*Gate{key(l1, d1): {Lease: l1, Domain: d1, Open: true}}}
}

func several() *State {
	return &State{Gates: map[string]*Gate{
		key(l1, d1): {Lease: l1, Domain: d1, Open: true},
		key(l1, d2): {Lease: l1, Domain: d2, Misses: 2},
		key(l2, d1): {Lease: l2, Domain: d1},
	}}
}

func ev(typ, lease, domain, detail string) Event {
	return Event{Type: typ, Lease: lease, Domain: domain, Detail: detail}
}

var (
	met    = Verdict{Seen: 2, Needed: 2, Of: 3, Detail: "x"}
	missed = Verdict{Seen: 1, Needed: 2, Of: 3, Detail: "y"}
)

func TestDecide_EveryInputFromEveryGateState(t *testing.T) {
	cases := []struct {
		name    string
		st      *State
		in      any
		env     Env
		events  []Event
		effects []any
		after   map[string]Gate // the gates once the events applied (Since ignored)
	}{
		{"watch a new domain: journaled, checked at once", newState(), &messages.WatchCustomDomain{Lease: l1, Domain: d1}, Env{},
			[]Event{ev(EvWatched, l1, d1, "")}, []any{Check{l1, d1}},
			map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1}}},
		{"watch with the check disabled: opens at once", newState(), &messages.WatchCustomDomain{Lease: l1, Domain: d1}, Env{CheckDisabled: true},
			[]Event{ev(EvWatched, l1, d1, ""), ev(EvOpened, l1, d1, "check disabled")}, []any{Ready{l1, d1}},
			map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1, Open: true, Last: "check disabled"}}},
		{"watch again while waiting: nothing new", watching(3), &messages.WatchCustomDomain{Lease: l1, Domain: d1}, Env{},
			nil, nil, map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1, Misses: 3}}},
		{"watch again once open: ready again", opened(), &messages.WatchCustomDomain{Lease: l1, Domain: d1}, Env{},
			nil, []any{Ready{l1, d1}}, map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1, Open: true}}},
		{"watch without a domain: ignored", newState(), &messages.WatchCustomDomain{Lease: l1}, Env{}, nil, nil, map[string]Gate{}},
		{"check met the quorum: opened, owner told", watching(2), Checked{l1, d1, met}, Env{},
			[]Event{ev(EvOpened, l1, d1, met.summary())}, []any{Ready{l1, d1}},
			map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1, Misses: 2, Open: true, Last: met.summary(), Checks: 1}}},
		{"check missed: journaled, next after the backoff", watching(2), Checked{l1, d1, missed}, Env{},
			[]Event{ev(EvMissed, l1, d1, missed.summary())}, []any{Schedule{l1, d1, 3}},
			map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1, Misses: 3, Last: missed.summary(), Checks: 1}}},
		{"late check of an open gate: nothing", opened(), Checked{l1, d1, missed}, Env{},
			nil, nil, map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1, Open: true}}},
		{"check of a forgotten gate: nothing", newState(), Checked{l1, d1, met}, Env{}, nil, nil, map[string]Gate{}},
		{"due while waiting: checked", watching(1), Due{l1, d1}, Env{},
			nil, []any{Check{l1, d1}}, map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1, Misses: 1}}},
		{"due once open: nothing", opened(), Due{l1, d1}, Env{}, nil, nil, map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1, Open: true}}},
		{"due of a forgotten gate: nothing", newState(), Due{l1, d1}, Env{}, nil, nil, map[string]Gate{}},
		{"forget one domain", several(), &messages.ForgetCustomDomain{Lease: l1, Domain: d2}, Env{},
			[]Event{ev(EvForgotten, l1, d2, "")}, []any{Cancel{l1, d2}},
			map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1, Open: true}, key(l2, d1): {Lease: l2, Domain: d1}}},
		{"forget every domain of a lease", several(), &messages.ForgetCustomDomain{Lease: l1}, Env{},
			[]Event{ev(EvForgotten, l1, d2, ""), ev(EvForgotten, l1, d1, "")}, []any{Cancel{l1, d2}, Cancel{l1, d1}},
			map[string]Gate{key(l2, d1): {Lease: l2, Domain: d1}}},
		{"forget what is not watched: nothing", watching(0), &messages.ForgetCustomDomain{Lease: l2}, Env{},
			nil, nil, map[string]Gate{key(l1, d1): {Lease: l1, Domain: d1}}},
		{"recover: open gates told again, waiting ones checked", several(), Recover{}, Env{},
			nil, []any{Check{l1, d2}, Ready{l1, d1}, Check{l2, d1}}, nil},
		{"recover with the check now disabled: waiting gates open", several(), Recover{}, Env{CheckDisabled: true},
			[]Event{ev(EvOpened, l1, d2, "check disabled"), ev(EvOpened, l2, d1, "check disabled")},
			[]any{Ready{l1, d2}, Ready{l1, d1}, Ready{l2, d1}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := clone(c.st)
			d := Decide(c.st, c.in, c.env)
			if !reflect.DeepEqual(c.st, before) {
				t.Fatal("Decide changed the state")
			}
			if !reflect.DeepEqual(d.Events, c.events) {
				t.Fatalf("events\n got %+v\nwant %+v", d.Events, c.events)
			}
			if !reflect.DeepEqual(d.Effects, c.effects) {
				t.Fatalf("effects\n got %+v\nwant %+v", d.Effects, c.effects)
			}
			for _, e := range d.Events {
				if err := c.st.Apply(supervisors.NewEvent(e.Type, eventVersion, time.Time{}, e)); err != nil {
					t.Fatalf("a decided event does not apply: %v", err)
				}
			}
			if c.after == nil {
				return
			}
			got := map[string]Gate{}
			for k, g := range c.st.Gates {
				got[k] = *g
			}
			if !reflect.DeepEqual(got, c.after) {
				t.Fatalf("gates after\n got %+v\nwant %+v", got, c.after)
			}
		})
	}
}

func clone(st *State) *State {
	out := newState()
	for k, g := range st.Gates {
		c := *g
		out.Gates[k] = &c
	}
	return out
}

func TestApply_RefusesWhatDoesNotFit(t *testing.T) {
	cases := []struct {
		name string
		st   *State
		ev   persistence.Event
		want string
	}{
		{"opened but never watched", newState(), supervisors.NewEvent(EvOpened, eventVersion, time.Time{}, ev("", l1, d1, "")), "not watched"},
		{"missed but never watched", newState(), supervisors.NewEvent(EvMissed, eventVersion, time.Time{}, ev("", l1, d1, "")), "not watched"},
		{"watched twice", watching(0), supervisors.NewEvent(EvWatched, eventVersion, time.Time{}, ev("", l1, d1, "")), "already watched"},
		{"no domain", newState(), supervisors.NewEvent(EvWatched, eventVersion, time.Time{}, ev("", l1, "", "")), "malformed"},
		{"another version", newState(), supervisors.NewEvent(EvWatched, 2, time.Time{}, ev("", l1, d1, "")), "version 2"},
		{"unknown type", watching(0), supervisors.NewEvent("gate.bent", eventVersion, time.Time{}, ev("", l1, d1, "")), "unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := clone(c.st)
			err := c.st.Apply(c.ev)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Apply: %v, want %q", err, c.want)
			}
			if !reflect.DeepEqual(c.st, before) {
				t.Fatal("a refused event changed the state")
			}
		})
	}
}
