package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/dockerio"
)

func TestRequestOp_FixedVocabularyFromMethodAndPathTemplate(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for _, c := range []struct{ method, path, want string }{
		{"GET", "/_ping", opPing},
		{"HEAD", "/_ping", opPing},
		{"GET", "/v1.41/_ping", opPing},
		{"POST", "/v1.41/containers/create", opContainerCreate},
		{"POST", "/v1.41/containers/" + id + "/start", opContainerStart},
		{"GET", "/v1.41/containers/" + id + "/json", opContainerInspect},
		{"GET", "/v1.41/containers/json", opContainerList},
		{"POST", "/v1.41/containers/" + id + "/stop", opContainerStop},
		{"DELETE", "/v1.41/containers/" + id, opContainerRemove},
		{"GET", "/v1.41/containers/" + id + "/logs", opContainerLogs},
		{"POST", "/v1.41/containers/" + id + "/kill", opOther},
		{"POST", "/v1.41/containers/" + id + "/wait", opOther},
		{"POST", "/v1.41/networks/create", opNetworkCreate},
		{"GET", "/v1.41/networks/" + id, opNetworkInspect},
		{"GET", "/v1.41/networks", opNetworkList},
		{"DELETE", "/v1.41/networks/" + id, opNetworkRemove},
		{"POST", "/v1.41/networks/" + id + "/connect", opOther},
		{"GET", "/v1.41/images/127.0.0.1:5000/berth/workload:test/json", opImageInspect},
		{"GET", "/v1.41/images/sha256:" + id + "/json", opImageInspect},
		{"GET", "/v1.41/images/json", opOther}, // the image list
		{"POST", "/v1.41/images/create", opImagePull},
		{"GET", "/v1.41/distribution/127.0.0.1:5000/berth/workload:test/json", opDistributionInspect},
		{"POST", "/v1.41/volumes/create", opVolumeCreate},
		{"GET", "/v1.41/volumes/fred-x-app-0-0", opVolumeInspect},
		{"GET", "/v1.41/volumes", opVolumeList},
		{"DELETE", "/v1.41/volumes/fred-x-app-0-0", opVolumeRemove},
		{"GET", "/v1.41/events", opEvents},
		{"GET", "/v1.41/info", opOther},
		{"GET", "/v1.41/version", opOther},
		{"GET", "/", opOther},
	} {
		if got := requestOp(c.method, c.path); got != c.want {
			t.Errorf("requestOp(%s %s) = %s, want %s", c.method, c.path, got, c.want)
		}
		if !slices.Contains(allOps, c.want) {
			t.Errorf("%s is not in the vocabulary", c.want)
		}
	}
}

// fakeDockerd stands in for dockerd: it answers ping, container create, start and
// inspect and image inspect, each after its configured delay (or the request's end).
type fakeDockerd struct {
	mu          sync.Mutex
	delay       map[string]time.Duration // op → delay
	served      map[string]int
	inFlight    int
	maxInFlight int // the most requests (events aside) it served at once
}

func (d *fakeDockerd) set(op string, delay time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.delay[op] = delay
}

func (d *fakeDockerd) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := requestOp(r.Method, r.URL.Path)
	d.mu.Lock()
	delay := d.delay[op]
	d.served[op]++
	if op != opEvents {
		d.inFlight++
		d.maxInFlight = max(d.maxInFlight, d.inFlight)
		defer func() { d.mu.Lock(); d.inFlight--; d.mu.Unlock() }()
	}
	d.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Api-Version", "1.41")
	w.Header().Set("Content-Type", "application/json")
	switch op {
	case opPing:
		fmt.Fprint(w, "OK")
	case opContainerCreate:
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"Id":"c1","Warnings":[]}`)
	case opContainerStart:
		w.WriteHeader(http.StatusNoContent)
	case opContainerInspect:
		fmt.Fprint(w, `{"Id":"c1","Name":"/x","State":{"Status":"running"},"Config":{"Labels":{}}}`)
	case opImageInspect: // larger than any image's metadata may be
		fmt.Fprintf(w, `{"Id":"sha256:%s","Comment":"%s"}`, strings.Repeat("a", 64), strings.Repeat("x", maxImageInspectBytes))
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"message":"not here"}`)
	}
}

func newFakeDockerdEngine(t *testing.T, reg prometheus.Registerer, create, start time.Duration) (*Engine, *fakeDockerd) {
	return newFakeDockerdEngineWith(t, Options{CreateTimeout: create, StartTimeout: start, Registerer: reg})
}

func newFakeDockerdEngineWith(t *testing.T, opts Options) (*Engine, *fakeDockerd) {
	t.Helper()
	d := &fakeDockerd{delay: map[string]time.Duration{}, served: map[string]int{}}
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	opts.Host, opts.InstallationID, opts.Logger = "tcp://"+strings.TrimPrefix(srv.URL, "http://"), newInstallation(), testLogger()
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e, d
}

