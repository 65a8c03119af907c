package debug_test

// The operator's API handlers against a real tree of stand-in actors (a registry,
// lease actors, an outbox and background actors that answer what the test set)
// and a real store: shapes, sorting, errors, and what the handlers add.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/http/debug"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

var now = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// world is what the stand-in actors answer; the test sets it before asking.
type world struct {
	mu          sync.Mutex
	rows        []messages.LeaseRow
	queries     []messages.DebugLeases
	releases    map[string][]messages.Release
	ring        *registry.Transitions
	leases      map[string]messages.DebugLeaseReply // by actor name
	outbox      messages.DebugOutboxReply
	passes      map[string]messages.PassReport // by actor name
	registryHit chan struct{}
	provisions  map[string]messages.ProvisionInfo // GetProvision's records, by lease
	gates       []messages.DomainGateView         // what the domain gate holds
}

// registryStandIn answers the registry's debug messages from the world.
type registryStandIn struct{ w *world }

func (r registryStandIn) Receive(c actor.Context) {
	w := r.w
	w.mu.Lock()
	defer w.mu.Unlock()
	switch m := c.Message().(type) {
	case *messages.DebugLeases:
		w.queries = append(w.queries, *m)
		var out []messages.LeaseRow
		for _, row := range w.rows {
			if m.Lease == "" || row.LeaseUUID == m.Lease {
				out = append(out, row)
			}
		}
		m.Reply <- messages.DebugLeasesReply{Rows: out}
	case *messages.DebugTransitions:
		m.Reply <- w.ring.Since(m.Since, m.Limit)
	case *messages.GetReleases:
		if rel, ok := w.releases[m.Lease]; ok {
			m.Reply <- messages.ReleasesReply{Releases: rel}
		} else {
			m.Reply <- messages.ReleasesReply{Err: messages.Refuse(messages.ErrNotFound, "lease not found")}
		}
	case *messages.GetProvision:
		if p, ok := w.provisions[m.Lease]; ok {
			m.Reply <- messages.ProvisionReply{Info: &p}
		} else {
			m.Reply <- messages.ProvisionReply{Err: messages.Refuse(messages.ErrNotFound, "lease not found")}
		}
	case addTransition:
		w.ring.Add(now, m.lease, m.from, m.to, m.reason)
	}
}

type addTransition struct{ lease, from, to, reason string }

// answering answers DebugLease, DebugOutbox and GetPass for its name from the world.
type answering struct {
	w    *world
	name string
}

func (a answering) Receive(c actor.Context) {
	a.w.mu.Lock()
	defer a.w.mu.Unlock()
	switch m := c.Message().(type) {
	case *messages.DebugLease:
		m.Reply <- a.w.leases[a.name]
	case *messages.DebugOutbox:
		rep := messages.DebugOutboxReply{Attempts: map[string]messages.DeliveryAttempts{}, Expired: a.w.outbox.Expired, Coalesced: a.w.outbox.Coalesced}
		for id, t := range a.w.outbox.Attempts {
			if m.Lease == "" || t.Lease == m.Lease {
				rep.Attempts[id] = t
			}
		}
		for _, d := range a.w.outbox.Delivered {
			if m.Lease == "" || d.Lease == m.Lease {
				rep.Delivered = append(rep.Delivered, d)
			}
		}
		m.Reply <- rep
	case *messages.GetPass:
		m.Reply <- a.w.passes[a.name]
	case *messages.DebugDomainGates:
		rep := messages.DomainGatesReply{}
		for _, g := range a.w.gates {
			if m.Lease == "" || g.LeaseUUID == m.Lease {
				rep.Gates = append(rep.Gates, g)
			}
		}
		m.Reply <- rep
	}
}

// mute never answers anything.
type mute struct{}

func (mute) Receive(actor.Context) {}

type fixture struct {
	t     *testing.T
	w     *world
	tree  *supervisors.Tree
	store *persistence.Store
	diag  *persistence.Diagnostics
	srv   *httptest.Server
	opts  debug.Options
	// exits receives once per request when the handler returned.
	exits chan string
}

