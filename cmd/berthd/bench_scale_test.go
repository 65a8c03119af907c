package main

// BenchmarkScale_10kLeases_FakeEngine: berthd (in-process, real HTTP API, real
// bbolt store, real actor tree) on the in-memory fake engine, at 10,000 leases:
//
//   - admission: signed POST /provision, 64 in flight → leases/s admitted (the
//     202s) and leases/s to ready (each lease's success callback);
//   - restart: SIGTERM, then a new daemon on the same data dir and the same fake
//     engine (its containers outlive the daemon, as Docker's do) → time from
//     start to GET /health healthy (target ≤ 1 s);
//   - one reconcile pass at 10k: the fake's event stream is broken, the watcher
//     reconnects and asks for a pass, whose duration /debug/freshness reports
//     (target ≤ 2 s); the startup pass after the restart is reported too;
//   - GET /provisions: the whole list in one request, and paged by 1000;
//   - memory per Ready lease: heap and RSS of the process with the restarted
//     daemon holding every lease, less the same taken just before that daemon
//     started (the fake engine's containers and the test's own state are in
//     both, so the difference is the daemon's) — target RSS ≤ 20 KB per lease.
//
// The fake engine has no dockerd latency, so the rates are berthd's own ceiling
// (HTTP, HMAC, admission, journal fsyncs, actors, outbox), not a Docker figure.
// A figure missing its target fails the benchmark with the measured value.
//
// Ignores b.N (one iteration is minutes at 10k). BERTH_SCALE_LEASES overrides the
// lease count for a quick run; BERTH_SCALE_PROFILE=<dir> writes a CPU profile of
// each phase there (admission.cpu, restart.cpu, pass.cpu; not with -cpuprofile):
//
//	go test -run '^$' -bench BenchmarkScale -benchtime 1x ./cmd/berthd/
//	BERTH_SCALE_LEASES=1000 go test -run '^$' -bench BenchmarkScale -benchtime 1x ./cmd/berthd/

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
)

// Targets of issue 11 at 10k leases.
const (
	scaleTargetHealthy   = time.Second
	scaleTargetPass      = 2 * time.Second
	scaleTargetRSSPerKB  = 20.0
	scaleDefaultLeases   = 10000
	scaleInFlight        = 64
	scaleSKU             = "scale-nano"
	scaleReadyTimeout    = 20 * time.Minute
	scaleHealthyTimeout  = 5 * time.Minute
	scalePassWaitTimeout = 5 * time.Minute
)

// scaleConfig is the daemon's config at n leases: a tiny diskless SKU and a pool
// that holds n of them, a short verify so leases turn ready quickly, and a
// reconcile interval long enough that no periodic pass runs during the run (the
// passes measured are the startup one and the one the benchmark asks for).
func scaleConfig(n int) []string {
	return []string{
		"sku_profiles:\n  " + scaleSKU + ": {cpu_cores: 0.01, memory_mb: 8, disk_mb: 0}",
		fmt.Sprintf("total_cpu_cores: %d", n/50+10),
		fmt.Sprintf("total_memory_mb: %d", n*16+1024),
		fmt.Sprintf("total_disk_mb: %d", n*128+1024),
		"startup_verify_duration: 100ms",
		"reconcile_interval: 1h",
		"provision_timeout: 10m",
		"log_level: error",
	}
}

func scaleLeaseCount(b *testing.B) int {
	s := os.Getenv("BERTH_SCALE_LEASES")
	if s == "" {
		return scaleDefaultLeases
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("BERTH_SCALE_LEASES=%q: want a positive integer", s)
	}
	return n
}

// scaleProfile starts a CPU profile of one phase when BERTH_SCALE_PROFILE names a
// directory, and returns what stops it: a whole-run profile mixes phases whose
// costs differ in kind (admission is the fake and the journal, a restart the
// journal replay).
func scaleProfile(b *testing.B, phase string) (stop func()) {
	dir := os.Getenv("BERTH_SCALE_PROFILE")
	if dir == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(dir, phase+".cpu"))
	if err != nil {
		b.Fatalf("profile %s: %v", phase, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatalf("profile %s (not with -cpuprofile): %v", phase, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Errorf("profile %s: %v", phase, err)
		}
	}
}

