package registry

// Table tests of Decide (decide.go): every input from every entry status —
// admission and its batch commit, close and its batch, retention and eviction,
// restore, maintenance, reports, terminations and respawns, the reaper's sweep
// — without actors, bbolt or Docker. Each row builds a directory (its journal
// folded from real registry events), decides one input, checks the decision as
// rendered text (events, effects, and what a failed commit would run instead),
// checks that Decide left the directory untouched, then runs the decision on
// the directory and checks where the lease ends up.

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

const (
	lA = "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa"
	lB = "bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb"
	lC = "cccccccc-cccc-4ccc-8ccc-cccccccccccc"
	lD = "dddddddd-dddd-4ddd-8ddd-dddddddddddd"
)

// short names the fixture leases in rendered decisions.
var short = strings.NewReplacer(lA, "A", lB, "B", lC, "C", lD, "D")

var now = t0.Add(time.Hour)

// dirOf is a ready directory over the actor tests' pool (2 cores, 4096 MB,
// 8192 MB disk), the sibling paths named.
func dirOf(mutate ...func(*Settings)) *Directory {
	set := actorSettings()
	set.NetpoolPath, set.ReaperPath = "root/netpool", "root/reaper"
	for _, m := range mutate {
		m(set)
	}
	d := newDirectory(set, newState())
	d.Ready = true
	return d
}

func mustFold(d *Directory, evs ...persistence.Event) {
	for _, ev := range evs {
		if err := d.fold(d.St, ev); err != nil {
			panic(err)
		}
	}
}

func pidOf(id string) *actor.PID { return &actor.PID{Id: "root/registry/lease-" + id} }

// put admits id (n × sku) into the directory's journal through its fold and
// gives it an entry in status; report is the lease status its last report (of
// this admission) gave ("": it has not reported). A closed entry's close is
// journaled; a respawning one's last report is of the admission before; a
// stopped one has no actor.
func put(d *Directory, id, sku string, n int, status Status, report lease.Status) *lease.Spec {
	return putRequest(d, leaseRequest(id, sku, n), status, report)
}

// putRequest is put of an admitted request.
func putRequest(d *Directory, req messages.ProvisionRequest, status Status, report lease.Status) *lease.Spec {
	id := req.LeaseUUID
	spec, err := d.set.prepare(req, t0)
	if err != nil {
		panic(err)
	}
	spec.Admission = d.St.Admissions + 1
	mustFold(d, AdmittedEvent(spec, t0))
	e := &entry{status: status, pid: pidOf(id), shown: untold}
	if report != "" {
		e.report = messages.LeaseReport{Lease: id, Admission: spec.Admission, Status: string(report),
			Info: messages.ProvisionInfo{LeaseUUID: id, Status: report.Wire(), FailCount: 1}}
		e.shown = string(report)
	}
	switch status {
	case Closed:
		mustFold(d, ClosedEvent(messages.LeaseClosed{Lease: id, Admission: spec.Admission}, t0))
	case Respawning:
		e.report.Admission--
	case Stopped:
		e.pid = nil
	}
	d.entries[id] = e
	return spec
}

// retained journals a retention record of id for tenant: one volume of app
// holding used bytes under a quota of quotaMB, retained at t0 until until.
func retained(d *Directory, id, tenant string, quotaMB, used int64, at, until time.Time) {
	spec, _ := d.set.prepare(leaseRequest(id, "docker-small", 1), t0)
	rec := &messages.RetentionRecord{Lease: id, Tenant: tenant, ProviderUUID: "provider-test", Items: spec.Items,
		Manifest: spec.Manifest, RetainedAt: at, RetainedUntil: until, Volumes: []messages.RetainedVolume{{
			Name: messages.RetainedVolumeName(id, "app", 0), Service: "app", QuotaMB: quotaMB, UsedBytes: used}}}
	mustFold(d, ClosedEvent(messages.LeaseClosed{Lease: id, Retention: rec}, at))
}

// render is a decision as text, one line per event or effect (logs left out).
func render(evs []persistence.Event, fx []Effect) []string {
	out := []string{}
	for _, ev := range evs {
		var p struct {
			Lease  string      `json:"lease_uuid"`
			Spec   *lease.Spec `json:"spec"`
			Reason string      `json:"reason"`
			Ret    any         `json:"retention"`
			Leases []string    `json:"leases"`
		}
		_ = json.Unmarshal(ev.Data, &p)
		s := ev.Type + " " + p.Lease
		if p.Spec != nil {
			s += fmt.Sprintf("%s#%d", p.Spec.Lease, p.Spec.Admission)
		}
		if p.Reason != "" {
			s += " " + p.Reason
		}
		if p.Ret != nil {
			s += " retained"
		}
		if len(p.Leases) > 0 {
			s += strings.Join(p.Leases, ",")
		}
		out = append(out, short.Replace(s))
	}
	for _, e := range fx {
		if s := renderEffect(e); s != "" {
			out = append(out, short.Replace(s))
		}
	}
	return out
}

func renderEffect(e Effect) string {
	switch e := e.(type) {
	case Spawn:
		if e.Admitted {
			return fmt.Sprintf("spawn %s#%d admitted", e.Spec.Lease, e.Spec.Admission)
		}
		return fmt.Sprintf("spawn %s#%d", e.Spec.Lease, e.Spec.Admission)
	case Send:
		switch m := e.Msg.(type) {
		case *messages.Deprovision:
			return fmt.Sprintf("send %s deprovision retain=%t", e.Lease, m.Retain)
		case lease.ReprovisionCommand:
			return fmt.Sprintf("send %s reprovision #%d", e.Lease, m.Spec.Admission)
		case *lease.MaintainCommand:
			return fmt.Sprintf("send %s maintain %s update=%t", e.Lease, m.Maintain.Kind, m.Maintain.Target != nil)
		}
		return fmt.Sprintf("send %s %T", e.Lease, e.Msg)
	case Stop:
		return "stop " + e.Lease
	case Tell:
		return fmt.Sprintf("tell %s %T", e.Path, e.Msg)
	case Answer:
		var r *messages.Refusal
		if errors.As(e.Err, &r) {
			return fmt.Sprintf("answer %v: %s", r.Kind, r.Msg)
		}
		return fmt.Sprintf("answer %v", e.Err)
	case Queue:
		if ad, ok := e.Item.(admission); ok {
			return fmt.Sprintf("queue %s#%d replacing=%t", ad.spec.Lease, ad.spec.Admission, ad.replacing)
		}
		return fmt.Sprintf("queue close %s", e.Item.(messages.LeaseClosed).Lease)
	case Move:
		if e.To == "" {
			return "forget " + e.Lease
		}
		return fmt.Sprintf("move %s %s", e.Lease, e.To)
	case Report:
		return fmt.Sprintf("report %s#%d %s", e.Report.Lease, e.Report.Admission, e.Report.Status)
	case Note:
		return fmt.Sprintf("note %s %s→%s", e.Lease, e.From, e.To)
	case Reserve:
		if e.Use == nil {
			return "release " + e.Lease
		}
		return fmt.Sprintf("reserve %s %dm", e.Lease, e.Use.use.CPUMilli)
	case Retain:
		return fmt.Sprintf("retain %s %dMB", e.Lease, e.MB)
	case CloseSent:
		return fmt.Sprintf("closes %s %+d", e.Lease, e.N)
	case DemoteRefused:
		return "count demote refused"
	}
	return "" // Log
}

