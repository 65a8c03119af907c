package outbox_test

// The harness: a real store on a temp dir, a real supervision tree hosting the
// outbox actor as root's "outbox" child, and a real local HTTP receiver that checks
// X-Fred-Signature with http/hmac's Verifier before it records anything.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/outbox"
	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

var secret = []byte("outbox-test-callback-secret-7f3a9c")

const (
	outboxPath = supervisors.RootPath + "/outbox"
	patience   = 30 * time.Second // upper bound for anything that should happen "soon"
	longSweep  = time.Hour        // a sweep that never fires within a test
)

// fastSettings are DefaultSettings with test-sized delays: three attempts 0/50/100 ms
// apart and a 300 ms sweep.
func fastSettings() outbox.Settings {
	s := outbox.DefaultSettings(secret, callback.Policy{})
	s.Delays = []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond}
	s.Deadline = patience
	s.Sweep = 300 * time.Millisecond
	return s
}

// call is one request that passed the receiver's signature check.
type call struct {
	Lease      string
	DeliveryID string
	RequestURI string
	Body       []byte
	Signature  string
	SignedAt   int64 // the t= of the signature
	Status     int   // what the receiver answered; 0 while still being answered
	Canceled   bool  // the sender gave up on the request while it was being answered
}

// responder decides the status of a verified call; n counts the calls with this
// delivery ID so far (1 = first attempt). It may block, but must return once ctx
// (the request's) is done. A 3xx status is sent with Location: /landing.
type responder func(ctx context.Context, c call, n int) int

type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	closed chan struct{} // closed at cleanup: releases every blocked responder

	mu        sync.Mutex
	calls     []*call
	outcomes  map[string]int // verifier outcomes, one per request
	respond   responder
	active    int
	maxActive int
	landed    atomic.Int64 // hits on the unauthenticated /landing page
}

func newReceiver(t *testing.T) *receiver { return newReceiverWithClock(t, nil) }

// newReceiverWithClock verifies signatures against now (nil = time.Now).
func newReceiverWithClock(t *testing.T, now func() time.Time) *receiver {
	t.Helper()
	r := &receiver{t: t, closed: make(chan struct{}), outcomes: map[string]int{}}
	v := &hmac.Verifier{Secret: secret, Now: now, Observe: func(o string) {
		r.mu.Lock()
		r.outcomes[o]++
		r.mu.Unlock()
	}}
	mux := http.NewServeMux()
	mux.Handle("/callbacks/", v.Middleware(http.HandlerFunc(r.serve)))
	mux.HandleFunc("/landing", func(w http.ResponseWriter, _ *http.Request) {
		r.landed.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	r.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(r.closed)
		r.srv.Close()
	})
	return r
}

// url is a lease's callback URL; the query proves the signature covers it.
func (r *receiver) url(lease string, op int) string {
	return fmt.Sprintf("%s/callbacks/%s?operation_id=op-%d", r.srv.URL, lease, op)
}

func (r *receiver) setRespond(f responder) {
	r.mu.Lock()
	r.respond = f
	r.mu.Unlock()
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body) // the verifier already read it into memory
	sig := req.Header.Get(callback.Header)
	c := &call{
		Lease:      strings.TrimPrefix(req.URL.Path, "/callbacks/"),
		DeliveryID: req.Header.Get("X-Berth-Delivery-Id"),
		RequestURI: req.RequestURI,
		Body:       body,
		Signature:  sig,
		SignedAt:   signedAt(sig),
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	n := 0
	for _, o := range r.calls {
		if o.DeliveryID == c.DeliveryID {
			n++
		}
	}
	respond := r.respond
	r.active++
	r.maxActive = max(r.maxActive, r.active)
	snapshot := *c
	r.mu.Unlock()

	status := http.StatusOK
	if respond != nil {
		status = respond(req.Context(), snapshot, n)
	}

	r.mu.Lock()
	r.active--
	c.Status = status
	c.Canceled = req.Context().Err() != nil
	r.mu.Unlock()
	if status >= 300 && status < 400 {
		w.Header().Set("Location", "/landing")
	}
	w.WriteHeader(status)
}

