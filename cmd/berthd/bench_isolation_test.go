package main

// BenchmarkIsolation_AtScale_vsRawShared (issue 20): berthd with its per-lease
// isolation at 200, 500 and 1,000 concurrent leases against raw Docker running
// the same hardened containers on one shared network (fred's topology), on the
// same engine in the same run. Per size, raw first, then berthd:
//
//   - wall: the batch from the burst to its last container running (raw: the
//     slowest create+start+inspect; berthd: first POST → last success callback,
//     less the verify wait); p50 per lease on the same terms; POST → 202 p99;
//   - machine CPU per lease (every process: /proc/stat over the burst) and
//     dockerd's own; berthd's CPU and RSS per lease;
//   - with every lease Ready: berthd restarted (SIGTERM, a new process; three
//     times, BERTH_BENCH_RESTARTS) → the median time to healthy, its first
//     reconcile pass, RSS per lease after the restart, each startup's phases;
//   - a mass close of every lease, timed until Docker holds nothing of the
//     installation and no pool network is bound.
//
// The machine's capacity is printed first, so figures scale to other hosts.
// BERTH_BENCH_RAW=skip measures berthd alone (its restart, reconcile pass,
// memory and mass close at a size whose raw round would take too long).
// BERTH_BENCH_SINGLE_NETWORK (default_bridge | own) overrides
// single_container_network, so both placements are measured by one binary.
// BERTH_BENCH_SCALE picks the sizes ("200,500,1000" by default; "200mix" is 200
// leases of which every fourth is a 2-service stack — raw runs the same
// containers on its one network). One iteration is many minutes; b.N is ignored:
//
//	make bench BENCH=BenchmarkIsolation BENCHTIME=1x
//	BERTH_BENCH_SCALE=200 go test -run '^$' -bench BenchmarkIsolation -benchtime 1x -timeout 3h ./cmd/berthd/

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// scaleSize is one row of the benchmark: n leases, every fourth a stack when mix.
type scaleSize struct {
	n   int
	mix bool
}

func (s scaleSize) String() string {
	if s.mix {
		return fmt.Sprintf("%d (every 4th a 2-service stack)", s.n)
	}
	return strconv.Itoa(s.n)
}

// stack reports whether lease i of the size is a 2-service stack.
func (s scaleSize) stack(i int) bool { return s.mix && i%4 == 3 }

// containers is how many containers the size runs.
func (s scaleSize) containers() int {
	c := 0
	for i := 0; i < s.n; i++ {
		c += 1 + btoi(s.stack(i))
	}
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func scaleSizes(b *testing.B) []scaleSize {
	spec := os.Getenv("BERTH_BENCH_SCALE")
	if spec == "" {
		spec = "200,500,1000"
	}
	var out []scaleSize
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		num, mix := strings.CutSuffix(f, "mix")
		n, err := strconv.Atoi(num)
		if err != nil || n <= 0 {
			b.Fatalf("BERTH_BENCH_SCALE: %q is not a lease count (200, 200mix)", f)
		}
		out = append(out, scaleSize{n: n, mix: mix})
	}
	return out
}

// isolationConfig leaves room for 1,000 docker-micro leases and stacks in the
// capacity ledger; the machine's real limits are what is measured.
var isolationConfig = []string{"total_cpu_cores: 4096", "total_memory_mb: 4194304", "log_level: warn",
	// The last of 1,000 concurrent provisions on two cores waits behind 999
	// starts (raw Docker has no deadline at all): the harness's 3m would fail it.
	"provision_timeout: 30m"}

func BenchmarkIsolation_AtScale_vsRawShared(b *testing.B) {
	dc := dockerClient(b)
	if _, err := dc.ImageInspect(context.Background(), testImage()); err != nil {
		skipOrFail(b, fmt.Sprintf("test image %s not present (make workload-image): %v", testImage(), err))
	}
	sizes := scaleSizes(b)
	benchPrint(b, machineCapacity(dc))
	pb := &benchProvisionBench{dc: dc, runID: uuid.NewString()}
	b.Cleanup(func() { benchRemoveRaw(dc, pb.runID) })
	cb := newCallbackReceiver(b)
	cfg := overConfig(benchConfig(), isolationConfig...)
	if v := os.Getenv("BERTH_BENCH_SINGLE_NETWORK"); v != "" {
		cfg = append(cfg, "single_container_network: "+v)
		benchPrint(b, "single_container_network: "+v+"\n")
	}
	d := newDaemonDir(b, cfg...).startChild(true)
	client := newBenchClient(d)
	install := benchInstallationID(b, d.dir+"/data")

	// Warm-up, untimed: compose's first calls, the connections, dockerd.
	if _, err := pb.rawRound(1, rawSharedNetwork); err != nil {
		b.Fatal(err)
	}
	s := &scaleRun{b: b, d: d, client: client, cb: cb, pb: pb, install: install}
	s.berthd(scaleSize{n: 1}, false)

	for _, size := range sizes {
		// Raw runs with nothing of berthd's on the engine (its pool networks
		// would slow raw's firewall updates, flattering berthd's ratio).
		var raw scaleBurst
		if os.Getenv("BERTH_BENCH_RAW") != "skip" {
			s.stop()
			raw = s.raw(size)
			s.start()
		}
		got := s.berthd(size, true)
		s.report(size, raw, got)
	}
	s.stop()
	if n := cb.badSignatures(); n != 0 {
		b.Fatalf("%d callbacks with bad signatures", n)
	}
	b.ReportMetric(0, "ns/op")
}