func newFixture(t *testing.T, mutate func(*debug.Options)) *fixture {
	t.Helper()
	dir := t.TempDir()
	store, _, err := persistence.Open(persistence.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	diag, err := persistence.OpenDiagnostics(persistence.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = diag.Close(); _ = store.Close() })
	w := &world{ring: registry.NewTransitions(16), releases: map[string][]messages.Release{},
		leases: map[string]messages.DebugLeaseReply{}, passes: map[string]messages.PassReport{}, provisions: map[string]messages.ProvisionInfo{}}
	ans := func(name string) supervisors.Spec {
		return supervisors.Spec{Name: name, Kind: name, Producer: func() actor.Actor { return answering{w: w, name: name} }}
	}
	tree, err := supervisors.Start(supervisors.Options{Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(),
		Children: func(*supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{
				{Name: "registry", Kind: "registry", Producer: func() actor.Actor { return registryStandIn{w: w} }},
				ans("outbox"), ans("leaseA"), ans("reconciler"), ans("reclaimer"), ans("domaingate"),
				{Name: "mute", Kind: "lease", Producer: func() actor.Actor { return mute{} }},
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tree.Stop(ctx)
	})
	for _, p := range []string{"registry", "outbox", "leaseA", "reconciler", "reclaimer", "domaingate", "mute"} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, ok := tree.Dir.Get(messages.Root.Child(p)); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("root/%s never spawned", p)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	opts := debug.Options{Token: token, RegistryPath: "root/registry", OutboxPath: "root/outbox",
		PassPaths: []messages.Address{"root/reconciler", "root/reclaimer", "root/reaper"}, DomainGatePath: "root/domaingate", Reads: storeReads{store, diag},
		Now: func() time.Time { return now }, AskTimeout: 2 * time.Second}
	if mutate != nil {
		mutate(&opts)
	}
	f := &fixture{t: t, w: w, tree: tree, store: store, diag: diag, opts: opts, exits: make(chan string, 64)}
	h := debug.Handler(tree, opts)
	f.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		defer func() { f.exits <- r.URL.Path }()
		h.ServeHTTP(rw, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// get answers a GET with the token: status and body.
func (f *fixture) get(path string) (int, string) {
	f.t.Helper()
	return call(f.t, f.srv, http.MethodGet, path, "Bearer "+token)
}

func (f *fixture) getJSON(path string, into any) string {
	f.t.Helper()
	status, body := f.get(path)
	if status != http.StatusOK {
		f.t.Fatalf("GET %s: %d %s", path, status, body)
	}
	if err := json.Unmarshal([]byte(body), into); err != nil {
		f.t.Fatalf("GET %s: %v in %s", path, err, body)
	}
	return body
}

func (f *fixture) set(fn func(w *world)) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	fn(f.w)
}

func row(id string, created time.Time, actorPath string) messages.LeaseRow {
	return messages.LeaseRow{LeaseUUID: id, Tenant: "t1", ProviderUUID: "p1", Status: "ready", LeaseStatus: "ready",
		CreatedAt: created, TerminalBudget: messages.TerminalBudget{Verdict: "retry"}, Actor: actorPath,
		Items:    []messages.DebugItem{{SKU: "docker-small", Quantity: 1, ServiceName: "app"}},
		Services: []messages.DebugService{{Name: "app", Instances: []messages.DebugInstance{}}}}
}

func TestLeases_NewestFirstWithTheLeaseActorsInstancesAndTheirAge(t *testing.T) {
	f := newFixture(t, nil)
	a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
	until := now.Add(time.Hour)
	retained := row(c, now.Add(-2*time.Hour), "")
	retained.Status, retained.LeaseStatus, retained.RetainedUntil = "retained", "retained", &until
	f.set(func(w *world) {
		w.rows = []messages.LeaseRow{row(a, now.Add(-time.Hour), "root/leaseA"), row(b, now.Add(-10*time.Minute), "root/mute"), retained}
		w.leases["leaseA"] = messages.DebugLeaseReply{LeaseStatus: "ready", Services: []messages.DebugService{{Name: "app",
			Instances: []messages.DebugInstance{{Index: 0, ContainerID: "0123456789ab", State: "running", Image: "img",
				Ports: map[string]messages.PortBinding{"8080/tcp": {HostIP: "127.0.0.1", HostPort: "32768"}}}}}}}
	})
	var out struct {
		Leases []messages.LeaseRow `json:"leases"`
	}
	start := time.Now()
	body := f.getJSON("/debug/leases?status=ready&tenant=t1", &out)
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a lease actor that does not answer held the list for %s", took)
	}
	if len(out.Leases) != 3 || out.Leases[0].LeaseUUID != b || out.Leases[1].LeaseUUID != a || out.Leases[2].LeaseUUID != c {
		t.Fatalf("order = %+v, want newest first", out.Leases)
	}
	got := out.Leases[1]
	if got.AgeSeconds != 3600 || len(got.Services[0].Instances) != 1 || got.Services[0].Instances[0].Ports["8080/tcp"].HostPort != "32768" ||
		got.InstancesError != "" {
		t.Fatalf("row with its lease actor = %+v", got)
	}
	if m := out.Leases[0]; !strings.Contains(m.InstancesError, "did not answer") || len(m.Services[0].Instances) != 0 || m.AgeSeconds != 600 {
		t.Fatalf("row whose lease actor is mute = %+v", m)
	}
	if r := out.Leases[2]; r.RetainedUntil == nil || !r.RetainedUntil.Equal(until) || r.InstancesError != "" {
		t.Fatalf("retained row = %+v", r)
	}
	f.set(func(w *world) {
		if q := w.queries[len(w.queries)-1]; q.Status != "ready" || q.Tenant != "t1" || q.Lease != "" {
			t.Errorf("the registry was asked %+v", q)
		}
	})
	for _, key := range []string{`"leases":[`, `"lease_uuid":"` + a + `"`, `"tenant":"t1"`, `"provider_uuid":"p1"`, `"status":"ready"`,
		`"created_at":"2030-06-01T11:00:00Z"`, `"age_seconds":3600`, `"fail_count":0`,
		`"terminal_budget":{"verdict":"retry","consecutive_failures":0}`, `"items":[{"sku":"docker-small","quantity":1,"service_name":"app"}]`,
		`"services":[{"name":"app","instances":[{"index":0,"container_id":"0123456789ab","state":"running","image":"img","ports":{"8080/tcp":{"host_ip":"127.0.0.1","host_port":"32768"}}}]}]`,
		`"retained_until":"2030-06-01T13:00:00Z"`, `"lease_status":"ready"`, `"actor":"root/leaseA"`} {
		if !strings.Contains(body, key) {
			t.Errorf("body lacks %s:\n%s", key, body)
		}
	}
	if strings.Count(body, `"reason"`) != 0 || strings.Count(body, `"retained_until"`) != 1 {
		t.Errorf("optional fields not omitted: %s", body)
	}

	if status, body := f.get("/debug/leases?status=bogus"); status != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
		t.Errorf("status=bogus: %d %s", status, body)
	}
	f.set(func(w *world) { w.rows = nil })
	if body := f.getJSON("/debug/leases", &out); !strings.Contains(body, `"leases":[]`) {
		t.Errorf("no leases: %s, want an empty array", body)
	}
}

func TestLeases_RegistryAbsentIs503(t *testing.T) {
	f := newFixture(t, func(o *debug.Options) { o.RegistryPath = "root/nobody" })
	for _, path := range []string{"/debug/leases", "/debug/leases/" + uuid.NewString(), "/debug/transitions"} {
		if status, body := f.get(path); status != http.StatusServiceUnavailable || !strings.Contains(body, `"error"`) {
			t.Errorf("%s without a registry: %d %s, want a JSON 503", path, status, body)
		}
	}
}

func commitEvents(t *testing.T, store *persistence.Store, id string, rows []persistence.OutboxRow, events ...persistence.Event) {
	t.Helper()
	if _, err := store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: lease.Stream(id), Events: events}}, Outbox: rows}); err != nil {
		t.Fatal(err)
	}
}

