package lease_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/persistence"
)

// Table tests of Decide (decide.go): the whole lease lifecycle — every input from
// every status it can meet — without actors, bbolt or Docker. Each row builds a
// State by replaying real journal events, gives Decide one Input and an Env (fixed
// clock, a Spec, the running worker, the maintenance fence, the limits), checks
// the Decision (events and their key payload fields, callbacks, effects, reply,
// hold), checks that Decide left the State untouched, then applies the decision's
// events and checks where the lease ends up.

// --- fixtures ---------------------------------------------------------------------

const (
	dLease  = "7d3f8a52-4b1c-4e9a-8f2d-6c5b4a3e2d1f"
	imgApp  = "127.0.0.1:5000/berth/app:1"
	imgApp2 = "127.0.0.1:5000/berth/app:2"
	imgDB   = "127.0.0.1:5000/berth/db:1"
	imgDB2  = "127.0.0.1:5000/berth/db:2"

	// Maintenance IDs are canonical UUIDv4s (the facade derives one when needed).
	mID1 = "3b241101-e2bb-4255-8caf-4136c566a962"
	mID2 = "9c5b94b1-35ad-49bb-b118-8e8fc24abf80"
	mID3 = "f47ac10b-58cc-4372-a567-0e02b2c3d479"

	provisionTimeout = 10 * time.Minute
	resumePoll       = 5 * time.Second
	teardownRetry    = 10 * time.Second
	releasesMaxAge   = 2160 * time.Hour
	historyBytes     = 32 << 20
	day              = 24 * time.Hour
)

var testLimits = lease.Limits{ProvisionTimeout: provisionTimeout, ResumePoll: resumePoll, TeardownRetry: teardownRetry,
	ReleasesMaxAge: releasesMaxAge, HistoryBytes: historyBytes}

// admittedAt is when Fred stamped the maintenance commands of these tests.
var admittedAt = time.Date(2025, 6, 1, 11, 59, 30, 0, time.UTC)

// service is one service of a spec: frozen profile, manifest with just an image.
func service(name, image string, quantity int) lease.ServiceSpec {
	return lease.ServiceSpec{Name: name, SKU: "docker-small", Quantity: quantity,
		Profile:  lease.Profile{CPUCores: 0.5, MemoryMB: 256, ScratchMB: 64},
		Manifest: &manifest.Service{Image: image}}
}

// rawManifest is the tenant manifest JSON of services, as it would have been sent.
func rawManifest(services []lease.ServiceSpec) []byte {
	m := map[string]map[string]map[string]string{"services": {}}
	for _, s := range services {
		m["services"][s.Name] = map[string]string{"image": s.Manifest.Image}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func itemsOf(services []lease.ServiceSpec) []messages.LeaseItem {
	var out []messages.LeaseItem
	for _, s := range services {
		out = append(out, messages.LeaseItem{SKU: s.SKU, Quantity: s.Quantity, ServiceName: s.Name})
	}
	return out
}

func sortedServices(services []lease.ServiceSpec) []lease.ServiceSpec {
	out := slices.Clone(services)
	slices.SortFunc(out, func(a, b lease.ServiceSpec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// dspec is admission n of the test lease (default: one service app of imgApp),
// built the way the registry's prepare does, with deterministic identities.
func dspec(admission uint64, services ...lease.ServiceSpec) *lease.Spec {
	if len(services) == 0 {
		services = []lease.ServiceSpec{service("app", imgApp, 1)}
	}
	services = sortedServices(services)
	op := fmt.Sprintf("5f0c3a1e-7b2d-4c8e-9a6f-%012d", admission)
	return &lease.Spec{
		Lease: dLease, Tenant: "fred1decidetenant0x9k", ProviderUUID: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9",
		Items: itemsOf(services), Services: services, Manifest: rawManifest(services),
		CallbackURL:  "https://providerd.test:8443/v1/callbacks?operation_id=" + op,
		LifecycleURL: "https://providerd.test:8443/v1/callbacks?lifecycle_id=" + op,
		OperationID:  op, Admission: admission, AdmittedAt: t0,
	}
}

// twoServices is a stack lease: app ×2 and db ×1.
func twoServices(admission uint64) *lease.Spec {
	return dspec(admission, service("app", imgApp, 2), service("db", imgDB, 1))
}

// releaseOf is the release of an admission, as startProvision builds it.
func releaseOf(spec *lease.Spec, when time.Time) lease.Release {
	return lease.Release{Kind: lease.KindProvision, OperationID: spec.OperationID, CreatedAt: when,
		Manifest: spec.Manifest, Items: spec.Items, Services: spec.Services}
}

// updateTarget is what the registry's prepareUpdate hands the actor.
func updateTarget(services ...lease.ServiceSpec) *lease.Release {
	services = sortedServices(services)
	return &lease.Release{Manifest: rawManifest(services), Items: itemsOf(services), Services: services}
}

// imageID is the deterministic content ID the fixtures pin a reference to.
func imageID(ref string) string { return fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(ref))) }

func pinsOf(services []lease.ServiceSpec) []lease.ServiceImage {
	var out []lease.ServiceImage
	for _, s := range services {
		out = append(out, lease.ServiceImage{Service: s.Name, ImagePin: messages.ImagePin{Ref: s.Manifest.Image,
			ID: imageID(s.Manifest.Image), Digest: "127.0.0.1:5000/berth/" + s.Name + "@sha256:0"}})
	}
	return out
}

// cohortOf is the complete cohort of services under generation gen.
func cohortOf(services []lease.ServiceSpec, gen uint64) []lease.Instance {
	var out []lease.Instance
	for _, s := range services {
		for i := 0; i < s.Quantity; i++ {
			out = append(out, lease.Instance{Service: s.Name, Index: i, ContainerID: ctrID(s.Name, i, gen), Image: s.Manifest.Image,
				Ports: lease.Ports{{Key: "8080/tcp", PortBinding: messages.PortBinding{HostIP: "127.0.0.1", HostPort: fmt.Sprint(32768 + i)}}}})
		}
	}
	return out
}

func ctrID(service string, index int, gen uint64) string {
	return fmt.Sprintf("%s-%d-g%d", service, index, gen)
}

// listed is what Docker lists for instances of generation gen: running, labelled,
// each running the content its reference was pinned to.
func listed(insts []lease.Instance, gen uint64) []messages.Container {
	var out []messages.Container
	for _, in := range insts {
		out = append(out, container(in.Service, in.Index, gen, in.ContainerID, in.Image, "running"))
	}
	return out
}

func container(service string, index int, gen uint64, id, image, state string) messages.Container {
	return messages.Container{ID: id, Name: "fred-" + dLease + "-" + service + "-" + fmt.Sprint(index), Lease: dLease,
		Service: service, Index: index, Generation: gen, Image: image, ImageID: imageID(image), State: state}
}

// journal builds a lease's event stream step by step, applying every event as it
// goes (a fixture the state machine refuses is a broken test: it panics), so later
// steps can read the state — the source of a maintenance, the generation in flight.
type journal struct {
	spec *lease.Spec
	st   *lease.State
	evs  []persistence.Event
	now  time.Time
}

func newJournal(spec *lease.Spec) *journal {
	return &journal{spec: spec, st: lease.NewState(), now: t0}
}

// wait moves the journal's clock; every step also advances it by a minute.
func (j *journal) wait(d time.Duration) *journal { j.now = j.now.Add(d); return j }

func (j *journal) tick() time.Time { j.now = j.now.Add(time.Minute); return j.now }

func (j *journal) put(typ string, p any) *journal {
	ev := mkEvent(typ, j.now, p)
	if err := j.st.Apply(ev); err != nil {
		panic(fmt.Sprintf("fixture event %s refused: %v", typ, err))
	}
	j.evs = append(j.evs, ev)
	return j
}

func nextGen(st *lease.State) uint64 { return max(st.LastGeneration, st.Generation) + 1 }

// provision starts spec (a first provision, a re-provision, or a new lease under a
// closed UUID) with its release.
func (j *journal) provision(spec *lease.Spec) *journal {
	j.spec = spec
	when := j.tick()
	rel := releaseOf(spec, when)
	return j.put(lease.EvProvisionStarted, lease.ProvisionStarted{Admission: spec.Admission, Generation: nextGen(j.st),
		OperationID: spec.OperationID, At: when, Deadline: when.Add(provisionTimeout), Release: &rel})
}

// retry starts the same admission again under the next generation.
func (j *journal) retry() *journal {
	when := j.tick()
	return j.put(lease.EvProvisionStarted, lease.ProvisionStarted{Admission: j.st.Admission, Generation: nextGen(j.st),
		OperationID: j.st.OperationID, At: when, Deadline: j.st.Deadline})
}

// pin records the images of the latest (deploying) release.
func (j *journal) pin() *journal {
	j.tick()
	l := j.st.Latest()
	return j.put(lease.EvReleasePinned, lease.ReleasePinned{Version: l.Version, Images: pinsOf(l.Services)})
}

func (j *journal) ready() *journal {
	when := j.tick()
	return j.put(lease.EvProvisionSucceeded, lease.ProvisionSucceeded{Stamp: lease.Stamp{Generation: j.st.Generation, At: when},
		Containers: cohortOf(j.st.Running().Services, j.st.Generation)})
}

func (j *journal) provisionFails() *journal {
	when := j.tick()
	return j.put(lease.EvProvisionFailed, lease.ProvisionFailed{Stamp: lease.Stamp{Generation: j.st.Generation, At: when},
		Cause: lease.Cause{Reason: messages.ReasonImagePullFailed, Message: "image could not be pulled"}})
}

// dies records a confirmed death of the cohort's first container.
func (j *journal) dies(counted bool) *journal {
	when := j.tick()
	c := j.st.Containers[0]
	return j.put(lease.EvRuntimeFailing, lease.RuntimeFailing{Stamp: lease.Stamp{Generation: j.st.Generation, At: when},
		ContainerID: c.ContainerID, Service: c.Service, Index: c.Index, ExitCode: 1, Counted: counted})
}

func (j *journal) fails() *journal {
	when := j.tick()
	return j.put(lease.EvRuntimeFailed, lease.RuntimeFailed{Stamp: lease.Stamp{Generation: j.st.Generation, At: when},
		Cause: lease.Cause{Reason: messages.ReasonContainerExited, Message: "container exited unexpectedly"}})
}

// maintain admits a restart (target nil) or an update, the way decideMaintain
// builds the intent: target release, source, generations.
func (j *journal) maintain(kind, id string, target *lease.Release) *journal {
	when := j.tick()
	st := j.st
	src := st.Running()
	t := *src
	t.Images = slices.Clone(src.Images)
	if target != nil {
		t = *target
		t.Images = nil
		for _, svc := range t.Services {
			if pin, ok := src.Pin(svc.Name); ok && pin.Ref == svc.Manifest.Image {
				t.Images = append(t.Images, lease.ServiceImage{Service: svc.Name, ImagePin: pin})
			}
		}
	}
	t.Kind, t.MaintenanceID, t.OperationID, t.CreatedAt, t.Reason, t.Message = kind, id, "", when, "", ""
	gen := nextGen(st)
	m := lease.Maintenance{ID: id, Kind: kind, AdmittedAt: admittedAt, At: when, Deadline: when.Add(provisionTimeout),
		SourceVersion: src.Version, SourceStatus: lease.Ready, SourceGen: st.Generation, Source: slices.Clone(st.Containers),
		Generation: gen, CompensateGen: gen + 1}
	if st.Status != lease.Ready {
		m.SourceStatus, m.Source = lease.Failed, nil
	}
	if src.Status != messages.ReleaseActive {
		m.SourceVersion = 0
	}
	return j.put(lease.EvMaintenanceStarted, lease.MaintenanceStarted{Maintenance: m, Release: t})
}

func (j *journal) restart(id string) *journal { return j.maintain(lease.KindRestart, id, nil) }

func (j *journal) update(id string, services ...lease.ServiceSpec) *journal {
	return j.maintain(lease.KindUpdate, id, updateTarget(services...))
}

// completes activates the maintenance's target.
func (j *journal) completes() *journal {
	when := j.tick()
	m := j.st.Maintenance
	return j.put(lease.EvMaintenanceDone, lease.MaintenanceDone{ID: m.ID, Stamp: lease.Stamp{Generation: m.Generation, At: when},
		Containers: cohortOf(j.st.Release(m.Version).Services, m.Generation)})
}

// rollsBack: the target failed and the source was recreated (compensated).
func (j *journal) rollsBack() *journal {
	when := j.tick()
	m := j.st.Maintenance
	return j.put(lease.EvMaintenanceRestored, lease.MaintenanceRestored{ID: m.ID, Stamp: lease.Stamp{Generation: m.CompensateGen, At: when},
		Containers: cohortOf(j.st.Release(m.SourceVersion).Services, m.CompensateGen), Compensated: true,
		Cause: lease.Cause{Reason: reasonOf(m.Kind), Message: "the " + m.Kind + " failed: the target did not become ready"}})
}

// maintenanceFails: the target failed and so did compensation.
func (j *journal) maintenanceFails() *journal {
	when := j.tick()
	m := j.st.Maintenance
	return j.put(lease.EvMaintenanceFailed, lease.MaintenanceFailed{ID: m.ID, Stamp: lease.Stamp{Generation: m.CompensateGen, At: when},
		Cause: lease.Cause{Reason: reasonOf(m.Kind), Message: "the " + m.Kind + " failed; the previous deployment could not be restored"}})
}

// diverges records a cohort divergence of the ready lease.
func (j *journal) diverges() *journal {
	when := j.tick()
	return j.put(lease.EvCohortDiverged, lease.CohortDiverged{Stamp: lease.Stamp{Generation: j.st.Generation, At: when},
		Message: "unexpected instance app/1"})
}

func (j *journal) prune(versions ...int) *journal {
	j.tick()
	return j.put(lease.EvReleasesPruned, lease.ReleasesPruned{Versions: versions})
}

func (j *journal) close() *journal {
	when := j.tick()
	return j.put(lease.EvCloseRequested, lease.CloseRequested{Admission: max(j.st.Admission, j.spec.Admission), At: when})
}

func (j *journal) closed() *journal {
	when := j.tick()
	return j.put(lease.EvClosed, lease.ClosedEv{Admission: j.st.Admission, At: when})
}

func reasonOf(kind string) string {
	if kind == lease.KindUpdate {
		return messages.ReasonUpdateFailed
	}
	return messages.ReasonRestartFailed
}

// The standard journals: the one-service lease of dspec(1) in every status.
func jReserved() *journal     { return newJournal(dspec(1)) }
func jProvisioning() *journal { return newJournal(dspec(1)).provision(dspec(1)).pin() }
func jReady() *journal        { return jProvisioning().ready() }
func jFailing() *journal      { return jReady().dies(true) }
func jFailed() *journal       { return jProvisioning().provisionFails() }
func jRestarting() *journal   { return jReady().restart(mID1) }
func jUpdating() *journal     { return jReady().update(mID1, service("app", imgApp2, 1)) }
func jDeprovisioning() *journal {
	return jReady().close()
}
func jClosed() *journal { return jDeprovisioning().closed() }

// --- expectations -------------------------------------------------------------------

// wantEvent is an expected journal event: its type, and checks of its payload.
type wantEvent struct {
	typ   string
	check func(t *testing.T, raw json.RawMessage)
}

func evType(typ string) wantEvent { return wantEvent{typ: typ} }

// evOf decodes the payload as P and runs check on it.
func evOf[P any](typ string, check func(t *testing.T, p P)) wantEvent {
	return wantEvent{typ: typ, check: func(t *testing.T, raw json.RawMessage) {
		t.Helper()
		var p P
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatalf("%s payload does not decode: %v", typ, err)
		}
		check(t, p)
	}}
}

// eq reports a field that differs.
func eq[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

// wantCB is an expected callback row.
type wantCB struct {
	status        string
	errPrefix     string // "" : no error text
	errHas        string
	lifecycle     bool
	maintenanceID string
	admittedAt    time.Time
}

func opCB(status, errPrefix string) wantCB { return wantCB{status: status, errPrefix: errPrefix} }
func lifeCB(status, errPrefix string) wantCB {
	return wantCB{status: status, errPrefix: errPrefix, lifecycle: true}
}
func maintCB(status, errPrefix, id string) wantCB {
	return wantCB{status: status, errPrefix: errPrefix, lifecycle: true, maintenanceID: id, admittedAt: admittedAt}
}

// decideRow is one row of a Decide table.
type decideRow struct {
	name     string
	j        *journal // the state, by replay; its clock + 1 min is Env.Now
	in       lease.Input
	env      []func(*lease.Env) // tweaks of the default Env
	events   []wantEvent
	cbs      []wantCB
	effects  []lease.Effect
	reply    error  // a sentinel of package messages; nil: accepted (or no command)
	replyHas string // in the reply's text
	hold     bool
	status   lease.Status                        // after applying the events; "" : unchanged
	check    func(t *testing.T, st *lease.State) // on the state after the events
}

func withWorker(k lease.WorkKind) func(*lease.Env) { return func(e *lease.Env) { e.Worker = k } }
func fenced(e *lease.Env)                          { e.Fenced = true }
func withSpec(s *lease.Spec) func(*lease.Env)      { return func(e *lease.Env) { e.Spec = s } }
func nowAt(tm time.Time) func(*lease.Env)          { return func(e *lease.Env) { e.Now = tm } }
func withHistoryBytes(n int) func(*lease.Env) {
	return func(e *lease.Env) { e.Limits.HistoryBytes = n }
}

func runDecide(t *testing.T, rows []decideRow) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			st := replay(t, r.j.evs...)
			env := lease.Env{Now: r.j.now.Add(time.Minute), Spec: r.j.spec, Limits: testLimits}
			for _, f := range r.env {
				f(&env)
			}
			before, from := stateJSON(t, st), st.Status
			d := lease.Decide(st, r.in, env)
			if after := stateJSON(t, st); after != before {
				t.Fatalf("Decide changed the state it was given:\nbefore %s\nafter  %s", before, after)
			}
			checkDecision(t, r, d)
			for i, ev := range d.Events {
				if err := st.Apply(ev); err != nil {
					t.Fatalf("event %d (%s) of the decision does not apply: %v", i, ev.Type, err)
				}
			}
			want := r.status
			if want == "" {
				want = from
			}
			if st.Status != want {
				t.Errorf("status after the decision %s, want %s", st.Status, want)
			}
			if r.check != nil && !t.Failed() {
				r.check(t, st)
			}
		})
	}
}