// scaleRun is what every size of the benchmark shares.
type scaleRun struct {
	b       *testing.B
	d       *daemonProc
	client  *benchClient
	cb      *callbackReceiver
	pb      *benchProvisionBench
	install string
}

// scaleBurst is one batch's figures (raw or berthd).
type scaleBurst struct {
	wall                      time.Duration   // burst → last container running (berthd: less verify)
	perLease                  []time.Duration // each lease, on the same terms
	accept                    []time.Duration // berthd: POST → 202
	machineCPU                time.Duration   // every process, over the burst
	dockerdCPU                time.Duration
	berthdCPU                 time.Duration
	rssKBPerLease             float64 // berthd: (RSS with every lease Ready − before) / n
	healthy                   time.Duration
	pass                      time.Duration
	rssKBPerLeaseAfterRestart float64
	heapKBPerLease            float64       // heap in use after a forced collection, less the same before the burst, per lease
	closeAll                  time.Duration // first deprovision → nothing of the installation left
}

// stop stops berthd (SIGTERM: with no lease bound its pool goes) and removes
// any pool network its stop budget left, as an operator's prune would.
func (s *scaleRun) stop() {
	b, d := s.b, s.d
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	if code := d.waitExit(5 * time.Minute); code != 0 {
		b.Fatalf("berthd exited %d on SIGTERM", code)
	}
	ctx := context.Background()
	f := filters.NewArgs(filters.Arg("label", "fred.installation_id="+s.install), filters.Arg("label", "fred.network_scope=pool"))
	ns, err := s.pb.dc.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range ns {
		if err := s.pb.dc.NetworkRemove(ctx, n.ID); err != nil {
			b.Fatalf("remove pool network %s left by the stop: %v", n.Name, err)
		}
	}
}

// start starts berthd and waits until its pool is full, printing what
// filling it cost (off any provision's path, but machine time all the same).
func (s *scaleRun) start() {
	m0, began := machineCPU(), time.Now()
	s.d.startChild(true)
	s.d.waitNetworkPoolSettled(s.b, benchConfiguredPoolSize())
	if size := benchConfiguredPoolSize(); size > 0 {
		benchPrint(s.b, fmt.Sprintf("berthd started, warm pool of %d networks full in %.1f s, machine CPU %.0f ms per network\n",
			size, time.Since(began).Seconds(), benchMs(machineCPU()-m0)/float64(size)))
	}
}

// raw launches the size's containers at once on one shared network wide
// enough for all of them (Docker's pool hands out /24s), then removes them.
func (s *scaleRun) raw(size scaleSize) scaleBurst {
	b, pb := s.b, s.pb
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	shared := "berth-bench-shared-" + uuid.NewString()
	if _, err := pb.dc.NetworkCreate(ctx, shared, network.CreateOptions{Driver: "bridge",
		Labels: map[string]string{"berth.bench.run": pb.runID},
		IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: "10.232.0.0/20"}}}}); err != nil {
		b.Fatalf("shared network create: %v", err)
	}
	n := size.containers()
	times := make([]benchRawTiming, n)
	errs := make([]error, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range times {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			times[i], errs[i] = pb.rawContainer(ctx, rawSharedNetwork, shared)
		}()
	}
	var out scaleBurst
	m0, d0 := machineCPU(), benchDockerdCPU()
	close(gate)
	wg.Wait()
	out.machineCPU, out.dockerdCPU = machineCPU()-m0, benchDockerdCPU()-d0
	for i, r := range times {
		if errs[i] != nil {
			continue
		}
		out.perLease = append(out.perLease, r.total)
		out.wall = max(out.wall, r.total)
	}
	cleared := time.Now()
	benchRemoveRaw(pb.dc, pb.runID)
	benchPrint(b, fmt.Sprintf("raw %s: removed in %.1f s\n", size, time.Since(cleared).Seconds()))
	for _, err := range errs {
		if err != nil {
			b.Fatalf("raw launch at %s: %v", size, err)
		}
	}
	return out
}