func event(typ string, at time.Time, data any) persistence.Event {
	raw, _ := json.Marshal(data)
	return persistence.Event{Type: typ, V: 1, At: at, Data: raw}
}

func TestLeaseHistory_EventsCallbacksReleasesDiagnostics(t *testing.T) {
	f := newFixture(t, nil)
	id := uuid.NewString()
	t1, t2, t3 := now.Add(-3*time.Minute), now.Add(-2*time.Minute), now.Add(-time.Minute)
	queued := persistence.OutboxRow{Lease: id, DeliveryID: "d-queued", URL: "http://fred.example/callbacks/lifecycle?lifecycle_id=x",
		Body: json.RawMessage(`{"lease_uuid":"` + id + `","status":"failed"}`), Kind: "lifecycle", CreatedAt: t3}
	commitEvents(t, f.store, id, nil,
		event(lease.EvProvisionStarted, t1, lease.ProvisionStarted{Admission: 1, Generation: 1, At: t1, Deadline: t1.Add(time.Minute),
			Release: &lease.Release{Kind: lease.KindProvision}}),
		event(lease.EvProvisionFailed, t2, lease.ProvisionFailed{Stamp: lease.Stamp{Generation: 1, At: t2},
			Cause: lease.Cause{Reason: messages.ReasonHealthCheckFailed, Message: "health check failed during startup"}}))
	commitEvents(t, f.store, id, []persistence.OutboxRow{queued}, event(lease.EvCloseRequested, t3, lease.CloseRequested{Admission: 1, At: t3}))
	logs := "captured tenant log text"
	blob, _ := json.Marshal(lease.Capture{Lease: id, Kind: lease.CaptureProvision, Stamp: lease.Stamp{At: t2}, Cause: lease.Cause{Reason: messages.ReasonHealthCheckFailed},
		Containers: []lease.ContainerCapture{{Service: "app", Index: 0, State: "running", Logs: logs}}})
	if err := f.diag.Put(id, t2, blob); err != nil {
		t.Fatal(err)
	}
	f.set(func(w *world) {
		r := row(id, t1, "root/leaseA")
		r.Status, r.LeaseStatus = "deprovisioning", "deprovisioning"
		w.rows = []messages.LeaseRow{r}
		w.releases[id] = []messages.Release{{Version: 1, Image: "stack", Status: messages.ReleaseFailed, CreatedAt: t1}}
		w.leases["leaseA"] = messages.DebugLeaseReply{LeaseStatus: "deprovisioning", Services: []messages.DebugService{{Name: "app", Instances: []messages.DebugInstance{}}}}
		w.outbox = messages.DebugOutboxReply{
			Attempts: map[string]messages.DeliveryAttempts{"d-queued": {Lease: id, Attempts: 2, LastAttemptAt: now, LastError: "post: status 500"}},
			Delivered: []messages.DeliveredCallback{{Lease: id, DeliveryID: "d-old", Kind: "operation", Status: "failed",
				URLPath: "/callbacks/provision", CreatedAt: t2, Attempts: 1, LastAttemptAt: t2.Add(time.Second), DeliveredAt: t2.Add(time.Second)}},
		}
	})
	var h messages.LeaseHistory
	body := f.getJSON("/debug/leases/"+id, &h)
	if h.Lease.LeaseUUID != id || h.Lease.Status != "deprovisioning" || h.Lease.AgeSeconds != 180 {
		t.Fatalf("lease = %+v", h.Lease)
	}
	if len(h.Events) != 3 || h.Events[1].Seq != 2 || h.Events[1].Type != lease.EvProvisionFailed ||
		h.Events[1].Summary != "provision.failed: HealthCheckFailed — health check failed during startup" || !h.Events[1].At.Equal(t2) {
		t.Fatalf("events = %+v", h.Events)
	}
	if h.CompactedBeforeSeq != 0 || strings.Contains(body, "compacted_before_seq") {
		t.Errorf("an uncompacted stream says compacted_before_seq: %s", body)
	}
	if len(h.Callbacks) != 2 {
		t.Fatalf("callbacks = %+v", h.Callbacks)
	}
	if c := h.Callbacks[0]; c.DeliveryID != "d-old" || c.State != "delivered" || c.Status != "failed" || c.Kind != "operation" ||
		c.URLPath != "/callbacks/provision" || c.Attempts != 1 || c.DeliveredAt == nil || c.LastError != "" {
		t.Errorf("delivered callback = %+v", c)
	}
	if c := h.Callbacks[1]; c.DeliveryID != "d-queued" || c.State != "queued" || c.Status != "failed" || c.Kind != "lifecycle" ||
		c.URLPath != "/callbacks/lifecycle" || c.Attempts != 2 || c.LastError != "post: status 500" || c.LastAttemptAt == nil ||
		c.DeliveredAt != nil || !c.CreatedAt.Equal(t3) {
		t.Errorf("queued callback = %+v", c)
	}
	if len(h.Releases) != 1 || h.Releases[0].Status != messages.ReleaseFailed || h.ReleasesError != "" {
		t.Errorf("releases = %+v (%s)", h.Releases, h.ReleasesError)
	}
	if len(h.Diagnostics) != 1 || h.Diagnostics[0] != (messages.DebugDiagnostic{Kind: "provision", Service: "app", Index: 0, At: t2,
		Bytes: len(logs), Reason: messages.ReasonHealthCheckFailed, State: "running"}) {
		t.Errorf("diagnostics = %+v", h.Diagnostics)
	}
	if strings.Contains(body, logs) || strings.Contains(body, "fred.example") {
		t.Errorf("the history carries captured logs or a callback host: %s", body)
	}
	for _, key := range []string{`"lease":{`, `"events":[{"seq":1,"type":"provision.started","at":`, `"summary":`, `"data":{"admission":1`,
		`"callbacks":[{"delivery_id":"d-old","kind":"operation","status":"failed","url_path":"/callbacks/provision","created_at":`,
		`"state":"queued","attempts":2,"last_attempt_at":`, `"last_error":"post: status 500"`, `"delivered_at":`,
		`"releases":[{"version":1`, `"diagnostics":[{"kind":"provision","service":"app","index":0,"at":`, `"bytes":24`} {
		if !strings.Contains(body, key) {
			t.Errorf("body lacks %s", key)
		}
	}
}