func checkDecision(t *testing.T, r decideRow, d lease.Decision) {
	t.Helper()
	var got, want []string
	for _, ev := range d.Events {
		got = append(got, ev.Type)
		if ev.V != 1 || !ev.At.Equal(d.Events[0].At) {
			t.Errorf("event %s: version %d at %s, want version 1 at the decision's time", ev.Type, ev.V, ev.At)
		}
	}
	for _, w := range r.events {
		want = append(want, w.typ)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i, w := range r.events {
		if w.check != nil {
			w.check(t, d.Events[i].Data)
		}
	}
	if len(d.Callbacks) != len(r.cbs) {
		t.Fatalf("callbacks %+v, want %d", d.Callbacks, len(r.cbs))
	}
	for i, w := range r.cbs {
		c := d.Callbacks[i]
		switch {
		case c.Status != w.status:
			t.Errorf("callback %d status %q, want %q", i, c.Status, w.status)
		case w.errPrefix == "" && c.Error != "":
			t.Errorf("callback %d error %q, want none", i, c.Error)
		case !strings.HasPrefix(c.Error, w.errPrefix) || !strings.Contains(c.Error, w.errHas):
			t.Errorf("callback %d error %q, want prefix %q containing %q", i, c.Error, w.errPrefix, w.errHas)
		case len(c.Error) > 256:
			t.Errorf("callback %d error is %d bytes; it is written on-chain (≤ 256)", i, len(c.Error))
		case c.Lifecycle != w.lifecycle:
			t.Errorf("callback %d lifecycle %v, want %v", i, c.Lifecycle, w.lifecycle)
		case c.MaintenanceID != w.maintenanceID || !c.AdmittedAt.Equal(w.admittedAt):
			t.Errorf("callback %d maintenance %q admitted %s, want %q %s", i, c.MaintenanceID, c.AdmittedAt, w.maintenanceID, w.admittedAt)
		}
		kind := lease.RowOperation
		switch {
		case w.maintenanceID != "":
			kind = lease.RowMaintenance
		case w.lifecycle:
			kind = lease.RowLifecycle
		}
		if c.Kind() != kind {
			t.Errorf("callback %d outbox kind %q, want %q", i, c.Kind(), kind)
		}
	}
	if (len(d.Effects) > 0 || len(r.effects) > 0) && !reflect.DeepEqual(d.Effects, r.effects) {
		t.Errorf("effects %#v, want %#v", d.Effects, r.effects)
	}
	switch {
	case r.reply == nil && d.Reply != nil:
		t.Errorf("reply %v, want accepted", d.Reply)
	case r.reply != nil && !errors.Is(d.Reply, r.reply):
		t.Errorf("reply %v, want %v", d.Reply, r.reply)
	case r.reply != nil && !strings.Contains(messages.SafeMessage(d.Reply), r.replyHas):
		t.Errorf("reply %q does not say %q", messages.SafeMessage(d.Reply), r.replyHas)
	}
	if r.reply != nil && (len(d.Events) > 0 || len(d.Effects) > 0 || len(d.Callbacks) > 0) {
		t.Errorf("a refused command journaled or did something: %+v", d)
	}
	if d.Hold != r.hold {
		t.Errorf("hold %v, want %v", d.Hold, r.hold)
	}
}

// Effect shorthands.
var (
	workProvision     = lease.Work{Kind: lease.WorkProvision}
	workResume        = lease.Work{Kind: lease.WorkResume}
	workTeardown      = lease.Work{Kind: lease.WorkTeardown}
	workCapture       = lease.Work{Kind: lease.WorkCapture}
	workReplace       = lease.Work{Kind: lease.WorkReplace}
	workReplaceResume = lease.Work{Kind: lease.WorkReplaceResume}
	waitResume        = lease.Wait{D: resumePoll, What: string(lease.WorkResume)}
	waitReplaceResume = lease.Wait{D: resumePoll, What: string(lease.WorkReplaceResume)}
	waitTeardown      = lease.Wait{D: teardownRetry, What: string(lease.WorkTeardown)}
)

func fx(e ...lease.Effect) []lease.Effect { return e }

func releaseStatuses(st *lease.State) []string {
	var out []string
	for _, r := range st.Releases {
		out = append(out, fmt.Sprintf("v%d:%s", r.Version, r.Status))
	}
	return out
}

func wantReleases(t *testing.T, st *lease.State, want ...string) {
	t.Helper()
	if got := releaseStatuses(st); !slices.Equal(got, want) {
		t.Errorf("releases %v, want %v", got, want)
	}
}

// historySize measures a history the way the per-lease cap does: the encoded
// size of each release.
func historySize(rs []lease.Release) int {
	n := 0
	for _, r := range rs {
		b, _ := json.Marshal(r)
		n += len(b)
	}
	return n
}

// --- Recover, Reprovision ----------------------------------------------------------

// TestDecide_Recover: an actor (re)started on its journal settles what the journal
// left unfinished, from every status.
func TestDecide_Recover(t *testing.T) {
	newer := dspec(2, service("app", imgApp2, 1))
	runDecide(t, []decideRow{
		{name: "reserved with a newer admission starts it with release v1", j: jReserved(), in: lease.Recover{},
			events: []wantEvent{evOf(lease.EvProvisionStarted, func(t *testing.T, p lease.ProvisionStarted) {
				spec := dspec(1)
				eq(t, "admission", p.Admission, uint64(1))
				eq(t, "generation", p.Generation, uint64(1))
				eq(t, "operation_id", p.OperationID, spec.OperationID)
				eq(t, "deadline", p.Deadline, p.At.Add(provisionTimeout))
				if p.Release == nil {
					t.Fatal("a new admission's provision.started carries no release")
				}
				eq(t, "release kind", p.Release.Kind, lease.KindProvision)
				eq(t, "release manifest", string(p.Release.Manifest), string(spec.Manifest))
				eq(t, "release services", p.Release.Services, spec.Services)
				eq(t, "release items", p.Release.Items, spec.Items)
			})},
			effects: fx(workProvision), status: lease.Provisioning,
			check: func(t *testing.T, st *lease.State) { wantReleases(t, st, "v1:deploying") }},
		{name: "provisioning resumes: the interrupted attempt is classified against Docker", j: jProvisioning(), in: lease.Recover{},
			effects: fx(workResume)},
		{name: "ready: nothing to settle", j: jReady(), in: lease.Recover{}},
		{name: "failing captures the failure", j: jFailing(), in: lease.Recover{}, effects: fx(workCapture)},
		{name: "failed with nothing newer: nothing", j: jFailed(), in: lease.Recover{}},
		{name: "failed with a newer admission re-provisions", j: jFailed(), in: lease.Recover{}, env: []func(*lease.Env){withSpec(newer)},
			events: []wantEvent{evOf(lease.EvProvisionStarted, func(t *testing.T, p lease.ProvisionStarted) {
				eq(t, "admission", p.Admission, uint64(2))
				eq(t, "generation", p.Generation, uint64(2))
				eq(t, "operation_id", p.OperationID, newer.OperationID)
				eq(t, "release services", p.Release.Services, newer.Services)
			})},
			effects: fx(workProvision), status: lease.Provisioning,
			check: func(t *testing.T, st *lease.State) {
				wantReleases(t, st, "v1:failed", "v2:deploying")
				eq(t, "fail_count carried", st.FailCount, 1)
			}},
		{name: "restarting resumes the maintenance", j: jRestarting(), in: lease.Recover{}, effects: fx(workReplaceResume)},
		{name: "updating resumes the maintenance", j: jUpdating(), in: lease.Recover{}, effects: fx(workReplaceResume)},
		{name: "deprovisioning tears down", j: jDeprovisioning(), in: lease.Recover{}, effects: fx(workTeardown)},
		{name: "closed with nothing newer tells the registry", j: jClosed(), in: lease.Recover{}, effects: fx(lease.TellClosed{})},
		{name: "closed with a newer admission: the close is final, the registry is told (issue 18: it started a new lease under the UUID)",
			j: jClosed(), in: lease.Recover{}, env: []func(*lease.Env){withSpec(newer)}, effects: fx(lease.TellClosed{})},
		{name: "failing with a newer admission re-provisions once the capture reports", j: jFailing(), in: lease.Recover{},
			env: []func(*lease.Env){withSpec(newer)}, events: []wantEvent{evType(lease.EvProvisionStarted)},
			effects: fx(workProvision), status: lease.Provisioning},
	})
}

// TestDecide_Reprovision: the registry admitted a newer spec for this lease.
func TestDecide_Reprovision(t *testing.T) {
	newer := dspec(2, service("app", imgApp2, 1))
	runDecide(t, []decideRow{
		{name: "failed re-provisions under the new admission, next generation", j: jReady().dies(true).fails(), in: lease.Reprovision{},
			env: []func(*lease.Env){withSpec(newer)},
			events: []wantEvent{evOf(lease.EvProvisionStarted, func(t *testing.T, p lease.ProvisionStarted) {
				eq(t, "admission", p.Admission, uint64(2))
				eq(t, "generation", p.Generation, uint64(2))
				eq(t, "release image", p.Release.Services[0].Manifest.Image, imgApp2)
			})},
			effects: fx(workProvision), status: lease.Provisioning,
			check: func(t *testing.T, st *lease.State) {
				eq(t, "fail_count carried", st.FailCount, 1)
				eq(t, "streak carried", st.Budget.Streak, 1)
				wantReleases(t, st, "v1:active", "v2:deploying")
			}},
		{name: "closed: nothing, a closed UUID is never provisioned again (issue 18: it started a new lease)", j: jClosed(),
			in: lease.Reprovision{}, env: []func(*lease.Env){withSpec(newer)}},
		{name: "failing (Failing → Provisioning): started, the death recorded; the attempt waits for the capture to report",
			j: jFailing(), in: lease.Reprovision{}, env: []func(*lease.Env){withSpec(newer), withWorker(lease.WorkCapture)},
			events: []wantEvent{evOf(lease.EvProvisionStarted, func(t *testing.T, p lease.ProvisionStarted) {
				eq(t, "admission", p.Admission, uint64(2))
				eq(t, "generation", p.Generation, uint64(2))
			})},
			status: lease.Provisioning,
			check: func(t *testing.T, st *lease.State) {
				eq(t, "fail_count (the death)", st.FailCount, 1)
				eq(t, "streak carried", st.Budget.Streak, 1)
				eq(t, "pending failure", st.PendingFailure, (*lease.RuntimeFailing)(nil))
			}},
		{name: "failing, the capture done: the attempt starts at once", j: jFailing(), in: lease.Reprovision{},
			env: []func(*lease.Env){withSpec(newer)}, events: []wantEvent{evType(lease.EvProvisionStarted)},
			effects: fx(workProvision), status: lease.Provisioning},
		{name: "failed, the same admission: nothing", j: jFailed(), in: lease.Reprovision{}},
		{name: "ready: a registry that admitted a re-provision of a live lease changes nothing", j: jReady(), in: lease.Reprovision{},
			env: []func(*lease.Env){withSpec(newer)}},
		{name: "deprovisioning: nothing", j: jDeprovisioning(), in: lease.Reprovision{}, env: []func(*lease.Env){withSpec(newer)}},
	})
}

// --- provisioning -------------------------------------------------------------------

// TestDecide_Attempted: a provision (or resume) worker's outcome.
func TestDecide_Attempted(t *testing.T) {
	spec := dspec(1)
	ready := lease.Outcome{Kind: lease.OutcomeReady, Containers: cohortOf(spec.Services, 1)}
	started := jProvisioning().st // its deadline
	deadline := started.Deadline
	runDecide(t, []decideRow{
		{name: "ready: provision.succeeded and one success callback to the operation URL", j: jProvisioning(),
			in: lease.Attempted{Generation: 1, Outcome: ready},
			events: []wantEvent{evOf(lease.EvProvisionSucceeded, func(t *testing.T, p lease.ProvisionSucceeded) {
				eq(t, "generation", p.Generation, uint64(1))
				eq(t, "containers", p.Containers, ready.Containers)
			})},
			cbs: []wantCB{opCB(messages.CallbackSuccess, "")}, status: lease.Ready,
			check: func(t *testing.T, st *lease.State) {
				wantReleases(t, st, "v1:active")
				eq(t, "containers", st.Containers, ready.Containers)
			}},
		{name: "failed: provision.failed and the curated failed callback", j: jProvisioning(),
			in: lease.Attempted{Generation: 1, Outcome: lease.Outcome{Kind: lease.OutcomeFailed, Reason: messages.ReasonHealthCheckFailed,
				Message: "health check of app/0 did not pass"}},
			events: []wantEvent{evOf(lease.EvProvisionFailed, func(t *testing.T, p lease.ProvisionFailed) {
				eq(t, "reason", p.Reason, messages.ReasonHealthCheckFailed)
				eq(t, "message", p.Message, "health check of app/0 did not pass")
			})},
			cbs: []wantCB{opCB(messages.CallbackFailed, "HealthCheckFailed: ")}, status: lease.Failed,
			check: func(t *testing.T, st *lease.State) {
				eq(t, "fail_count", st.FailCount, 1)
				wantReleases(t, st, "v1:failed")
				eq(t, "release reason", st.Releases[0].Reason, messages.ReasonHealthCheckFailed)
			}},
		{name: "retry before the deadline: same admission and deadline, next generation, no new release", j: jProvisioning(),
			in: lease.Attempted{Generation: 1, Outcome: lease.Outcome{Kind: lease.OutcomeRetry}},
			events: []wantEvent{evOf(lease.EvProvisionStarted, func(t *testing.T, p lease.ProvisionStarted) {
				eq(t, "admission", p.Admission, uint64(1))
				eq(t, "generation", p.Generation, uint64(2))
				eq(t, "operation_id", p.OperationID, spec.OperationID)
				eq(t, "deadline", p.Deadline, deadline)
				if p.Release != nil {
					t.Errorf("a retry carries release %+v; its release is already deploying", p.Release)
				}
			})},
			effects: fx(workProvision), status: lease.Provisioning,
			check: func(t *testing.T, st *lease.State) {
				eq(t, "generation", st.Generation, uint64(2))
				wantReleases(t, st, "v1:deploying")
			}},
		{name: "retry after the deadline: provision.failed Internal, did not complete in time", j: jProvisioning(),
			in: lease.Attempted{Generation: 1, Outcome: lease.Outcome{Kind: lease.OutcomeRetry}}, env: []func(*lease.Env){nowAt(deadline.Add(time.Second))},
			events: []wantEvent{evOf(lease.EvProvisionFailed, func(t *testing.T, p lease.ProvisionFailed) {
				eq(t, "reason", p.Reason, messages.ReasonInternal)
				if !strings.Contains(p.Message, "did not complete in time") {
					t.Errorf("message %q", p.Message)
				}
			})},
			cbs: []wantCB{opCB(messages.CallbackFailed, "Internal: ")}, status: lease.Failed},
		{name: "retry at the deadline itself fails too", j: jProvisioning(),
			in: lease.Attempted{Generation: 1, Outcome: lease.Outcome{Kind: lease.OutcomeRetry}}, env: []func(*lease.Env){nowAt(deadline)},
			events: []wantEvent{evType(lease.EvProvisionFailed)}, cbs: []wantCB{opCB(messages.CallbackFailed, "Internal: ")}, status: lease.Failed},
		{name: "pending: look again after the resume poll", j: jProvisioning(),
			in: lease.Attempted{Generation: 1, Outcome: lease.Outcome{Kind: lease.OutcomePending}}, effects: fx(waitResume)},
		{name: "canceled (a drain): look again after the resume poll", j: jProvisioning(),
			in: lease.Attempted{Generation: 1, Outcome: lease.Outcome{Kind: lease.OutcomeCanceled}}, effects: fx(waitResume)},
		{name: "the outcome of a generation a retry superseded: nothing", j: jProvisioning().retry(),
			in: lease.Attempted{Generation: 1, Outcome: ready}},
		{name: "an outcome after ready (a late duplicate): nothing", j: jReady(), in: lease.Attempted{Generation: 1, Outcome: ready}},
		{name: "while deprovisioning the canceled attempt drained: tear down", j: jProvisioning().close(),
			in: lease.Attempted{Generation: 1, Outcome: lease.Outcome{Kind: lease.OutcomeCanceled}}, effects: fx(workTeardown)},
		{name: "while deprovisioning even a ready outcome only tears down", j: jProvisioning().close(),
			in: lease.Attempted{Generation: 1, Outcome: ready}, effects: fx(workTeardown)},
	})
}

// TestDecide_Pinned: a worker resolved the images of a deploying release.
func TestDecide_Pinned(t *testing.T) {
	pins := pinsOf(dspec(1).Services)
	runDecide(t, []decideRow{
		{name: "the deploying release records its images", j: newJournal(dspec(1)).provision(dspec(1)),
			in: lease.Pinned{Version: 1, Images: pins},
			events: []wantEvent{evOf(lease.EvReleasePinned, func(t *testing.T, p lease.ReleasePinned) {
				eq(t, "version", p.Version, 1)
				eq(t, "images", p.Images, pins)
			})},
			check: func(t *testing.T, st *lease.State) { eq(t, "images", st.Releases[0].Images, pins) }},
		{name: "the same pins again: nothing", j: jProvisioning(), in: lease.Pinned{Version: 1, Images: pins}},
		{name: "the maintenance target records its images", j: jUpdating(),
			in:     lease.Pinned{Version: 2, Images: pinsOf([]lease.ServiceSpec{service("app", imgApp2, 1)})},
			events: []wantEvent{evOf(lease.EvReleasePinned, func(t *testing.T, p lease.ReleasePinned) { eq(t, "version", p.Version, 2) })}},
		{name: "an active release: nothing", j: jReady(), in: lease.Pinned{Version: 1, Images: pinsOf([]lease.ServiceSpec{service("app", imgApp2, 1)})}},
		{name: "a release a close failed: nothing", j: newJournal(dspec(1)).provision(dspec(1)).close(), in: lease.Pinned{Version: 1, Images: pins}},
		{name: "an unknown version: nothing", j: jProvisioning(), in: lease.Pinned{Version: 7, Images: pins}},
	})
}

// --- close ----------------------------------------------------------------------------

// TestDecide_Close: a deprovision request journals its intent first (write-ahead),
// with the failed completion of whatever operation it pre-empts in the same
// decision, cancels the running worker (teardown starts once it drained) or starts
// the teardown, and holds its answer until the closed receipt.
func TestDecide_Close(t *testing.T) {
	closeReq := func(admission uint64) wantEvent {
		return evOf(lease.EvCloseRequested, func(t *testing.T, p lease.CloseRequested) { eq(t, "admission", p.Admission, admission) })
	}
	canceled := opCB(messages.CallbackFailed, "Canceled: ")
	runDecide(t, []decideRow{
		{name: "reserved: the admitted provision's Canceled callback, teardown", j: jReserved(), in: lease.Close{},
			events: []wantEvent{closeReq(1)}, cbs: []wantCB{canceled}, effects: fx(workTeardown), hold: true, status: lease.Deprovisioning},
		{name: "provisioning with its worker: Canceled callback to the operation URL, cancel", j: jProvisioning(), in: lease.Close{},
			env:    []func(*lease.Env){withWorker(lease.WorkProvision)},
			events: []wantEvent{closeReq(1)}, cbs: []wantCB{canceled}, effects: fx(lease.Cancel{}), hold: true, status: lease.Deprovisioning,
			check: func(t *testing.T, st *lease.State) {
				wantReleases(t, st, "v1:failed")
				eq(t, "release reason", st.Releases[0].Reason, "Canceled")
			}},
		{name: "provisioning waiting to resume (no worker): Canceled callback, teardown", j: jProvisioning(), in: lease.Close{},
			events: []wantEvent{closeReq(1)}, cbs: []wantCB{canceled}, effects: fx(workTeardown), hold: true, status: lease.Deprovisioning},
		{name: "ready: no operation to pre-empt, teardown", j: jReady(), in: lease.Close{},
			events: []wantEvent{closeReq(1)}, effects: fx(workTeardown), hold: true, status: lease.Deprovisioning,
			check: func(t *testing.T, st *lease.State) { wantReleases(t, st, "v1:active") }},
		{name: "failing: no stale failed callback; the capture is canceled", j: jFailing(), in: lease.Close{},
			env:    []func(*lease.Env){withWorker(lease.WorkCapture)},
			events: []wantEvent{closeReq(1)}, effects: fx(lease.Cancel{}), hold: true, status: lease.Deprovisioning},
		{name: "failed: no callback, teardown", j: jFailed(), in: lease.Close{},
			events: []wantEvent{closeReq(1)}, effects: fx(workTeardown), hold: true, status: lease.Deprovisioning},
		{name: "restarting with its worker: the maintenance's failed completion, cancel", j: jRestarting(), in: lease.Close{},
			env:    []func(*lease.Env){withWorker(lease.WorkReplace)},
			events: []wantEvent{closeReq(1)},
			cbs: []wantCB{{status: messages.CallbackFailed, errPrefix: "RestartFailed: ", errHas: "closed", lifecycle: true,
				maintenanceID: mID1, admittedAt: admittedAt}},
			effects: fx(lease.Cancel{}), hold: true, status: lease.Deprovisioning,
			check: func(t *testing.T, st *lease.State) {
				wantReleases(t, st, "v1:active", "v2:failed")
				if st.Maintenance != nil {
					t.Errorf("maintenance %+v still in flight after the close", st.Maintenance)
				}
			}},
		{name: "updating waiting to resume: the maintenance's failed completion, teardown", j: jUpdating(), in: lease.Close{},
			events: []wantEvent{closeReq(1)},
			cbs: []wantCB{{status: messages.CallbackFailed, errPrefix: "UpdateFailed: ", errHas: "closed", lifecycle: true,
				maintenanceID: mID1, admittedAt: admittedAt}},
			effects: fx(workTeardown), hold: true, status: lease.Deprovisioning},
		{name: "deprovisioning: the answer waits for the receipt, nothing more", j: jDeprovisioning(), in: lease.Close{}, hold: true},
		{name: "deprovisioning with its teardown held: lifecycle_pending at once", j: jDeprovisioning(), in: lease.Close{},
			env: []func(*lease.Env){func(e *lease.Env) { e.CloseHeld = held(rootUnproven).Err }}, reply: messages.ErrLifecyclePending, replyHas: "close held"},
		{name: "closed: answered at once", j: jClosed(), in: lease.Close{}},
	})
}

// TestDecide_Close_PreemptsAnAdmissionNotYetStarted: a failed lease whose newer
// admission (a re-provision the registry journaled) has no provision.started yet
// still has an operation intent; the close pre-empts it and must queue its failed
// operation callback. Seed, Durable close finalization: "If a provision/restore
// intent exists, that transaction enqueues its exact failed operation callback
// before removing it and publishing the close."
func TestDecide_Close_PreemptsAnAdmissionNotYetStarted(t *testing.T) {
	runDecide(t, []decideRow{
		{name: "failed with a newer admission not started", j: jFailed(), in: lease.Close{},
			env: []func(*lease.Env){withSpec(dspec(2))},
			events: []wantEvent{evOf(lease.EvCloseRequested, func(t *testing.T, p lease.CloseRequested) {
				eq(t, "admission", p.Admission, uint64(2))
			})},
			cbs: []wantCB{opCB(messages.CallbackFailed, "Canceled: ")}, effects: fx(workTeardown), hold: true, status: lease.Deprovisioning},
	})
}

// TestDecide_TornDown: the teardown worker's result.
func TestDecide_TornDown(t *testing.T) {
	runDecide(t, []decideRow{
		{name: "done: the closed receipt, the deprovisioned lifecycle callback, tell the registry, then answer", j: jDeprovisioning(),
			in:     lease.TornDown{},
			events: []wantEvent{evOf(lease.EvClosed, func(t *testing.T, p lease.ClosedEv) { eq(t, "admission", p.Admission, uint64(1)) })},
			cbs:    []wantCB{lifeCB(messages.CallbackDeprovisioned, "")}, effects: fx(lease.TellClosed{}, lease.Answer{}), status: lease.Closed,
			check: func(t *testing.T, st *lease.State) {
				eq(t, "closed admission", st.ClosedAdmission, uint64(1))
				eq(t, "releases", len(st.Releases), 0)
			}},
		{name: "the close of a pre-empted provision completes the same way", j: jProvisioning().close(), in: lease.TornDown{},
			events: []wantEvent{evType(lease.EvClosed)}, cbs: []wantCB{lifeCB(messages.CallbackDeprovisioned, "")},
			effects: fx(lease.TellClosed{}, lease.Answer{}), status: lease.Closed},
		{name: "an error: try again after the teardown retry, the close held meanwhile", j: jDeprovisioning(), in: lease.TornDown{Err: errors.New("docker: connection refused")},
			effects: fx(waitTeardown, held("teardown failed and is retried"))},
		{name: "not deprovisioning: nothing", j: jReady(), in: lease.TornDown{}},
		{name: "the volume root unproven: held — no closed event, no callback — retried on the kit's backoff",
			j: jDeprovisioning(), in: lease.TornDown{Err: fmt.Errorf("destroy x: %w", dockerio.ErrVolumeRootUnproven)},
			effects: fx(lease.Backoff{What: string(lease.WorkTeardown), Attempt: 1}, held(rootUnproven)), status: lease.Deprovisioning},
		{name: "the volume root still unproven: the next backoff step",
			j: jDeprovisioning(), in: lease.TornDown{Err: fmt.Errorf("destroy x: %w", dockerio.ErrVolumeRootUnproven), Attempt: 3},
			effects: fx(lease.Backoff{What: string(lease.WorkTeardown), Attempt: 4}, held(rootUnproven)), status: lease.Deprovisioning},
	})
}

const rootUnproven = "the volume root is not proven (is it mounted?); the close completes once it is"

// held is the answer of a close whose teardown cannot finish yet: 503
// lifecycle_pending, to its waiters now and to every close until the next attempt.
func held(why string) lease.Answer {
	return lease.Answer{Err: messages.Refuse(messages.ErrLifecyclePending, "close held: %s", why)}
}

// TestDecide_Timer: a wait scheduled by a Wait effect ran out.
func TestDecide_Timer(t *testing.T) {
	runDecide(t, []decideRow{
		{name: "teardown retry while deprovisioning", j: jDeprovisioning(), in: lease.Timer{What: string(lease.WorkTeardown)}, effects: fx(workTeardown)},
		{name: "a held teardown's backoff ran out: the teardown again, numbered", j: jDeprovisioning(),
			in: lease.Timer{What: string(lease.WorkTeardown), Attempt: 2}, effects: fx(lease.Work{Kind: lease.WorkTeardown, Attempt: 2})},
		{name: "resume while provisioning", j: jProvisioning(), in: lease.Timer{What: string(lease.WorkResume)}, effects: fx(workResume)},
		{name: "resume after the lease became ready: nothing", j: jReady(), in: lease.Timer{What: string(lease.WorkResume)}},
		{name: "replace-resume while restarting", j: jRestarting(), in: lease.Timer{What: string(lease.WorkReplaceResume)}, effects: fx(workReplaceResume)},
		{name: "replace-resume while updating", j: jUpdating(), in: lease.Timer{What: string(lease.WorkReplaceResume)}, effects: fx(workReplaceResume)},
		{name: "replace-resume after the maintenance settled: nothing", j: jRestarting().completes(), in: lease.Timer{What: string(lease.WorkReplaceResume)}},
		{name: "resume while restarting: nothing", j: jRestarting(), in: lease.Timer{What: string(lease.WorkResume)}},
	})
}

// --- maintenance ------------------------------------------------------------------------

func restartCmd(id string) lease.Maintain {
	return lease.Maintain{Kind: lease.KindRestart, ID: id, AdmittedAt: admittedAt}
}

func updateCmd(id string, services ...lease.ServiceSpec) lease.Maintain {
	return lease.Maintain{Kind: lease.KindUpdate, ID: id, AdmittedAt: admittedAt, Target: updateTarget(services...)}
}

// TestDecide_Maintain_Refused: a restart or update the lease cannot take is
// answered at once and journals nothing.
func TestDecide_Maintain_Refused(t *testing.T) {
	var rows []decideRow
	for _, tc := range []struct {
		status lease.Status
		j      *journal
	}{
		{lease.Reserved, jReserved()}, {lease.Provisioning, jProvisioning()}, {lease.Restarting, jRestarting()},
		{lease.Updating, jUpdating()}, {lease.Deprovisioning, jDeprovisioning()}, {lease.Closed, jClosed()},
	} {
		rows = append(rows,
			decideRow{name: "restart from " + string(tc.status), j: tc.j, in: restartCmd(mID2), reply: messages.ErrInvalidState,
				replyHas: "needs a ready or failed lease"},
			decideRow{name: "update from " + string(tc.status), j: tc.j, in: updateCmd(mID2, service("app", imgApp2, 1)),
				reply: messages.ErrInvalidState, replyHas: "needs a ready or failed lease"})
	}
	rows = append(rows,
		decideRow{name: "an ID that names a completed maintenance's release", j: jRestarting().completes(), in: restartCmd(mID1),
			reply: messages.ErrInvalidState, replyHas: "send a new key"},
		decideRow{name: "an ID that names a rolled-back maintenance's release", j: jRestarting().rollsBack(),
			in: updateCmd(mID1, service("app", imgApp2, 1)), reply: messages.ErrInvalidState, replyHas: "send a new key"},
		decideRow{name: "an ID that names the release of a maintenance that failed the lease", j: jRestarting().maintenanceFails(),
			in: restartCmd(mID1), reply: messages.ErrInvalidState, replyHas: "send a new key"},
		decideRow{name: "the maintenance fence: an earlier completion is still queued", j: jRestarting().completes(), in: restartCmd(mID2),
			env: []func(*lease.Env){fenced}, reply: messages.ErrInvalidState, replyHas: "still being delivered"},
		decideRow{name: "the fence holds a failed lease too", j: jRestarting().maintenanceFails(), in: restartCmd(mID2),
			env: []func(*lease.Env){fenced}, reply: messages.ErrInvalidState, replyHas: "retry"},
	)
	runDecide(t, rows)
}

// TestDecide_Maintain_Accepted: the intent, with its target release, is journaled
// before the 202; generations target = next, compensation = next + 1; an accepted
// restart or update resets the budget streak.
func TestDecide_Maintain_Accepted(t *testing.T) {
	spec := dspec(1)
	two := twoServices(1)
	rows := []decideRow{}

	// restart of a ready lease: a copy of the source with its pins.
	j := jReady()
	now := j.now.Add(time.Minute)
	rows = append(rows, decideRow{name: "restart from ready", j: j, in: restartCmd(mID1),
		events: []wantEvent{evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) {
			eq(t, "id", p.ID, mID1)
			eq(t, "kind", p.Kind, lease.KindRestart)
			eq(t, "admitted_at", p.AdmittedAt, admittedAt)
			eq(t, "at", p.At, now)
			eq(t, "deadline", p.Deadline, now.Add(provisionTimeout))
			eq(t, "source version", p.SourceVersion, 1)
			eq(t, "source status", p.SourceStatus, lease.Ready)
			eq(t, "source generation", p.SourceGen, uint64(1))
			eq(t, "source cohort", p.Source, cohortOf(spec.Services, 1))
			eq(t, "target generation", p.Generation, uint64(2))
			eq(t, "compensation generation", p.CompensateGen, uint64(3))
			r := p.Release
			eq(t, "target kind", r.Kind, lease.KindRestart)
			eq(t, "target maintenance_id", r.MaintenanceID, mID1)
			eq(t, "target operation_id", r.OperationID, "")
			eq(t, "target created_at", r.CreatedAt, now)
			eq(t, "target manifest", string(r.Manifest), string(spec.Manifest))
			eq(t, "target services", r.Services, spec.Services)
			eq(t, "target items", r.Items, spec.Items)
			eq(t, "target pins", r.Images, pinsOf(spec.Services))
		})},
		effects: fx(workReplace), status: lease.Restarting,
		check: func(t *testing.T, st *lease.State) {
			wantReleases(t, st, "v1:active", "v2:deploying")
			eq(t, "maintenance target version", st.Maintenance.Version, 2)
			eq(t, "last generation", st.LastGeneration, uint64(3))
		}})

	// update of a ready stack: new services; a pin only for an unchanged reference.
	j = newJournal(two).provision(two).pin().ready()
	rows = append(rows, decideRow{name: "update from ready keeps pins of unchanged references only", j: j,
		in: updateCmd(mID1, service("app", imgApp, 2), service("db", imgDB2, 1)),
		events: []wantEvent{evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) {
			eq(t, "kind", p.Kind, lease.KindUpdate)
			eq(t, "target generation", p.Generation, uint64(2))
			eq(t, "compensation generation", p.CompensateGen, uint64(3))
			eq(t, "source cohort", p.Source, cohortOf(two.Services, 1))
			eq(t, "target kind", p.Release.Kind, lease.KindUpdate)
			eq(t, "target services", p.Release.Services, sortedServices([]lease.ServiceSpec{service("app", imgApp, 2), service("db", imgDB2, 1)}))
			eq(t, "target manifest", string(p.Release.Manifest), string(updateTarget(service("app", imgApp, 2), service("db", imgDB2, 1)).Manifest))
			eq(t, "target pins", p.Release.Images, pinsOf([]lease.ServiceSpec{service("app", imgApp, 2)}))
		})},
		effects: fx(workReplace), status: lease.Updating,
		check: func(t *testing.T, st *lease.State) { wantReleases(t, st, "v1:active", "v2:deploying") }})

	// from failing: the capture worker is canceled; the replacement starts when it drained.
	rows = append(rows, decideRow{name: "restart from failing cancels the capture", j: jFailing(), in: restartCmd(mID1),
		env: []func(*lease.Env){withWorker(lease.WorkCapture)},
		events: []wantEvent{evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) {
			eq(t, "source status", p.SourceStatus, lease.Failed)
			eq(t, "source cohort", p.Source, []lease.Instance(nil))
			eq(t, "source version", p.SourceVersion, 1)
			eq(t, "target generation", p.Generation, uint64(2))
		})},
		effects: fx(lease.Cancel{}), status: lease.Restarting,
		check: func(t *testing.T, st *lease.State) {
			if st.PendingFailure != nil {
				t.Errorf("pending failure %+v kept", st.PendingFailure)
			}
			eq(t, "budget", st.Budget, lease.Budget{})
		}})

	// from failed: a lease that never became ready has no source to return to.
	rows = append(rows, decideRow{name: "restart from failed, never ready: no source release", j: jFailed(), in: restartCmd(mID1),
		events: []wantEvent{evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) {
			eq(t, "source status", p.SourceStatus, lease.Failed)
			eq(t, "source version", p.SourceVersion, 0)
			eq(t, "target services", p.Release.Services, spec.Services)
		})},
		effects: fx(workReplace), status: lease.Restarting,
		check: func(t *testing.T, st *lease.State) { wantReleases(t, st, "v1:failed", "v2:deploying") }})

	// from failed after a death: the source is the active release; the streak resets.
	j = jReady().wait(15 * time.Minute).dies(true).fails()
	if j.st.Budget.Streak != 1 {
		t.Fatalf("fixture streak %d", j.st.Budget.Streak)
	}
	rows = append(rows, decideRow{name: "update from failed resets the streak", j: j, in: updateCmd(mID1, service("app", imgApp2, 1)),
		events: []wantEvent{evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) {
			eq(t, "source status", p.SourceStatus, lease.Failed)
			eq(t, "source version", p.SourceVersion, 1)
			eq(t, "target pins", p.Release.Images, []lease.ServiceImage(nil))
		})},
		effects: fx(workReplace), status: lease.Updating,
		check: func(t *testing.T, st *lease.State) { eq(t, "budget", st.Budget, lease.Budget{}) }})

	// admitted_at is kept as UTC.
	j = jReady()
	rows = append(rows, decideRow{name: "admitted_at in another zone is journaled as UTC", j: j,
		in:      lease.Maintain{Kind: lease.KindRestart, ID: mID1, AdmittedAt: admittedAt.In(time.FixedZone("CEST", 2*3600))},
		events:  []wantEvent{evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) { eq(t, "admitted_at", p.AdmittedAt, admittedAt) })},
		effects: fx(workReplace), status: lease.Restarting})

	// a new key after a settled maintenance.
	rows = append(rows, decideRow{name: "a new key after a completed restart", j: jRestarting().completes(), in: restartCmd(mID2),
		events: []wantEvent{evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) {
			eq(t, "source version", p.SourceVersion, 2)
			eq(t, "source generation", p.SourceGen, uint64(2))
			eq(t, "target generation", p.Generation, uint64(4))
			eq(t, "compensation generation", p.CompensateGen, uint64(5))
		})},
		effects: fx(workReplace), status: lease.Restarting})
	runDecide(t, rows)
}

