package registry

// The actor harness: the registry hosted in a real supervisors.Tree (chaos on) over
// a real persistence.Store and Diagnostics, its lease actors driving the in-memory
// dockerio/dockertest/fake engine, and recording probes at the reconciler and reclaimer paths
// (they only record; nothing reconciles, so the test sends Recovered itself).

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"sort"
	"sync"
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
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

const (
	regPath        = supervisors.RootPath + "/registry"
	reconcilerPath = supervisors.RootPath + "/reconciler"
	reclaimerPath  = supervisors.RootPath + "/reclaimer"
	patience       = 30 * time.Second // bound for anything that should happen "soon"
)

// Profiles of the actor tests. The pool holds 2 cores, 4096 MB, 8192 MB disk.
func actorSettings() *Settings {
	return &Settings{
		Totals:     Resources{CPUMilli: CPU(2), MemoryMB: 4096, DiskMB: 8192},
		SKUMapping: map[string]string{"chain-small": "docker-small"},
		SKUProfiles: map[string]lease.Profile{
			"docker-small": {CPUCores: 0.1, MemoryMB: 128, DiskMB: 256},
			"docker-tiny":  {CPUCores: 0.2, MemoryMB: 64}, // diskless: pins ScratchMB
			"docker-big":   {CPUCores: 1.5, MemoryMB: 1024, DiskMB: 1024},
			"docker-huge":  {CPUCores: 1.8, MemoryMB: 2048, DiskMB: 1024},
		},
		ScratchMB:         32,
		AllowedRegistries: []string{"127.0.0.1:5000"},
		LeaseMailboxLimit: 256,
		SnapshotEvery:     1000,
		ReconcilerPath:    reconcilerPath,
		ReclaimerPath:     reclaimerPath,
	}
}

// probe records what its path receives.
type probe struct {
	mu   sync.Mutex
	msgs []any
}

func (p *probe) Receive(c actor.Context) {
	switch c.Message().(type) {
	case messages.RecoverNow, *messages.LeaseGone:
		p.mu.Lock()
		p.msgs = append(p.msgs, c.Message())
		p.mu.Unlock()
	}
}

func (p *probe) received() []any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]any(nil), p.msgs...)
}

// incarnations are the registry incarnations that asked for a recovery pass,
// in the order they first asked (each asks again every second until answered).
func (p *probe) incarnations() []uint64 {
	var out []uint64
	for _, m := range p.received() {
		if r, ok := m.(messages.RecoverNow); ok && !slices.Contains(out, r.For) {
			out = append(out, r.For)
		}
	}
	return out
}

type harness struct {
	t          *testing.T
	tree       *supervisors.Tree
	store      *persistence.Store
	faulty     *supervisors.FaultyStore // the registry's store: fails its commits on demand
	diag       *persistence.Diagnostics
	eng        *fake.Engine
	vols       *fake.Volumes
	set        *Settings
	reconciler *probe
	reclaimer  *probe
	batches    *batchSizes // what each admission commit carried
	closures   *batchSizes // what each batched close commit carried
	quiet      *supervisors.Quiet
}

// batchSizes records AdmissionBatches observations.
type batchSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) Observe(v float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sizes = append(b.sizes, int(v))
}

func (b *batchSizes) get() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.sizes...)
}