// fingerprint is everything a decision could change in the directory.
func fingerprint(d *Directory) string {
	type row struct {
		Status Status
		PID    string
		Report messages.LeaseReport
		Shown  string
		Closes int
	}
	rows := map[string]row{}
	for id, e := range d.entries {
		r := row{Status: e.status, Report: e.report, Shown: e.shown, Closes: e.closes}
		if e.pid != nil {
			r.PID = e.pid.Id
		}
		rows[id] = r
	}
	b, _ := json.Marshal([]any{d.St, rows, d.Pool.byLease, d.Pool.allocated, d.Retaining, d.Ready})
	return string(b)
}

// runOn runs a decision on the directory as the actor would, its commit
// succeeding: events folded, spawns given an actor, directory changes applied.
func runOn(d *Directory, dec Decision) {
	mustFold(d, dec.Events...)
	for _, e := range dec.Effects {
		if s, ok := e.(Spawn); ok {
			d.spawned(s, pidOf(s.Spec.Lease))
		}
		d.apply(e)
	}
}

type row struct {
	name   string
	setup  func(d *Directory) any // builds the directory, returns the input
	env    Env
	want   []string // events, then effects
	failed []string // what a failed commit runs instead (rows with events)
	lease  string   // whose entry then ends in status then ("-": no entry)
	then   Status
	mutate func(*Settings)
}

func runRows(t *testing.T, rows []row) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			d := dirOf()
			if r.mutate != nil {
				d = dirOf(r.mutate)
			}
			in := r.setup(d)
			env := r.env
			if env.Now.IsZero() {
				env.Now = now
			}
			before := fingerprint(d)
			dec := Decide(d, in, env)
			if after := fingerprint(d); after != before {
				t.Fatalf("Decide changed the directory:\n%s\n%s", before, after)
			}
			if got := render(dec.Events, dec.Effects); !slices.Equal(got, r.want) {
				t.Fatalf("decision\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(r.want, "\n  "))
			}
			if got := render(nil, dec.Failed); !slices.Equal(got, r.failed) {
				t.Fatalf("on a failed commit\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(r.failed, "\n  "))
			}
			if r.lease == "" {
				return
			}
			runOn(d, dec)
			e := d.entries[r.lease]
			switch {
			case r.then == "-" && e != nil:
				t.Fatalf("entry left in %s, want none", e.status)
			case r.then != "-" && (e == nil || e.status != r.then):
				t.Fatalf("entry %+v, want status %s", e, r.then)
			}
		})
	}
}

func admit(id, sku string, n int) *messages.Admit {
	return &messages.Admit{Req: leaseRequest(id, sku, n), Reply: make(chan error, 1)}
}

// queued is an admission batch holding one admission of id.
func queued(d *Directory, id string) []admission {
	spec, _ := d.set.prepare(leaseRequest(id, "docker-small", 1), now)
	return []admission{{spec: spec}}
}

const closedUUID = "answer already provisioned: lease already provisioned and closed; a lease UUID is never provisioned again"

// usedIs is an Env.Used answering used (or err) for every UUID.
func usedIs(used bool, err error) func(string) (bool, error) {
	return func(string) (bool, error) { return used, err }
}

func TestDecide_Admit(t *testing.T) {
	fresh := func(*Directory) any { return admit(lA, "docker-small", 2) }
	already := "answer already provisioned: lease already provisioned"
	from := func(s Status, r lease.Status) func(d *Directory) any {
		return func(d *Directory) any { put(d, lA, "docker-small", 1, s, r); return admit(lA, "docker-small", 1) }
	}
	runRows(t, []row{
		{name: "fresh: reserved and queued", setup: fresh, want: []string{"queue A#1 replacing=false", "reserve A 200m"}},
		{name: "numbered behind the queued batch", setup: fresh, env: Env{Queued: append(queued(dirOf(), lB), queued(dirOf(), lC)...)},
			want: []string{"queue A#3 replacing=false", "reserve A 200m"}},
		{name: "not ready", setup: func(d *Directory) any { d.Ready = false; return admit(lA, "docker-small", 1) },
			want: []string{"answer unavailable: recovering state, retry shortly"}},
		{name: "not a UUID", setup: func(*Directory) any { return admit("X", "docker-small", 1) },
			want: []string{"answer bad request: lease_uuid must be a canonical UUID"}},
		{name: "already in the batch", setup: func(d *Directory) any { return admit(lA, "docker-small", 1) },
			env: Env{Queued: queued(dirOf(), lA)}, want: []string{already}},
		{name: "admitted", setup: from(Admitted, ""), want: []string{already}},
		{name: "reported ready", setup: from(Reported, lease.Ready), want: []string{already}},
		{name: "maintaining a failed lease: deciding blocks the replacement", setup: from(Maintaining, lease.Failed), want: []string{already}},
		{name: "closing a failed lease", setup: from(Closing, lease.Failed), want: []string{already}},
		{name: "respawning", setup: from(Respawning, lease.Closed), want: []string{already}},
		{name: "stopped", setup: from(Stopped, lease.Failed), want: []string{already}},
		{name: "failed: replaced, its reservation swapped", setup: func(d *Directory) any {
			put(d, lA, "docker-big", 1, Reported, lease.Failed) // 1.5 of 2 cores
			return admit(lA, "docker-huge", 1)                  // 1.8: fits only with the 1.5 freed
		}, want: []string{"queue A#2 replacing=true", "reserve A 1800m"}},
		{name: "failing: replaced too (Failing → Provisioning)", setup: from(Reported, lease.Failing),
			want: []string{"queue A#2 replacing=true", "reserve A 100m"}},
		{name: "closed, its actor stopping: refused, the close is a permanent fence (issue 18: admitted anew)",
			setup: from(Closed, lease.Closed), want: []string{closedUUID}},
		{name: "closed long ago: its lease stream refuses the UUID", setup: fresh, env: Env{Used: usedIs(true, nil)},
			want: []string{closedUUID}},
		{name: "never seen: its lease stream looked up, admitted", setup: fresh, env: Env{Used: usedIs(false, nil)},
			want: []string{"queue A#1 replacing=false", "reserve A 200m"}},
		{name: "the store cannot tell: unavailable", setup: fresh, env: Env{Used: usedIs(false, errors.New("io"))},
			want: []string{"answer unavailable: state store unavailable"}},
		{name: "insufficient resources", setup: func(d *Directory) any {
			put(d, lB, "docker-big", 1, Reported, lease.Ready)
			return admit(lA, "docker-tiny", 3)
		}, want: []string{"answer insufficient resources: insufficient resources in the provider's pool"}},
		{name: "tenant quota", mutate: func(s *Settings) { s.TenantQuota = Resources{CPUMilli: CPU(0.3)} }, setup: func(d *Directory) any {
			put(d, lB, "docker-tiny", 1, Reported, lease.Ready)
			return admit(lA, "docker-tiny", 1)
		}, want: []string{"answer insufficient resources: tenant quota exceeded"}},
	})
}