// TestDecide_Maintain_RestartOfAReprovisionedFailedLease: a failed lease whose
// re-provision (a new admission with a new manifest and items) failed is restarted.
// The restart must run the lease as admitted now — the re-provision's release —
// not the release of the admission it replaced: the pool holds the new admission's
// allocations and an update is already built from the new spec's services.
// spec.go: "A re-provision of a failed lease is a new admission with a new Spec";
// CONTRACT.md, POST /provision: "unless the existing lease is failed: then it is
// replaced"; seed, POST /restart: "same image, same configuration".
func TestDecide_Maintain_RestartOfAReprovisionedFailedLease(t *testing.T) {
	second := dspec(2, service("app", imgApp2, 2))
	j := jReady().dies(true).fails().provision(second).provisionFails()
	runDecide(t, []decideRow{{name: "restart after a failed re-provision", j: j, in: restartCmd(mID1),
		events: []wantEvent{evOf(lease.EvMaintenanceStarted, func(t *testing.T, p lease.MaintenanceStarted) {
			eq(t, "target services", p.Release.Services, second.Services)
			eq(t, "target items", p.Release.Items, second.Items)
			eq(t, "target manifest", string(p.Release.Manifest), string(second.Manifest))
		})},
		effects: fx(workReplace), status: lease.Restarting}})
}

