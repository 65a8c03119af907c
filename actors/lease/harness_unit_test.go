package lease_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/actors/lease/steps"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// The lease actor unit-test harness: a real store (persistence.Open on a temp dir),
// the in-memory fake Docker engine, and a real supervisors.Tree in which a small
// parent actor (standing in for the registry) hosts the lease actors and forwards
// their Reports and LeaseClosed messages to the test, and a sink actor at the
// settings' OutboxPath observes OutboxWake.

// unitWait bounds every wait of these tests: generous, for a loaded 2-core machine
// running -race. Waits poll; none is a fixed sleep.
const unitWait = 30 * time.Second

// unitImage is the image every unit-test service runs (the fake only needs it added).
const unitImage = "127.0.0.1:5000/berth/unit-workload:1"

const (
	parentPath = supervisors.RootPath + "/leases"
	sinkPath   = supervisors.RootPath + "/outbox-sink"
)

// harness is one test's world.
type harness struct {
	t     *testing.T
	store *persistence.Store
	diag  *persistence.Diagnostics
	eng   *gatedEngine
	vols  *fake.Volumes
	set   *lease.Settings
	deps  *lease.Deps
	tree  *supervisors.Tree
	logs  *logBuffer
	reg   *prometheus.Registry // the lease metrics'

	reports chan messages.LeaseReport
	closed  chan messages.LeaseClosed
	givenUp chan lease.CloseDropped // closes refused because their askers gave up
	wakes   chan wakeSeen
	dropped atomic.Int64 // forwarded messages that found a full channel
}

// wakeSeen is an OutboxWake as the sink received it, with what the store held for
// that lease at that moment (read on the sink's goroutine, before anything else).
type wakeSeen struct {
	lease  string
	events []string // journal event types
	rows   []persistence.OutboxRow
	err    error
}

// unitSettings are the short-duration lease settings of these tests.
func unitSettings(id persistence.Identity) *lease.Settings {
	return &lease.Settings{
		BackendName:      "berth-unit",
		HostAddress:      "203.0.113.7",
		HostBindIP:       "127.0.0.1",
		StorageID:        id.StorageID,
		InstallationID:   id.InstallationID,
		ProvisionTimeout: 5 * time.Second,
		PullTimeout:      2 * time.Second,
		VerifyDuration:   50 * time.Millisecond,
		StopTimeout:      time.Second,
		HealthPoll:       20 * time.Millisecond,
		ResumePoll:       50 * time.Millisecond,
		TeardownRetry:    50 * time.Millisecond,
		ReadonlyRootfs:   true,
		PidsLimit:        256,
		TmpfsSizeMB:      16,
		OutboxPath:       sinkPath,
		SnapshotEvery:    64,
		WorkerDrain:      5 * time.Second,
	}
}

// newHarness opens a store and diagnostics in a temp dir, builds the fake engine
// (with unitImage added) and starts the tree. tune may adjust the settings.
func newHarness(t *testing.T, tune func(*lease.Settings)) *harness {
	t.Helper()
	dir := t.TempDir()
	store, _, err := persistence.Open(persistence.Options{Dir: dir})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	diag, err := persistence.OpenDiagnostics(persistence.Options{Dir: dir})
	if err != nil {
		t.Fatalf("open diagnostics: %v", err)
	}
	h := &harness{
		t:       t,
		store:   store,
		diag:    diag,
		eng:     newGatedEngine(store.Identity().InstallationID),
		logs:    &logBuffer{},
		reports: make(chan messages.LeaseReport, 4096),
		closed:  make(chan messages.LeaseClosed, 64),
		givenUp: make(chan lease.CloseDropped, 64),
		wakes:   make(chan wakeSeen, 256),
	}
	h.eng.AddImage(unitImage, dockerio.ImageInfo{Volumes: []string{"/data"}})
	h.set = unitSettings(store.Identity())
	if tune != nil {
		tune(h.set)
	}
	log := zerolog.New(h.logs).With().Timestamp().Logger()
	h.vols = fake.NewVolumes(filepath.Join(dir, "volumes"))
	h.reg = prometheus.NewRegistry()
	h.deps = &lease.Deps{Store: store, Diag: diag, Engine: steps.Docker{ImagesAPI: h.eng, NetworksAPI: h.eng, ContainersAPI: h.eng}, Volumes: h.vols, Settings: h.set, Log: log, Now: time.Now,
		Metrics: lease.NewMetrics(h.reg)}

	// Cleanups run last-registered first: stop the tree, then close the files.
	t.Cleanup(func() {
		if err := store.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
		if err := diag.Close(); err != nil {
			t.Errorf("close diagnostics: %v", err)
		}
	})
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     log,
		Registerer: prometheus.NewRegistry(),
		Chaos:      true,
		Children: func(tr *supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{
				{Name: "leases", Kind: "lease-parent", Supervisor: supervisors.LeaseStrategy(),
					Producer: func() actor.Actor { return &leaseParent{h: h, tree: tr} }},
				{Name: "outbox-sink", Kind: "outbox-sink",
					Producer: func() actor.Actor { return &outboxSink{h: h} }},
			}
		},
	})
	if err != nil {
		t.Fatalf("start tree: %v", err)
	}
	h.tree = tree
	t.Cleanup(func() {
		h.eng.releaseAll()
		ctx, cancel := context.WithTimeout(context.Background(), unitWait)
		defer cancel()
		if err := tree.Stop(ctx); err != nil {
			t.Errorf("stop tree: %v", err)
		}
		if n := h.dropped.Load(); n != 0 {
			t.Errorf("%d messages to the test were dropped (channel full)", n)
		}
		if t.Failed() {
			t.Logf("berthd log:\n%s", h.logs.String())
		}
	})
	h.waitFor("the lease parent and outbox sink to start", func() bool {
		_, p := tree.Dir.Get(parentPath)
		_, s := tree.Dir.Get(sinkPath)
		return p && s
	})
	return h
}