func TestLeaseHistory_ClosedCompactedUnknown(t *testing.T) {
	f := newFixture(t, nil)
	closed := uuid.NewString()
	t1 := now.Add(-time.Hour)
	commitEvents(t, f.store, closed, nil,
		event(lease.EvProvisionStarted, t1, lease.ProvisionStarted{Admission: 1, Generation: 1, At: t1, Release: &lease.Release{Kind: lease.KindProvision}}),
		event(lease.EvCloseRequested, t1, lease.CloseRequested{Admission: 1, At: t1}),
		event(lease.EvClosed, t1, lease.ClosedEv{Admission: 1, At: t1}))
	var h messages.LeaseHistory
	body := f.getJSON("/debug/leases/"+closed, &h)
	if h.Lease.LeaseUUID != closed || h.Lease.Status != "closed" || h.Lease.Actor != "" || len(h.Events) != 3 ||
		h.Events[2].Type != "closed" || h.Releases == nil || len(h.Releases) != 0 || h.Callbacks == nil || h.Diagnostics == nil {
		t.Fatalf("closed lease history = %s", body)
	}

	// A snapshot compacted the first event: said so.
	st := lease.NewState()
	_ = st.Apply(event(lease.EvProvisionStarted, t1, lease.ProvisionStarted{Admission: 1, Generation: 1, At: t1, Release: &lease.Release{Kind: lease.KindProvision}}))
	snap, _ := json.Marshal(st)
	if err := f.store.SaveSnapshot(lease.Stream(closed), persistence.Snapshot{Seq: 1, V: 1, At: t1, Data: snap}); err != nil {
		t.Fatal(err)
	}
	body = f.getJSON("/debug/leases/"+closed, &h)
	if h.CompactedBeforeSeq != 2 || len(h.Events) != 2 || h.Events[0].Seq != 2 || !strings.Contains(body, `"compacted_before_seq":2`) {
		t.Fatalf("compacted history = %s", body)
	}

	for _, path := range []string{"/debug/leases/" + uuid.NewString(), "/debug/leases/NOT-A-UUID", "/debug/leases/" + strings.ToUpper(closed)} {
		if status, body := f.get(path); status != http.StatusNotFound || !strings.Contains(body, `{"error":`) {
			t.Errorf("GET %s: %d %s, want a JSON 404", path, status, body)
		}
	}
}