// TestDecide_Replaced: a maintenance worker's verdict.
func TestDecide_Replaced(t *testing.T) {
	spec := dspec(1)
	target := cohortOf(spec.Services, 2)
	recreated := cohortOf(spec.Services, 3)
	rows := []decideRow{
		{name: "completed: target active, source superseded, success with maintenance_id", j: jRestarting(),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceCompleted, Generation: 2, Containers: target}},
			events: []wantEvent{evOf(lease.EvMaintenanceDone, func(t *testing.T, p lease.MaintenanceDone) {
				eq(t, "id", p.ID, mID1)
				eq(t, "generation", p.Generation, uint64(2))
				eq(t, "containers", p.Containers, target)
			})},
			cbs: []wantCB{maintCB(messages.CallbackSuccess, "", mID1)}, status: lease.Ready,
			check: func(t *testing.T, st *lease.State) {
				wantReleases(t, st, "v1:superseded", "v2:active")
				eq(t, "generation", st.Generation, uint64(2))
				eq(t, "containers", st.Containers, target)
				eq(t, "reason", st.Reason, "")
			}},
		{name: "completed update", j: jUpdating(),
			in:     lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceCompleted, Generation: 2, Containers: target}},
			events: []wantEvent{evType(lease.EvMaintenanceDone)}, cbs: []wantCB{maintCB(messages.CallbackSuccess, "", mID1)}, status: lease.Ready},
		{name: "recovered: the source recreated under the compensation generation, failed callback saying so", j: jRestarting(),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceRecovered, Generation: 3, Containers: recreated,
				Reason: messages.ReasonHealthCheckFailed, Message: "the restart failed: health check did not pass"}},
			events: []wantEvent{evOf(lease.EvMaintenanceRestored, func(t *testing.T, p lease.MaintenanceRestored) {
				eq(t, "generation", p.Generation, uint64(3))
				eq(t, "compensated", p.Compensated, true)
				eq(t, "containers", p.Containers, recreated)
				eq(t, "reason", p.Reason, messages.ReasonRestartFailed)
			})},
			cbs:    []wantCB{{status: messages.CallbackFailed, errPrefix: "RestartFailed: ", errHas: "restored", lifecycle: true, maintenanceID: mID1, admittedAt: admittedAt}},
			status: lease.Ready,
			check: func(t *testing.T, st *lease.State) {
				wantReleases(t, st, "v1:active", "v2:failed")
				eq(t, "generation", st.Generation, uint64(3))
				eq(t, "reason kept on the ready lease", st.Reason, messages.ReasonRestartFailed)
				eq(t, "fail_count", st.FailCount, 0)
			}},
		{name: "recovered update keeps UpdateFailed", j: jUpdating(),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceRecovered, Generation: 3, Containers: recreated}},
			events: []wantEvent{evOf(lease.EvMaintenanceRestored, func(t *testing.T, p lease.MaintenanceRestored) {
				eq(t, "reason", p.Reason, messages.ReasonUpdateFailed)
			})},
			cbs:    []wantCB{{status: messages.CallbackFailed, errPrefix: "UpdateFailed: ", errHas: "restored", lifecycle: true, maintenanceID: mID1, admittedAt: admittedAt}},
			status: lease.Ready,
			check:  func(t *testing.T, st *lease.State) { eq(t, "reason", st.Reason, messages.ReasonUpdateFailed) }},
		{name: "intact, ready source: the source generation and its very containers, the cause kept", j: jUpdating(),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceIntact, Reason: messages.ReasonImagePullFailed,
				Message: "image could not be pulled"}},
			events: []wantEvent{evOf(lease.EvMaintenanceRestored, func(t *testing.T, p lease.MaintenanceRestored) {
				eq(t, "generation", p.Generation, uint64(1))
				eq(t, "compensated", p.Compensated, false)
				eq(t, "containers", p.Containers, cohortOf(spec.Services, 1))
				eq(t, "reason", p.Reason, messages.ReasonImagePullFailed)
			})},
			cbs:    []wantCB{{status: messages.CallbackFailed, errPrefix: "UpdateFailed: ImagePullFailed", lifecycle: true, maintenanceID: mID1, admittedAt: admittedAt}},
			status: lease.Ready,
			check: func(t *testing.T, st *lease.State) {
				wantReleases(t, st, "v1:active", "v2:failed")
				eq(t, "generation", st.Generation, uint64(1))
				eq(t, "containers", st.Containers, cohortOf(spec.Services, 1))
			}},
		{name: "intact without a cause: unchanged", j: jRestarting(),
			in:     lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceIntact}},
			events: []wantEvent{evType(lease.EvMaintenanceRestored)},
			cbs:    []wantCB{{status: messages.CallbackFailed, errPrefix: "RestartFailed: ", errHas: "unchanged", lifecycle: true, maintenanceID: mID1, admittedAt: admittedAt}},
			status: lease.Ready},
		{name: "intact, failed source: maintenance.failed, the lease stays failed", j: jFailed().restart(mID1),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceIntact, Reason: messages.ReasonImagePullFailed}},
			events: []wantEvent{evOf(lease.EvMaintenanceFailed, func(t *testing.T, p lease.MaintenanceFailed) {
				eq(t, "generation", p.Generation, uint64(1))
				eq(t, "reason", p.Reason, messages.ReasonRestartFailed)
			})},
			cbs:    []wantCB{maintCB(messages.CallbackFailed, "RestartFailed: ", mID1)},
			status: lease.Failed,
			check:  func(t *testing.T, st *lease.State) { eq(t, "fail_count", st.FailCount, 2) }},
		{name: "failed: maintenance.failed under the compensation generation, fail_count + 1", j: jRestarting(),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceFailed, Generation: 3,
				Message: "the restart failed; the previous deployment could not be restored"}},
			events: []wantEvent{evOf(lease.EvMaintenanceFailed, func(t *testing.T, p lease.MaintenanceFailed) {
				eq(t, "generation", p.Generation, uint64(3))
				eq(t, "reason", p.Reason, messages.ReasonRestartFailed)
			})},
			cbs:    []wantCB{maintCB(messages.CallbackFailed, "RestartFailed: ", mID1)},
			status: lease.Failed,
			check: func(t *testing.T, st *lease.State) {
				eq(t, "fail_count", st.FailCount, 1)
				eq(t, "containers", len(st.Containers), 0)
				wantReleases(t, st, "v1:active", "v2:failed")
			}},
		{name: "failed before compensation ran: the target generation", j: jUpdating(),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceFailed, Generation: 2}},
			events: []wantEvent{evOf(lease.EvMaintenanceFailed, func(t *testing.T, p lease.MaintenanceFailed) {
				eq(t, "generation", p.Generation, uint64(2))
			})},
			cbs: []wantCB{maintCB(messages.CallbackFailed, "UpdateFailed: ", mID1)}, status: lease.Failed},
		{name: "pending: look again", j: jRestarting(), in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplacePending}},
			effects: fx(waitReplaceResume)},
		{name: "canceled by a drain: look again", j: jUpdating(), in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceCanceled}},
			effects: fx(waitReplaceResume)},
		{name: "another maintenance ID: nothing", j: jRestarting(),
			in: lease.Replaced{ID: mID2, Result: lease.ReplaceResult{Kind: lease.ReplaceCompleted, Generation: 2, Containers: target}}},
		{name: "after the maintenance settled (a late duplicate): nothing", j: jRestarting().completes(),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceCompleted, Generation: 2, Containers: target}}},
		{name: "while deprovisioning: the canceled worker drained, tear down", j: jRestarting().close(),
			in: lease.Replaced{ID: mID1, Result: lease.ReplaceResult{Kind: lease.ReplaceCanceled}}, effects: fx(workTeardown)},
	}
	runDecide(t, rows)
}