// leaseParent stands in for the registry: it spawns lease actors through the tree
// (as the registry does) and forwards what they tell it to the test.
type leaseParent struct {
	h    *harness
	tree *supervisors.Tree
}

type spawnLease struct {
	spec *lease.Spec
	done chan<- error
}

func (p *leaseParent) Receive(c actor.Context) {
	switch m := c.Message().(type) {
	case spawnLease:
		_, err := p.tree.Spawn(c, supervisors.Spec{
			Name:         "lease-" + m.spec.Lease,
			Kind:         "lease",
			Producer:     lease.New(p.h.deps, m.spec),
			MailboxLimit: 256,
		})
		m.done <- err
	case messages.LeaseReport:
		forward(p.h, p.h.reports, m)
	case messages.LeaseClosed:
		forward(p.h, p.h.closed, m)
	case lease.CloseDropped:
		forward(p.h, p.h.givenUp, m)
	}
}

// outboxSink stands at the outbox's path and records every wake with the store's
// view of that lease at that moment.
type outboxSink struct{ h *harness }

func (s *outboxSink) Receive(c actor.Context) {
	m, ok := c.Message().(*messages.OutboxWake)
	if !ok {
		return
	}
	seen := wakeSeen{lease: m.Lease}
	loaded, err := s.h.store.Load(lease.Stream(m.Lease))
	if err != nil {
		seen.err = err
	}
	for _, r := range loaded.Events {
		seen.events = append(seen.events, r.Type)
	}
	rows, err := s.h.store.OutboxAll()
	if err != nil && seen.err == nil {
		seen.err = err
	}
	for _, e := range rows {
		if e.Row.Lease == m.Lease {
			seen.rows = append(seen.rows, e.Row)
		}
	}
	forward(s.h, s.h.wakes, seen)
}

// forward never blocks an actor: a full channel is counted and fails the test.
func forward[T any](h *harness, ch chan T, v T) {
	select {
	case ch <- v:
	default:
		h.dropped.Add(1)
	}
}

// --- leases -----------------------------------------------------------------

// leaseUnderTest is one spawned lease actor.
type leaseUnderTest struct {
	h    *harness
	id   string
	spec *lease.Spec
	path messages.Address
}

// start spawns the lease actor of spec under the parent.
func (h *harness) start(spec *lease.Spec) *leaseUnderTest {
	h.t.Helper()
	done := make(chan error, 1)
	h.tree.Send(parentPath, spawnLease{spec: spec, done: done})
	select {
	case err := <-done:
		if err != nil {
			h.t.Fatalf("spawn lease %s: %v", spec.Lease, err)
		}
	case <-time.After(unitWait):
		h.t.Fatalf("spawning lease %s took over %s", spec.Lease, unitWait)
	}
	return &leaseUnderTest{h: h, id: spec.Lease, spec: spec, path: parentPath.Child("lease-" + spec.Lease)}
}