// signedAt extracts t= from "t=<unix>,sha256=<hex>" (-1 if absent).
func signedAt(sig string) int64 {
	ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// wait blocks a responder until release is closed, the request is canceled or the
// receiver shuts down; it reports whether release came.
func (r *receiver) wait(ctx context.Context, release <-chan struct{}) bool {
	select {
	case <-release:
		return true
	case <-ctx.Done():
	case <-r.closed:
	}
	return false
}

// all returns a copy of every verified call, in arrival order.
func (r *receiver) all() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]call, len(r.calls))
	for i, c := range r.calls {
		out[i] = *c
	}
	return out
}

// of returns the calls of one lease, in arrival order.
func (r *receiver) of(lease string) []call {
	var out []call
	for _, c := range r.all() {
		if c.Lease == lease {
			out = append(out, c)
		}
	}
	return out
}

// attemptsOf returns the calls that carried one delivery ID.
func (r *receiver) attemptsOf(id string) []call {
	var out []call
	for _, c := range r.all() {
		if c.DeliveryID == id {
			out = append(out, c)
		}
	}
	return out
}

// accepted returns the delivery IDs a lease's calls were answered 2xx for, in
// arrival order (a redelivery shows up twice).
func (r *receiver) accepted(lease string) []string {
	var out []string
	for _, c := range r.of(lease) {
		if c.Status >= 200 && c.Status <= 299 {
			out = append(out, c.DeliveryID)
		}
	}
	return out
}

func (r *receiver) activeNow() (active, maxActive int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active, r.maxActive
}

// verified is how many requests passed the signature check; refused how many did not.
func (r *receiver) verified() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.outcomes[hmac.OutcomeOK]
}

func (r *receiver) refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for o, c := range r.outcomes {
		if o != hmac.OutcomeOK {
			n += c
		}
	}
	return n
}

// daemon is one "process": a store opened on dir and a tree hosting the outbox.
type daemon struct {
	t     *testing.T
	dir   string
	store *persistence.Store
	tree  *supervisors.Tree
	reg   *prometheus.Registry
	once  sync.Once
}

type daemonOptions struct {
	chaos      bool
	metricsNow func() time.Time // clock of the age gauge; nil = time.Now
}

func startDaemon(t *testing.T, dir string, set outbox.Settings, opt daemonOptions) *daemon {
	t.Helper()
	store, _, err := persistence.Open(persistence.Options{Dir: dir})
	if err != nil {
		t.Fatalf("open store %s: %v", dir, err)
	}
	now := opt.metricsNow
	if now == nil {
		now = time.Now
	}
	reg := prometheus.NewRegistry()
	met := outbox.NewMetrics(reg, store, now)
	tree, err := supervisors.Start(supervisors.Options{
		Logger:     zerolog.Nop(),
		Registerer: reg,
		Chaos:      opt.chaos,
		Children: func(*supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{{Name: "outbox", Kind: "outbox", Producer: outbox.New(store, set, zerolog.Nop(), met)}}
		},
	})
	if err != nil {
		_ = store.Close()
		t.Fatalf("start tree: %v", err)
	}
	d := &daemon{t: t, dir: dir, store: store, tree: tree, reg: reg}
	t.Cleanup(d.stop)
	d.waitRunning()
	return d
}

// stop drains the tree (the outbox cancels and waits for its deliveries) and closes
// the store, like berthd's shutdown. Idempotent.
func (d *daemon) stop() {
	d.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := d.tree.Stop(ctx); err != nil {
			d.t.Errorf("stop tree: %v", err)
		}
		if err := d.store.Close(); err != nil {
			d.t.Errorf("close store: %v", err)
		}
	})
}

// waitRunning returns once the outbox actor answers Describe, i.e. it has handled
// Started (and its start-up scan) already.
func (d *daemon) waitRunning() {
	d.t.Helper()
	eventually(d.t, "outbox actor running", func() bool {
		_, err := d.describe(time.Second)
		return err == nil
	})
}

func (d *daemon) describe(timeout time.Duration) (messages.NodeInfo, error) {
	return supervisors.Ask(context.Background(), d.tree, outboxPath, timeout, func(r chan<- messages.NodeInfo) any {
		return &messages.Describe{Reply: r}
	})
}