// berthd provisions the size's leases at once, waits for every success
// callback, then (full) restarts berthd with all of them Ready and closes them
// all; the warm-up (full false) only provisions and closes.
func (s *scaleRun) berthd(size scaleSize, full bool) scaleBurst {
	b, d := s.b, s.d
	leases := make([]string, size.n)
	for i := range leases {
		leases[i] = uuid.NewString()
	}
	d.waitNetworkPoolSettled(b, size.n)
	heap0 := s.heapAfterGC()
	rss0, cpu0 := procRSS(b, d.cmd.Process.Pid), procCPU(d.cmd.Process.Pid)
	var out scaleBurst
	sent := make([]time.Time, size.n)
	out.accept = make([]time.Duration, size.n)
	errs := make([]error, size.n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i, lease := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			var accepted time.Time
			body := isolationProvisionBody(lease, s.cb.callbackURL(), size.stack(i))
			sent[i] = time.Now()
			code, resp, err := s.client.do(http.MethodPost, "/provision", body)
			accepted = time.Now()
			if err == nil && code != http.StatusAccepted {
				err = fmt.Errorf("provision %s: %d %s", lease, code, resp)
			}
			out.accept[i], errs[i] = accepted.Sub(sent[i]), err
		}()
	}
	m0, d0 := machineCPU(), benchDockerdCPU()
	close(gate)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	done := waitCallbacks(b, s.d, s.cb, leases, messages.CallbackSuccess, 30*time.Minute)
	out.machineCPU, out.dockerdCPU = machineCPU()-m0, benchDockerdCPU()-d0
	out.berthdCPU = procCPU(d.cmd.Process.Pid) - cpu0
	first := slices.MinFunc(sent, func(a, c time.Time) int { return a.Compare(c) })
	for i, lease := range leases {
		at := done[lease]
		out.perLease = append(out.perLease, at.Sub(sent[i])-benchVerify)
		out.wall = max(out.wall, at.Sub(first)-benchVerify)
	}
	if full {
		time.Sleep(2 * time.Second) // the outbox's deletes and the pool's refill settle
		out.rssKBPerLease = float64(procRSS(b, d.cmd.Process.Pid)-rss0) / 1024 / float64(size.n)
		s.restart(size, leases, &out)
		out.heapKBPerLease = (s.heapAfterGC() - heap0) / 1024 / float64(size.n)
	}
	out.closeAll = s.closeAll(leases)
	return out
}

// restart restarts berthd with every lease Ready (BERTH_BENCH_RESTARTS times,
// 3 by default) and keeps the median restart's time to healthy and first
// reconcile pass, and its RSS per lease once recovered; each restart's startup
// phases are printed.
func (s *scaleRun) restart(size scaleSize, leases []string, out *scaleBurst) {
	n := 3
	if v, err := strconv.Atoi(os.Getenv("BERTH_BENCH_RESTARTS")); err == nil && v > 0 {
		n = v
	}
	var runs []benchRestart
	var sb strings.Builder
	fmt.Fprintf(&sb, "(the machine was %.0f%% busy over the 5 s before the restarts)\n", 100*waitMachineQuiet(0.25, 3*time.Minute))
	for r := 1; r <= n; r++ {
		got := benchRestartTimed(s.b, s.d, s.client, leases, nil)
		got.describe(&sb, r)
		runs = append(runs, got)
	}
	benchPrint(s.b, fmt.Sprintf("%s leases Ready, %d restarts:\n%s", size, n, sb.String()))
	slices.SortFunc(runs, func(a, c benchRestart) int { return int(a.healthy - c.healthy) })
	median := runs[len(runs)/2]
	out.healthy, out.pass = median.healthy, median.pass
	out.rssKBPerLeaseAfterRestart = float64(procRSS(s.b, s.d.cmd.Process.Pid)) / 1024 / float64(size.n)
}

// heapAfterGC is berthd's heap in use right after a collection it was made to
// run (pprof's gc=1): what its leases hold, without a burst's garbage — the
// figure the fake-engine scale benchmark measures in-process.
func (s *scaleRun) heapAfterGC() float64 {
	if r := s.d.debugGet("/debug/pprof/heap?gc=1"); r.Status != http.StatusOK {
		s.b.Fatalf("GET /debug/pprof/heap?gc=1: %d", r.Status)
	}
	return s.d.metricValue("go_memstats_heap_inuse_bytes")
}

