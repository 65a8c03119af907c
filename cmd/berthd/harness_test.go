package main

// The integration harness: a real berthd (in-process, or as a child process for
// kill -9 and exit-code tests) against the real Docker engine and local registry,
// a callback receiver that verifies every signature, and a signed API client.

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/supervisors"
)

// testSecret is the callback_secret of every test daemon.
const testSecret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// testDebugToken is every test daemon's debug.token: the debug listener refuses
// requests without it, and chaos needs one.
const testDebugToken = "berth-test-debug-token-5d2e8a"

// Most tests here wait on Docker, so an independent one calls t.Parallel()
// first: each has its own data dir, installation ID, ports and callback
// receiver, and its leftover check looks only at its own installations. A test
// stays sequential (a "Sequential:" comment says why) when it sets testHooks
// (every in-process daemon reads it at start), stops dockerd, counts Docker
// requests, or asserts a latency that parallel load would stretch. go test runs
// every sequential top-level test before the parallel ones, so they never overlap.

// TestMain lets a test re-execute this binary as berthd itself.
func TestMain(m *testing.M) {
	if os.Getenv("BERTH_TEST_AS_DAEMON") == "1" {
		// A child berthd may be given a fast guardian ("base,cap,maxFailures") so
		// give-up is reachable in a test's time.
		if g := os.Getenv("BERTH_TEST_GUARDIAN"); g != "" {
			var base, limit time.Duration
			var max int
			parts := strings.Split(g, ",")
			base, _ = time.ParseDuration(parts[0])
			limit, _ = time.ParseDuration(parts[1])
			_, _ = fmt.Sscan(parts[2], &max)
			testHooks.guardian = supervisors.Backoff{Base: base, Cap: limit, MaxFailures: max, Window: time.Minute}
		}
		// A child berthd may create its containers under another runtime
		// contract (leases from before a bump, or after one).
		testHooks.contract, _ = strconv.Atoi(os.Getenv("BERTH_TEST_CONTRACT"))
		// ... or a facade that gives up on the registry sooner than 10 s.
		testHooks.askTimeout, _ = time.ParseDuration(os.Getenv("BERTH_TEST_ASK_TIMEOUT"))
		main()
		return
	}
	os.Exit(m.Run())
}

func testImage() string {
	if img := os.Getenv("BERTH_TEST_IMAGE"); img != "" {
		return img
	}
	return "127.0.0.1:5000/berth/workload:test"
}

// dockerClient is a raw Docker client for assertions, separate from berth's.
func dockerClient(t testing.TB) *client.Client {
	t.Helper()
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		skipOrFail(t, "no Docker engine at /var/run/docker.sock (make test starts one)")
	}
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// dockerRequired is set under make test (BERTH_REQUIRE_DOCKER=1) and in CI
// (CI=true): a Docker-gated test that cannot run there fails instead of skipping,
// so a green run means every one of them ran.
func dockerRequired() bool {
	return os.Getenv("BERTH_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true"
}

// skipOrFail skips a test that cannot run here, or fails it where it must run.
func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if dockerRequired() {
		t.Fatalf("cannot run: %s (BERTH_REQUIRE_DOCKER/CI demand it)", why)
	}
	t.Skip("SKIPPING: " + why)
}

func freePort(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	// The kernel may hand a just-closed port out again at once (seen in CI: one
	// daemon's listen and debug addresses came back equal), so no address is
	// given twice in this process.
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if !handedOut.addrs[addr] {
			handedOut.addrs[addr] = true
			return addr
		}
	}
	t.Fatal("no free port not handed out before in 100 tries")
	return ""
}

// handedOut is every address freePort returned in this test process.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

// testConfig is a config file body for a test daemon; extra lines are appended.
func testConfig(dataDir, api, dbg string, extra ...string) string {
	lines := []string{
		"data_dir: " + dataDir,
		"listen_addr: " + api,
		"debug_listen_addr: " + dbg,
		"host_address: 127.0.0.1",
		"host_bind_ip: 127.0.0.1",
		"callback_secret: " + testSecret,
		"startup_verify_duration: 1s",
		"reconcile_interval: 3s",
		// The warm network pool on, small: a burst of more leases mixes pooled
		// and own networks (netpool_test.go covers on and off explicitly).
		"network_pool_size: 4",
		"provision_timeout: 3m",
		"container_stop_timeout: 5s",
		"log_level: warn",
		"allowed_registries: [\"127.0.0.1:5000\", \"docker.io\"]",
		// Managed volumes beside the data dir, on the dir driver (no quota);
		// the tenant-data tests override both with the btrfs test mount.
		"volume_data_path: " + filepath.Join(filepath.Dir(dataDir), "volumes"),
		"volume_filesystem: dir",
	}
	if !slices.Contains(extra, "production_mode: true") { // production refuses debug.chaos
		lines = append(lines, "debug:", "  chaos: true", "  token: "+testDebugToken)
	}
	// An extra line for a key already set replaces it (YAML refuses duplicates).
	for _, e := range extra {
		key, _, _ := strings.Cut(e, ":")
		for i, l := range lines {
			if strings.HasPrefix(l, key+":") {
				lines = append(lines[:i], lines[i+1:]...)
				break
			}
		}
	}
	return strings.Join(append(lines, extra...), "\n") + "\n"
}