// MaxInFlight bounds the requests dockerd sees at once; a long stream (events)
// holds no slot, and a caller that gives up while waiting for one gets its
// context's error.
func TestBoundedTransport_MaxInFlight_BoundsConcurrentRequestsStreamsAside(t *testing.T) {
	e, d := newFakeDockerdEngineWith(t, Options{MaxInFlight: 3})
	ctx := testCtx(t, time.Minute)
	d.set(opEvents, 5*time.Second) // held open for the whole test
	d.set(opContainerInspect, 100*time.Millisecond)
	streams, cancelStreams := context.WithCancel(ctx)
	defer cancelStreams()
	for range 4 {
		go func() {
			req, _ := http.NewRequestWithContext(streams, http.MethodGet, "http://docker/v1.41/events", nil)
			if resp, err := e.docker.HTTPClient().Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	start := time.Now()
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.Inspect(ctx, "c1"); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("inspect: %v", err)
	}
	took := time.Since(start)
	d.mu.Lock()
	most := d.maxInFlight
	d.mu.Unlock()
	if most != 3 {
		t.Fatalf("dockerd saw %d requests at once, want the bound 3", most)
	}
	if took < 350*time.Millisecond || took > 3*time.Second {
		t.Fatalf("12 inspects of 100 ms three at a time took %s, want ~400 ms (events streams hold no slot)", took)
	}
	waiting, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	d.set(opContainerInspect, time.Second)
	for range 3 {
		go func() { _, _ = e.Inspect(ctx, "c1") }()
	}
	time.Sleep(50 * time.Millisecond)
	if _, err := e.Inspect(waiting, "c1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a caller that gave up waiting for a slot = %v, want its deadline", err)
	}
}

// The transport bounds create and start by their own timeouts (unless the
// caller's deadline is earlier), leaves every other call to the caller's
// context, caps image inspect answers, and counts each request by op.
func TestBoundedTransport_CreateStartTimeoutsCountsAndInspectCap_AgainstAStandIn(t *testing.T) {
	reg := prometheus.NewRegistry()
	e, d := newFakeDockerdEngine(t, reg, 100*time.Millisecond, 150*time.Millisecond)
	ctx := testCtx(t, time.Minute)
	create := func(ctx context.Context) error {
		_, err := e.docker.ContainerCreate(ctx, &container.Config{Image: "x"}, nil, nil, nil, "")
		return err
	}

	if err := create(ctx); err != nil {
		t.Fatalf("create within its timeout: %v", err)
	}
	d.set(opContainerCreate, 2*time.Second)
	start := time.Now()
	err := create(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "container_create_timeout 100ms") {
		t.Fatalf("slow create = %v, want container_create_timeout", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("slow create took %s; the 100ms bound did not cut it", took)
	}
	early, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	err = create(early)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "container_create_timeout") {
		t.Errorf("create with an earlier caller deadline = %v, want the caller's own deadline", err)
	}

	d.set(opContainerStart, 2*time.Second)
	err = e.docker.ContainerStart(ctx, "c1", container.StartOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "container_start_timeout 150ms") {
		t.Errorf("slow start = %v, want container_start_timeout", err)
	}
	d.set(opContainerStart, 0)
	if err := e.docker.ContainerStart(ctx, "c1", container.StartOptions{}); err != nil {
		t.Errorf("start within its timeout: %v", err)
	}

	// Not bounded by the create/start timeouts.
	d.set(opContainerInspect, 400*time.Millisecond)
	if c, err := e.Inspect(ctx, "c1"); err != nil || c.ID != "c1" {
		t.Errorf("slow inspect = %+v, %v; only create and start are bounded", c, err)
	}
	if _, err := e.docker.ImageInspect(ctx, "berth/x:1"); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("image inspect over 2 MiB = %v, want refused", err)
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	var inspectSeconds float64
	var inspectTimed uint64
	for _, f := range families {
		if f.GetName() == "berth_docker_request_seconds" {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "op" && l.GetValue() == opContainerInspect {
						inspectSeconds, inspectTimed = m.GetHistogram().GetSampleSum(), m.GetHistogram().GetSampleCount()
					}
				}
			}
		}
		if f.GetName() != "berth_docker_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "op" || !slices.Contains(allOps, l.GetValue()) {
					t.Errorf("label %s=%q outside the vocabulary", l.GetName(), l.GetValue())
				}
				counts[l.GetValue()] = int(m.GetCounter().GetValue())
			}
		}
	}
	d.mu.Lock()
	served := d.served[opContainerCreate]
	d.mu.Unlock()
	if counts[opContainerCreate] != 3 || counts[opContainerStart] != 2 || counts[opContainerInspect] != 1 ||
		counts[opImageInspect] != 1 || counts[opPing] < 1 {
		t.Errorf("counted %v, want 3 creates, 2 starts, 1 inspect, 1 image inspect, ≥1 ping", counts)
	}
	if served < 1 {
		t.Errorf("the stand-in served %d creates", served)
	}
	// The 400 ms inspect is timed as dockerd's answer took.
	if inspectTimed != 1 || inspectSeconds < 0.4 || inspectSeconds > 2 {
		t.Errorf("berth_docker_request_seconds{op=container_inspect}: %d samples, %.3f s; want one of ~0.4 s", inspectTimed, inspectSeconds)
	}

	// A second engine on the same registry shares the counter.
	e2, _ := newFakeDockerdEngine(t, reg, 0, 0)
	if e2.requests != e.requests {
		t.Error("a second engine on one registry registered a second counter")
	}
	if e2.durations != e.durations {
		t.Error("a second engine on one registry registered a second request histogram")
	}
	if e2.opts.CreateTimeout != defaultCallTimeout || e2.opts.StartTimeout != defaultCallTimeout {
		t.Errorf("default timeouts = %s/%s, want 30s", e2.opts.CreateTimeout, e2.opts.StartTimeout)
	}
}