func (d *daemon) restarts() int {
	n, ok := d.tree.Dir.Get(outboxPath)
	if !ok {
		return 0
	}
	return n.Restarts()
}

// commit writes rows in one transaction together with a journal event per lease, the
// way a lease actor does, and returns the keys the store assigned.
func (d *daemon) commit(rows ...persistence.OutboxRow) []persistence.OutboxKey {
	d.t.Helper()
	var appends []persistence.Append
	seen := map[string]bool{}
	for _, r := range rows {
		if !seen[r.Lease] {
			seen[r.Lease] = true
			appends = append(appends, persistence.Append{Stream: "lease/" + r.Lease, Events: []persistence.Event{
				{Type: "test.callback_enqueued", V: 1, Data: json.RawMessage(`{}`)},
			}})
		}
	}
	res, err := d.store.Commit(persistence.Write{Appends: appends, Outbox: rows})
	if err != nil {
		d.t.Fatalf("commit %d outbox rows: %v", len(rows), err)
	}
	return res.OutboxKeys
}

// wake tells the outbox, as a lease actor does after its commit, that lease has rows.
func (d *daemon) wake(lease string) { d.tree.Send(outboxPath, &messages.OutboxWake{Lease: lease}) }

func (d *daemon) pending() int {
	d.t.Helper()
	n, _, err := d.store.OutboxStats()
	if err != nil {
		d.t.Fatalf("outbox stats: %v", err)
	}
	return n
}

// head is a lease's oldest pending row, the one delivered next.
func (d *daemon) head(lease string) (*persistence.OutboxEntry, bool, error) {
	rows, err := d.store.OutboxOf(lease)
	if err != nil || len(rows) == 0 {
		return nil, false, err
	}
	return &rows[0], true, nil
}

// rowIDs returns the delivery IDs of the pending rows, in creation order.
func (d *daemon) rowIDs() []string {
	d.t.Helper()
	all, err := d.store.OutboxAll()
	if err != nil {
		d.t.Fatalf("outbox all: %v", err)
	}
	ids := make([]string, len(all))
	for i, e := range all {
		ids[i] = e.Row.DeliveryID
	}
	return ids
}

// metric reads one sample from the daemon's registry; labels are name/value pairs.
func (d *daemon) metric(name string, labels ...string) float64 {
	d.t.Helper()
	mfs, err := d.reg.Gather()
	if err != nil {
		d.t.Fatalf("gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	d.t.Fatalf("metric %s%v not exposed", name, labels)
	return 0
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func (d *daemon) attempts(outcome string) float64 {
	return d.metric("berth_callback_attempts_total", "outcome", outcome)
}

// newRow builds the n-th callback row of a lease the way the lease actor does: a
// json.Marshal'd Callback body, a fresh delivery UUID.
func newRow(r *receiver, lease string, n int) persistence.OutboxRow {
	body, err := json.Marshal(messages.Callback{
		LeaseUUID:        lease,
		Status:           messages.CallbackSuccess,
		BackendStorageID: "storage-outbox-test",
		MaintenanceID:    fmt.Sprintf("%s-row-%d", lease, n),
	})
	if err != nil {
		panic(err) // a fixed struct always marshals
	}
	return persistence.OutboxRow{
		Lease:      lease,
		DeliveryID: uuid.NewString(),
		URL:        r.url(lease, n),
		Body:       body,
		Kind:       "operation",
	}
}

func newRows(r *receiver, lease string, count int) []persistence.OutboxRow {
	rows := make([]persistence.OutboxRow, count)
	for i := range rows {
		rows[i] = newRow(r, lease, i+1)
	}
	return rows
}

func ids(rows []persistence.OutboxRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.DeliveryID
	}
	return out
}

// collapse drops immediate repeats: an at-least-once redelivery of a head right
// after itself is allowed, anything else out of order is not.
func collapse(in []string) []string {
	var out []string
	for _, s := range in {
		if len(out) == 0 || out[len(out)-1] != s {
			out = append(out, s)
		}
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// eventually polls cond until it holds or patience runs out.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", patience, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// offsetClock is real time plus an offset the test can move forward; sender and
// receiver share it, so a jump makes any signature taken before it stale.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) advance(d time.Duration) { c.off.Add(int64(d)) }