// closeAll deprovisions every lease (64 in flight) and returns the time from
// the first close until every deprovisioned callback came, Docker holds nothing
// of the installation and no pool network is bound.
func (s *scaleRun) closeAll(leases []string) time.Duration {
	b := s.b
	began := time.Now()
	if err := benchForEachLimited(len(leases), 64, func(i int) error { return s.client.deprovision(leases[i]) }); err != nil {
		b.Fatal(err)
	}
	waitCallbacks(b, s.d, s.cb, leases, messages.CallbackDeprovisioned, 30*time.Minute)
	benchWaitInstallationEmpty(b, s.pb.dc, s.install, 30*time.Minute)
	benchWaitMetric(b, s.client, `berth_network_pool_networks{state="bound"}`, func(v float64) bool { return v == 0 }, 10*time.Minute)
	return time.Since(began)
}

// report prints one size's figures and ratios and reports the key ones as
// metrics (suffixed with the size).
func (s *scaleRun) report(size scaleSize, raw, got scaleBurst) {
	b := s.b
	n := float64(size.n)
	ratio := func(a, r time.Duration) float64 { return float64(a) / float64(r) }
	var sb strings.Builder
	skipped := raw.wall == 0
	if skipped { // BERTH_BENCH_RAW=skip: berthd's own figures, no ratios
		raw = scaleBurst{wall: time.Nanosecond, perLease: []time.Duration{time.Nanosecond}, machineCPU: 1, dockerdCPU: 1}
		fmt.Fprintf(&sb, "(raw not run: BERTH_BENCH_RAW=skip; ignore the raw columns and ratios)\n")
	}
	rp50, bp50 := benchPercentile(raw.perLease, 0.5), benchPercentile(got.perLease, 0.5)
	fmt.Fprintf(&sb, "%s leases (%d containers), raw Docker on one shared network vs berthd:\n", size, size.containers())
	fmt.Fprintf(&sb, "  wall               raw %8.1f s   berthd %8.1f s (beyond verify)   %.2f×\n", raw.wall.Seconds(), got.wall.Seconds(), ratio(got.wall, raw.wall))
	fmt.Fprintf(&sb, "  p50 per lease      raw %8.1f s   berthd %8.1f s                   %.2f×\n", rp50.Seconds(), bp50.Seconds(), ratio(bp50, rp50))
	fmt.Fprintf(&sb, "  machine CPU/lease  raw %8.0f ms  berthd %8.0f ms                  %.2f×\n", benchMs(raw.machineCPU)/n, benchMs(got.machineCPU)/n, ratio(got.machineCPU, raw.machineCPU))
	fmt.Fprintf(&sb, "  dockerd CPU/lease  raw %8.0f ms  berthd %8.0f ms                  %.2f×\n", benchMs(raw.dockerdCPU)/n, benchMs(got.dockerdCPU)/n, ratio(got.dockerdCPU, raw.dockerdCPU))
	fmt.Fprintf(&sb, "  berthd itself: CPU %.0f ms/lease, RSS %.1f KB/lease Ready; POST → 202 p50 %.1f ms p99 %.1f ms\n",
		benchMs(got.berthdCPU)/n, got.rssKBPerLease, benchMs(benchPercentile(got.accept, 0.5)), benchMs(benchPercentile(got.accept, 0.99)))
	fmt.Fprintf(&sb, "  restart with all Ready (median restart): healthy in %.0f ms, first reconcile pass %.0f ms, RSS %.1f KB/lease\n",
		benchMs(got.healthy), benchMs(got.pass), got.rssKBPerLeaseAfterRestart)
	fmt.Fprintf(&sb, "  heap in use after a forced collection: %.1f KB/lease more than before the burst\n", got.heapKBPerLease)
	fmt.Fprintf(&sb, "  mass close: nothing of the installation left after %.1f s\n", got.closeAll.Seconds())
	benchPrint(b, sb.String())
	tag := strconv.Itoa(size.n)
	if size.mix {
		tag += "mix"
	}
	if !skipped {
		b.ReportMetric(ratio(got.wall, raw.wall), "wall_ratio_"+tag)
		b.ReportMetric(ratio(got.machineCPU, raw.machineCPU), "machine_cpu_ratio_"+tag)
		b.ReportMetric(ratio(bp50, rp50), "p50_ratio_"+tag)
	}
	b.ReportMetric(benchMs(got.healthy), "healthy_ms_"+tag)
	b.ReportMetric(got.closeAll.Seconds(), "close_all_s_"+tag)
}