func TestOutbox_QueuedRowsByLeaseOldestFirst(t *testing.T) {
	f := newFixture(t, nil)
	a, b := uuid.NewString(), uuid.NewString()
	rowOf := func(lease, id, kind string, at time.Time) persistence.OutboxRow {
		return persistence.OutboxRow{Lease: lease, DeliveryID: id, URL: "http://fred.example/cb", Body: json.RawMessage(`{}`), Kind: kind, CreatedAt: at}
	}
	commitEvents(t, f.store, a, []persistence.OutboxRow{rowOf(a, "a1", "operation", now.Add(-time.Minute)), rowOf(a, "a2", "lifecycle", now)},
		event("test.event", now, map[string]int{}))
	commitEvents(t, f.store, b, []persistence.OutboxRow{rowOf(b, "b1", "maintenance", now.Add(-time.Hour))}, event("test.event", now, map[string]int{}))
	f.set(func(w *world) {
		w.outbox = messages.DebugOutboxReply{Attempts: map[string]messages.DeliveryAttempts{
			"a1": {Lease: a, Attempts: 3, LastAttemptAt: now, LastError: "post: status 503"},
			"a2": {Lease: a, Attempts: 9}, // not the head: not what the lease shows
		}}
	})
	var out messages.OutboxSummary
	body := f.getJSON("/debug/outbox", &out)
	if out.TotalQueued != 3 || len(out.Leases) != 2 || out.Leases[0].LeaseUUID != b || out.Leases[1].LeaseUUID != a {
		t.Fatalf("outbox = %s", body)
	}
	if l := out.Leases[0]; l.Queued != 1 || l.OldestAgeSeconds != 3600 || l.Attempts != 0 || l.LastError != "" || l.Kinds["maintenance"] != 1 {
		t.Errorf("lease b = %+v", l)
	}
	if l := out.Leases[1]; l.Queued != 2 || l.OldestAgeSeconds != 60 || l.Attempts != 3 || l.LastError != "post: status 503" ||
		l.Kinds["operation"] != 1 || l.Kinds["lifecycle"] != 1 || !l.OldestAt.Equal(now.Add(-time.Minute)) || l.LastAttemptAt == nil {
		t.Errorf("lease a = %+v", l)
	}
	for _, key := range []string{`"total_queued":3`, `"leases":[{"lease_uuid":"` + b + `","queued":1,"oldest_at":"2030-06-01T11:00:00Z","oldest_age_seconds":3600,"attempts":0,"kinds":{"maintenance":1}}`} {
		if !strings.Contains(body, key) {
			t.Errorf("body lacks %s:\n%s", key, body)
		}
	}

	// Without the outbox actor the rows still show, and why the attempts do not.
	g := newFixture(t, func(o *debug.Options) { o.OutboxPath = "root/nobody" })
	if body := g.getJSON("/debug/outbox", &out); out.TotalQueued != 0 || !strings.Contains(body, `"leases":[]`) || !strings.Contains(body, `"attempts_error":`) ||
		!strings.Contains(body, `"dropped":[]`) {
		t.Errorf("no outbox actor: %s", body)
	}
}