// daemonProc is a berthd under test.
type daemonProc struct {
	t       testing.TB
	dir     string
	cfgPath string
	api     string
	debug   string
	secret  []byte
	log     *syncBuffer

	// in-process
	sigs chan os.Signal
	done chan int

	// child process
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned (the only Wait)

	// installations is every installation ID this daemon ran as (a test may
	// overwrite the marker): the cleanup sweeps them all.
	installsMu    sync.Mutex
	installations map[string]bool
}

// rememberInstallation records the installation the data dir holds now.
func (d *daemonProc) rememberInstallation() {
	id := readInstallationID(filepath.Join(d.dir, "data"))
	if id == "" {
		return
	}
	d.installsMu.Lock()
	defer d.installsMu.Unlock()
	if d.installations == nil {
		d.installations = map[string]bool{}
	}
	d.installations[id] = true
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// newDaemonDir prepares a data dir and config; extra config lines are appended.
func newDaemonDir(t testing.TB, extra ...string) *daemonProc {
	t.Helper()
	dir := t.TempDir()
	d := &daemonProc{t: t, dir: dir, api: freePort(t), debug: freePort(t), secret: []byte(testSecret), log: &syncBuffer{}}
	d.cfgPath = filepath.Join(dir, "berthd.yaml")
	if err := os.WriteFile(d.cfgPath, []byte(testConfig(filepath.Join(dir, "data"), d.api, d.debug, extra...)), 0o600); err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: after the daemon stopped, whatever this
	// installation still has fails the test and is removed (leftovers_test.go).
	t.Cleanup(d.checkLeftovers)
	return d
}

// readInstallationID reads the installation ID of a data dir's marker ("" when none).
func readInstallationID(dataDir string) string {
	raw, err := os.ReadFile(filepath.Join(dataDir, "storage-identity"))
	if err != nil {
		return ""
	}
	var marker struct {
		InstallationID string `json:"installation_id"`
	}
	if json.Unmarshal(raw, &marker) != nil {
		return ""
	}
	return marker.InstallationID
}

// removeInstallation force-removes every container, network and volume labelled
// with the installation.
func removeInstallation(installation string) {
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return
	}
	defer dc.Close()
	// A benchmark's installation can hold 1,000 containers: eight removals at
	// a time, the whole sweep bounded by the count, not by one minute.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", "fred.installation_id="+installation))
	if cs, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
		_ = benchForEachLimited(len(cs), 8, func(i int) error {
			return dc.ContainerRemove(ctx, cs[i].ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		})
	}
	// dockerd finishes a network create whose client went away (a pool refill
	// cut by the daemon's stop or kill): sweep until a look finds none.
	for round := 0; round < 4; round++ {
		ns, err := dc.NetworkList(ctx, network.ListOptions{Filters: f})
		if err != nil || (len(ns) == 0 && round > 0) {
			break
		}
		for _, n := range ns {
			_ = dc.NetworkRemove(ctx, n.ID)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if vs, err := dc.VolumeList(ctx, volume.ListOptions{Filters: f}); err == nil {
		for _, v := range vs.Volumes {
			_ = dc.VolumeRemove(ctx, v.Name, true)
		}
	}
}

// startInProcess runs berthd's run() on a goroutine and waits until healthy.
func (d *daemonProc) startInProcess() *daemonProc {
	d.t.Helper()
	d.sigs, d.done = make(chan os.Signal, 1), make(chan int, 1)
	go func() { d.done <- run([]string{"-config", d.cfgPath}, nil, d.log, d.log, d.sigs) }()
	d.waitHealthy(60 * time.Second)
	d.t.Cleanup(func() { d.stop() })
	return d
}

// stop sends SIGTERM (in-process) and returns the exit code.
func (d *daemonProc) stop() int {
	if d.done == nil {
		return -1
	}
	select {
	case d.sigs <- os.Interrupt:
	default:
	}
	select {
	case code := <-d.done:
		d.done = nil
		return code
	case <-time.After(90 * time.Second):
		d.t.Fatalf("berthd did not stop within 90s\n%s", d.log.String())
		return -1
	}
}

// startChild runs berthd as a separate process (this test binary re-executed).
func (d *daemonProc) startChild(wait bool, env ...string) *daemonProc {
	d.t.Helper()
	cmd := exec.Command(os.Args[0], "-config", d.cfgPath)
	cmd.Env = append(append(os.Environ(), "BERTH_TEST_AS_DAEMON=1", "GORACE=atexit_sleep_ms=0"), env...)
	cmd.Stdout, cmd.Stderr = d.log, d.log
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.cmd, d.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(d.exited)
	d.t.Cleanup(func() {
		if d.cmd == cmd && !d.hasExited() {
			// A clean stop, as an operator's: it trims the pool (the leftover check).
			_ = cmd.Process.Signal(os.Interrupt)
			d.waitExit(90 * time.Second)
		}
	})
	if wait {
		d.waitHealthy(60 * time.Second)
	}
	return d
}

// kill9 kills the child process with SIGKILL.
func (d *daemonProc) kill9() {
	d.t.Helper()
	_ = d.cmd.Process.Kill()
	<-d.exited
}

// hasExited reports whether the child process has exited.
func (d *daemonProc) hasExited() bool {
	select {
	case <-d.exited:
		return true
	default:
		return false
	}
}

// waitExit waits for the child process and returns its exit code.
func (d *daemonProc) waitExit(timeout time.Duration) int {
	d.t.Helper()
	select {
	case <-d.exited:
		return d.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		_ = d.cmd.Process.Kill()
		<-d.exited
		d.t.Fatalf("berthd did not exit within %s\n%s", timeout, d.log.String())
		return -1
	}
}

func (d *daemonProc) waitHealthy(timeout time.Duration) {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get("http://" + d.api + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(body), `"healthy"`) {
				d.rememberInstallation()
				return
			}
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("berthd not healthy within %s (last: %v)\n%s", timeout, err, d.log.String())
		}
		if d.done != nil {
			select {
			case code := <-d.done:
				d.t.Fatalf("berthd exited %d before becoming healthy\n%s", code, d.log.String())
			default:
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// response is one API answer.
type response struct {
	Status int
	Body   []byte
	Header http.Header
}

func (r response) json(t testing.TB, into any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, into); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
}

// call sends a signed request to the API.
func (d *daemonProc) call(method, uri string, body []byte) response {
	d.t.Helper()
	req, err := http.NewRequest(method, "http://"+d.api+uri, bytes.NewReader(body))
	if err != nil {
		d.t.Fatal(err)
	}
	if err := callback.SignRequest(d.secret, req, body, time.Now()); err != nil {
		d.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, uri, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Body: data, Header: resp.Header}
}

func (d *daemonProc) get(uri string) response { return d.call(http.MethodGet, uri, nil) }

func (d *daemonProc) postJSON(uri string, v any) response {
	d.t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		d.t.Fatal(err)
	}
	return d.call(http.MethodPost, uri, body)
}

// provision submits a lease with the given manifest (any JSON-able value) and items.
func (d *daemonProc) provision(lease, callbackURL string, manifest any, items ...messages.LeaseItem) response {
	d.t.Helper()
	raw, err := json.Marshal(manifest)
	if err != nil {
		d.t.Fatal(err)
	}
	if len(items) == 0 {
		items = []messages.LeaseItem{{SKU: "docker-small", Quantity: 1}}
	}
	return d.postJSON("/provision", messages.ProvisionRequest{LeaseUUID: lease, Tenant: "tenant-test",
		ProviderUUID: "provider-test", Items: items, CallbackURL: callbackURL,
		Payload: base64.StdEncoding.EncodeToString(raw)})
}

func (d *daemonProc) deprovision(lease string) response {
	return d.postJSON("/deprovision", messages.DeprovisionRequest{LeaseUUID: lease})
}

// deprovisionUntilGone retries a 503 lifecycle_pending until the 200.
func (d *daemonProc) deprovisionUntilGone(lease string) {
	d.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := d.deprovision(lease)
		if r.Status == 200 {
			d.waitLeaseObjectsGone(lease, deadline)
			return
		}
		if r.Status != 503 || time.Now().After(deadline) {
			d.t.Fatalf("deprovision %s: %d %s", lease, r.Status, r.Body)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitLeaseObjectsGone waits (until deadline) for the close's teardown: a 200
// means the close is durable, and the containers and network follow, then the
// registry forgets the lease (GET /provisions?lease_uuid= lists it no more),
// which is when the network pool hears it closed. A daemon stopped before that
// leaves them to its next start: its pool keeps a network still bound to the
// lease, and the leftover check would report the whole pool.
func (d *daemonProc) waitLeaseObjectsGone(lease string, deadline time.Time) {
	dc := dockerClient(d.t)
	defer dc.Close()
	for time.Now().Before(deadline) && (len(leaseContainers(d.t, dc, lease))+len(leaseNetworks(d.t, dc, lease)) > 0 || d.listed(lease)) {
		time.Sleep(200 * time.Millisecond)
	}
}

// listed reports whether the registry still lists lease as live (true when the
// answer is not a clean list: still waiting).
func (d *daemonProc) listed(lease string) bool {
	r := d.get("/provisions?lease_uuid=" + lease)
	var page struct {
		Provisions []messages.ProvisionInfo `json:"provisions"`
	}
	return r.Status != 200 || json.Unmarshal(r.Body, &page) != nil || len(page.Provisions) > 0
}

func (d *daemonProc) provisionInfo(lease string) messages.ProvisionInfo {
	d.t.Helper()
	r := d.get("/provisions/" + lease)
	if r.Status != 200 {
		d.t.Fatalf("GET /provisions/%s: %d %s", lease, r.Status, r.Body)
	}
	var info messages.ProvisionInfo
	r.json(d.t, &info)
	return info
}

func (d *daemonProc) stats() messages.Stats {
	d.t.Helper()
	r := d.get("/stats")
	if r.Status != 200 {
		d.t.Fatalf("GET /stats: %d %s", r.Status, r.Body)
	}
	var s messages.Stats
	r.json(d.t, &s)
	return s
}

// debugGet reads the debug listener.
func (d *daemonProc) debugGet(uri string) response {
	d.t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+d.debug+uri, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testDebugToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Body: data}
}

func (d *daemonProc) crash(path string) {
	d.t.Helper()
	resp, err := debugPost("http://" + d.debug + "/debug/chaos/crash?actor=" + path)
	if err != nil {
		d.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		d.t.Fatalf("crash %s: %d", path, resp.StatusCode)
	}
}

// receivedCallback is one callback as the receiver saw it.
type receivedCallback struct {
	Path       string
	DeliveryID string
	Body       messages.Callback
	At         time.Time
}

// callbackReceiver is a Fred stand-in: it verifies every signature (refusing bad
// ones with 401, which the test then sees as missing callbacks) and records them.
type callbackReceiver struct {
	t       testing.TB
	srv     *http.Server
	url     string
	mu      sync.Mutex
	got     []receivedCallback
	failN   map[string]int               // lease → answer 500 this many more times
	refuse  func(messages.Callback) bool // answer 500 to every callback it matches
	bad     int                          // requests with a bad signature
	refused []messages.Callback
	notify  chan struct{}
}

func newCallbackReceiver(t testing.TB) *callbackReceiver {
	t.Helper()
	return newCallbackReceiverAt(t, "127.0.0.1:0")
}

func newCallbackReceiverAt(t testing.TB, addr string) *callbackReceiver {
	t.Helper()
	r := &callbackReceiver{t: t, failN: map[string]int{}, notify: make(chan struct{}, 1)}
	v := &hmac.Verifier{Secret: []byte(testSecret), Observe: func(o string) {
		if o != hmac.OutcomeOK {
			r.mu.Lock()
			r.bad++
			r.mu.Unlock()
		}
	}}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.url = "http://" + ln.Addr().String()
	r.srv = &http.Server{Handler: v.Middleware(http.HandlerFunc(r.handle))}
	go func() { _ = r.srv.Serve(ln) }()
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

func (r *callbackReceiver) handle(w http.ResponseWriter, req *http.Request) {
	var cb messages.Callback
	if err := json.NewDecoder(req.Body).Decode(&cb); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	if r.refuse != nil && r.refuse(cb) {
		r.refused = append(r.refused, cb)
		r.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if n := r.failN[cb.LeaseUUID]; n > 0 {
		r.failN[cb.LeaseUUID] = n - 1
		r.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	r.got = append(r.got, receivedCallback{Path: req.URL.RequestURI(), DeliveryID: req.Header.Get("X-Berth-Delivery-Id"),
		Body: cb, At: time.Now()})
	r.mu.Unlock()
	select {
	case r.notify <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusOK)
}

// callbackURL is a provision callback URL carrying a fresh operation_id.
func (r *callbackReceiver) callbackURL() string {
	return r.url + "/callbacks/provision?operation_id=" + uuid.NewString()
}

func (r *callbackReceiver) failNext(lease string, n int) {
	r.mu.Lock()
	r.failN[lease] = n
	r.mu.Unlock()
}

// forLease returns the distinct callbacks received for lease, in arrival order.
// Delivery is at least once: a redelivery (same delivery ID, e.g. when the 2xx was
// lost to a shutdown) is the same callback and is counted once.
func (r *callbackReceiver) forLease(lease string) []receivedCallback {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedCallback
	seen := map[string]bool{}
	for _, c := range r.got {
		if c.Body.LeaseUUID != lease || seen[c.DeliveryID] {
			continue
		}
		seen[c.DeliveryID] = true
		out = append(out, c)
	}
	return out
}

// waitFor waits until lease has n callbacks and returns them.
func (r *callbackReceiver) waitFor(lease string, n int, timeout time.Duration) []receivedCallback {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := r.forLease(lease)
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("lease %s: %d callbacks after %s, want %d: %+v", lease, len(got), timeout, n, got)
		}
		select {
		case <-r.notify:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (r *callbackReceiver) badSignatures() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

// flatManifest is a single-service manifest of the test workload.
func flatManifest(extra map[string]any) map[string]any {
	m := map[string]any{"image": testImage(), "ports": map[string]any{"8080/tcp": map[string]any{}}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// leaseContainers lists every container (any state) labelled with lease.
func leaseContainers(t testing.TB, dc *client.Client, lease string) []container.Summary {
	t.Helper()
	cs, err := dc.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "fred.lease_uuid="+lease))})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return cs
}

// leaseNetworks lists networks named for lease.
func leaseNetworks(t testing.TB, dc *client.Client, lease string) []network.Summary {
	t.Helper()
	ns, err := dc.NetworkList(context.Background(), network.ListOptions{
		Filters: filters.NewArgs(filters.Arg("label", "fred.lease_uuid="+lease))})
	if err != nil {
		t.Fatalf("list networks: %v", err)
	}
	return ns
}

// assertGone waits until no container, network or volume of lease remains.
func assertGone(t testing.TB, dc *client.Client, lease string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cs, ns := leaseContainers(t, dc, lease), leaseNetworks(t, dc, lease)
		vs, err := dc.VolumeList(context.Background(), volume.ListOptions{
			Filters: filters.NewArgs(filters.Arg("label", "fred.lease_uuid="+lease))})
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) == 0 && len(ns) == 0 && len(vs.Volumes) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lease %s left %d containers, %d networks and %d volumes behind", lease, len(cs), len(ns), len(vs.Volumes))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// closeAll deprovisions every lease (retrying lifecycle_pending), asserts nothing
// of them is left in Docker, then that the pool holds nothing: how every
// integration test ends.
func (d *daemonProc) closeAll(dc *client.Client, leases ...string) {
	d.t.Helper()
	for _, l := range leases {
		d.deprovisionUntilGone(l)
		assertGone(d.t, dc, l)
	}
	assertPoolEmpty(d.t, d)
}

// assertPoolEmpty checks the pool holds nothing once every lease is closed but
// the disk of retained data.
func assertPoolEmpty(t testing.TB, d *daemonProc) {
	t.Helper()
	s := d.stats()
	if s.AllocatedCPUCores != 0 || s.AllocatedMemoryMB != 0 || s.AllocatedDiskMB != s.RetainedDiskMB || s.ActiveContainers != 0 {
		t.Fatalf("pool not empty after every lease closed: %+v", s)
	}
}

// waitStatus polls GET /provisions/{lease} until its status is want.
func (d *daemonProc) waitStatus(lease, want string, timeout time.Duration) messages.ProvisionInfo {
	d.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		info := d.provisionInfo(lease)
		if info.Status == want {
			return info
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("lease %s status %q after %s, want %q (%+v)", lease, info.Status, timeout, want, info)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// httpGetHostPort fetches a URL on a published port.
func httpGetHostPort(hostPort, path string) (int, string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://%s%s", hostPort, path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

// debugPost is postNoBody to the debug listener, with the debug token.
func debugPost(url string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+testDebugToken)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

func postNoBody(url string) (*http.Response, error) {
	resp, err := http.Post(url, "", nil)
	if err == nil {
		resp.Body.Close()
	}
	return resp, err
}

func signRequest(req *http.Request, body []byte) error {
	return callback.SignRequest([]byte(testSecret), req, body, time.Now())
}

func encodeB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
