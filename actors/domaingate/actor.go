// Package domaingate is the custom-domain DNS readiness gate: a tenant's custom
// domain gets its Traefik router (and with it an HTTP-01 certificate request)
// only once custom_domain_dns_quorum of custom_domain_dns_resolvers see the
// domain at host_address. Each watched (lease, domain) is journaled in the
// "domaingate" stream, checked at once and after every miss with the kit's
// jittered backoff, and survives a restart; when it opens the owner (the
// registry, for the lease) is told, again after every restart until the lease
// forgets the domain — so a crash between the opening and the lease recording
// it loses nothing.
package domaingate

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Actor is the gate actor.
type Actor struct {
	*Deps
	tasks    *supervisors.Tasks
	journal  *supervisors.Journal[*State]
	checking map[string]bool      // gates with a check running
	due      map[string]func()    // cancels a gate's scheduled Due
	next     map[string]time.Time // when a gate's scheduled Due fires (for operators)
}

// New returns the producer of the gate actor.
func New(deps *Deps) actor.Producer {
	return func() actor.Actor { return &Actor{Deps: deps} }
}

// Tasks are the gate's checks and timers.
func (a *Actor) Tasks() *supervisors.Tasks { return a.tasks }

// Describe summarises the gates for /debug/actors.
func (a *Actor) Describe() (string, int) {
	if a.journal == nil {
		return "loading", 0
	}
	open := 0
	for _, g := range a.journal.State.Gates {
		if g.Open {
			open++
		}
	}
	return fmt.Sprintf("%d custom domains, %d open", len(a.journal.State.Gates), open), len(a.checking)
}

// Receive handles the gate's messages.
func (a *Actor) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case *actor.Started:
		a.start(c)
	case *messages.WatchCustomDomain, *messages.ForgetCustomDomain, Due:
		a.decide(m)
	case Checked:
		delete(a.checking, key(m.Lease, m.Domain))
		a.decide(m)
	case *messages.DebugDomainGates:
		m.Reply <- messages.DomainGatesReply{Gates: Views(a.journal.State, m.Lease, a.checking, a.next)}
	}
}

func (a *Actor) start(c actor.Context) {
	a.tasks = supervisors.NewTasks(c, 0)
	a.checking, a.due, a.next = map[string]bool{}, map[string]func(){}, map[string]time.Time{}
	a.journal = &supervisors.Journal[*State]{Store: a.Store, Stream: Stream, Version: eventVersion, Now: a.Now, Log: a.Log}
	st := newState()
	if err := a.journal.Load(st, st.mend); err != nil {
		// An unreadable journal stops the daemon; until then the gate holds nothing.
		a.Tree.Fail(fmt.Errorf("domaingate: %w", err))
		a.journal.Resume(newState(), 0)
		return
	}
	a.decide(Recover{})
}

// decide journals what Decide chose, then runs its effects; a failed commit
// runs none (the store has latched and the daemon drains).
func (a *Actor) decide(in any) {
	d := Decide(a.journal.State, in, Env{CheckDisabled: a.Settings.CheckDisabled})
	events := make([]persistence.Event, len(d.Events))
	for i, e := range d.Events {
		events[i] = a.journal.Event(e.Type, e)
	}
	_ = supervisors.Execute(supervisors.Decided[any]{Events: events, Effects: d.Effects}, func(evs []persistence.Event) error {
		if err := a.journal.Commit(evs); err != nil {
			return err
		}
		for _, e := range d.Events {
			lvl := a.Log.Info()
			if e.Type == EvMissed { // every backoff: the console shows the last verdict
				lvl = a.Log.Debug()
			}
			lvl.Str("lease", e.Lease).Str("domain", e.Domain).Str("event", e.Type).Str("detail", e.Detail).Msg("custom domain gate")
		}
		return nil
	}, a.run)
}

func (a *Actor) run(eff any) {
	switch e := eff.(type) {
	case Check:
		a.check(e.Lease, e.Domain)
	case Schedule:
		k := key(e.Lease, e.Domain)
		a.cancel(k)
		wait := supervisors.Retry{Base: a.Settings.BackoffBase, Cap: a.Settings.BackoffCap}.Jittered(e.Attempt)
		a.due[k] = a.tasks.After("gate-due", wait, Due{e.Lease, e.Domain})
		a.next[k] = a.Now().Add(wait)
	case Cancel:
		a.cancel(key(e.Lease, e.Domain))
	case Ready:
		a.Tree.Send(a.Settings.OwnerPath, &messages.CustomDomainReady{Lease: e.Lease, Domain: e.Domain})
	}
}

func (a *Actor) cancel(k string) {
	if stop, ok := a.due[k]; ok {
		stop()
		delete(a.due, k)
	}
	delete(a.next, k)
}

// check runs one check of a gate off the actor, unless one runs already.
func (a *Actor) check(lease, domain string) {
	k := key(lease, domain)
	delete(a.due, k)
	delete(a.next, k)
	if a.checking[k] {
		return
	}
	res, timeout := a.Settings.Resolvers, a.Settings.CheckTimeout
	if a.tasks.Go("gate-check", func(ctx context.Context) any {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		return Checked{Lease: lease, Domain: domain, Verdict: res.Check(ctx, domain)}
	}) {
		a.checking[k] = true
	}
}