func TestDecide_AdmissionBatchCommit(t *testing.T) {
	// A batch of a fresh lease and the replacement of a failed one, decided as
	// the actor decides each Admit, then committed.
	batch := func(d *Directory) any {
		put(d, lB, "docker-small", 1, Reported, lease.Failed)
		var items []admission
		for _, m := range []*messages.Admit{admit(lA, "docker-small", 2), admit(lB, "docker-tiny", 1)} {
			dec := Decide(d, m, Env{Now: now, Queued: items})
			items = append(items, dec.Effects[0].(Queue).Item.(admission))
			d.apply(dec.Effects[1])
		}
		return admissionBatch(items)
	}
	runRows(t, []row{
		{name: "journaled in one commit, spawned or re-provisioned, answered", setup: batch, lease: lB, then: Admitted,
			want: []string{"lease.admitted A#2", "lease.admitted B#3",
				"spawn A#2 admitted", "answer <nil>", "move B admitted", "send B reprovision #3", "answer <nil>"},
			failed: []string{"reserve B 100m", "answer unavailable: state store unavailable",
				"release A", "answer unavailable: state store unavailable"}},
	})
	// The replaced lease reads provisioning under its new admission, its
	// fail_count kept, until it reports on it.
	d := dirOf()
	runOn(d, Decide(d, batch(d), Env{Now: now}))
	if info := d.view(lB, d.entries[lB]); info.Status != messages.StatusProvisioning || info.FailCount != 1 || info.Quantity != 1 {
		t.Fatalf("replaced lease reads %+v", info)
	}
	if got := d.Pool.Allocated(); got != (Resources{CPUMilli: 400, MemoryMB: 320, DiskMB: 544}) {
		t.Fatalf("pool after the commit %+v", got)
	}
}

func deprovision(id string) *messages.Deprovision {
	return &messages.Deprovision{Lease: id, Reply: make(chan error, 1)}
}

func TestDecide_Deprovision(t *testing.T) {
	gone := []string{"answer <nil>"}
	from := func(s Status, r lease.Status) func(d *Directory) any {
		return func(d *Directory) any { put(d, lA, "docker-small", 1, s, r); return deprovision(lA) }
	}
	retain := func(s *Settings) { s.RetainOnClose = true }
	runRows(t, []row{
		{name: "not a UUID", setup: func(*Directory) any { return deprovision("X") },
			want: []string{"answer bad request: lease_uuid must be a canonical UUID"}},
		{name: "unknown: gone", setup: func(*Directory) any { return deprovision(lA) }, want: gone},
		{name: "closed: gone", setup: from(Closed, lease.Closed), want: gone},
		{name: "live without an entry: an actor spawned to own the close, never a 200 (issue 18: answered gone)",
			setup: func(d *Directory) any {
				put(d, lA, "docker-small", 1, Reported, lease.Ready)
				delete(d.entries, lA)
				return deprovision(lA)
			}, lease: lA, then: Closing, want: []string{"spawn A#1", "move A closing", "send A deprovision retain=false", "closes A +1"}},
		{name: "respawning: lifecycle pending", setup: from(Respawning, lease.Closed),
			want: []string{"answer lifecycle pending: lease is being replaced, retry shortly"}},
		{name: "reported: forwarded", setup: from(Reported, lease.Ready), lease: lA, then: Closing,
			want: []string{"move A closing", "send A deprovision retain=false", "closes A +1"}},
		{name: "admitted: forwarded", setup: from(Admitted, ""), lease: lA, then: Closing,
			want: []string{"move A closing", "send A deprovision retain=false", "closes A +1"}},
		{name: "maintaining: forwarded", setup: from(Maintaining, lease.Ready), lease: lA, then: Closing,
			want: []string{"move A closing", "send A deprovision retain=false", "closes A +1"}},
		{name: "stopped: respawned, then forwarded", setup: from(Stopped, lease.Ready), lease: lA, then: Closing,
			want: []string{"spawn A#1", "move A closing", "send A deprovision retain=false", "closes A +1"}},
		{name: "busy: refused, the close stays asked for", setup: from(Reported, lease.Ready),
			env: Env{Busy: func(*actor.PID) bool { return true }}, lease: lA, then: Closing,
			want: []string{"move A closing", "answer busy: lease is busy, retry later"}},
		{name: "retain_on_close with room: retained", mutate: retain, setup: from(Reported, lease.Ready), lease: lA, then: Closing,
			want: []string{"retain A 256MB", "move A closing", "send A deprovision retain=true", "closes A +1"}},
		{name: "retain_on_close, a diskless lease: nothing to retain", mutate: retain, setup: func(d *Directory) any {
			put(d, lA, "docker-tiny", 1, Reported, lease.Ready)
			return deprovision(lA)
		}, want: []string{"move A closing", "send A deprovision retain=false", "closes A +1"}},
		{name: "retain_on_close without room: destroyed", mutate: func(s *Settings) { retain(s); s.MaxRetainedDiskMB = 300 },
			setup: func(d *Directory) any {
				retained(d, lB, "fred1tenant", 256, 0, t0, time.Time{})
				put(d, lA, "docker-small", 1, Reported, lease.Ready)
				return deprovision(lA)
			}, want: []string{"move A closing", "send A deprovision retain=false", "closes A +1"}},
		{name: "a close deciding to retain counts against the cap", mutate: func(s *Settings) { retain(s); s.MaxRetainedDiskMB = 300 },
			setup: func(d *Directory) any {
				put(d, lB, "docker-small", 1, Closing, lease.Deprovisioning)
				d.Retaining[lB] = 256
				put(d, lA, "docker-small", 1, Reported, lease.Ready)
				return deprovision(lA)
			}, want: []string{"move A closing", "send A deprovision retain=false", "closes A +1"}},
		{name: "a second close keeps the first decision", mutate: retain, setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Closing, lease.Deprovisioning)
			d.Retaining[lA] = 256
			return deprovision(lA)
		}, lease: lA, then: Closing, want: []string{"move A closing", "send A deprovision retain=false", "closes A +1"}},
		{name: "a close its lease refused (its asker gave up): no longer closing", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Closing, lease.Ready)
			d.entries[lA].closes = 1
			return lease.CloseDropped{Lease: lA}
		}, lease: lA, then: Reported, want: []string{"closes A -1", "move A reported", "retain A 0MB"}},
		{name: "one of two forwarded closes refused: still closing (the other may be taken)", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Closing, lease.Ready)
			d.entries[lA].closes = 2
			return lease.CloseDropped{Lease: lA}
		}, lease: lA, then: Closing, want: []string{"closes A -1"}},
		{name: "a refused close of a lease no longer closing here: nothing", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			return lease.CloseDropped{Lease: lA}
		}, lease: lA, then: Reported},
	})
}