// --- reconciliation ------------------------------------------------------------------

// TestDecide_Listed: reconciliation's inventory of the lease.
func TestDecide_Listed(t *testing.T) {
	two := twoServices(1)
	ready := func() *journal { return newJournal(two).provision(two).pin().ready() }
	cohort := cohortOf(two.Services, 1)
	without := func(cs []messages.Container, id string) []messages.Container {
		return slices.DeleteFunc(slices.Clone(cs), func(c messages.Container) bool { return c.ID == id })
	}
	with := func(cs []messages.Container, more ...messages.Container) []messages.Container {
		return append(slices.Clone(cs), more...)
	}
	running := listed(cohort, 1)
	exited := slices.Clone(running)
	exited[2].State, exited[2].ExitCode = "exited", 1 // db/0
	otherImage := slices.Clone(running)
	otherImage[1].ImageID = imageID(imgApp2) // app/1
	diverged := func(has string) wantEvent {
		return evOf(lease.EvCohortDiverged, func(t *testing.T, p lease.CohortDiverged) {
			eq(t, "generation", p.Generation, uint64(1))
			if !strings.Contains(p.Message, has) {
				t.Errorf("message %q does not say %q", p.Message, has)
			}
		})
	}
	divergedState := func(t *testing.T, st *lease.State) {
		eq(t, "reason", st.Reason, messages.ReasonInternal)
		eq(t, "fail_count", st.FailCount, 1)
		eq(t, "budget", st.Budget, lease.Budget{})
		eq(t, "containers", len(st.Containers), 0)
	}
	// A retried provision: generation 1 left containers, generation 2 runs.
	retried := func() *journal { return newJournal(two).provision(two).retry().pin() }
	gen1 := listed(cohort, 1)
	gen2 := listed(cohortOf(two.Services, 2), 2)
	ids := func(cs []messages.Container) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	deadGen2 := slices.Clone(gen2)
	for i := range deadGen2 {
		deadGen2[i].State = "exited"
	}
	runDecide(t, []decideRow{
		{name: "ready with its cohort running: nothing", j: ready(), in: lease.Listed{Containers: running}},
		{name: "ready, a recorded container missing: confirm it, uncounted", j: ready(),
			in:      lease.Listed{Containers: without(running, ctrID("app", 1, 1))},
			effects: fx(lease.Confirm{Death: lease.Died{ContainerID: ctrID("app", 1, 1), Generation: 1}})},
		{name: "ready, a recorded container not running: confirm it, uncounted", j: ready(), in: lease.Listed{Containers: exited},
			effects: fx(lease.Confirm{Death: lease.Died{ContainerID: ctrID("db", 0, 1), Generation: 1}})},
		{name: "ready, nothing listed: confirm every recorded container", j: ready(), in: lease.Listed{},
			effects: fx(lease.Confirm{Death: lease.Died{ContainerID: ctrID("app", 0, 1), Generation: 1}},
				lease.Confirm{Death: lease.Died{ContainerID: ctrID("app", 1, 1), Generation: 1}},
				lease.Confirm{Death: lease.Died{ContainerID: ctrID("db", 0, 1), Generation: 1}})},
		{name: "ready, a running instance the release does not have: diverged", j: ready(),
			in:     lease.Listed{Containers: with(running, container("app", 2, 1, "intruder", imgApp, "running"))},
			events: []wantEvent{diverged("unexpected instance app/2")}, cbs: []wantCB{lifeCB(messages.CallbackFailed, "Internal: ")},
			status: lease.Failed, check: divergedState},
		{name: "ready, a service the release does not have: diverged", j: ready(),
			in:     lease.Listed{Containers: with(running, container("cache", 0, 1, "intruder", imgApp, "running"))},
			events: []wantEvent{diverged("unexpected instance cache/0")}, cbs: []wantCB{lifeCB(messages.CallbackFailed, "Internal: ")},
			status: lease.Failed, check: divergedState},
		{name: "ready, an instance running twice: diverged", j: ready(),
			in:     lease.Listed{Containers: with(running, container("app", 0, 1, "twin", imgApp, "running"))},
			events: []wantEvent{diverged("app/0 runs twice")}, cbs: []wantCB{lifeCB(messages.CallbackFailed, "Internal: ")},
			status: lease.Failed, check: divergedState},
		{name: "ready, another image ID than the release's pin: diverged", j: ready(), in: lease.Listed{Containers: otherImage},
			events: []wantEvent{diverged("app/1 runs another image")}, cbs: []wantCB{lifeCB(messages.CallbackFailed, "Internal: ")},
			status: lease.Failed, check: divergedState},
		{name: "ready, containers of settled generations: sweep them", j: retried().ready(),
			in: lease.Listed{Containers: with(gen2, gen1...)}, effects: fx(lease.Sweep{IDs: ids(gen1)})},
		{name: "ready, a missing container and leftovers: confirm, then sweep", j: retried().ready(),
			in:      lease.Listed{Containers: with(without(gen2, ctrID("db", 0, 2)), gen1[0])},
			effects: fx(lease.Confirm{Death: lease.Died{ContainerID: ctrID("db", 0, 2), Generation: 2}}, lease.Sweep{IDs: []string{gen1[0].ID}})},
		{name: "ready after a rollback: the failed target and the retired source are swept", j: jRestarting().rollsBack(),
			in: lease.Listed{Containers: with(listed(cohortOf(dspec(1).Services, 3), 3),
				container("app", 0, 2, ctrID("app", 0, 2), imgApp, "exited"), container("app", 0, 1, ctrID("app", 0, 1), imgApp, "exited"))},
			effects: fx(lease.Sweep{IDs: []string{ctrID("app", 0, 2), ctrID("app", 0, 1)}})},
		{name: "failed: other generations swept, the dead cohort kept for the operator", j: retried().ready().dies(true).fails(),
			in: lease.Listed{Containers: with(deadGen2, gen1...)}, effects: fx(lease.Sweep{IDs: ids(gen1)})},
		{name: "failed with only its own dead cohort: nothing", j: ready().dies(false).fails(), in: lease.Listed{Containers: exited}},
		{name: "provisioning: older generations swept, the attempt's own kept", j: retried(),
			in: lease.Listed{Containers: with(gen2[:1], gen1...)}, effects: fx(lease.Sweep{IDs: ids(gen1)})},
		{name: "restarting: the maintenance owns every container, nothing swept", j: jRestarting(),
			in: lease.Listed{Containers: with(listed(cohortOf(dspec(1).Services, 1), 1), container("app", 0, 2, ctrID("app", 0, 2), imgApp, "running"),
				container("app", 0, 0, "older", imgApp, "exited"))}},
		{name: "updating: nothing swept, no divergence judged", j: jUpdating(),
			in: lease.Listed{Containers: []messages.Container{container("app", 5, 2, "x", imgDB, "running")}}},
		{name: "failing: the capture owns the cohort", j: jFailing(), in: lease.Listed{Containers: []messages.Container{container("app", 0, 0, "older", imgApp, "exited")}}},
		{name: "deprovisioning: the teardown owns everything", j: jDeprovisioning(), in: lease.Listed{Containers: running}},
		{name: "closed: nothing", j: jClosed(), in: lease.Listed{Containers: running}},
	})
}