func newHarness(t *testing.T, mutate func(*Settings)) *harness {
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
	// Registered first, so it runs after the tree has drained.
	t.Cleanup(func() {
		_ = diag.Close()
		_ = store.Close()
	})
	set := actorSettings()
	if mutate != nil {
		mutate(set)
	}
	h := &harness{t: t, store: store, diag: diag, eng: fake.New(fake.Options{InstallationID: store.Identity().InstallationID}), set: set,
		reconciler: &probe{}, reclaimer: &probe{}, batches: &batchSizes{}, closures: &batchSizes{}, quiet: &supervisors.Quiet{},
		faulty: &supervisors.FaultyStore{Store: store}}
	// VOLUME /data: a stateful lease's data is in a volume a retaining close keeps
	// (one holding only writable-path copies is reclaimed instead).
	h.eng.AddImage(testImage, dockerio.ImageInfo{Volumes: []string{"/data"}})
	id := store.Identity()
	h.vols = fake.NewVolumes(filepath.Join(dir, "volumes"))
	leaseDeps := &lease.Deps{Store: store, Diag: diag, Engine: steps.Docker{ImagesAPI: h.eng, NetworksAPI: h.eng, ContainersAPI: h.eng}, Volumes: h.vols, Log: zerolog.Nop(), Now: time.Now,
		Settings: &lease.Settings{
			BackendName:      "berth-test",
			HostAddress:      "127.0.0.1",
			HostBindIP:       "127.0.0.1",
			StorageID:        id.StorageID,
			InstallationID:   id.InstallationID,
			ProvisionTimeout: time.Minute,
			RetentionMaxAge:  time.Hour,
			PullTimeout:      10 * time.Second,
			VerifyDuration:   10 * time.Millisecond,
			StopTimeout:      time.Second,
			HealthPoll:       20 * time.Millisecond,
			ResumePoll:       50 * time.Millisecond,
			TeardownRetry:    100 * time.Millisecond,
			OutboxPath:       supervisors.RootPath + "/outbox", // nobody: callbacks stay in the store
			SnapshotEvery:    64,
			WorkerDrain:      10 * time.Second,
		}}
	deps := &Deps{Store: h.faulty, Diag: diag, LeaseDeps: leaseDeps, Settings: set, Log: zerolog.Nop(), Now: time.Now,
		AdmissionBatches: h.batches, ClosureBatches: h.closures, Quiet: h.quiet}
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     zerolog.Nop(),
		Registerer: prometheus.NewRegistry(),
		Chaos:      true,
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			deps.Tree = tree
			return []supervisors.Spec{
				{Name: "reconciler", Kind: "probe", Producer: func() actor.Actor { return h.reconciler }},
				{Name: "reclaimer", Kind: "probe", Producer: func() actor.Actor { return h.reclaimer }},
				{Name: "registry", Kind: "registry", Producer: New(deps), MailboxLimit: 1024,
					Supervisor: supervisors.LeaseStrategy()},
			}
		},
	})
	if err != nil {
		t.Fatalf("start tree: %v", err)
	}
	h.tree = tree
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := tree.Stop(ctx); err != nil {
			t.Errorf("stop tree: %v", err)
		}
	})
	h.eventually("registry spawned", func() bool { _, ok := tree.Dir.Get(regPath); return ok })
	return h
}

// eventually polls cond until it holds or patience runs out.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ask[R any](h *harness, timeout time.Duration, build func(chan<- R) any) R {
	h.t.Helper()
	r, err := supervisors.Ask(context.Background(), h.tree, regPath, timeout, build)
	if err != nil {
		h.t.Fatalf("ask registry: %v", err)
	}
	return r
}

// recovered marks startup recovery done, as the reconciler would — answering
// the newest incarnation that asked — and waits for it.
// A registry just crashed may not have asked yet: it is answered again, as
// the reconciler answers its repeated asks.
func (h *harness) recovered() {
	h.t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		h.tree.Send(regPath, messages.Recovered{For: h.asking()})
		if h.health().Ready {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("registry not ready after Recovered")
		}
	}
}

// asking is the newest registry incarnation that asked for a recovery pass.
func (h *harness) asking() uint64 {
	h.t.Helper()
	h.eventually("the registry asked for its recovery pass", func() bool { return len(h.reconciler.incarnations()) > 0 })
	in := h.reconciler.incarnations()
	return in[len(in)-1]
}

func (h *harness) health() messages.HealthReply {
	h.t.Helper()
	return ask(h, 10*time.Second, func(r chan<- messages.HealthReply) any { return &messages.GetHealth{Reply: r} })
}

func (h *harness) admit(req messages.ProvisionRequest) error {
	h.t.Helper()
	return ask(h, 10*time.Second, func(r chan<- error) any { return &messages.Admit{Req: req, Reply: r} })
}

func (h *harness) get(id string) messages.ProvisionReply {
	h.t.Helper()
	return ask(h, 10*time.Second, func(r chan<- messages.ProvisionReply) any {
		return &messages.GetProvision{Lease: id, Reply: r}
	})
}

func (h *harness) list(m messages.ListProvisions) messages.ProvisionsReply {
	h.t.Helper()
	return ask(h, 10*time.Second, func(r chan<- messages.ProvisionsReply) any { m.Reply = r; return &m })
}

func (h *harness) statsReply() messages.StatsReply {
	h.t.Helper()
	return ask(h, 10*time.Second, func(r chan<- messages.StatsReply) any { return &messages.GetStats{Reply: r} })
}

func (h *harness) stats() messages.Stats {
	h.t.Helper()
	r := h.statsReply()
	if r.Err != nil {
		h.t.Fatalf("stats: %v", r.Err)
	}
	return r.Stats
}