func closed(id string, admission uint64, rec *messages.RetentionRecord) messages.LeaseClosed {
	return messages.LeaseClosed{Lease: id, Admission: admission, Retention: rec}
}

func record(id string) *messages.RetentionRecord {
	return &messages.RetentionRecord{Lease: id, Tenant: "fred1tenant", RetainedAt: now,
		Volumes: []messages.RetainedVolume{{Service: "app", QuotaMB: 256}}}
}

func TestDecide_LeaseClosed(t *testing.T) {
	closing := func(d *Directory) { put(d, lA, "docker-small", 1, Closing, lease.Deprovisioning) }
	gone := []string{"tell root/reclaimer *messages.LeaseGone", "tell root/netpool *messages.LeaseGone"}
	forgotten := append(slices.Clone(gone), "move A closed", "stop A")
	runRows(t, []row{
		{name: "plain: queued for the close batch", setup: func(d *Directory) any { closing(d); return closed(lA, 1, nil) },
			lease: lA, then: Closing, want: []string{"queue close A"}},
		{name: "unknown: nothing", setup: func(*Directory) any { return closed(lA, 1, nil) }},
		{name: "closed already: nothing", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Closed, lease.Closed)
			return closed(lA, 1, nil)
		}},
		{name: "an admission since superseded: nothing", setup: func(d *Directory) any {
			closing(d)
			return closed(lA, 0, nil)
		}},
		{name: "journaled as not live: forgotten without a commit", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Closed, lease.Closed)
			d.entries[lA].status = Closing
			return closed(lA, 1, nil)
		}, lease: lA, then: Closed, want: append(gone, "move A closed", "stop A")},
		{name: "retained: decided alone", setup: func(d *Directory) any { closing(d); return closed(lA, 1, record(lA)) },
			lease: lA, then: Closed, want: append([]string{"lease.closed A retained"}, forgotten...)},
		{name: "retained beyond the tenant's cap: its oldest evicted", mutate: func(s *Settings) { s.MaxRetainedPerTenant = 2 },
			setup: func(d *Directory) any {
				retained(d, lC, "fred1tenant", 256, 0, t0.Add(2*time.Minute), time.Time{})
				retained(d, lB, "fred1tenant", 256, 0, t0.Add(time.Minute), time.Time{})
				retained(d, lD, "fred1other", 256, 0, t0, time.Time{})
				closing(d)
				return closed(lA, 1, record(lA))
			}, lease: lA, then: Closed,
			want: append([]string{"lease.closed A retained", "retention.reaping B evicted", "tell root/reaper messages.ReapNow"}, forgotten...)},
	})
}

func TestDecide_CloseBatchCommit(t *testing.T) {
	runRows(t, []row{
		{name: "journaled in one commit; settled, repeated and superseded closes left out", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Closing, lease.Deprovisioning)
			put(d, lB, "docker-small", 1, Closed, lease.Closed)
			put(d, lC, "docker-small", 1, Closing, lease.Deprovisioning)
			put(d, lD, "docker-small", 1, Closing, lease.Deprovisioning)
			d.entries[lD].pid = nil
			return closeBatch{closed(lA, 1, nil), closed(lB, 2, nil), closed(lA, 1, nil), closed(lC, 2, nil), closed(lD, 4, nil)}
		}, lease: lD, then: "-", want: []string{"lease.closed A", "lease.closed D",
			"tell root/reclaimer *messages.LeaseGone", "tell root/netpool *messages.LeaseGone", "move A closed", "stop A",
			"tell root/reclaimer *messages.LeaseGone", "tell root/netpool *messages.LeaseGone", "forget D"}},
	})
}

func restore(dest, from, sku string) *messages.Restore {
	return &messages.Restore{Req: restoreRequest(dest, from, "fred1tenant", sku), Reply: make(chan error, 1)}
}