// Lifecycle rows the outbox removed undelivered (expired, coalesced) are counted
// and listed on /debug/outbox, and shown by state in the lease's callbacks.
func TestOutbox_RowsRemovedUndeliveredAreCountedListedAndShownByState(t *testing.T) {
	f := newFixture(t, nil)
	id := uuid.NewString()
	t1, t2 := now.Add(-time.Hour), now.Add(-time.Minute)
	f.set(func(w *world) {
		w.rows = []messages.LeaseRow{row(id, t1, "root/leaseA")}
		w.outbox = messages.DebugOutboxReply{Expired: 1, Coalesced: 2, Delivered: []messages.DeliveredCallback{
			{Lease: id, DeliveryID: "d-death", Kind: "lifecycle", Status: "failed", CreatedAt: t1, Attempts: 4,
				LastError: "post: status 500", DeliveredAt: t2, Dropped: "expired"},
			{Lease: id, DeliveryID: "d-maint", Kind: "maintenance", Status: "success", CreatedAt: t1, Attempts: 1, DeliveredAt: now},
		}}
	})
	var out messages.OutboxSummary
	body := f.getJSON("/debug/outbox", &out)
	if out.Expired != 1 || out.Coalesced != 2 || len(out.Dropped) != 1 || out.Dropped[0] != (messages.OutboxDropped{LeaseUUID: id,
		DeliveryID: "d-death", Kind: "lifecycle", Status: "failed", Reason: "expired", CreatedAt: t1, DroppedAt: t2, Attempts: 4,
		LastError: "post: status 500"}) {
		t.Fatalf("outbox = %s", body)
	}
	if !strings.Contains(body, `"expired":1,"coalesced":2,"dropped":[{"lease_uuid":"`+id+`","delivery_id":"d-death"`) {
		t.Errorf("body lacks the counts and the dropped row: %s", body)
	}
	var h messages.LeaseHistory
	f.getJSON("/debug/leases/"+id, &h)
	if len(h.Callbacks) != 2 || h.Callbacks[0].State != "expired" || h.Callbacks[1].State != messages.CallbackDelivered {
		t.Errorf("callbacks = %+v, want the death expired and the completion delivered", h.Callbacks)
	}
}