// --- deaths and the terminal budget -----------------------------------------------------

// TestDecide_DiedConfirmedCaptured: a death the live stream saw is confirmed by an
// inspect off the actor; a confirmed exit moves a ready lease to failing and starts
// the capture, whose end fails the lease with one lifecycle callback.
func TestDecide_DiedConfirmedCaptured(t *testing.T) {
	ctr := ctrID("app", 0, 1)
	death := lease.Died{ContainerID: ctr, Generation: 1, Counted: true}
	exited := container("app", 0, 1, ctr, imgApp, "exited")
	exited.ExitCode, exited.OOMKilled = 137, true
	j := jReady()
	now := j.now.Add(time.Minute)
	runDecide(t, []decideRow{
		{name: "died, counted: confirm it", j: jReady(), in: death, effects: fx(lease.Confirm{Death: death})},
		{name: "died, a container the cohort does not have: nothing", j: jReady(), in: lease.Died{ContainerID: "stranger", Generation: 1, Counted: true}},
		{name: "died, a generation the lease left: nothing", j: jRestarting().completes(), in: death},
		{name: "died while failing: nothing", j: jFailing(), in: lease.Died{ContainerID: ctr, Generation: 1}},
		{name: "died while restarting: the maintenance owns the cohort", j: jRestarting(), in: death},
		{name: "confirmed exit, counted: runtime.failing, capture, streak 1", j: j,
			in: lease.Confirmed{Generation: 1, Death: death, Exited: &exited},
			events: []wantEvent{evOf(lease.EvRuntimeFailing, func(t *testing.T, p lease.RuntimeFailing) {
				eq(t, "generation", p.Generation, uint64(1))
				eq(t, "container", p.ContainerID, ctr)
				eq(t, "service/index", fmt.Sprintf("%s/%d", p.Service, p.Index), "app/0")
				eq(t, "exit code", p.ExitCode, 137)
				eq(t, "oom killed", p.OOMKilled, true)
				eq(t, "counted", p.Counted, true)
			})},
			effects: fx(workCapture), status: lease.Failing,
			check: func(t *testing.T, st *lease.State) {
				eq(t, "streak", st.Budget.Streak, 1)
				eq(t, "streak start", st.Budget.StreakStart, now)
			}},
		{name: "confirmed exit, uncounted (reconciliation): the streak does not move", j: jReady(),
			in:      lease.Confirmed{Generation: 1, Death: lease.Died{ContainerID: ctr, Generation: 1}, Exited: &exited},
			events:  []wantEvent{evOf(lease.EvRuntimeFailing, func(t *testing.T, p lease.RuntimeFailing) { eq(t, "counted", p.Counted, false) })},
			effects: fx(workCapture), status: lease.Failing,
			check: func(t *testing.T, st *lease.State) { eq(t, "streak", st.Budget.Streak, 0) }},
		{name: "confirmed: it runs after all: nothing", j: jReady(), in: lease.Confirmed{Generation: 1, Death: death}},
		{name: "confirmed for a generation the lease left: nothing", j: jRestarting().completes(),
			in: lease.Confirmed{Generation: 1, Death: death, Exited: &exited}},
		{name: "confirmed after a close: nothing", j: jDeprovisioning(), in: lease.Confirmed{Generation: 1, Death: death, Exited: &exited}},
		{name: "captured: runtime.failed and one failed lifecycle callback", j: jFailing(), in: lease.Captured{Generation: 1},
			events: []wantEvent{evOf(lease.EvRuntimeFailed, func(t *testing.T, p lease.RuntimeFailed) {
				eq(t, "reason", p.Reason, messages.ReasonContainerExited)
			})},
			cbs: []wantCB{lifeCB(messages.CallbackFailed, "ContainerExited: ")}, status: lease.Failed,
			check: func(t *testing.T, st *lease.State) { eq(t, "fail_count", st.FailCount, 1) }},
		{name: "captured of another generation: nothing", j: jFailing(), in: lease.Captured{Generation: 7}},
		{name: "captured after a restart was accepted while failing: start the replacement", j: jFailing().restart(mID1),
			in: lease.Captured{Generation: 1}, effects: fx(workReplace)},
		{name: "captured after a close: tear down", j: jFailing().close(), in: lease.Captured{Generation: 1}, effects: fx(workTeardown)},
		{name: "captured after a re-provision was accepted while failing: start the attempt, no failed callback",
			j: jFailing().provision(dspec(2)), in: lease.Captured{Generation: 1}, effects: fx(workProvision)},
		{name: "captured while ready: nothing", j: jReady(), in: lease.Captured{Generation: 1}},
	})
}