func TestDecide_Restore(t *testing.T) {
	withRecord := func(used int64) func(d *Directory) {
		return func(d *Directory) { retained(d, lB, "fred1tenant", 256, used, t0, now.Add(time.Hour)) }
	}
	mini := func(s *Settings) { retaining(s) }
	runRows(t, []row{
		{name: "restored: the record claimed with the admission", setup: func(d *Directory) any {
			withRecord(0)(d)
			return restore(lA, lB, "docker-small")
		}, lease: lA, then: Admitted, want: []string{"lease.admitted A#1", "spawn A#1", "answer <nil>"},
			failed: []string{"answer unavailable: state store unavailable"}},
		{name: "nothing retained: the bare 422", setup: func(*Directory) any { return restore(lA, lB, "docker-small") },
			want: []string{"answer nothing retained: nothing retained"}},
		{name: "past its grace: the bare 422", setup: func(d *Directory) any {
			retained(d, lB, "fred1tenant", 256, 0, t0, now.Add(-time.Second))
			return restore(lA, lB, "docker-small")
		}, want: []string{"answer nothing retained: nothing retained"}},
		{name: "demoted below the data", mutate: mini, setup: func(d *Directory) any {
			withRecord(100 << 20)(d)
			return restore(lA, lB, "docker-mini")
		}, want: []string{"count demote refused", "answer retained data exceeds the requested tier: the retained data of app does not fit the requested tier"}},
		{name: "already provisioned", setup: func(d *Directory) any {
			withRecord(0)(d)
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			return restore(lA, lB, "docker-small")
		}, want: []string{"answer already provisioned: lease already provisioned"}},
		{name: "the pool, counting the record's footprint as freed", mutate: func(s *Settings) { s.Totals.DiskMB = 1024 + 256 }, setup: func(d *Directory) any {
			withRecord(0)(d)
			put(d, lC, "docker-huge", 1, Reported, lease.Ready)
			return restore(lA, lB, "docker-small")
		}, want: []string{"lease.admitted A#2", "spawn A#2", "answer <nil>"},
			failed: []string{"answer unavailable: state store unavailable"}},
		{name: "the pool refuses", setup: func(d *Directory) any {
			withRecord(0)(d)
			put(d, lC, "docker-huge", 1, Reported, lease.Ready)
			return restore(lA, lB, "docker-big")
		}, want: []string{"answer insufficient resources: insufficient resources in the provider's pool"}},
		{name: "not ready", setup: func(d *Directory) any { d.Ready = false; return restore(lA, lB, "docker-small") },
			want: []string{"answer unavailable: recovering state, retry shortly"}},
		{name: "into a closed UUID, its actor stopping: refused (issue 18: admitted over it)", setup: func(d *Directory) any {
			withRecord(0)(d)
			put(d, lA, "docker-small", 1, Closed, lease.Closed)
			return restore(lA, lB, "docker-small")
		}, want: []string{closedUUID}},
		{name: "into a UUID closed long ago: its lease stream refuses it", setup: func(d *Directory) any {
			withRecord(0)(d)
			return restore(lA, lB, "docker-small")
		}, env: Env{Used: usedIs(true, nil)}, want: []string{closedUUID}},
	})
}

func maintain(id, kind, payload string) *messages.Maintain {
	return &messages.Maintain{Kind: kind, MaintenanceID: "m-1", Reply: make(chan error, 1),
		Req: messages.MaintenanceRequest{LeaseUUID: id, Payload: payload}}
}

func TestDecide_Maintain(t *testing.T) {
	notFound := []string{"answer not found: lease not provisioned"}
	from := func(s Status, r lease.Status) func(d *Directory) any {
		return func(d *Directory) any {
			put(d, lA, "docker-small", 1, s, r)
			return maintain(lA, messages.MaintenanceRestart, "")
		}
	}
	update := b64(`{"image":"` + testImage + `"}`)
	runRows(t, []row{
		{name: "reported: forwarded, deciding", setup: from(Reported, lease.Failed), lease: lA, then: Maintaining,
			want: []string{"move A maintaining", "send A maintain restart update=false"}},
		{name: "an update: its target validated", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			return maintain(lA, messages.MaintenanceUpdate, update)
		}, lease: lA, then: Maintaining, want: []string{"move A maintaining", "send A maintain update update=true"}},
		{name: "an update without a manifest", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			return maintain(lA, messages.MaintenanceUpdate, "")
		}, want: []string{"answer bad request: payload is required"}},
		{name: "admitted: forwarded, still admitted", setup: from(Admitted, ""), lease: lA, then: Admitted,
			want: []string{"send A maintain restart update=false"}},
		{name: "maintaining: forwarded (the lease decides)", setup: from(Maintaining, lease.Restarting), lease: lA, then: Maintaining,
			want: []string{"send A maintain restart update=false"}},
		{name: "unknown", setup: func(*Directory) any { return maintain(lA, messages.MaintenanceRestart, "") }, want: notFound},
		{name: "closing: not found", setup: from(Closing, lease.Deprovisioning), want: notFound},
		{name: "closed: not found", setup: from(Closed, lease.Closed), want: notFound},
		{name: "stopped: being recovered", setup: from(Stopped, lease.Ready),
			want: []string{"answer unavailable: lease actor is being recovered"}},
		{name: "respawning: being recovered", setup: from(Respawning, lease.Closed),
			want: []string{"answer unavailable: lease actor is being recovered"}},
		{name: "busy", setup: from(Reported, lease.Ready), env: Env{Busy: func(*actor.PID) bool { return true }}, lease: lA, then: Reported,
			want: []string{"answer busy: lease is busy, retry later"}},
		{name: "not ready", setup: func(d *Directory) any { d.Ready = false; return maintain(lA, messages.MaintenanceRestart, "") },
			want: []string{"answer unavailable: recovering state, retry shortly"}},
	})
}

func reportOf(id string, admission uint64, st lease.Status) messages.LeaseReport {
	return messages.LeaseReport{Lease: id, Admission: admission, Status: string(st), Info: messages.ProvisionInfo{LeaseUUID: id, Status: st.Wire()}}
}