func TestFreshness_FreshStaleUnknown(t *testing.T) {
	interval := 10 * time.Second
	at := func(age time.Duration) time.Time { return now.Add(-age) }
	for _, c := range []struct {
		name    string
		p       messages.PassReport
		status  string
		outcome string
	}{
		{"never passed", messages.PassReport{Interval: interval}, "unknown", "none"},
		{"just passed", messages.PassReport{Interval: interval, LastAt: at(time.Second)}, "fresh", "ok"},
		{"one interval late", messages.PassReport{Interval: interval, LastAt: at(15 * time.Second)}, "fresh", "ok"},
		{"at twice the interval", messages.PassReport{Interval: interval, LastAt: at(20 * time.Second)}, "fresh", "ok"},
		{"beyond twice", messages.PassReport{Interval: interval, LastAt: at(21 * time.Second)}, "stale", "ok"},
		{"at three times", messages.PassReport{Interval: interval, LastAt: at(30 * time.Second)}, "stale", "ok"},
		{"beyond three times", messages.PassReport{Interval: interval, LastAt: at(31 * time.Second)}, "unknown", "ok"},
		{"failed just now", messages.PassReport{Interval: interval, LastAt: at(time.Second), Err: "list containers: EOF"}, "stale", "error: list containers: EOF"},
		{"failed long ago", messages.PassReport{Interval: interval, LastAt: at(time.Minute), Err: "x"}, "unknown", "error: x"},
		{"no interval", messages.PassReport{LastAt: at(time.Hour)}, "fresh", "ok"},
	} {
		f := debug.Freshness(c.p, now)
		if f.Status != c.status || f.Outcome != c.outcome {
			t.Errorf("%s: status %s outcome %q, want %s %q", c.name, f.Status, f.Outcome, c.status, c.outcome)
		}
		if c.p.LastAt.IsZero() != (f.LastPassAt == nil) || (f.LastPassAt != nil && f.AgeSeconds != now.Sub(c.p.LastAt).Seconds()) {
			t.Errorf("%s: last pass %v age %v", c.name, f.LastPassAt, f.AgeSeconds)
		}
	}
}

func TestFreshness_AsksEveryBackgroundActor(t *testing.T) {
	f := newFixture(t, nil)
	f.set(func(w *world) {
		w.passes["reconciler"] = messages.PassReport{Name: "reconciler", Interval: 3 * time.Second, Passes: 4, LastAt: now.Add(-time.Second),
			Duration: 250 * time.Millisecond, Detail: "2 leases"}
		w.passes["reclaimer"] = messages.PassReport{Name: "reclaimer", Interval: 3 * time.Second, Running: true}
	})
	var out struct {
		Passes []messages.Freshness `json:"passes"`
	}
	body := f.getJSON("/debug/freshness", &out)
	if len(out.Passes) != 3 {
		t.Fatalf("passes = %s", body)
	}
	if p := out.Passes[0]; p.Name != "reconciler" || p.Status != "fresh" || p.Outcome != "ok" || p.DurationSeconds != 0.25 ||
		p.AgeSeconds != 1 || p.Passes != 4 || p.IntervalSeconds != 3 || p.Detail != "2 leases" {
		t.Errorf("reconciler = %+v", p)
	}
	if p := out.Passes[1]; p.Name != "reclaimer" || p.Status != "unknown" || p.Outcome != "none" || p.LastPassAt != nil || !p.Running {
		t.Errorf("reclaimer = %+v", p)
	}
	if p := out.Passes[2]; p.Name != "reaper" || p.Status != "unknown" || !strings.HasPrefix(p.Outcome, "error: ") {
		t.Errorf("an absent reaper = %+v", p)
	}
	if !strings.Contains(body, `{"name":"reconciler","last_pass_at":"2030-06-01T11:59:59Z","duration_seconds":0.25,"outcome":"ok","age_seconds":1,"status":"fresh"`) {
		t.Errorf("body = %s", body)
	}
}

func TestTransitions_SinceLimitAndErrors(t *testing.T) {
	f := newFixture(t, nil)
	for i := 0; i < 5; i++ {
		f.tree.Send("root/registry", addTransition{lease: "l", from: "a", to: "b"})
	}
	var out messages.TransitionsReply
	deadline := time.Now().Add(5 * time.Second)
	for f.getJSON("/debug/transitions", &out); len(out.Transitions) != 5; f.getJSON("/debug/transitions", &out) {
		if time.Now().After(deadline) {
			t.Fatalf("transitions = %+v", out)
		}
	}
	body := f.getJSON("/debug/transitions?since=2&limit=2", &out)
	if len(out.Transitions) != 2 || out.Transitions[0].Seq != 3 || out.Next != 4 {
		t.Fatalf("since=2 limit=2: %s", body)
	}
	if !strings.Contains(body, `{"transitions":[{"seq":3,"at":"2030-06-01T12:00:00Z","lease_uuid":"l","from":"a","to":"b"}`) || !strings.Contains(body, `"next":4`) {
		t.Errorf("body = %s", body)
	}
	if body := f.getJSON("/debug/transitions?since=5", &out); !strings.Contains(body, `"transitions":[]`) || out.Next != 5 {
		t.Errorf("since=last: %s", body)
	}
	for _, q := range []string{"since=", "since=-1", "since=a", "limit=", "limit=0", "limit=1025", "limit=x"} {
		if status, body := f.get("/debug/transitions?" + q); status != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
			t.Errorf("?%s: %d %s, want a JSON 400", q, status, body)
		}
	}
}