func (l *leaseUnderTest) send(msg any) { l.h.tree.Send(l.path, msg) }

// deprovision sends a Deprovision and returns its reply channel.
func (l *leaseUnderTest) deprovision() <-chan error {
	reply := make(chan error, 1)
	l.send(&messages.Deprovision{Lease: l.id, Reply: reply})
	return reply
}

// deprovisionRetaining is a Deprovision with the registry's decision to retain.
func (l *leaseUnderTest) deprovisionRetaining() <-chan error {
	reply := make(chan error, 1)
	l.send(&messages.Deprovision{Lease: l.id, Retain: true, Reply: reply})
	return reply
}

// barrier asks the lease for its provision record. The lease's mailbox is FIFO,
// so once it answers, every message this goroutine sent before has been handled.
func (l *leaseUnderTest) barrier() messages.ProvisionInfo {
	l.h.t.Helper()
	r, err := supervisors.Ask(context.Background(), l.h.tree, l.path, unitWait, func(reply chan<- messages.ProvisionReply) any {
		return &messages.GetProvision{Lease: l.id, Reply: reply}
	})
	if err != nil || r.Info == nil {
		l.h.t.Fatalf("lease %s did not answer GetProvision: %v", l.id, err)
	}
	return *r.Info
}

// restarts is how many times the lease actor's supervisor restarted it.
func (l *leaseUnderTest) restarts() int {
	n, ok := l.h.tree.Dir.Get(l.path)
	if !ok {
		return -1
	}
	return n.Restarts()
}

// --- the store ----------------------------------------------------------------

// events is the lease's journal (these tests never snapshot: SnapshotEvery is 64).
func (l *leaseUnderTest) events() []persistence.Record {
	l.h.t.Helper()
	loaded, err := l.h.store.Load(lease.Stream(l.id))
	if err != nil {
		l.h.t.Fatalf("load journal of %s: %v", l.id, err)
	}
	if loaded.Snapshot != nil {
		l.h.t.Fatalf("journal of %s was snapshotted; these tests read events only", l.id)
	}
	return loaded.Events
}

func (l *leaseUnderTest) eventTypes() []string { return eventTypes(l.events()) }

func eventTypes(recs []persistence.Record) []string {
	out := make([]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.Type)
	}
	return out
}

// rows is the lease's pending outbox rows, oldest first.
func (l *leaseUnderTest) rows() []persistence.OutboxRow {
	l.h.t.Helper()
	all, err := l.h.store.OutboxAll()
	if err != nil {
		l.h.t.Fatalf("read outbox: %v", err)
	}
	var out []persistence.OutboxRow
	for _, e := range all {
		if e.Row.Lease == l.id {
			out = append(out, e.Row)
		}
	}
	return out
}

// state is the lease's state as a restart would rebuild it.
func (l *leaseUnderTest) state() *lease.State {
	l.h.t.Helper()
	st, _, err := lease.Load(l.h.store, l.id)
	if err != nil {
		l.h.t.Fatalf("load lease %s: %v", l.id, err)
	}
	return st
}

// waitEvent waits until the journal holds an event of type typ and returns the first.
func (l *leaseUnderTest) waitEvent(typ string) persistence.Record {
	l.h.t.Helper()
	var found persistence.Record
	l.h.waitFor("lease journal to hold "+typ, func() bool {
		for _, r := range l.events() {
			if r.Type == typ {
				found = r
				return true
			}
		}
		return false
	})
	return found
}

// count is how many events of type typ the journal holds.
func count(recs []persistence.Record, typ string) int {
	n := 0
	for _, r := range recs {
		if r.Type == typ {
			n++
		}
	}
	return n
}

// payload decodes a journal record's data.
func payload[T any](t *testing.T, r persistence.Record) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.Data, &v); err != nil {
		t.Fatalf("decode %s: %v", r.Type, err)
	}
	return v
}

// callback decodes an outbox row's body.
func callback(t *testing.T, row persistence.OutboxRow) messages.Callback {
	t.Helper()
	var cb messages.Callback
	if err := json.Unmarshal(row.Body, &cb); err != nil {
		t.Fatalf("decode callback body %s: %v", row.Body, err)
	}
	return cb
}

// --- waiting ------------------------------------------------------------------