func TestDecide_LeaseReport(t *testing.T) {
	from := func(s Status, r lease.Status, rep messages.LeaseReport) func(d *Directory) any {
		return func(d *Directory) any { put(d, lA, "docker-small", 1, s, r); return rep }
	}
	restoring := func(d *Directory) {
		retained(d, lB, "fred1tenant", 256, 0, t0, now.Add(time.Hour))
		runOn(d, Decide(d, restore(lA, lB, "docker-small"), Env{Now: now}))
	}
	runRows(t, []row{
		{name: "admitted: its first report", setup: from(Admitted, "", reportOf(lA, 1, lease.Reserved)), lease: lA, then: Reported,
			want: []string{"note A ?→reserved", "report A#1 reserved", "move A reported"}},
		{name: "reported: a transition", setup: from(Reported, lease.Provisioning, reportOf(lA, 1, lease.Ready)), lease: lA, then: Reported,
			want: []string{"note A provisioning→ready", "report A#1 ready"}},
		{name: "reported: no change, no transition", setup: from(Reported, lease.Ready, reportOf(lA, 1, lease.Ready)),
			want: []string{"report A#1 ready"}},
		{name: "maintaining: decided", setup: from(Maintaining, lease.Failed, reportOf(lA, 1, lease.Restarting)), lease: lA, then: Reported,
			want: []string{"note A failed→restarting", "report A#1 restarting", "move A reported"}},
		{name: "closing: stays closing", setup: from(Closing, lease.Ready, reportOf(lA, 1, lease.Deprovisioning)), lease: lA, then: Closing,
			want: []string{"note A ready→deprovisioning", "report A#1 deprovisioning"}},
		{name: "unreadable journal: shown unknown", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			r := reportOf(lA, 1, lease.Reserved)
			r.Info.Status = messages.StatusUnknown
			return r
		}, want: []string{"note A ready→unknown", "report A#1 reserved"}},
		{name: "older than the last: nothing", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			d.entries[lA].report.Admission = 2
			return reportOf(lA, 1, lease.Failed)
		}},
		{name: "unknown lease: nothing", setup: func(*Directory) any { return reportOf(lA, 1, lease.Ready) }},
		{name: "of an admission it was re-provisioned past: the Reprovision sent again", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Failed)
			spec, _ := d.set.prepare(leaseRequest(lA, "docker-small", 1), now)
			spec.Admission = 2
			mustFold(d, AdmittedEvent(spec, now))
			d.entries[lA].status = Admitted
			return reportOf(lA, 1, lease.Failed)
		}, lease: lA, then: Admitted, want: []string{"report A#1 failed", "send A reprovision #2"}},
		{name: "a restore's destination ready: the record consumed", setup: func(d *Directory) any {
			restoring(d)
			return reportOf(lA, 1, lease.Ready)
		}, lease: lA, then: Reported, want: []string{"retention.consumed B", "note A ?→ready", "report A#1 ready", "move A reported"},
			failed: []string{"note A ?→ready", "report A#1 ready", "move A reported"}},
		{name: "a restore's destination failed: the record released", setup: func(d *Directory) any {
			restoring(d)
			return reportOf(lA, 1, lease.Failed)
		}, want: []string{"retention.released B", "note A ?→failed", "report A#1 failed", "move A reported"},
			failed: []string{"note A ?→failed", "report A#1 failed", "move A reported"}},
		{name: "a restore's destination provisioning: nothing settled", setup: func(d *Directory) any {
			restoring(d)
			return reportOf(lA, 1, lease.Provisioning)
		}, want: []string{"note A ?→provisioning", "report A#1 provisioning", "move A reported"}},
	})
}

// terminated is the Terminated of id's actor (the PID its spawn returned).
func terminated(d *Directory, id string) *actor.Terminated {
	if e := d.entries[id]; e != nil {
		return &actor.Terminated{Who: e.pid}
	}
	return &actor.Terminated{Who: pidOf(id)}
}

func TestDecide_Terminated(t *testing.T) {
	stopped := func(s Status, r lease.Status) row {
		return row{name: string(s) + ": stopped past its limit, shown unknown", lease: lA, then: Stopped,
			setup: func(d *Directory) any { put(d, lA, "docker-small", 1, s, r); return terminated(d, lA) },
			want:  []string{"move A stopped", "note A " + string(r) + "→unknown"}}
	}
	runRows(t, []row{
		{name: "respawning: spawned anew", lease: lA, then: Admitted, setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Respawning, lease.Closed)
			return terminated(d, lA)
		}, want: []string{"spawn A#1"}},
		{name: "closed: forgotten", lease: lA, then: "-", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Closed, lease.Closed)
			return terminated(d, lA)
		}, want: []string{"forget A"}},
		stopped(Reported, lease.Ready),
		stopped(Maintaining, lease.Failed),
		stopped(Closing, lease.Deprovisioning),
		{name: "admitted, never reported: stopped, no transition to tell", lease: lA, then: Stopped, setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Admitted, "")
			return terminated(d, lA)
		}, want: []string{"move A stopped", "note A ?→unknown"}},
		{name: "the registry stops: its children stop with it", env: Env{Stopping: true}, setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			return terminated(d, lA)
		}},
		{name: "an actor it does not know", setup: func(d *Directory) any { return terminated(d, lA) }},
		{name: "its predecessor's, its next actor spawned under the same name", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Admitted, "")
			return &actor.Terminated{Who: pidOf(lA)} // the same Id, another PID
		}, lease: lA, then: Admitted},
	})
}

// refused is spawnFailed of id after the executor recorded its refused spawn
// (Directory.spawned with no actor), as the actor runs it.
func refused(d *Directory, id string) spawnFailed {
	d.spawned(Spawn{Spec: d.St.Leases[id]}, nil)
	return spawnFailed{Lease: id, Err: errors.New("spawn: name exists")}
}