// readEvents reads SSE events from r until n of kind have arrived or timeout.
func readEvents(t *testing.T, r *bufio.Reader, kind string, n int, timeout time.Duration) []map[string]string {
	t.Helper()
	var got []map[string]string
	done := make(chan error, 1)
	go func() {
		cur := map[string]string{}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				done <- err
				return
			}
			line = strings.TrimRight(line, "\n")
			if line == "" {
				if cur["event"] == kind || (kind == "ping" && cur["comment"] == "ping") {
					got = append(got, cur)
					if len(got) == n {
						done <- nil
						return
					}
				}
				cur = map[string]string{}
				continue
			}
			if strings.HasPrefix(line, ": ") {
				cur["comment"] = strings.TrimPrefix(line, ": ")
				continue
			}
			k, v, _ := strings.Cut(line, ": ")
			cur[k] = v
		}
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("reading the stream: %v (got %v)", err, got)
		}
	case <-time.After(timeout):
		t.Fatalf("%d %s events after %s, want %d", len(got), kind, timeout, n)
	}
	return got
}

func openStream(t *testing.T, f *fixture, query string) (*bufio.Reader, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/debug/events"+query, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		cancel()
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	return bufio.NewReader(resp.Body), cancel
}

// waitExit waits for the handler of path to return.
func (f *fixture) waitExit(path string, timeout time.Duration) {
	f.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case p := <-f.exits:
			if p == path {
				return
			}
		case <-deadline:
			f.t.Fatalf("the %s handler did not return within %s", path, timeout)
		}
	}
}

func TestEvents_TransitionsWithIDsTreesAndTheClientGoing(t *testing.T) {
	f := newFixture(t, func(o *debug.Options) { o.TreeEvery, o.TransitionPoll = 100*time.Millisecond, 20*time.Millisecond })
	f.tree.Send("root/registry", addTransition{lease: "l1", from: "", to: "reserved"})
	r, cancel := openStream(t, f, "")
	first := readEvents(t, r, "transition", 1, 5*time.Second)[0]
	if first["id"] != "1" || first["data"] != `{"seq":1,"at":"2030-06-01T12:00:00Z","lease_uuid":"l1","from":"","to":"reserved"}` {
		t.Fatalf("first transition = %v", first)
	}
	f.tree.Send("root/registry", addTransition{lease: "l1", from: "reserved", to: "provisioning", reason: "why"})
	if next := readEvents(t, r, "transition", 1, 5*time.Second)[0]; next["id"] != "2" || !strings.Contains(next["data"], `"to":"provisioning","reason":"why"`) {
		t.Fatalf("second transition = %v", next)
	}
	tree := readEvents(t, r, "tree", 1, 5*time.Second)[0]
	var root messages.NodeInfo
	if err := json.Unmarshal([]byte(tree["data"]), &root); err != nil || root.Path != "root" || len(root.Children) != 7 {
		t.Fatalf("tree event = %v (%v)", tree, err)
	}
	cancel()
	f.waitExit("/debug/events", 5*time.Second)

	// ?since= skips what the client has; ?tree=0 pings instead of trees.
	r, _ = openStream(t, f, "?since=1&tree=0")
	if got := readEvents(t, r, "transition", 1, 5*time.Second)[0]; got["id"] != "2" {
		t.Fatalf("since=1 starts with %v", got)
	}
	readEvents(t, r, "ping", 2, 5*time.Second)
	if status, body := f.get("/debug/events?since=x"); status != http.StatusBadRequest {
		t.Fatalf("since=x: %d %s", status, body)
	}
}

func TestEvents_ASlowClientIsDroppedAndNoActorWaits(t *testing.T) {
	f := newFixture(t, func(o *debug.Options) {
		o.TreeEvery, o.TransitionPoll, o.StreamWriteGrace = time.Hour, 5*time.Millisecond, 300*time.Millisecond
	})
	// Transitions far bigger than any socket buffer, coming all the time.
	reason := strings.Repeat("r", 64<<10)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				f.tree.Send("root/registry", addTransition{lease: "l", from: "a", to: "b", reason: reason})
			}
		}
	}()
	// A client that sends the request and never reads.
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /debug/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token)
	f.waitExit("/debug/events", 30*time.Second)
	// The registry answered all along.
	start := time.Now()
	var out messages.TransitionsReply
	f.getJSON("/debug/transitions?limit=1", &out)
	if time.Since(start) > time.Second || len(out.Transitions) != 1 {
		t.Fatalf("the registry after the slow client: %+v in %s", out, time.Since(start))
	}
}