// Compose runs on the same client: its creates and starts are counted and bounded.
func TestBoundedTransport_RealEngine_ComposeCreatesCountedAndBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newTestEngineFor(t, newInstallation(), counting(reg))
	info := ensurePulled(t, e)
	l := newTestLease(t, e)
	ctx := testCtx(t, 3*time.Minute)
	before := map[string]int{}
	for _, op := range allOps {
		before[op] = requests(e, op)
	}
	if err := e.Up(ctx, l.plan(workloadService("web", 2, info))); err != nil {
		t.Fatalf("Up: %v", err)
	}
	delta := map[string]int{}
	var seen []string
	for _, op := range allOps {
		if d := requests(e, op) - before[op]; d > 0 {
			delta[op] = d
			seen = append(seen, fmt.Sprintf("%s=%d", op, d))
		}
	}
	t.Logf("Docker requests of one Up of 2 containers (berth's and compose's): %s", strings.Join(seen, " "))
	if delta[opContainerCreate] != 2 || delta[opContainerStart] != 2 {
		t.Errorf("Up of 2 containers counted %d creates and %d starts, want 2 and 2", delta[opContainerCreate], delta[opContainerStart])
	}
	if delta[opContainerList] < 1 {
		t.Errorf("compose's container lists not counted")
	}

	// A create bound no daemon can meet: compose's create fails on it, nothing is made.
	impatient := newTestEngineFor(t, newInstallation(), func(o *Options) { o.CreateTimeout = time.Nanosecond })
	li := newTestLease(t, impatient)
	err := impatient.Up(ctx, li.plan(workloadService("app", 1, info)))
	if err == nil || !strings.Contains(err.Error(), "container_create_timeout") {
		t.Fatalf("Up with a 1ns create timeout = %v, want container_create_timeout", err)
	}
	if c, _ := impatient.Cohort(ctx, li.Lease); len(c) != 0 {
		t.Errorf("a create cut off by its timeout left %d containers", len(c))
	}
	// dockerd may still finish a create whose client went away: give it a
	// moment, then remove what it made, before the lease's own cleanup (which
	// removes the network) and TestMain's leftover check.
	t.Cleanup(func() {
		time.Sleep(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := impatient.Down(ctx, li.Lease, dockerio.DownOptions{StopTimeout: time.Second}); err != nil {
			t.Errorf("remove a late create: %v", err)
		}
	})
}

// Container starts queue behind their own bound, first come first served, and
// nothing else queues behind them; InFlight counts what berthd waits on
// (queued starts included) and drops back to zero.
func TestBoundedTransport_MaxStartsInFlight_QueuesStartsOnly_InFlightCounts(t *testing.T) {
	e, d := newFakeDockerdEngineWith(t, Options{MaxStartsInFlight: 2})
	ctx := testCtx(t, time.Minute)
	d.set(opContainerStart, 150*time.Millisecond)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	start := time.Now()
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- e.docker.ContainerStart(ctx, "c1", container.StartOptions{})
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if n := e.InFlight(); n != 6 {
		t.Errorf("InFlight %d while 6 starts run or queue, want 6", n)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("start: %v", err)
		}
	}
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Fatalf("6 starts of 150 ms two at a time took %s, want ≥ 450 ms", took)
	}
	d.mu.Lock()
	most := d.maxInFlight
	d.mu.Unlock()
	if most != 2 {
		t.Fatalf("dockerd saw %d starts at once, want the bound 2", most)
	}
	if n := e.InFlight(); n != 0 {
		t.Fatalf("InFlight %d after every request answered, want 0", n)
	}

	// An inspect does not wait behind queued starts.
	d.set(opContainerStart, time.Second)
	for range 4 {
		go func() { _ = e.docker.ContainerStart(ctx, "c1", container.StartOptions{}) }()
	}
	time.Sleep(50 * time.Millisecond)
	began := time.Now()
	if _, err := e.Inspect(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took > 500*time.Millisecond {
		t.Fatalf("an inspect behind queued starts took %s", took)
	}
}