func TestDecide_SpawnFailed(t *testing.T) {
	runRows(t, []row{
		{name: "at start, no actor and none coming: stopped, shown unknown, retried with the stopped", lease: lA, then: Stopped,
			setup: func(d *Directory) any {
				put(d, lA, "docker-small", 1, Reported, lease.Ready)
				d.entries = map[string]*entry{} // a (re)started registry's directory
				return refused(d, lA)
			}, want: []string{"move A stopped", "note A ?→unknown"}},
		{name: "a stopped lease's retry refused again: stays stopped, already shown unknown", lease: lA, then: Stopped,
			setup: func(d *Directory) any {
				put(d, lA, "docker-small", 1, Stopped, lease.Ready)
				d.entries[lA].shown = messages.StatusUnknown
				return refused(d, lA)
			}, want: []string{"move A stopped"}},
		{name: "an orphan's close whose spawn was refused: stopped, the close retried by providerd", lease: lA, then: Stopped,
			setup: func(d *Directory) any {
				put(d, lA, "docker-small", 1, Stopped, lease.Ready)
				in := refused(d, lA)
				d.apply(Move{lA, Closing}) // the deprovision's effects after its Spawn
				return in
			}, want: []string{"move A stopped", "note A ready→unknown"}},
		{name: "respawning behind a predecessor that still stops: waits for its Terminated", lease: lA, then: Respawning,
			setup: func(d *Directory) any {
				put(d, lA, "docker-small", 1, Closed, lease.Closed)
				mustFold(d, AdmittedEvent(func() *lease.Spec {
					spec, _ := d.set.prepare(leaseRequest(lA, "docker-small", 1), t0)
					spec.Admission = d.St.Admissions + 1
					return spec
				}(), t0))
				return refused(d, lA)
			}},
		{name: "refused again once its predecessor terminated: stopped", lease: lA, then: Stopped, setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Respawning, lease.Closed)
			return refused(d, lA) // the Spawn terminated() asked for
		}, want: []string{"move A stopped", "note A closed→unknown"}},
		{name: "closed meanwhile: forgotten", lease: lA, then: "-", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Admitted, "")
			d.entries[lA].pid = nil // admitted here: its first spawn
			in := refused(d, lA)
			mustFold(d, ClosedEvent(messages.LeaseClosed{Lease: lA, Admission: 1}, t0))
			return in
		}, want: []string{"forget A"}},
		{name: "spawned since: nothing", lease: lA, then: Admitted, setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Admitted, "")
			return spawnFailed{Lease: lA, Err: errors.New("spawn: name exists")}
		}},
		{name: "the registry stops: nothing", env: Env{Stopping: true}, lease: lA, then: Respawning, setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Stopped, lease.Ready)
			return refused(d, lA)
		}},
	})
}

// TestDecide_SpawnFailed_ReservationKept: a live lease held stopped after its
// spawn was refused keeps its reservation in the pool and reads unknown.
func TestDecide_SpawnFailed_ReservationKept(t *testing.T) {
	d := dirOf()
	put(d, lA, "docker-small", 1, Admitted, "")
	d.entries[lA].pid = nil // admitted here: its first spawn
	before := d.Pool.Allocated()
	runOn(d, Decide(d, refused(d, lA), Env{Now: now}))
	if e := d.entries[lA]; e == nil || e.status != Stopped || e.shown != messages.StatusUnknown || e.pid != nil {
		t.Fatalf("entry %+v, want stopped, shown unknown, no actor", e)
	}
	if got := d.Pool.Allocated(); got != before || got.CPUMilli != 100 {
		t.Fatalf("pool %+v, want the reservation kept %+v", got, before)
	}
	if got := render(nil, Decide(d, messages.RetryStopped{}, Env{Now: now}).Effects); !slices.Equal(got, []string{"spawn A#1"}) {
		t.Fatalf("retry: %v, want it spawned again", got)
	}
}

func TestDecide_RetryStopped_Start_HoldDone(t *testing.T) {
	runRows(t, []row{
		{name: "retry: every stopped lease respawned", lease: lC, then: Reported, setup: func(d *Directory) any {
			put(d, lC, "docker-small", 1, Stopped, lease.Ready)
			put(d, lA, "docker-small", 1, Stopped, "")
			put(d, lB, "docker-small", 1, Reported, lease.Ready)
			return messages.RetryStopped{}
		}, want: []string{"spawn A#2", "spawn C#1"}},
		{name: "start: every live lease spawned, recovery asked", lease: lB, then: Admitted, setup: func(d *Directory) any {
			put(d, lB, "docker-small", 1, Reported, lease.Ready)
			put(d, lA, "docker-small", 1, Closed, lease.Closed)
			put(d, lC, "docker-small", 1, Reported, lease.Ready)
			d.entries = map[string]*entry{}
			return started{}
		}, want: []string{"spawn B#1", "spawn C#3", "tell root/reconciler messages.RecoverNow"}},
		{name: "a lease's hold done: handed to it", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Closing, lease.Deprovisioning)
			return &messages.HoldDone{Owner: "lease:" + lA, Name: "v"}
		}, want: []string{"send A *messages.VolumeHoldDone"}},
		{name: "a closed lease's hold done: nobody to tell", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Closed, lease.Closed)
			return &messages.HoldDone{Owner: "lease:" + lA, Name: "v"}
		}},
		{name: "a record's hold done: the reaper asked", setup: func(*Directory) any {
			return &messages.HoldDone{Owner: "retention:" + lA, Name: "v"}
		}, want: []string{"tell root/reaper messages.ReapNow"}},
	})
}

func TestDecide_Retention(t *testing.T) {
	until := now.Add(-time.Minute)
	runRows(t, []row{
		{name: "sweep: expired reaping, a gone destination's record released", setup: func(d *Directory) any {
			retained(d, lB, "fred1tenant", 256, 0, t0, until) // expired
			retained(d, lC, "fred1tenant", 256, 0, t0, time.Time{})
			retained(d, lD, "fred1tenant", 256, 0, t0, now.Add(time.Hour))
			runOn(d, Decide(d, restore(lA, lD, "docker-small"), Env{Now: t0}))
			mustFold(d, ClosedEvent(messages.LeaseClosed{Lease: lA, Admission: 1}, now)) // closed before ready, not re-quarantined
			return &messages.RetentionSweep{Now: now}
		}, want: []string{"retention.reaping B expired", "retention.released D"}},
		{name: "sweep: a restoring record with its destination live is never reaped", setup: func(d *Directory) any {
			retained(d, lB, "fred1tenant", 256, 0, t0, until)
			runOn(d, Decide(d, restore(lA, lB, "docker-small"), Env{Now: t0}))
			return &messages.RetentionSweep{Now: now}
		}},
		{name: "reaped: deleted", setup: func(d *Directory) any {
			retained(d, lB, "fred1tenant", 256, 0, t0, until)
			mustFold(d, retentionEv(EvRetentionReaping, lB, "expired", now))
			return &messages.RetentionReaped{Lease: lB}
		}, want: []string{"retention.deleted B"}},
		{name: "reaped while active: nothing", setup: func(d *Directory) any {
			retained(d, lB, "fred1tenant", 256, 0, t0, until)
			return &messages.RetentionReaped{Lease: lB}
		}},
		{name: "orphaned: pruned", setup: func(d *Directory) any {
			retained(d, lB, "fred1tenant", 256, 0, t0, until)
			return &messages.RetentionOrphaned{Lease: lB}
		}, want: []string{"retention.pruned B orphan"}},
		{name: "orphaned while reaping: nothing", setup: func(d *Directory) any {
			retained(d, lB, "fred1tenant", 256, 0, t0, until)
			mustFold(d, retentionEv(EvRetentionReaping, lB, "expired", now))
			return &messages.RetentionOrphaned{Lease: lB}
		}},
	})
}