func (h *harness) deprovision(id string) error {
	h.t.Helper()
	return ask(h, patience, func(r chan<- error) any { return &messages.Deprovision{Lease: id, Reply: r} })
}

// waitStatus polls GetProvision until the lease reads want.
func (h *harness) waitStatus(id, want string) messages.ProvisionInfo {
	h.t.Helper()
	var last messages.ProvisionReply
	deadline := time.Now().Add(patience)
	for {
		last = h.get(id)
		if last.Err == nil && last.Info != nil && last.Info.Status == want {
			return *last.Info
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("lease %s: %+v (err %v) after %s, want status %q", id, last.Info, last.Err, patience, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// journal is the registry's durable state as the next incarnation would load it.
func (h *harness) journal() (*State, uint64) {
	h.t.Helper()
	st, seq, err := LoadState(h.store)
	if err != nil {
		h.t.Fatalf("LoadState: %v", err)
	}
	return st, seq
}

func (h *harness) journalJSON() string {
	h.t.Helper()
	st, _ := h.journal()
	return mustJSON(h.t, st)
}

// registryEvents are the registry stream's journaled (not yet compacted) events.
func (h *harness) registryEvents() []persistence.Record {
	h.t.Helper()
	l, err := h.store.Load(Stream)
	if err != nil {
		h.t.Fatalf("load registry stream: %v", err)
	}
	return l.Events
}

// assertPoolInvariant: the pool the registry reports is exactly the sum of Need over
// the live specs of its journal.
func (h *harness) assertPoolInvariant() {
	h.t.Helper()
	st, _ := h.journal()
	var sum Resources
	for _, spec := range st.Leases {
		sum = sum.add(Need(spec))
	}
	for _, r := range st.Retentions {
		if r.Status != RetentionRestoring {
			sum.DiskMB += r.Record.DiskMB() // retained data holds disk until it is gone
		}
	}
	s := h.stats()
	if s.AllocatedCPUCores != float64(sum.CPUMilli)/1000 || s.AllocatedMemoryMB != sum.MemoryMB || s.AllocatedDiskMB != sum.DiskMB {
		h.t.Fatalf("pool invariant broken: stats allocate %.3f cores, %d MB, %d MB disk; journal's live specs need %+v",
			s.AllocatedCPUCores, s.AllocatedMemoryMB, s.AllocatedDiskMB, sum)
	}
	if s.AvailableCPUCores != float64(h.set.Totals.CPUMilli-sum.CPUMilli)/1000 {
		h.t.Fatalf("available cpu %.3f, want %.3f", s.AvailableCPUCores, float64(h.set.Totals.CPUMilli-sum.CPUMilli)/1000)
	}
}

// leaseRequest is a flat request for quantity instances of sku, with a callback URL
// carrying a fresh operation_id.
func leaseRequest(id, sku string, quantity int) messages.ProvisionRequest {
	return messages.ProvisionRequest{
		LeaseUUID:    id,
		Tenant:       "fred1tenant",
		ProviderUUID: "provider-test",
		Items:        []messages.LeaseItem{{SKU: sku, Quantity: quantity}},
		CallbackURL:  "http://127.0.0.1:9/callbacks/provision?operation_id=" + uuid.NewString(),
		Payload:      b64(`{"image":"` + testImage + `","ports":{"8080/tcp":{}}}`),
	}
}

// provisionReady admits a lease and waits until it is ready.
func (h *harness) provisionReady(id, sku string, quantity int) messages.ProvisionInfo {
	h.t.Helper()
	if err := h.admit(leaseRequest(id, sku, quantity)); err != nil {
		h.t.Fatalf("admit %s: %v", id, err)
	}
	return h.waitStatus(id, messages.StatusReady)
}

// provisionFailed admits a lease whose start Docker refuses and waits until it failed.
func (h *harness) provisionFailed(id, sku string, quantity int) messages.ProvisionInfo {
	h.t.Helper()
	h.eng.RefuseNextStart(errors.New("injected: start refused"))
	if err := h.admit(leaseRequest(id, sku, quantity)); err != nil {
		h.t.Fatalf("admit %s: %v", id, err)
	}
	return h.waitStatus(id, messages.StatusFailed)
}

// sortedIDs returns n fresh lease UUIDs in ascending order.
func sortedIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = uuid.NewString()
	}
	sort.Strings(ids)
	return ids
}

func leasePath(id string) messages.Address { return regPath.Child("lease-" + id) }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