// driver runs one lease through Decide and Apply alone — the lifecycle as the actor
// runs it, without the actor.
type driver struct {
	t    *testing.T
	st   *lease.State
	spec *lease.Spec
}

func (d *driver) step(in lease.Input, at time.Time, worker lease.WorkKind) lease.Decision {
	d.t.Helper()
	dec := lease.Decide(d.st, in, lease.Env{Now: at, Spec: d.spec, Worker: worker, Limits: testLimits})
	if dec.Reply != nil {
		d.t.Fatalf("%T refused: %v", in, dec.Reply)
	}
	for _, ev := range dec.Events {
		if err := d.st.Apply(ev); err != nil {
			d.t.Fatalf("%T: %s does not apply: %v", in, ev.Type, err)
		}
	}
	return dec
}

func (d *driver) want(status lease.Status) {
	d.t.Helper()
	if d.st.Status != status {
		d.t.Fatalf("status %s, want %s", d.st.Status, status)
	}
}

// dlife is one Ready period ended by a death: reached by a provision (the first,
// or a re-provision of the failed lease) or by an accepted restart of the failed
// lease; the death seen by the live stream (counted or not) or by reconciliation.
type dlife struct {
	via                string // "provision" | "restart"
	start, ready, died time.Duration
	death              string // "counted" | "uncounted" | "listed"
	wantStreak         int
	wantExhausted      bool
}

// TestDecide_TerminalBudget drives the budget rules through Decide: three counted
// failures in a row spanning at least 30 minutes exhaust; ten minutes of Ready
// reset the streak; a death found by reconciliation never counts; an accepted
// restart resets the streak.
func TestDecide_TerminalBudget(t *testing.T) {
	m := time.Minute
	for _, tc := range []struct {
		name  string
		lives []dlife
	}{
		{"three counted deaths spanning 30 minutes exhaust", []dlife{
			{"provision", 0, 0, 1 * m, "counted", 1, false},
			{"provision", 15 * m, 15 * m, 16 * m, "counted", 2, false},
			{"provision", 30 * m, 30 * m, 31 * m, "counted", 3, true},
		}},
		{"three counted deaths inside 30 minutes do not", []dlife{
			{"provision", 0, 0, 1 * m, "counted", 1, false},
			{"provision", 10 * m, 10 * m, 11 * m, "counted", 2, false},
			{"provision", 20 * m, 20 * m, 21 * m, "counted", 3, false},
		}},
		{"ten minutes of Ready reset the streak", []dlife{
			{"provision", 0, 0, 1 * m, "counted", 1, false},
			{"provision", 4 * m, 4 * m, 5 * m, "counted", 2, false},
			{"provision", 21 * m, 21 * m, 31 * m, "counted", 1, false},
		}},
		{"deaths found by reconciliation never count", []dlife{
			{"provision", 0, 0, 1 * m, "counted", 1, false},
			{"provision", 15 * m, 15 * m, 16 * m, "listed", 1, false},
			{"provision", 30 * m, 30 * m, 31 * m, "uncounted", 1, false},
			{"provision", 32 * m, 32 * m, 33 * m, "counted", 2, false},
		}},
		{"an accepted restart resets the streak", []dlife{
			{"provision", 0, 0, 1 * m, "counted", 1, false},
			{"provision", 15 * m, 15 * m, 16 * m, "counted", 2, false},
			{"restart", 24 * m, 25 * m, 31 * m, "counted", 1, false}, // without the reset: 3 spanning 30 minutes
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &driver{t: t, st: lease.NewState(), spec: dspec(1)}
			for i, l := range tc.lives {
				switch {
				case i == 0:
					d.step(lease.Recover{}, at(l.start), "")
				case l.via == "provision":
					d.spec = dspec(uint64(i + 1))
					d.step(lease.Reprovision{}, at(l.start), "")
				default:
					id := fmt.Sprintf("3b241101-e2bb-4255-8caf-%012d", i)
					d.step(lease.Maintain{Kind: lease.KindRestart, ID: id, AdmittedAt: at(l.start)}, at(l.start), "")
					if d.st.Budget != (lease.Budget{}) {
						t.Fatalf("life %d: an accepted restart left the budget %+v", i+1, d.st.Budget)
					}
				}
				gen := d.st.Generation
				if d.st.Maintenance != nil {
					gen = d.st.Maintenance.Generation
				}
				cohort := cohortOf(d.spec.Services, gen)
				if l.via == "restart" {
					d.step(lease.Replaced{ID: d.st.Maintenance.ID, Result: lease.ReplaceResult{Kind: lease.ReplaceCompleted,
						Generation: gen, Containers: cohort}}, at(l.ready), lease.WorkReplace)
				} else {
					d.step(lease.Attempted{Generation: gen, Outcome: lease.Outcome{Kind: lease.OutcomeReady, Containers: cohort}},
						at(l.ready), lease.WorkProvision)
				}
				d.want(lease.Ready)
				died := lease.Died{ContainerID: cohort[0].ContainerID, Generation: gen, Counted: l.death == "counted"}
				var dec lease.Decision
				if l.death == "listed" {
					dec = d.step(lease.Listed{}, at(l.died), "")
				} else {
					dec = d.step(died, at(l.died), "")
				}
				if !reflect.DeepEqual(dec.Effects, fx(lease.Confirm{Death: died})) {
					t.Fatalf("life %d: the death chose %#v, want a confirmation of %+v", i+1, dec.Effects, died)
				}
				gone := container("app", 0, gen, died.ContainerID, imgApp, "exited")
				d.step(lease.Confirmed{Generation: gen, Death: died, Exited: &gone}, at(l.died), "")
				d.want(lease.Failing)
				if d.st.Budget.Streak != l.wantStreak || d.st.Budget.Exhausted != l.wantExhausted {
					t.Fatalf("life %d: streak %d exhausted %v, want %d %v", i+1, d.st.Budget.Streak, d.st.Budget.Exhausted,
						l.wantStreak, l.wantExhausted)
				}
				d.step(lease.Captured{Generation: gen}, at(l.died+time.Second), lease.WorkCapture)
				d.want(lease.Failed)
				verdict := "retry"
				if l.wantExhausted {
					verdict = "exhausted"
				}
				if v := d.st.Verdict(); v.Verdict != verdict || v.ConsecutiveFailures != l.wantStreak {
					t.Fatalf("life %d: verdict %+v, want %s/%d", i+1, *v, verdict, l.wantStreak)
				}
			}
			if d.st.FailCount != len(tc.lives) {
				t.Fatalf("fail_count %d after %d deaths", d.st.FailCount, len(tc.lives))
			}
		})
	}
}