// The pool is folded from the journal: a retained record holds its disk until
// its volumes are gone, a restore moves it to the destination's reservation.
func TestDirectory_PoolFollowsTheJournal(t *testing.T) {
	d := dirOf(retaining)
	retained(d, lB, "fred1tenant", 256, 0, t0, now.Add(time.Hour))
	if got := d.Pool.Allocated(); got.DiskMB != 256 {
		t.Fatalf("retained record: %+v", got)
	}
	runOn(d, Decide(d, restore(lA, lB, "docker-small"), Env{Now: now}))
	if got := d.Pool.Allocated(); got != (Resources{CPUMilli: 100, MemoryMB: 128, DiskMB: 256}) {
		t.Fatalf("restoring: %+v, want only the destination's reservation", got)
	}
	runOn(d, Decide(d, reportOf(lA, 1, lease.Failed), Env{Now: now})) // released: counted again
	put(d, lC, "docker-small", 1, Closing, lease.Deprovisioning)
	runOn(d, Decide(d, closed(lC, 2, nil), Env{Now: now}))
	runOn(d, Decide(d, closeBatch{closed(lC, 2, nil)}, Env{Now: now}))
	var ids []string
	for id := range d.Pool.byLease {
		ids = append(ids, short.Replace(id))
	}
	sort.Strings(ids)
	if want := []string{"A", "retained:B"}; !reflect.DeepEqual(ids, want) || d.Pool.Allocated().DiskMB != 512 {
		t.Fatalf("pool holds %v (%+v), want %v", ids, d.Pool.Allocated(), want)
	}
}

// closedHere puts id through its close in this process: its need remembered,
// its reservation freed by the journaled close.
func closedHere(d *Directory, id string) {
	put(d, id, "docker-small", 1, Closing, lease.Deprovisioning)
	runOn(d, Decide(d, closeBatch{closed(id, d.St.Leases[id].Admission, nil)}, Env{Now: now}))
}

func TestDecide_Lingering_ClosedLeasesContainersHoldThePoolUntilGone(t *testing.T) {
	later := Env{Now: now.Add(closedGrace)} // closedHere closes at now
	runRows(t, []row{
		{name: "a closed lease listed: its reservation held again", setup: func(d *Directory) any {
			closedHere(d, lA)
			return messages.Recovered{Lingering: []string{lA}}
		}, want: []string{"reserve lingering:A 100m"}},
		{name: "held and listed again: kept, nothing new", setup: func(d *Directory) any {
			closedHere(d, lA)
			runOn(d, Decide(d, messages.Recovered{Lingering: []string{lA}}, Env{Now: now}))
			return messages.Recovered{Lingering: []string{lA}}
		}, env: later},
		{name: "held and no longer listed: released; within the grace what it held is kept", setup: func(d *Directory) any {
			closedHere(d, lA)
			closedHere(d, lB)
			runOn(d, Decide(d, messages.Recovered{Lingering: []string{lA, lB}}, Env{Now: now}))
			return messages.Recovered{Lingering: []string{lB}}
		}, want: []string{"release lingering:A"}},
		{name: "no longer listed past the grace: released and forgotten", setup: func(d *Directory) any {
			closedHere(d, lA)
			closedHere(d, lB)
			runOn(d, Decide(d, messages.Recovered{Lingering: []string{lA, lB}}, Env{Now: now}))
			return messages.Recovered{Lingering: []string{lB}}
		}, env: later, want: []string{"closed.settled A", "release lingering:A"}, failed: []string{"release lingering:A"}},
		{name: "a late container within the grace: held", setup: func(d *Directory) any {
			closedHere(d, lA)
			runOn(d, Decide(d, messages.Recovered{}, Env{Now: now.Add(closedGrace / 2)}))
			return messages.Recovered{Lingering: []string{lA}}
		}, env: Env{Now: now.Add(closedGrace - time.Second)}, want: []string{"reserve lingering:A 100m"}},
		{name: "a live lease listed: its own reservation already counts it", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			return messages.Recovered{Lingering: []string{lA}}
		}},
		{name: "closed before this process: what it held is journaled, held again", setup: func(d *Directory) any {
			closedHere(d, lC)
			*d = *newDirectory(d.set, d.St) // a restart: the directory folded from the journal
			d.Ready = true
			return messages.Recovered{Lingering: []string{lC}}
		}, env: later, want: []string{"reserve lingering:C 100m"}},
		{name: "a lease never closed here listed: nothing known, nothing held", setup: func(d *Directory) any {
			return messages.Recovered{Lingering: []string{lC}}
		}},
		{name: "several past the grace: forgotten in one event", setup: func(d *Directory) any {
			closedHere(d, lB)
			closedHere(d, lA)
			return messages.Recovered{}
		}, env: later, want: []string{"closed.settled A,B"}},
	})
}

// TestDirectory_Lingering_StatsShowTheHeldAmountInAllocated: /stats counts a
// closed lease's lingering containers in allocated and shows them as lingering,
// and frees them once a pass lists them no more.
func TestDirectory_Lingering_StatsShowTheHeldAmountInAllocated(t *testing.T) {
	d := dirOf()
	closedHere(d, lA)
	free := d.stats().Stats
	runOn(d, Decide(d, messages.Recovered{Lingering: []string{lA}}, Env{}))
	held := d.stats().Stats
	if held.LingeringCPUCores != 0.1 || held.LingeringMemoryMB != 128 || held.AllocatedMemoryMB != free.AllocatedMemoryMB+128 ||
		held.AvailableMemoryMB != free.AvailableMemoryMB-128 {
		t.Fatalf("held %+v, free %+v: want 0.1 cores / 128 MB lingering, counted in allocated", held, free)
	}
	runOn(d, Decide(d, messages.Recovered{}, Env{}))
	if got := d.stats().Stats; got != free {
		t.Fatalf("after the pass saw them gone %+v, want %+v", got, free)
	}
}