func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(unitWait)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out after %s waiting for %s", unitWait, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stayQuiet fails the test if happened turns true within window. It is a
// detection window for effects that must never occur (an asynchronous check a
// buggy lease would start): a correct lease passes it however slow the machine is.
func (h *harness) stayQuiet(what string, window time.Duration, happened func() bool) {
	h.t.Helper()
	end := time.Now().Add(window)
	for time.Now().Before(end) {
		if happened() {
			h.t.Fatalf("%s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// awaitReport reads the lease reports until one satisfies ok.
func (h *harness) awaitReport(what string, ok func(messages.LeaseReport) bool) messages.LeaseReport {
	h.t.Helper()
	timeout := time.After(unitWait)
	var seen []string
	for {
		select {
		case r := <-h.reports:
			if ok(r) {
				return r
			}
			seen = append(seen, string(r.Status))
		case <-timeout:
			h.t.Fatalf("no report %s within %s (saw %v)", what, unitWait, seen)
		}
	}
}

// awaitReply waits for a Deprovision reply.
func awaitReply(t *testing.T, what string, reply <-chan error, within time.Duration) error {
	t.Helper()
	select {
	case err := <-reply:
		return err
	case <-time.After(within):
		t.Fatalf("no reply to %s within %s", what, within)
		return nil
	}
}

// --- Docker -------------------------------------------------------------------

// containers is what the fake holds for the lease (every managed container of the
// installation whose lease label is this lease).
func (l *leaseUnderTest) containers() []messages.Container {
	l.h.t.Helper()
	return leaseContainers(l.h.t, l.h, l.id)
}

func leaseContainers(t *testing.T, h *harness, leaseID string) []messages.Container {
	t.Helper()
	all, err := h.eng.Engine.ListManaged(context.Background())
	if err != nil {
		t.Fatalf("list fake containers: %v", err)
	}
	var out []messages.Container
	for _, c := range all {
		if c.Lease == leaseID {
			out = append(out, c)
		}
	}
	return out
}

// gatedEngine is the fake engine plus one-shot gates: Hold(op) makes the next call
// of op (queued in order) wait until the gate is released or its context ends, so a
// test can stop a worker at an exact step, act, and let it go on. Every other
// behaviour is the fake's.
type gatedEngine struct {
	*fake.Engine
	mu    sync.Mutex
	queue map[fake.Op][]*gate
	all   []*gate
}

// gate is one held call: entered is closed when the call arrives, returned once the
// underlying fake call has returned.
type gate struct {
	entered  chan struct{}
	returned chan struct{}
	release  chan struct{}
	once     sync.Once
}

// Release lets the held call through (idempotent).
func (g *gate) Release() { g.once.Do(func() { close(g.release) }) }

func newGatedEngine(installation string) *gatedEngine {
	return &gatedEngine{Engine: fake.New(fake.Options{InstallationID: installation, BackendName: "berth-unit"}), queue: map[fake.Op][]*gate{}}
}

// Hold arms a gate for the next call of op not already gated.
func (e *gatedEngine) Hold(op fake.Op) *gate {
	g := &gate{entered: make(chan struct{}), returned: make(chan struct{}), release: make(chan struct{})}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queue[op] = append(e.queue[op], g)
	e.all = append(e.all, g)
	return g
}

func (e *gatedEngine) releaseAll() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, g := range e.all {
		g.Release()
	}
}

func (e *gatedEngine) take(op fake.Op) *gate {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queue[op]
	if len(q) == 0 {
		return nil
	}
	e.queue[op] = q[1:]
	return q[0]
}

// through runs call behind op's next gate, if one is armed.
func (e *gatedEngine) through(ctx context.Context, op fake.Op, call func()) error {
	g := e.take(op)
	if g == nil {
		call()
		return nil
	}
	defer close(g.returned)
	close(g.entered)
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	call()
	return nil
}

func (e *gatedEngine) Up(ctx context.Context, plan dockerio.Plan) error {
	var err error
	if gerr := e.through(ctx, fake.OpUp, func() { err = e.Engine.Up(ctx, plan) }); gerr != nil {
		return gerr
	}
	return err
}

// Launch goes through the gated Up.
func (e *gatedEngine) Launch(ctx context.Context, plan dockerio.Plan) ([]messages.Container, error) {
	if err := e.Up(ctx, plan); err != nil {
		return nil, err
	}
	return e.Engine.Launched(ctx, plan.Lease)
}

func (e *gatedEngine) Inspect(ctx context.Context, id string) (messages.Container, error) {
	var (
		c   messages.Container
		err error
	)
	if gerr := e.through(ctx, fake.OpInspect, func() { c, err = e.Engine.Inspect(ctx, id) }); gerr != nil {
		return messages.Container{}, gerr
	}
	return c, err
}

func (e *gatedEngine) Down(ctx context.Context, leaseID string, opts dockerio.DownOptions) error {
	var err error
	if gerr := e.through(ctx, fake.OpDown, func() { err = e.Engine.Down(ctx, leaseID, opts) }); gerr != nil {
		return gerr
	}
	return err
}

// awaitGate waits until a held call has arrived.
func awaitGate(t *testing.T, what string, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(unitWait):
		t.Fatalf("timed out after %s waiting for %s", unitWait, what)
	}
}

// --- specs --------------------------------------------------------------------

// plainService is a service without a health check.
func plainService(name string, quantity int) lease.ServiceSpec {
	return lease.ServiceSpec{
		Name:     name,
		SKU:      "docker-small",
		Quantity: quantity,
		Profile:  lease.Profile{CPUCores: 0.5, MemoryMB: 256, DiskMB: 0, ScratchMB: 64},
		Manifest: &manifest.Service{
			Image: unitImage,
			Ports: map[string]manifest.Port{"8080/tcp": {Ingress: true}},
			Env:   map[string]string{"PORT": "8080"},
		},
	}
}

// statefulService is a plain service of a stateful SKU (disk_mb 512) whose image
// declares VOLUME /data.
func statefulService(name string, quantity int) lease.ServiceSpec {
	s := plainService(name, quantity)
	s.SKU, s.Profile = "docker-stateful", lease.Profile{CPUCores: 0.5, MemoryMB: 256, DiskMB: 512}
	return s
}

// checkedService is a service with an active manifest health check.
func checkedService(name string, quantity int) lease.ServiceSpec {
	s := plainService(name, quantity)
	s.Manifest.HealthCheck = &manifest.HealthCheck{
		Test:     []string{"CMD", "/bin/healthcheck"},
		Interval: manifest.Duration(time.Second),
		Timeout:  manifest.Duration(time.Second),
		Retries:  3,
	}
	return s
}

// newSpec builds a lease spec the way the registry's prepare does (services sorted
// by name, lifecycle URL derived from the callback's operation_id).
func newSpec(admission uint64, services ...lease.ServiceSpec) *lease.Spec {
	if len(services) == 0 {
		services = []lease.ServiceSpec{plainService(manifest.DefaultService, 1)}
	}
	slices.SortFunc(services, func(a, b lease.ServiceSpec) int { return strings.Compare(a.Name, b.Name) })
	op := uuid.NewString()
	spec := &lease.Spec{
		Lease:        uuid.NewString(),
		Tenant:       "fred1unittenant7x0k2q",
		ProviderUUID: "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9",
		Flat:         len(services) == 1 && services[0].Name == manifest.DefaultService,
		CallbackURL:  "https://providerd.test:8443/v1/callbacks?operation_id=" + op,
		LifecycleURL: "https://providerd.test:8443/v1/callbacks?lifecycle_id=" + op,
		OperationID:  op,
		Admission:    admission,
		AdmittedAt:   time.Now().UTC(),
	}
	for _, s := range services {
		item := messages.LeaseItem{SKU: s.SKU, Quantity: s.Quantity}
		if !spec.Flat {
			item.ServiceName = s.Name
		}
		spec.Items = append(spec.Items, item)
		spec.Services = append(spec.Services, s)
	}
	// The raw manifest as a tenant would have sent it (stack form).
	raw := map[string]any{}
	for _, s := range spec.Services {
		raw[s.Name] = s.Manifest
	}
	spec.Manifest, _ = json.Marshal(map[string]any{"services": raw})
	return spec
}

// --- logs ---------------------------------------------------------------------

// logBuffer collects the daemon log, shown when a test fails.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// describe is a short summary of a lease for failure messages.
func (l *leaseUnderTest) describe() string {
	return fmt.Sprintf("journal %v, rows %d, containers %d", l.eventTypes(), len(l.rows()), len(l.containers()))
}

// gauge is the value of an unlabelled gauge of the lease metrics (-1: absent).
func (h *harness) gauge(name string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