// --- releases ---------------------------------------------------------------------------

// historyOf: v1 superseded, v2 failed, v3 active — the lease was ready, a restart
// rolled back, a second restart completed.
func historyOf() *journal {
	return jReady().restart(mID1).rollsBack().restart(mID2).completes()
}

func pruned(versions ...int) wantEvent {
	return evOf(lease.EvReleasesPruned, func(t *testing.T, p lease.ReleasesPruned) { eq(t, "versions", p.Versions, versions) })
}

// TestDecide_Releases: release history is compacted in the transaction that
// appends a release: superseded and failed releases older than releases_max_age
// go, never the latest or the active one; the per-lease cap compacts the oldest
// disposable releases first, and a maintenance whose protected releases alone
// would not fit is refused before any effect.
func TestDecide_Releases(t *testing.T) {
	h := historyOf()
	if got := releaseStatuses(h.st); !slices.Equal(got, []string{"v1:superseded", "v2:failed", "v3:active"}) {
		t.Fatalf("fixture history %v", got)
	}
	old := func(j *journal) func(*lease.Env) { return nowAt(j.now.Add(releasesMaxAge + day)) }
	sizes := func(j *journal) (active, all int) {
		return historySize([]lease.Release{*j.st.Active()}), historySize(j.st.Releases)
	}
	// The target of a restart is a copy of the active release: about its size.
	aSize, _ := sizes(historyOf())
	h2 := historyOf()
	s2 := historySize(h2.st.Releases[1:2])

	j := historyOf()
	rows := []decideRow{
		{name: "maintain: superseded and failed releases past releases_max_age are pruned, the active one kept", j: j,
			in: restartCmd(mID3), env: []func(*lease.Env){old(j)},
			events:  []wantEvent{evType(lease.EvMaintenanceStarted), pruned(1, 2)},
			effects: fx(workReplace), status: lease.Restarting,
			check: func(t *testing.T, st *lease.State) { wantReleases(t, st, "v3:active", "v4:deploying") }},
		{name: "maintain: nothing older than releases_max_age, nothing pruned", j: historyOf(), in: restartCmd(mID3),
			env:    []func(*lease.Env){nowAt(historyOf().now.Add(releasesMaxAge - day))},
			events: []wantEvent{evType(lease.EvMaintenanceStarted)}, effects: fx(workReplace), status: lease.Restarting},
	}
	j = jReady().restart(mID1).completes().dies(true).fails() // v1 superseded, v2 active
	rows = append(rows, decideRow{name: "re-provision: the expired superseded release is pruned in the transaction that appends the new one",
		j: j, in: lease.Reprovision{}, env: []func(*lease.Env){withSpec(dspec(2)), old(j)},
		events: []wantEvent{evType(lease.EvProvisionStarted), pruned(1)}, effects: fx(workProvision), status: lease.Provisioning,
		check: func(t *testing.T, st *lease.State) { wantReleases(t, st, "v2:active", "v3:deploying") }})
	rows = append(rows,
		decideRow{name: "cap: the oldest disposable release goes first", j: historyOf(), in: restartCmd(mID3),
			env:    []func(*lease.Env){withHistoryBytes(s2 + 2*aSize + 200)},
			events: []wantEvent{evType(lease.EvMaintenanceStarted), pruned(1)}, effects: fx(workReplace), status: lease.Restarting,
			check: func(t *testing.T, st *lease.State) { wantReleases(t, st, "v2:failed", "v3:active", "v4:deploying") }},
		decideRow{name: "cap: as many as needed, oldest first", j: historyOf(), in: restartCmd(mID3),
			env:    []func(*lease.Env){withHistoryBytes(2*aSize + 200)},
			events: []wantEvent{evType(lease.EvMaintenanceStarted), pruned(1, 2)}, effects: fx(workReplace), status: lease.Restarting,
			check: func(t *testing.T, st *lease.State) { wantReleases(t, st, "v3:active", "v4:deploying") }},
		decideRow{name: "cap: protected releases alone would not fit: refused before any effect", j: historyOf(), in: restartCmd(mID3),
			env:   []func(*lease.Env){withHistoryBytes(2*aSize - 200)},
			reply: messages.ErrInvalidState, replyHas: "release history"},
		decideRow{name: "cap: an update whose target alone exceeds the cap is refused", j: jReady(),
			in:    updateCmd(mID1, service("app", imgApp2, 1)),
			env:   []func(*lease.Env){withHistoryBytes(aSize / 2)},
			reply: messages.ErrInvalidState, replyHas: "release history"},
	)
	runDecide(t, rows)
}

// TestDecide_Releases_CompactionIsDeterministic: the same state, input and limits
// choose byte-identical events.
func TestDecide_Releases_CompactionIsDeterministic(t *testing.T) {
	h := historyOf()
	a := historySize([]lease.Release{*h.st.Active()})
	env := lease.Env{Now: h.now.Add(time.Minute), Spec: h.spec, Limits: testLimits}
	env.Limits.HistoryBytes = 2*a + 200
	var first []persistence.Event
	for i := range 5 {
		d := lease.Decide(replay(t, h.evs...), restartCmd(mID3), env)
		if len(d.Events) != 2 || d.Events[1].Type != lease.EvReleasesPruned {
			t.Fatalf("run %d: events %v", i, d.Events)
		}
		if i == 0 {
			first = d.Events
			continue
		}
		if !reflect.DeepEqual(d.Events, first) {
			t.Fatalf("run %d chose %s, the first %s", i, d.Events[0].Data, first[0].Data)
		}
	}
}

// TestDecide_Releases_CompactionCountsTheReleaseTheAppendRetires: compaction runs
// for the history as it will be after the append. A failed latest release (a
// rolled-back restart) stops being the latest once the next target is appended:
// it is then disposable audit history, and the cap and releases_max_age apply to
// it like to any other. Seed, Releases: "Compaction always preserves the
// index-latest row and most recent active row. It removes expired disposable audit
// entries first, then the oldest fresh disposable entries … If protected authority
// alone exceeds the cap, admission fails before mutation." The prune is journaled
// after the append, so it can take the retired latest.
func TestDecide_Releases_CompactionCountsTheReleaseTheAppendRetires(t *testing.T) {
	fl := jReady().restart(mID1).rollsBack() // v1 active, v2 failed (latest)
	active := historySize([]lease.Release{*fl.st.Active()})
	failed := historySize(fl.st.Releases[1:])
	limit := 2*active + failed/2 // the active release and the target fit; the rolled-back one does not
	t.Run("cap", func(t *testing.T) {
		st := replay(t, fl.evs...)
		env := lease.Env{Now: fl.now.Add(time.Minute), Spec: fl.spec, Limits: testLimits}
		env.Limits.HistoryBytes = limit
		d := lease.Decide(st, restartCmd(mID2), env)
		if d.Reply != nil {
			return // refusing is within the seed too: nothing was mutated
		}
		for _, ev := range d.Events {
			if err := st.Apply(ev); err != nil {
				t.Fatalf("%s does not apply: %v", ev.Type, err)
			}
		}
		if n := historySize(st.Releases); n > limit {
			t.Errorf("admitted with a history of %d bytes over the cap of %d: releases %v", n, limit, releaseStatuses(st))
		}
	})
	runDecide(t, []decideRow{{name: "releases_max_age", j: jReady().restart(mID1).rollsBack(), in: restartCmd(mID2),
		env:    []func(*lease.Env){nowAt(fl.now.Add(releasesMaxAge + day))},
		events: []wantEvent{evType(lease.EvMaintenanceStarted), pruned(2)}, effects: fx(workReplace), status: lease.Restarting,
		check: func(t *testing.T, st *lease.State) { wantReleases(t, st, "v1:active", "v3:deploying") }}})
}

// TestDecide_Releases_ExpireOnAnIdleLease: a lease that deploys nothing new still
// loses its expired audit history. Seed, GET /releases: "Entries are retained for
// up to releases_max_age (default 90 days)"; Releases: "Maximum age of persisted
// release entries before cleanup". Reconciliation's periodic inventory (Listed)
// is the input every live lease gets, so expiry rides on it.
func TestDecide_Releases_ExpireOnAnIdleLease(t *testing.T) {
	j := jRestarting().completes() // v1 superseded, v2 active
	runDecide(t, []decideRow{{name: "ready, healthy, a superseded release past releases_max_age", j: j,
		in: lease.Listed{Containers: listed(j.st.Containers, j.st.Generation)}, env: []func(*lease.Env){nowAt(j.now.Add(releasesMaxAge + day))},
		events: []wantEvent{pruned(1)},
		check:  func(t *testing.T, st *lease.State) { wantReleases(t, st, "v2:active") }}})
}

// TestRelease_Wire: GET /releases/{lease} entries: image "stack", the manifest as
// base64 of the raw tenant manifest, status, reason and message as journaled.
func TestRelease_Wire(t *testing.T) {
	j := jReady().update(mID1, service("app", imgApp2, 1)).rollsBack()
	st := replay(t, j.evs...)
	want := []messages.Release{
		{Version: 1, Image: "stack", Status: messages.ReleaseActive, CreatedAt: st.Releases[0].CreatedAt,
			Manifest: base64.StdEncoding.EncodeToString(dspec(1).Manifest)},
		{Version: 2, Image: "stack", Status: messages.ReleaseFailed, CreatedAt: st.Releases[1].CreatedAt,
			Reason: messages.ReasonUpdateFailed, Message: "the update failed: the target did not become ready",
			Manifest: base64.StdEncoding.EncodeToString(updateTarget(service("app", imgApp2, 1)).Manifest)},
	}
	for i := range st.Releases {
		got := st.Releases[i].Wire()
		eq(t, fmt.Sprintf("release %d", i+1), got, want[i])
		raw, err := base64.StdEncoding.DecodeString(got.Manifest)
		if err != nil || string(raw) != string(st.Releases[i].Manifest) {
			t.Errorf("release %d manifest does not decode to the raw manifest: %v", i+1, err)
		}
		b, _ := json.Marshal(got)
		var keys map[string]any
		_ = json.Unmarshal(b, &keys)
		for _, k := range []string{"version", "image", "status", "created_at", "manifest"} {
			if _, ok := keys[k]; !ok {
				t.Errorf("release %d JSON %s lacks %q", i+1, b, k)
			}
		}
	}
	if got := (&lease.Release{Version: 1, Status: messages.ReleaseDeploying}).Wire(); got.Manifest != "" || got.Image != "stack" {
		t.Errorf("a release without a manifest: %+v", got)
	}
}