// scaleEngine hands every daemon start the same fake engine, created for the
// installation of the first start: the second daemon finds the containers the
// first one launched, as it would on a real host.
type scaleEngine struct {
	mu  sync.Mutex
	eng *fake.Engine
	id  string
}

func (s *scaleEngine) get(installationID string) (docker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eng == nil {
		s.eng, s.id = fake.New(fake.Options{InstallationID: installationID}), installationID
		s.eng.AddImage(testImage(), dockerio.ImageInfo{})
	}
	if installationID != s.id {
		return nil, fmt.Errorf("fake engine of installation %s asked for installation %s", s.id, installationID)
	}
	return s.eng, nil
}

func (s *scaleEngine) fake() *fake.Engine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eng
}

// scaleReceiver counts callbacks by kind; it keeps one timestamp per lease, not
// the bodies (the callback receiver of the harness keeps every one).
type scaleReceiver struct {
	url     string
	mu      sync.Mutex
	ready   map[string]time.Time // lease → first success callback
	other   map[string]int       // status → count of other callbacks
	bad     int                  // bad signatures
	total   int
	lastErr string
}

func newScaleReceiver(b *testing.B) *scaleReceiver {
	r := &scaleReceiver{ready: map[string]time.Time{}, other: map[string]int{}}
	v := &hmac.Verifier{Secret: []byte(testSecret), Observe: func(o string) {
		if o != hmac.OutcomeOK {
			r.mu.Lock()
			r.bad++
			r.mu.Unlock()
		}
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	r.url = "http://" + ln.Addr().String() + "/callbacks/provision"
	srv := &http.Server{Handler: v.Middleware(http.HandlerFunc(r.handle))}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return r
}

func (r *scaleReceiver) handle(w http.ResponseWriter, req *http.Request) {
	var cb messages.Callback
	if err := json.NewDecoder(req.Body).Decode(&cb); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	at := time.Now()
	r.mu.Lock()
	r.total++
	if cb.Status == messages.CallbackSuccess {
		if _, seen := r.ready[cb.LeaseUUID]; !seen {
			r.ready[cb.LeaseUUID] = at
		}
	} else {
		r.other[cb.Status]++
		r.lastErr = cb.LeaseUUID + ": " + cb.Status + " " + cb.Error
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// state is the number of leases ready, the last ready time, and the counts of the rest.
func (r *scaleReceiver) state() (ready int, last time.Time, total int, other map[string]int, lastErr string, bad int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, at := range r.ready {
		if at.After(last) {
			last = at
		}
	}
	other = make(map[string]int, len(r.other))
	for k, v := range r.other {
		other[k] = v
	}
	return len(r.ready), last, r.total, other, r.lastErr, r.bad
}

// scaleDaemonDir is newDaemonDir without its Docker cleanup: nothing of this
// benchmark is in Docker, and Docker may be busy with another run.
func scaleDaemonDir(b *testing.B, extra ...string) *daemonProc {
	dir := b.TempDir()
	d := &daemonProc{t: b, dir: dir, api: freePort(b), debug: freePort(b), secret: []byte(testSecret), log: &syncBuffer{}}
	d.cfgPath = filepath.Join(dir, "berthd.yaml")
	if err := os.WriteFile(d.cfgPath, []byte(testConfig(filepath.Join(dir, "data"), d.api, d.debug, extra...)), 0o600); err != nil {
		b.Fatal(err)
	}
	return d
}

// scaleStart runs berthd on a goroutine and returns when /health first answered
// healthy (polled every 5 ms) and how long that took from the call of run.
func scaleStart(b *testing.B, d *daemonProc) time.Duration {
	d.sigs, d.done = make(chan os.Signal, 1), make(chan int, 1)
	began := time.Now()
	go func() { d.done <- run([]string{"-config", d.cfgPath}, nil, d.log, d.log, d.sigs) }()
	c := &http.Client{Timeout: time.Second}
	deadline := began.Add(scaleHealthyTimeout)
	for {
		resp, err := c.Get("http://" + d.api + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte(`"healthy"`)) {
				return time.Since(began)
			}
		}
		select {
		case code := <-d.done:
			d.done = nil
			b.Fatalf("berthd exited %d before becoming healthy\n%s", code, scaleTail(d.log.String()))
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("berthd not healthy within %s (last: %v)\n%s", scaleHealthyTimeout, err, scaleTail(d.log.String()))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// scaleStop sends SIGTERM and waits for a clean exit; it returns how long the drain took.
func scaleStop(b *testing.B, d *daemonProc) time.Duration {
	if d.done == nil {
		return 0
	}
	began := time.Now()
	d.sigs <- os.Interrupt
	select {
	case code := <-d.done:
		d.done = nil
		if code != 0 {
			b.Fatalf("berthd exited %d on SIGTERM\n%s", code, scaleTail(d.log.String()))
		}
	case <-time.After(3 * time.Minute):
		b.Fatalf("berthd did not stop within 3m\n%s", scaleTail(d.log.String()))
	}
	return time.Since(began)
}

// scaleTail is the end of a daemon log, enough to see why it failed.
func scaleTail(log string) string {
	const keep = 8 << 10
	if len(log) > keep {
		return "…" + log[len(log)-keep:]
	}
	return log
}

// scaleProvisionBody is a one-instance lease of the scale SKU.
func scaleProvisionBody(lease, callbackURL string, manifest []byte) []byte {
	body, _ := json.Marshal(messages.ProvisionRequest{LeaseUUID: lease, Tenant: "tenant-scale",
		ProviderUUID: "provider-scale", Items: []messages.LeaseItem{{SKU: scaleSKU, Quantity: 1}},
		CallbackURL: callbackURL + "?operation_id=" + uuid.NewString(), Payload: base64.StdEncoding.EncodeToString(manifest)})
	return body
}

// scaleList reads every lease's status through GET /provisions: one request
// without a limit (pageSize 0), or paged. A 503 (the registry's backlog is over
// its limit) is retried after 10 ms, counted in busy and included in the time.
func scaleList(c *benchClient, pageSize int) (statuses map[string]string, took time.Duration, busy int, err error) {
	out := map[string]string{}
	began := time.Now()
	cont := ""
	for {
		uri := "/provisions"
		if pageSize > 0 {
			uri += "?limit=" + strconv.Itoa(pageSize)
			if cont != "" {
				uri += "&continue=" + cont
			}
		}
		code, body, err := c.do(http.MethodGet, uri, nil)
		if err == nil && code == http.StatusServiceUnavailable && time.Since(began) < time.Minute {
			busy++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if err != nil || code != http.StatusOK {
			return nil, 0, busy, fmt.Errorf("GET %s: %d %.200s %v", uri, code, body, err)
		}
		var page struct {
			Provisions []messages.ProvisionInfo `json:"provisions"`
			Continue   string                   `json:"continue"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, 0, busy, fmt.Errorf("decode GET %s: %w", uri, err)
		}
		for _, p := range page.Provisions {
			out[p.LeaseUUID] = p.Status
		}
		if pageSize == 0 || page.Continue == "" {
			return out, time.Since(began), busy, nil
		}
		cont = page.Continue
	}
}

// scaleAllReady checks that every lease is listed ready.
func scaleAllReady(statuses map[string]string, leases []string) error {
	notReady := map[string]int{}
	for _, l := range leases {
		if s := statuses[l]; s != "ready" {
			notReady[s]++
		}
	}
	if len(notReady) > 0 {
		return fmt.Errorf("%d of %d leases listed, not all ready: %v", len(statuses), len(leases), notReady)
	}
	return nil
}

// scaleReconcilerPass reads the reconciler's last pass from /debug/freshness.
func scaleReconcilerPass(b *testing.B, d *daemonProc) messages.Freshness {
	r := d.debugGet("/debug/freshness")
	if r.Status != http.StatusOK {
		b.Fatalf("GET /debug/freshness: %d %s", r.Status, r.Body)
	}
	var f struct {
		Passes []messages.Freshness `json:"passes"`
	}
	r.json(b, &f)
	for _, p := range f.Passes {
		if p.Name == "reconciler" {
			return p
		}
	}
	b.Fatalf("/debug/freshness has no reconciler pass: %s", r.Body)
	return messages.Freshness{}
}

// scaleMem is the process's memory after a full GC with the freed pages
// returned to the OS, so two readings differ by what is live.
type scaleMem struct {
	heapAlloc, heapInuse uint64 // bytes
	rss, rssAnon         uint64 // bytes, from /proc/self/status
	goroutines           int
}

func scaleReadMem(b *testing.B) scaleMem {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := scaleMem{heapAlloc: ms.HeapAlloc, heapInuse: ms.HeapInuse, goroutines: runtime.NumGoroutine()}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Fatalf("read RSS: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			m.rss = kb << 10
		case "RssAnon":
			m.rssAnon = kb << 10
		}
	}
	if m.rss == 0 {
		b.Fatal("read RSS: no VmRSS in /proc/self/status")
	}
	return m
}

// perLeaseKB is (after − before) / n in KB; negative when memory shrank.
func perLeaseKB(after, before uint64, n int) float64 {
	return (float64(after) - float64(before)) / float64(n) / 1024
}

func BenchmarkScale_10kLeases_FakeEngine(b *testing.B) {
	n := scaleLeaseCount(b)
	b.StopTimer()
	engines := &scaleEngine{}
	testHooks.engine = engines.get
	b.Cleanup(func() { testHooks.engine = nil })

	cb := newScaleReceiver(b)
	d := scaleDaemonDir(b, scaleConfig(n)...)
	b.Cleanup(func() { scaleStop(b, d) })
	firstHealthy := scaleStart(b, d)
	client := newBenchClient(d)
	client.http.Transport.(*http.Transport).MaxConnsPerHost = scaleInFlight

	leases := make([]string, n)
	for i := range leases {
		leases[i] = uuid.NewString()
	}
	// No published port: host ports are not what this measures.
	manifest, _ := json.Marshal(map[string]any{"image": testImage()})

	// --- admission and ready ---------------------------------------------------------
	var lastAccepted time.Time
	var acceptedMu sync.Mutex
	stopProfile := scaleProfile(b, "admission")
	began := time.Now()
	err := benchForEachLimited(n, scaleInFlight, func(i int) error {
		body := scaleProvisionBody(leases[i], cb.url, manifest)
		code, resp, err := client.do(http.MethodPost, "/provision", body)
		if err != nil {
			return err
		}
		if code != http.StatusAccepted {
			return fmt.Errorf("provision %s: %d %s", leases[i], code, resp)
		}
		now := time.Now()
		acceptedMu.Lock()
		if now.After(lastAccepted) {
			lastAccepted = now
		}
		acceptedMu.Unlock()
		return nil
	})
	if err != nil {
		b.Fatalf("admission: %v\n%s", err, scaleTail(d.log.String()))
	}
	admitTook := lastAccepted.Sub(began)
	var readyAt time.Time
	for {
		ready, last, _, other, lastErr, bad := cb.state()
		if len(other) > 0 || bad > 0 {
			b.Fatalf("callbacks other than success: %v (last %s), %d bad signatures", other, lastErr, bad)
		}
		if ready == n {
			readyAt = last
			break
		}
		if time.Since(began) > scaleReadyTimeout {
			b.Fatalf("%d of %d leases ready after %s\n%s", ready, n, scaleReadyTimeout, scaleTail(d.log.String()))
		}
		time.Sleep(50 * time.Millisecond)
	}
	readyTook := readyAt.Sub(began)
	stopProfile()

	statuses, listFirst, _, err := scaleList(client, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := scaleAllReady(statuses, leases); err != nil {
		b.Fatal(err)
	}
	if got, err := engines.fake().ListManaged(b.Context()); err != nil || len(got) != n {
		b.Fatalf("fake engine holds %d managed containers (%v), want %d", len(got), err, n)
	}

	// --- restart -----------------------------------------------------------------------
	stopTook := scaleStop(b, d)
	memBefore := scaleReadMem(b) // the fake's n containers and the test's state, no daemon
	stopProfile = scaleProfile(b, "restart")
	healthyTook := scaleStart(b, d)
	stopProfile()
	startupPass := scaleReconcilerPass(b, d)
	phases := benchStartupPhasesFromMetrics(b, client)

	// Every lease is ready again, none relaunched, no callback sent.
	// The first list right after healthy may meet the registry still busy with
	// the startup pass's deliveries (503, retried); the second is the list on a
	// settled daemon.
	statuses, listAfterHealthy, busyAfterHealthy, err := scaleList(client, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := scaleAllReady(statuses, leases); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Second)
	_, listTook, _, err := scaleList(client, 0)
	if err != nil {
		b.Fatal(err)
	}
	_, pagedTook, _, err := scaleList(client, 1000)
	if err != nil {
		b.Fatal(err)
	}

	// --- memory of the restarted daemon holding n Ready leases --------------------------
	memAfter := scaleReadMem(b)

	// --- one reconcile pass at n ------------------------------------------------------
	// A broken event stream makes the watcher reconnect (after its 1 s backoff) and
	// ask the reconciler for a pass, as after a real dockerd hiccup.
	passesBefore := startupPass.Passes
	stopProfile = scaleProfile(b, "pass")
	engines.fake().BreakEvents(errors.New("bench: event stream dropped to trigger a reconcile pass"))
	var pass messages.Freshness
	deadline := time.Now().Add(scalePassWaitTimeout)
	for {
		pass = scaleReconcilerPass(b, d)
		if pass.Passes > passesBefore && !pass.Running {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("no reconcile pass within %s: %+v", scalePassWaitTimeout, pass)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.HasPrefix(pass.Outcome, "ok") {
		b.Fatalf("reconcile pass failed: %+v", pass)
	}
	stopProfile()
	passTook := time.Duration(pass.DurationSeconds * float64(time.Second))

	time.Sleep(500 * time.Millisecond) // a callback the restart or the pass sent would be late
	_, _, total, other, lastErr, bad := cb.state()
	if total != n || len(other) > 0 || bad > 0 {
		b.Fatalf("after the restart and the pass: %d callbacks (want %d), others %v (last %s), %d bad signatures",
			total, n, other, lastErr, bad)
	}
	if got, err := engines.fake().ListManaged(b.Context()); err != nil || len(got) != n {
		b.Fatalf("fake engine holds %d managed containers after the restart (%v), want %d", len(got), err, n)
	}

	// --- report ------------------------------------------------------------------------
	admitRate := float64(n) / admitTook.Seconds()
	readyRate := float64(n) / readyTook.Seconds()
	rssPer := perLeaseKB(memAfter.rss, memBefore.rss, n)
	anonPer := perLeaseKB(memAfter.rssAnon, memBefore.rssAnon, n)
	heapPer := perLeaseKB(memAfter.heapAlloc, memBefore.heapAlloc, n)
	inusePer := perLeaseKB(memAfter.heapInuse, memBefore.heapInuse, n)
	startupPassTook := time.Duration(startupPass.DurationSeconds * float64(time.Second))

	type row struct {
		what, value, target string
		failed              bool
	}
	verdict := func(ok bool) string {
		if ok {
			return "PASS"
		}
		return "FAIL"
	}
	rows := []row{
		{what: "first start → healthy (empty store)", value: fmt.Sprintf("%.1f ms", benchMs(firstHealthy))},
		{what: fmt.Sprintf("admitted (%d POST /provision, %d in flight)", n, scaleInFlight),
			value: fmt.Sprintf("%.0f leases/s (%.2f s)", admitRate, admitTook.Seconds())},
		{what: "to ready (first POST → last success callback)", value: fmt.Sprintf("%.0f leases/s (%.2f s)", readyRate, readyTook.Seconds())},
		{what: "SIGTERM → clean exit", value: fmt.Sprintf("%.1f ms", benchMs(stopTook))},
		{what: "restart → /health healthy", value: fmt.Sprintf("%.1f ms", benchMs(healthyTook)),
			target: verdict(healthyTook <= scaleTargetHealthy) + " ≤ 1000 ms", failed: healthyTook > scaleTargetHealthy},
	}
	for _, p := range benchStartupPhaseNames {
		rows = append(rows, row{what: "  phase " + p, value: fmt.Sprintf("%.1f ms", phases[p]*1000)})
	}
	rows = append(rows,
		row{what: "startup reconcile pass (after the restart)", value: fmt.Sprintf("%.1f ms", benchMs(startupPassTook))},
		row{what: "reconcile pass (watcher reconnect)", value: fmt.Sprintf("%.1f ms (%s)", benchMs(passTook), pass.Detail),
			target: verdict(passTook <= scaleTargetPass) + " ≤ 2000 ms", failed: passTook > scaleTargetPass},
		row{what: fmt.Sprintf("GET /provisions, all %d in one response", n), value: fmt.Sprintf("%.1f ms (before restart %.1f ms)", benchMs(listTook), benchMs(listFirst))},
		row{what: "GET /provisions, paged by 1000", value: fmt.Sprintf("%.1f ms", benchMs(pagedTook))},
		row{what: "GET /provisions, first right after healthy", value: fmt.Sprintf("%.1f ms (%d × 503 registry busy, retried)", benchMs(listAfterHealthy), busyAfterHealthy)},
		row{what: "RSS per Ready lease", value: fmt.Sprintf("%.1f KB (anon %.1f KB; %d → %d MB)", rssPer, anonPer, memBefore.rss>>20, memAfter.rss>>20),
			target: verdict(rssPer <= scaleTargetRSSPerKB) + " ≤ 20 KB", failed: rssPer > scaleTargetRSSPerKB},
		row{what: "heap per Ready lease (alloc / in use)", value: fmt.Sprintf("%.1f KB / %.1f KB", heapPer, inusePer)},
		row{what: "goroutines (no daemon → daemon)", value: fmt.Sprintf("%d → %d", memBefore.goroutines, memAfter.goroutines)},
	)
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d leases on the fake engine (startup_verify_duration 100ms, GOMAXPROCS %d)\n", n, runtime.GOMAXPROCS(0))
	for _, r := range rows {
		fmt.Fprintf(&sb, "  %-52s %-52s %s\n", r.what, r.value, r.target)
	}
	benchPrint(b, sb.String())

	b.ReportMetric(0, "ns/op") // one op is minutes; the metrics below are the result
	b.ReportMetric(admitRate, "admitted_leases/s")
	b.ReportMetric(readyRate, "ready_leases/s")
	b.ReportMetric(benchMs(healthyTook), "restart_healthy_ms")
	b.ReportMetric(benchMs(passTook), "reconcile_pass_ms")
	b.ReportMetric(benchMs(startupPassTook), "startup_pass_ms")
	b.ReportMetric(benchMs(listTook), "list_all_ms")
	b.ReportMetric(float64(busyAfterHealthy), "busy_503_after_healthy")
	b.ReportMetric(rssPer, "rss_KB/lease")
	b.ReportMetric(heapPer, "heap_KB/lease")

	for _, r := range rows {
		if r.failed {
			b.Errorf("%s: %s, target %s", r.what, r.value, strings.TrimPrefix(r.target, "FAIL "))
		}
	}
}
