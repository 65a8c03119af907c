package domaingate

import (
	"maps"
	"slices"

	"github.com/berth-dev/berth/messages"
)

// Inputs besides the messages.WatchCustomDomain and messages.ForgetCustomDomain
// the gate is sent.
type (
	// Recover: the actor started, its gates replayed.
	Recover struct{}
	// Checked is a finished check of one gate.
	Checked struct {
		Lease, Domain string
		Verdict       Verdict
	}
	// Due: a gate's backoff ran out; check it again.
	Due struct{ Lease, Domain string }
)

// Effects the actor runs after the events are journaled.
type (
	// Check asks the resolvers about the gate's domain (one check at a time each).
	Check struct{ Lease, Domain string }
	// Schedule sends Due after the backoff's wait before attempt Attempt.
	Schedule struct {
		Lease, Domain string
		Attempt       int
	}
	// Cancel drops a gate's scheduled Due.
	Cancel struct{ Lease, Domain string }
	// Ready tells the owner the gate opened.
	Ready struct{ Lease, Domain string }
)

// detailCheckDisabled is the detail of a gate opened without a check.
const detailCheckDisabled = "check disabled"

// Env is what Decide knows besides the state.
type Env struct {
	CheckDisabled bool // custom_domain_dns_check_disabled: every gate opens at once
}

// Decision is what Decide chose: events to journal, then effects to run.
type Decision struct {
	Events  []Event
	Effects []any
}

func (d *Decision) event(typ string, g Gate, detail string) {
	d.Events = append(d.Events, Event{Type: typ, Lease: g.Lease, Domain: g.Domain, Detail: detail})
}

// opened records a gate opening and tells the owner.
func (d *Decision) opened(g Gate, detail string) {
	d.event(EvOpened, g, detail)
	d.Effects = append(d.Effects, Ready{g.Lease, g.Domain})
}

// Decide chooses the gate's events and effects for one input. It never
// changes st.
func Decide(st *State, in any, env Env) Decision {
	var d Decision
	switch m := in.(type) {
	case *messages.WatchCustomDomain:
		if m.Lease == "" || m.Domain == "" {
			break
		}
		g, ok := st.Gates[key(m.Lease, m.Domain)]
		switch {
		case ok && g.Open:
			d.Effects = append(d.Effects, Ready{m.Lease, m.Domain})
		case ok: // its check or backoff is under way
		case env.CheckDisabled:
			d.event(EvWatched, Gate{Lease: m.Lease, Domain: m.Domain}, "")
			d.opened(Gate{Lease: m.Lease, Domain: m.Domain}, detailCheckDisabled)
		default:
			d.event(EvWatched, Gate{Lease: m.Lease, Domain: m.Domain}, "")
			d.Effects = append(d.Effects, Check{m.Lease, m.Domain})
		}
	case *messages.ForgetCustomDomain:
		for _, k := range slices.Sorted(maps.Keys(st.Gates)) {
			if g := st.Gates[k]; g.Lease == m.Lease && (m.Domain == "" || g.Domain == m.Domain) {
				d.event(EvForgotten, *g, "")
				d.Effects = append(d.Effects, Cancel{g.Lease, g.Domain})
			}
		}
	case Checked:
		g, ok := st.Gates[key(m.Lease, m.Domain)]
		switch {
		case !ok || g.Open: // forgotten meanwhile, or a late report
		case m.Verdict.Open():
			d.opened(*g, m.Verdict.summary())
		default:
			d.event(EvMissed, *g, m.Verdict.summary())
			d.Effects = append(d.Effects, Schedule{g.Lease, g.Domain, g.Misses + 1})
		}
	case Due:
		if g, ok := st.Gates[key(m.Lease, m.Domain)]; ok && !g.Open {
			d.Effects = append(d.Effects, Check{m.Lease, m.Domain})
		}
	case Recover:
		for _, k := range slices.Sorted(maps.Keys(st.Gates)) {
			switch g := st.Gates[k]; {
			case g.Open:
				d.Effects = append(d.Effects, Ready{g.Lease, g.Domain})
			case env.CheckDisabled:
				d.opened(*g, detailCheckDisabled)
			default:
				d.Effects = append(d.Effects, Check{g.Lease, g.Domain})
			}
		}
	}
	return d
}