// isolationProvisionBody is a docker-micro flat lease, or (stack) a web+db stack
// of two docker-micro services.
func isolationProvisionBody(lease, callbackURL string, stack bool) []byte {
	if !stack {
		return benchProvisionBody(lease, callbackURL, flatManifest(nil))
	}
	manifest := map[string]any{"services": map[string]any{
		"web": flatManifest(nil),
		"db":  map[string]any{"image": testImage()},
	}}
	raw, _ := json.Marshal(manifest)
	body, _ := json.Marshal(messages.ProvisionRequest{LeaseUUID: lease, Tenant: "tenant-bench",
		ProviderUUID: "provider-bench", CallbackURL: callbackURL, Payload: base64.StdEncoding.EncodeToString(raw),
		Items: []messages.LeaseItem{{SKU: "docker-micro", Quantity: 1, ServiceName: "web"},
			{SKU: "docker-micro", Quantity: 1, ServiceName: "db"}}})
	return body
}

// waitCallbacks waits until every lease has a callback of status and returns
// when each arrived. One waiter scans the receiver, so a thousand leases do not
// poll it a thousand times over (that would be the test's CPU, not berthd's).
func waitCallbacks(b *testing.B, d *daemonProc, cb *callbackReceiver, leases []string, status string, timeout time.Duration) map[string]time.Time {
	b.Helper()
	want := make(map[string]bool, len(leases))
	for _, l := range leases {
		want[l] = true
	}
	at := make(map[string]time.Time, len(leases))
	seen := 0
	deadline := time.Now().Add(timeout)
	for {
		cb.mu.Lock()
		got := cb.got[seen:]
		for _, c := range got {
			if want[c.Body.LeaseUUID] && c.Body.Status == status {
				if _, dup := at[c.Body.LeaseUUID]; !dup {
					at[c.Body.LeaseUUID] = c.At
				}
			} else if want[c.Body.LeaseUUID] && status == messages.CallbackSuccess && c.Body.Status != status {
				cb.mu.Unlock()
				history := d.debugGet("/debug/leases/" + c.Body.LeaseUUID).Body
				b.Fatalf("lease %s: %s callback %q; berthd logged of it:\n%s\nits history: %.6000s",
					c.Body.LeaseUUID, c.Body.Status, c.Body.Error, d.logLines(c.Body.LeaseUUID), history)
			}
		}
		seen += len(got)
		cb.mu.Unlock()
		if len(at) == len(want) {
			return at
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d leases without a %s callback after %s", len(want)-len(at), len(want), status, timeout)
		}
		select {
		case <-cb.notify:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitMachineQuiet waits (at most timeout) until the machine's CPUs are less
// than share busy over 5 s, and returns the last 5 s's share: a restart is
// measured in a steady state with every lease Ready, not in the wake of the
// burst that made them (dockerd, containerd and the shims settle for minutes).
func waitMachineQuiet(share float64, timeout time.Duration) float64 {
	deadline := time.Now().Add(timeout)
	for {
		c0 := machineCPU()
		time.Sleep(5 * time.Second)
		busy := float64(machineCPU()-c0) / float64(5*time.Second) / float64(runtime.NumCPU())
		if busy < share || time.Now().After(deadline) {
			return busy
		}
	}
}

// machineCPU is the CPU time every process of the machine has used (the busy
// fields of /proc/stat's cpu line).
func machineCPU() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	var ticks int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest times are already in user
			break
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

// procCPU is a process's user+system CPU time so far.
func procCPU(pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100)
}

// procRSS is a process's resident set in bytes.
func procRSS(b *testing.B, pid int) uint64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	b.Fatalf("no VmRSS for pid %d", pid)
	return 0
}

// machineCapacity describes the host the figures come from.
func machineCapacity(dc *client.Client) string {
	var sb strings.Builder
	model, mem := "", ""
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok && model == "" {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
			}
		}
	}
	if raw, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem, _, _ = strings.Cut(string(raw), "\n")
	}
	fmt.Fprintf(&sb, "machine: %d CPUs (%s), %s, %s/%s\n", runtime.NumCPU(), model, strings.Join(strings.Fields(mem), " "), runtime.GOOS, runtime.GOARCH)
	if info, err := dc.Info(context.Background()); err == nil {
		fmt.Fprintf(&sb, "docker: %s, kernel %s, cgroup v%s, storage %s, %d CPUs and %.1f GB for dockerd\n",
			info.ServerVersion, info.KernelVersion, info.CgroupVersion, info.Driver, info.NCPU, float64(info.MemTotal)/(1<<30))
	}
	if out, err := exec.Command("iptables", "--version").Output(); err == nil {
		fmt.Fprintf(&sb, "firewall: %s", out)
	}
	return sb.String()
}
