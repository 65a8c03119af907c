package main

// BenchmarkRestart_vsRawDocker: POST /restart → success completion callback for
// Ready single-container leases (flat manifest, docker-micro, startup_verify_duration
// 1s), 1 and 10 at a time, against the same replacement done directly with the
// Docker SDK in the same run, round by round: stop (the container's own stop
// timeout, as Compose's recreate uses) and remove the old container, create and
// start the new one on a user-defined bridge network of this run, wait the same
// 1 s verify interval, inspect.
//
// Each raw slot has its own network, as each lease has its own. One network
// shared by the ten slots is what the issue first asked for, and it leaked: on
// Docker 20.10, concurrent starts and stops on one network can leave its
// endpoint count at 1 with no endpoint (libnetwork's local-kv.db), after which
// dockerd refuses to remove it ("has active endpoints") until it is restarted.
// That happened twice in about 420 raw restarts at concurrency 10 on one
// network (both in six-round diagnostic runs); per-slot networks
// never see two endpoint changes at once, and measured no consistent difference
// against the shared one (−6 % and +8 % of the raw mean in two runs).
//
// The raw containers are clones of berthd's own container (captured from a Ready
// lease): same image ID, command, environment, limits, hardening, port bindings,
// tmpfs mounts and stop timeout; its named /data volume is replaced by a per-slot
// volume of this run that, like the lease's, survives every recreate. Only the
// labels (berth.bench.run=<run>, never fred.*) and the network differ.
//
// The ratio that matters is the time beyond the verify wait (total − 1 s),
// berthd p50 / raw p50. Where berthd's time goes is reported three ways: Docker's
// event stream per restart (target create, source kill/die/destroy, target
// start), berth_replace_phase_duration_seconds means, and
// berth_docker_requests_total deltas per restart against raw's five calls.
//
// Opt-in diagnostics:
//
//   - BERTH_BENCH_DOCKER_TRACE=1: berthd reaches Docker through a logging proxy in
//     this process; every berthd request is placed on its restart's timeline
//     (each pays the proxy's hop, so berthd's numbers of that run read slightly high).
//   - BERTH_BENCH_RAW_READS=1: a third interleaved variant, raw plus the 19
//     read-only requests berthd makes per restart beyond raw's one inspect, at the
//     same steps, which tells the reads' cost (theirs and their load on dockerd)
//     from the rest. berthd's 25 requests = raw's 5 + these 19 + one rename.
//   - BERTH_BENCH_RAW_COMPOSE_ORDER=1: another, raw in Compose's recreate order:
//     the new container is created while the old one still runs, then the old
//     one is stopped and removed, the new one renamed and started.
//
// Ignores b.N (run with -benchtime 1x):
//
//	go test -run '^$' -bench BenchmarkRestart_vsRawDocker -benchtime 1x ./cmd/berthd/

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// benchRestartMaxConcurrency is how many Ready leases (and raw slots) the run holds.
const benchRestartMaxConcurrency = 10

// benchRestartBench holds what the restart benchmark shares across sub-benchmarks.
type benchRestartBench struct {
	d       *daemonProc
	client  *benchClient
	cb      *callbackReceiver
	dc      *client.Client
	ev      *benchContainerEvents
	install string
	runID   string // label value of this run's raw containers, volumes and networks

	leases    []string
	callbacks map[string]int // lease → distinct callbacks received so far (touched between rounds only)
	fenced    int            // 409s answered while the previous completion's row was still queued
	fencedMu  sync.Mutex

	rawCfg  *container.Config // berthd's container config, relabelled
	rawHost *container.HostConfig
	rawVol  string   // mount target of the lease's named volume ("" when none)
	slots   []string // raw slot → current container ID

	trace      *benchDockerTrace // berthd's Docker requests, only with BERTH_BENCH_DOCKER_TRACE=1
	variants   []benchRawMode    // the opt-in raw variants beside plain raw
	slotNets   []string          // slot → its own bridge network (name)
	slotNetIDs []string
}

// benchRawMode is a variant of the raw restart.
type benchRawMode struct {
	name         string
	reads        bool // plus berthd's 19 extra read-only requests
	composeOrder bool // Compose's recreate order: create, stop + remove the old, rename, start
}

// benchRestartTiming is one measured berthd restart.
type benchRestartTiming struct {
	lease           string
	sent, accepted  time.Time // POST /restart sent, 202 received (client clock)
	callback        time.Time // completion callback arrival (receiver)
	targetCreated   time.Time // Docker events of this restart
	sourceKilled    time.Time
	sourceDied      time.Time
	sourceDestroyed time.Time
	targetRenamed   time.Time
	targetStarted   time.Time
}

// benchRawRestartTiming is one raw Docker stop+remove+create+start+verify-wait+inspect.
type benchRawRestartTiming struct {
	total, stop, remove, create, start, inspect time.Duration
	reads                                       time.Duration // raw+reads only: time in the extra reads
	rename                                      time.Duration // compose order only
}

func BenchmarkRestart_vsRawDocker(b *testing.B) {
	dc := dockerClient(b)
	if _, err := dc.ImageInspect(context.Background(), testImage()); err != nil {
		skipOrFail(b, fmt.Sprintf("test image %s not present (make workload-image): %v", testImage(), err))
	}
	rb := &benchRestartBench{dc: dc, cb: newCallbackReceiver(b), runID: uuid.NewString(), callbacks: map[string]int{}}
	// Raw objects go even when the benchmark fails half-way (registered before the
	// daemon, so it runs after the daemon stopped and removeInstallation ran).
	b.Cleanup(func() { benchRemoveRawRestart(dc, rb.runID) })
	rb.ev = benchWatchContainerEvents(b, dc)
	cfg := slices.Clone(benchPool)
	if os.Getenv("BERTH_BENCH_DOCKER_TRACE") == "1" {
		// Diagnostic: berthd talks to Docker through a logging proxy (each call pays
		// the proxy's hop; raw does not), so its per-call latencies can be placed on
		// the restart's timeline.
		rb.trace = benchStartDockerTrace(b)
		cfg = append(cfg, "docker_host: unix://"+rb.trace.sock)
	}
	if os.Getenv("BERTH_BENCH_RAW_READS") == "1" {
		rb.variants = append(rb.variants, benchRawMode{name: "raw + berthd's 19 extra reads", reads: true})
	}
	if os.Getenv("BERTH_BENCH_RAW_COMPOSE_ORDER") == "1" {
		rb.variants = append(rb.variants, benchRawMode{name: "raw in Compose's order (create, stop, remove, rename, start)", composeOrder: true})
	}
	rb.d = newDaemonDir(b, cfg...).startInProcess()
	rb.client = newBenchClient(rb.d)
	rb.install = benchInstallationID(b, filepath.Join(rb.d.dir, "data"))

	// Untimed setup: the Ready leases, berthd's container as the raw template, the
	// raw network, volumes and first containers.
	rb.leases = make([]string, benchRestartMaxConcurrency)
	for i := range rb.leases {
		rb.leases[i] = uuid.NewString()
	}
	if err := benchForEachLimited(len(rb.leases), len(rb.leases), func(i int) error {
		lease := rb.leases[i]
		if _, _, err := rb.client.provision(lease, rb.cb.callbackURL(), flatManifest(nil)); err != nil {
			return err
		}
		got, err := benchWaitCallback(rb.cb, lease, 1, 3*time.Minute)
		if err == nil && got.Body.Status != messages.CallbackSuccess {
			err = fmt.Errorf("lease %s: %s callback %q", lease, got.Body.Status, got.Body.Error)
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for _, l := range rb.leases {
		rb.callbacks[l] = 1
	}
	rb.captureTemplate(b)
	rb.setupRaw(b)

	// Warm-up, untimed: compose's first recreate, the HTTP connections, dockerd.
	if _, err := rb.berthdRound(1); err != nil {
		b.Fatal(err)
	}
	if _, err := rb.rawRound(1, benchRawMode{}); err != nil {
		b.Fatal(err)
	}

	for _, tc := range []struct{ concurrency, rounds int }{{1, 20}, {benchRestartMaxConcurrency, 2}} {
		b.Run(fmt.Sprintf("concurrency=%d", tc.concurrency), func(b *testing.B) {
			b.StopTimer()
			var berthd []benchRestartTiming
			var raw []benchRawRestartTiming
			variants := make([][]benchRawRestartTiming, len(rb.variants))
			var cpuBerthd, cpuRaw benchCPU
			before := benchScrapeMetrics(b, rb.client)
			// Rounds interleave berthd and raw so background load drifts hit both alike.
			for r := 0; r < tc.rounds; r++ {
				c0 := benchCPUNow()
				got, err := rb.berthdRound(tc.concurrency)
				if err != nil {
					b.Fatal(err)
				}
				c1 := benchCPUNow()
				berthd = append(berthd, got...)
				rt, err := rb.rawRound(tc.concurrency, benchRawMode{})
				if err != nil {
					b.Fatal(err)
				}
				c2 := benchCPUNow()
				raw = append(raw, rt...)
				cpuBerthd, cpuRaw = cpuBerthd.plus(c1.minus(c0)), cpuRaw.plus(c2.minus(c1))
				for k, mode := range rb.variants {
					rt, err := rb.rawRound(tc.concurrency, mode)
					if err != nil {
						b.Fatal(err)
					}
					variants[k] = append(variants[k], rt...)
				}
			}
			after := benchScrapeMetrics(b, rb.client)
			rb.report(b, berthd, raw, variants, before, after, cpuBerthd, cpuRaw)
		})
	}

	// Untimed teardown: close every lease, then nothing of the installation or of
	// the raw run may be left in Docker.
	if err := benchForEachLimited(len(rb.leases), len(rb.leases), func(i int) error {
		lease := rb.leases[i]
		if err := rb.client.deprovision(lease); err != nil {
			return err
		}
		got, err := benchWaitCallback(rb.cb, lease, rb.callbacks[lease]+1, 3*time.Minute)
		if err == nil && got.Body.Status != messages.CallbackDeprovisioned {
			err = fmt.Errorf("lease %s: %s callback after deprovision", lease, got.Body.Status)
		}
		return err
	}); err != nil {
		b.Fatal(err)
	}
	benchWaitInstallationEmpty(b, dc, rb.install, 3*time.Minute)
	benchRemoveRawRestart(dc, rb.runID)
	if left := benchRawRestartLeft(dc, rb.runID); left != "" {
		b.Fatalf("raw run %s left %s", rb.runID, left)
	}
	if n := rb.cb.badSignatures(); n != 0 {
		b.Fatalf("%d callbacks with bad signatures", n)
	}
}

// captureTemplate inspects the first lease's container and derives the raw
// container config from it: same everything, but this run's label and network,
// and the named volume left to setupRaw.
func (rb *benchRestartBench) captureTemplate(b *testing.B) {
	cs := leaseContainers(b, rb.dc, rb.leases[0])
	if len(cs) != 1 {
		b.Fatalf("lease %s has %d containers, want 1", rb.leases[0], len(cs))
	}
	info, err := rb.dc.ContainerInspect(context.Background(), cs[0].ID)
	if err != nil {
		b.Fatal(err)
	}
	cfg := *info.Config
	cfg.Hostname = ""
	cfg.Image = info.Image // the content ID berthd launched
	labels := map[string]string{"berth.bench.run": rb.runID}
	// An image label berthd masks (sets empty on its container) stays masked on
	// the clone; no other berthd label is copied.
	img, err := rb.dc.ImageInspect(context.Background(), info.Image)
	if err != nil {
		b.Fatal(err)
	}
	if img.Config != nil {
		for k := range img.Config.Labels {
			if v, ok := info.Config.Labels[k]; ok && v == "" {
				labels[k] = ""
			}
		}
	}
	cfg.Labels = labels
	host := *info.HostConfig
	host.ContainerIDFile = ""
	// Compose mounts the lease's named volume as a bind "name:/data:rw": the clone
	// gets its slot's own volume there (rawCreate substitutes the name).
	host.Binds = nil
	for _, bind := range info.HostConfig.Binds {
		src, rest, ok := strings.Cut(bind, ":")
		if !ok || strings.HasPrefix(src, "/") || rb.rawVol != "" {
			b.Fatalf("berthd's container has binds %v: want at most one named volume", info.HostConfig.Binds)
		}
		rb.rawVol, _, _ = strings.Cut(rest, ":")
		host.Binds = append(host.Binds, "%s:"+rest)
	}
	host.Mounts = nil
	for _, m := range info.HostConfig.Mounts {
		switch m.Type {
		case mount.TypeTmpfs:
			host.Mounts = append(host.Mounts, m)
		case mount.TypeVolume, mount.TypeBind:
			// A stateful instance bind-mounts a subdirectory of its managed volume
			// (dockerio/volumes); the raw clone gets a per-slot Docker volume at the
			// same target, on the same filesystem.
			if rb.rawVol != "" {
				b.Fatalf("berthd's container mounts more than one volume: %+v", info.HostConfig.Mounts)
			}
			rb.rawVol = m.Target // a per-slot volume of this run, set per container
			m.Type, m.Source, m.VolumeOptions, m.BindOptions = mount.TypeVolume, "", nil, nil
			host.Mounts = append(host.Mounts, m)
		default:
			b.Fatalf("berthd's container mounts %s %s: the raw clone must not share it", m.Type, m.Source)
		}
	}
	rb.rawCfg, rb.rawHost = &cfg, &host
	stop := "unset: Docker's default, 10 s"
	if cfg.StopTimeout != nil {
		stop = strconv.Itoa(*cfg.StopTimeout) + " s"
	}
	benchPrint(b, fmt.Sprintf("raw template from berthd's container %s: image %s, memory %d MiB (swap %d MiB), %.2f CPUs, pids %v, read-only rootfs %v, cap-drop %v, security %v, ports %v, binds %v, %d mounts, named volume at %q, stop timeout %s\n",
		info.ID[:12], trimImageID(cfg.Image), host.Memory>>20, host.MemorySwap>>20, float64(host.NanoCPUs)/1e9,
		derefPids(host.PidsLimit), host.ReadonlyRootfs, host.CapDrop, host.SecurityOpt, host.PortBindings,
		info.HostConfig.Binds, len(host.Mounts), rb.rawVol, stop))
}

func trimImageID(id string) string {
	if len(id) > 19 {
		return id[:19]
	}
	return id
}

func derefPids(p *int64) any {
	if p == nil {
		return "unlimited"
	}
	return *p
}

// setupRaw creates one bridge network and one volume (when berthd's container
// has one) per slot, and each slot's first container (untimed).
func (rb *benchRestartBench) setupRaw(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	labels := map[string]string{"berth.bench.run": rb.runID}
	rb.slots = make([]string, benchRestartMaxConcurrency)
	for i := range rb.slots {
		name := fmt.Sprintf("berth-bench-%s-net%d", rb.runID[:8], i)
		created, err := rb.dc.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Labels: labels})
		if err != nil {
			b.Fatalf("raw network: %v", err)
		}
		rb.slotNets, rb.slotNetIDs = append(rb.slotNets, name), append(rb.slotNetIDs, created.ID)
	}
	if err := benchForEachLimited(len(rb.slots), len(rb.slots), func(i int) error {
		if rb.rawVol != "" {
			if _, err := rb.dc.VolumeCreate(ctx, volume.CreateOptions{Name: rb.slotVolume(i), Driver: "local", Labels: labels}); err != nil {
				return fmt.Errorf("raw volume: %w", err)
			}
		}
		id, _, err := rb.rawCreate(ctx, i)
		if err != nil {
			return err
		}
		rb.slots[i] = id
		_, err = rb.rawStart(ctx, id)
		return err
	}); err != nil {
		b.Fatal(err)
	}
}

func (rb *benchRestartBench) slotVolume(slot int) string {
	return fmt.Sprintf("berth-bench-%s-%d", rb.runID[:8], slot)
}

// network is the bridge network of slot's containers.
func (rb *benchRestartBench) network(slot int) (name, id string) {
	return rb.slotNets[slot], rb.slotNetIDs[slot]
}

// rawCreate creates slot's next container from the template.
func (rb *benchRestartBench) rawCreate(ctx context.Context, slot int) (id string, took time.Duration, err error) {
	cfg := *rb.rawCfg
	cfg.Labels = maps.Clone(rb.rawCfg.Labels)
	cfg.Labels["berth.bench.slot"] = strconv.Itoa(slot) // what raw+reads lists by, as berthd lists by project
	host := *rb.rawHost
	host.Mounts = make([]mount.Mount, len(rb.rawHost.Mounts))
	copy(host.Mounts, rb.rawHost.Mounts)
	for k := range host.Mounts {
		if host.Mounts[k].Type == mount.TypeVolume {
			host.Mounts[k].Source = rb.slotVolume(slot)
		}
	}
	host.Binds = nil
	for _, bind := range rb.rawHost.Binds {
		host.Binds = append(host.Binds, fmt.Sprintf(bind, rb.slotVolume(slot)))
	}
	netName, _ := rb.network(slot)
	host.NetworkMode = container.NetworkMode(netName)
	netCfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		netName: {Aliases: []string{"app"}}}}
	name := fmt.Sprintf("berth-bench-%s-%d-%s", rb.runID[:8], slot, uuid.NewString()[:8])
	t := time.Now()
	created, err := rb.dc.ContainerCreate(ctx, &cfg, &host, netCfg, nil, name)
	if err != nil {
		return "", 0, fmt.Errorf("container create: %w", err)
	}
	return created.ID, time.Since(t), nil
}

func (rb *benchRestartBench) rawStart(ctx context.Context, id string) (time.Duration, error) {
	t := time.Now()
	if err := rb.dc.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return 0, fmt.Errorf("container start: %w", err)
	}
	return time.Since(t), nil
}

// rawRestart replaces slot's container: stop (its own stop timeout, like Compose's
// recreate) and remove it, create and start the next, wait the verify interval,
// inspect it. With reads, it also makes the read-only requests berthd makes
// around the same steps (see benchRawReads), so their cost can be told apart.
func (rb *benchRestartBench) rawRestart(ctx context.Context, slot int, mode benchRawMode) (benchRawRestartTiming, error) {
	var rt benchRawRestartTiming
	old := rb.slots[slot]
	begin := time.Now()
	read := func(step string, id string) error {
		if !mode.reads {
			return nil
		}
		t := time.Now()
		err := rb.benchRawReads(ctx, step, slot, id)
		rt.reads += time.Since(t)
		return err
	}
	if err := read("before create", old); err != nil {
		return rt, err
	}
	var id string
	create := func() error {
		var err error
		if id, rt.create, err = rb.rawCreate(ctx, slot); err != nil {
			return err
		}
		rb.slots[slot] = id
		return read("after create", id)
	}
	if mode.composeOrder {
		if err := create(); err != nil {
			return rt, err
		}
	}
	t := time.Now()
	if err := rb.dc.ContainerStop(ctx, old, container.StopOptions{}); err != nil {
		return rt, fmt.Errorf("container stop: %w", err)
	}
	rt.stop = time.Since(t)
	t = time.Now()
	if err := rb.dc.ContainerRemove(ctx, old, container.RemoveOptions{RemoveVolumes: true}); err != nil {
		return rt, fmt.Errorf("container remove: %w", err)
	}
	rt.remove = time.Since(t)
	if mode.composeOrder {
		t = time.Now()
		if err := rb.dc.ContainerRename(ctx, id, fmt.Sprintf("berth-bench-%s-%d-%s", rb.runID[:8], slot, uuid.NewString()[:8])); err != nil {
			return rt, fmt.Errorf("container rename: %w", err)
		}
		rt.rename = time.Since(t)
	} else if err := create(); err != nil {
		return rt, err
	}
	var err error
	if err := read("before start", id); err != nil {
		return rt, err
	}
	if rt.start, err = rb.rawStart(ctx, id); err != nil {
		return rt, err
	}
	if err := read("after start", id); err != nil {
		return rt, err
	}
	time.Sleep(benchVerify)
	t = time.Now()
	info, err := rb.dc.ContainerInspect(ctx, id)
	if err != nil {
		return rt, fmt.Errorf("container inspect: %w", err)
	}
	rt.inspect = time.Since(t)
	rt.total = time.Since(begin)
	if info.State == nil || !info.State.Running || len(info.NetworkSettings.Ports["8080/tcp"]) == 0 {
		return rt, fmt.Errorf("raw container %s not running with a published port after the verify wait", id[:12])
	}
	return rt, nil
}

// benchRawReads makes, for a raw slot, the read-only requests berthd makes at the
// same step of a restart (as BERTH_BENCH_DOCKER_TRACE shows them at concurrency
// 1): before the target's create the source cohort (list + inspect), the image
// (3 inspects: admission, the launch's re-admission, compose), the network
// (2 lists, 3 inspects), the volume (2 inspects), a ping and two more project
// lists (the foreign-container check, compose's own); after the create compose's
// inspect of it; before the start compose's list; after it the cohort listing
// (list + inspect) that precedes verification.
func (rb *benchRestartBench) benchRawReads(ctx context.Context, step string, slot int, id string) error {
	netName, netID := rb.network(slot)
	var errs []error
	list := func() {
		_, err := rb.dc.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(
			filters.Arg("label", "berth.bench.run="+rb.runID), filters.Arg("label", "berth.bench.slot="+strconv.Itoa(slot)))})
		errs = append(errs, err)
	}
	inspect := func() {
		_, err := rb.dc.ContainerInspect(ctx, id)
		errs = append(errs, err)
	}
	switch step {
	case "before create":
		list()
		inspect()
		for range 3 {
			_, err := rb.dc.ImageInspect(ctx, rb.rawCfg.Image)
			errs = append(errs, err)
		}
		for range 2 {
			_, err := rb.dc.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", netName))})
			errs = append(errs, err)
		}
		for range 3 {
			_, err := rb.dc.NetworkInspect(ctx, netID, network.InspectOptions{})
			errs = append(errs, err)
		}
		if rb.rawVol != "" {
			for range 2 {
				_, err := rb.dc.VolumeInspect(ctx, rb.slotVolume(slot))
				errs = append(errs, err)
			}
		}
		_, err := rb.dc.Ping(ctx)
		errs = append(errs, err)
		list()
		list()
	case "after create":
		inspect()
	case "before start":
		list()
	case "after start":
		list()
		inspect()
	}
	return errors.Join(errs...)
}

// rawRound restarts n raw slots at once.
func (rb *benchRestartBench) rawRound(n int, mode benchRawMode) ([]benchRawRestartTiming, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out := make([]benchRawRestartTiming, n)
	errs := make([]error, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			out[i], errs[i] = rb.rawRestart(ctx, i, mode)
		}()
	}
	close(gate)
	wg.Wait()
	return out, errors.Join(errs...)
}

// restart posts POST /restart until the 202: a 409 while the previous completion's
// row is still queued (the maintenance fence reopens a moment after its 2xx) is
// retried, and only the accepted request is timed.
func (rb *benchRestartBench) restart(lease, id string) (sent, accepted time.Time, err error) {
	body, _ := json.Marshal(messages.MaintenanceRequest{LeaseUUID: lease, MaintenanceID: id,
		MaintenanceAdmittedAt: time.Now().UTC().Format(time.RFC3339)})
	deadline := time.Now().Add(30 * time.Second)
	for {
		sent = time.Now()
		code, resp, err := rb.client.do(http.MethodPost, "/restart", body)
		accepted = time.Now()
		switch {
		case err != nil:
			return sent, accepted, err
		case code == http.StatusAccepted:
			return sent, accepted, nil
		case code == http.StatusConflict && time.Now().Before(deadline):
			rb.fencedMu.Lock()
			rb.fenced++
			rb.fencedMu.Unlock()
			time.Sleep(20 * time.Millisecond)
		default:
			return sent, accepted, fmt.Errorf("restart %s: %d %s", lease, code, resp)
		}
	}
}

// berthdRound restarts the first n leases at once and waits for every success
// completion, then reads the Docker events of each restart.
func (rb *benchRestartBench) berthdRound(n int) ([]benchRestartTiming, error) {
	out := make([]benchRestartTiming, n)
	errs := make([]error, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range out {
		lease := rb.leases[i]
		want := rb.callbacks[lease] + 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			lt := &out[i]
			lt.lease = lease
			id := uuid.NewString()
			if lt.sent, lt.accepted, errs[i] = rb.restart(lease, id); errs[i] != nil {
				return
			}
			got, err := benchWaitCallback(rb.cb, lease, want, 3*time.Minute)
			if err != nil {
				errs[i] = err
				return
			}
			if got.Body.Status != messages.CallbackSuccess || got.Body.MaintenanceID != id {
				errs[i] = fmt.Errorf("lease %s: completion %s (maintenance %s) %q, want success of %s",
					lease, got.Body.Status, got.Body.MaintenanceID, got.Body.Error, id)
				return
			}
			lt.callback = got.At
		}()
	}
	close(gate)
	wg.Wait()
	for i := range out {
		rb.callbacks[rb.leases[i]]++ // each restart sent exactly one completion (or failed the round)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	time.Sleep(100 * time.Millisecond) // the event stream trails the callbacks slightly
	for i := range out {
		rb.ev.attribute(&out[i])
	}
	return out, nil
}

// --- Docker's container events -------------------------------------------------------

type benchContainerEvent struct {
	id, action string
	at         time.Time
}

// benchContainerEvents records the lifecycle events of berthd's lease containers.
type benchContainerEvents struct {
	mu      sync.Mutex
	byLease map[string][]benchContainerEvent
}

func benchWatchContainerEvents(b *testing.B, dc *client.Client) *benchContainerEvents {
	l := &benchContainerEvents{byLease: map[string][]benchContainerEvent{}}
	ctx, cancel := context.WithCancel(context.Background())
	f := filters.NewArgs(filters.Arg("type", "container"))
	for _, a := range []string{"create", "start", "kill", "die", "stop", "destroy", "rename"} {
		f.Add("event", a)
	}
	msgs, errs := dc.Events(ctx, events.ListOptions{Filters: f})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case m := <-msgs:
				lease := m.Actor.Attributes["fred.lease_uuid"]
				if lease == "" {
					continue
				}
				l.mu.Lock()
				l.byLease[lease] = append(l.byLease[lease], benchContainerEvent{id: m.Actor.ID, action: string(m.Action), at: time.Unix(0, m.TimeNano)})
				l.mu.Unlock()
			case <-errs:
				return
			}
		}
	}()
	b.Cleanup(func() { cancel(); <-done })
	return l
}

// attribute fills the Docker timestamps of one restart: the first container
// created after the POST is the target; the source is the other one killed, died
// and destroyed in the window.
func (l *benchContainerEvents) attribute(lt *benchRestartTiming) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var target string
	for _, e := range l.byLease[lt.lease] {
		if e.at.Before(lt.sent) || e.at.After(lt.callback) {
			continue
		}
		if target == "" && e.action == "create" {
			target, lt.targetCreated = e.id, e.at
			continue
		}
		first := func(t *time.Time) {
			if t.IsZero() {
				*t = e.at
			}
		}
		switch {
		case e.id == target && e.action == "rename":
			first(&lt.targetRenamed)
		case e.id == target && e.action == "start":
			first(&lt.targetStarted)
		case e.id != target && e.action == "kill":
			first(&lt.sourceKilled)
		case e.id != target && e.action == "die":
			first(&lt.sourceDied)
		case e.id != target && e.action == "destroy":
			first(&lt.sourceDestroyed)
		}
	}
}

// --- /metrics ------------------------------------------------------------------------

// benchScrapeMetrics reads every sample of /metrics, keyed by `name{labels}`.
func benchScrapeMetrics(b *testing.B, c *benchClient) map[string]float64 {
	code, body, err := c.do(http.MethodGet, "/metrics", nil)
	if err != nil || code != http.StatusOK {
		b.Fatalf("GET /metrics: %d %v", code, err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// --- the report ----------------------------------------------------------------------

func (rb *benchRestartBench) report(b *testing.B, berthd []benchRestartTiming, raw []benchRawRestartTiming, variants [][]benchRawRestartTiming,
	before, after map[string]float64, cpuBerthd, cpuRaw benchCPU) {
	var total, beyond []time.Duration
	phase := benchPhases{}
	add := phase.add
	for _, lt := range berthd {
		d := lt.callback.Sub(lt.sent)
		total, beyond = append(total, d), append(beyond, d-benchVerify)
		add("0 POST → 202", lt.sent, lt.accepted)
		add("1 POST → target created", lt.sent, lt.targetCreated)
		add("2 target created → source SIGTERM (kill)", lt.targetCreated, lt.sourceKilled)
		add("3 source SIGTERM → source exited (die)", lt.sourceKilled, lt.sourceDied)
		add("4 source exited → source removed", lt.sourceDied, lt.sourceDestroyed)
		add("5 source removed → target started", lt.sourceDestroyed, lt.targetStarted)
		add("  5a source removed → target renamed", lt.sourceDestroyed, lt.targetRenamed)
		add("  5b target renamed → target started", lt.targetRenamed, lt.targetStarted)
		add("6 target started → callback", lt.targetStarted, lt.callback)
		add("  6' same minus the verify wait", lt.targetStarted.Add(benchVerify), lt.callback)
	}
	pick := func(f func(benchRawRestartTiming) time.Duration) []time.Duration {
		out := make([]time.Duration, len(raw))
		for i, r := range raw {
			out[i] = f(r)
		}
		return out
	}
	rawTotal := pick(func(r benchRawRestartTiming) time.Duration { return r.total })
	rawBeyond := pick(func(r benchRawRestartTiming) time.Duration { return r.total - benchVerify })
	ratio := float64(benchPercentile(beyond, 0.5)) / float64(benchPercentile(rawBeyond, 0.5))
	ratio95 := float64(benchPercentile(beyond, 0.95)) / float64(benchPercentile(rawBeyond, 0.95))

	var sb strings.Builder
	fmt.Fprintf(&sb, "\nberthd total (POST /restart → completion)  %s\n", benchP50p95(total))
	fmt.Fprintf(&sb, "berthd beyond the 1 s verify wait          %s\n", benchP50p95(beyond))
	fmt.Fprintf(&sb, "raw docker total                           %s\n", benchP50p95(rawTotal))
	fmt.Fprintf(&sb, "raw docker beyond the 1 s verify wait      %s\n", benchP50p95(rawBeyond))
	fmt.Fprintf(&sb, "  stop    %s\n  remove  %s\n  create  %s\n  start   %s\n  inspect %s\n",
		benchP50p95(pick(func(r benchRawRestartTiming) time.Duration { return r.stop })),
		benchP50p95(pick(func(r benchRawRestartTiming) time.Duration { return r.remove })),
		benchP50p95(pick(func(r benchRawRestartTiming) time.Duration { return r.create })),
		benchP50p95(pick(func(r benchRawRestartTiming) time.Duration { return r.start })),
		benchP50p95(pick(func(r benchRawRestartTiming) time.Duration { return r.inspect })))
	fmt.Fprintf(&sb, "ratio beyond-verify berthd/raw: p50 %.2f×, p95 %.2f× (aim ≤ 1.2×); p50 gap %.1f ms\n",
		ratio, ratio95, benchMs(benchPercentile(beyond, 0.5)-benchPercentile(rawBeyond, 0.5)))
	for k, vt := range variants {
		of := func(f func(benchRawRestartTiming) time.Duration) []time.Duration {
			out := make([]time.Duration, len(vt))
			for i, r := range vt {
				out[i] = f(r)
			}
			return out
		}
		vBeyond := of(func(r benchRawRestartTiming) time.Duration { return r.total - benchVerify })
		fmt.Fprintf(&sb, "%s, beyond verify %s  mean %.1f ms (raw mean %.1f ms)\n", rb.variants[k].name, benchP50p95(vBeyond),
			benchMs(benchMean(vBeyond)), benchMs(benchMean(rawBeyond)))
		for _, c := range []struct {
			name string
			f    func(benchRawRestartTiming) time.Duration
		}{
			{"reads", func(r benchRawRestartTiming) time.Duration { return r.reads }},
			{"stop", func(r benchRawRestartTiming) time.Duration { return r.stop }},
			{"remove", func(r benchRawRestartTiming) time.Duration { return r.remove }},
			{"create", func(r benchRawRestartTiming) time.Duration { return r.create }},
			{"rename", func(r benchRawRestartTiming) time.Duration { return r.rename }},
			{"start", func(r benchRawRestartTiming) time.Duration { return r.start }},
		} {
			if (c.name == "reads" && !rb.variants[k].reads) || (c.name == "rename" && !rb.variants[k].composeOrder) {
				continue
			}
			fmt.Fprintf(&sb, "  %-7s %s  mean %7.1f ms (raw mean %7.1f ms)\n", c.name, benchP50p95(of(c.f)), benchMs(benchMean(of(c.f))), benchMs(benchMean(pick(c.f))))
		}
		fmt.Fprintf(&sb, "  ratio beyond-verify berthd/(%s): p50 %.2f×\n", rb.variants[k].name,
			float64(benchPercentile(beyond, 0.5))/float64(benchPercentile(vBeyond, 0.5)))
	}
	rb.fencedMu.Lock()
	fmt.Fprintf(&sb, "409 fence retries before a 202 (untimed): %d\n", rb.fenced)
	rb.fenced = 0
	rb.fencedMu.Unlock()

	fmt.Fprintf(&sb, "berthd per restart, from Docker's event stream:\n")
	for _, k := range phase.names() {
		fmt.Fprintf(&sb, "  %-44s %s  mean %7.1f ms\n", k, benchP50p95(phase[k]), benchMs(benchMean(phase[k])))
	}
	// Means add up (the segments telescope), so the mean gap splits exactly into
	// like-for-like pieces: berthd's segment against the raw calls doing that work.
	seg := func(k string) time.Duration { return benchMean(phase[k]) }
	rawMean := func(f func(benchRawRestartTiming) time.Duration) time.Duration { return benchMean(pick(f)) }
	rawStop, rawRemove := rawMean(func(r benchRawRestartTiming) time.Duration { return r.stop }), rawMean(func(r benchRawRestartTiming) time.Duration { return r.remove })
	rawCreate, rawStart := rawMean(func(r benchRawRestartTiming) time.Duration { return r.create }), rawMean(func(r benchRawRestartTiming) time.Duration { return r.start })
	rawRest := benchMean(rawBeyond) - rawStop - rawRemove - rawCreate - rawStart
	fmt.Fprintf(&sb, "mean beyond verify: berthd %.1f ms, raw %.1f ms, gap %.1f ms, split like for like (berthd − raw):\n",
		benchMs(benchMean(beyond)), benchMs(benchMean(rawBeyond)), benchMs(benchMean(beyond)-benchMean(rawBeyond)))
	for _, row := range []struct {
		name      string
		berthd, r time.Duration
	}{
		{"POST → target created  vs  create", seg("1 POST → target created"), rawCreate},
		{"created → source removed  vs  stop + remove", seg("2 target created → source SIGTERM (kill)") + seg("3 source SIGTERM → source exited (die)") + seg("4 source exited → source removed"), rawStop + rawRemove},
		{"source removed → target started  vs  start", seg("5 source removed → target started"), rawStart},
		{"started → callback − 1 s  vs  inspect + sleep overshoot", seg("  6' same minus the verify wait"), rawRest},
	} {
		fmt.Fprintf(&sb, "  %-56s %7.1f − %7.1f = %+7.1f ms\n", row.name, benchMs(row.berthd), benchMs(row.r), benchMs(row.berthd-row.r))
	}
	per := func(d time.Duration, n int) float64 { return benchMs(d) / float64(n) }
	fmt.Fprintf(&sb, "CPU per restart (berthd rounds | raw rounds): this process (in-process berthd + bench client) %.1f | %.1f ms, dockerd %.1f | %.1f ms, containerd %.1f | %.1f ms\n",
		per(cpuBerthd.self, len(berthd)), per(cpuRaw.self, len(raw)), per(cpuBerthd.dockerd, len(berthd)), per(cpuRaw.dockerd, len(raw)),
		per(cpuBerthd.containerd, len(berthd)), per(cpuRaw.containerd, len(raw)))

	delta := func(key string) float64 { return after[key] - before[key] }
	fmt.Fprintf(&sb, "berthd replace phases (berth_replace_phase_duration_seconds, mean per restart):\n")
	var phaseSum float64
	for _, p := range []string{"capture", "images", "launch", "verify", "compensate"} {
		lbl := `{operation="restart",phase="` + p + `"}`
		n := delta("berth_replace_phase_duration_seconds_count" + lbl)
		if n == 0 {
			continue
		}
		mean := delta("berth_replace_phase_duration_seconds_sum"+lbl) / n * 1000
		phaseSum += mean
		fmt.Fprintf(&sb, "  %-10s %8.1f ms  (n=%.0f)\n", p, mean, n)
	}
	meanTotal := 0.0
	for _, d := range total {
		meanTotal += benchMs(d)
	}
	meanTotal /= float64(len(total))
	fmt.Fprintf(&sb, "  outside the phases %8.1f ms  (mean total %.1f ms: HTTP + admission journal, the post-launch cohort listing, completion journal + outbox delivery)\n",
		meanTotal-phaseSum, meanTotal)

	fmt.Fprintf(&sb, "Docker API requests per restart (berth_docker_requests_total delta / %d; raw: 1 each of stop, remove, create, start, inspect):\n", len(berthd))
	var ops []string
	for k := range after {
		if op, ok := strings.CutPrefix(k, `berth_docker_requests_total{op="`); ok && delta(k) > 0 {
			ops = append(ops, strings.TrimSuffix(op, `"}`))
		}
	}
	sort.Strings(ops)
	var calls float64
	for _, op := range ops {
		per := delta(`berth_docker_requests_total{op="`+op+`"}`) / float64(len(berthd))
		calls += per
		fmt.Fprintf(&sb, "  %-22s %6.2f\n", op, per)
	}
	fmt.Fprintf(&sb, "  %-22s %6.2f  (raw: 5)\n", "total", calls)
	if rb.trace != nil {
		rb.trace.report(&sb, berthd)
	}
	benchPrint(b, sb.String())

	b.ReportMetric(0, "ns/op") // one op is minutes of Docker work; the metrics below are the result
	b.ReportMetric(benchMs(benchPercentile(total, 0.5)), "berthd_p50_ms")
	b.ReportMetric(benchMs(benchPercentile(total, 0.95)), "berthd_p95_ms")
	b.ReportMetric(benchMs(benchPercentile(beyond, 0.5)), "berthd_beyond_verify_p50_ms")
	b.ReportMetric(benchMs(benchPercentile(beyond, 0.95)), "berthd_beyond_verify_p95_ms")
	b.ReportMetric(benchMs(benchPercentile(rawTotal, 0.5)), "raw_p50_ms")
	b.ReportMetric(benchMs(benchPercentile(rawTotal, 0.95)), "raw_p95_ms")
	b.ReportMetric(benchMs(benchPercentile(rawBeyond, 0.5)), "raw_beyond_verify_p50_ms")
	b.ReportMetric(benchMs(benchPercentile(rawBeyond, 0.95)), "raw_beyond_verify_p95_ms")
	b.ReportMetric(ratio, "ratio_beyond_verify")
	b.ReportMetric(ratio95, "ratio_beyond_verify_p95")
	b.ReportMetric(calls, "berthd_docker_calls/restart")
}

// --- cleanup ---------------------------------------------------------------------------

// benchRemoveRawRestart removes the run's containers and network (benchRemoveRaw),
// then its named volumes.
func benchRemoveRawRestart(dc *client.Client, runID string) {
	benchRemoveRaw(dc, runID)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", "berth.bench.run="+runID))
	// dockerd can refuse a network remove for a moment after its last container
	// went ("has active endpoints"): retry for a while.
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		ns, err := dc.NetworkList(ctx, network.ListOptions{Filters: f})
		if err != nil || len(ns) == 0 {
			break
		}
		for _, n := range ns {
			_ = dc.NetworkRemove(ctx, n.ID)
		}
	}
	if vs, err := dc.VolumeList(ctx, volume.ListOptions{Filters: f}); err == nil {
		for _, v := range vs.Volumes {
			_ = dc.VolumeRemove(ctx, v.Name, true)
		}
	}
}

// benchRawRestartLeft describes what of the raw run is still in Docker ("" when nothing).
func benchRawRestartLeft(dc *client.Client, runID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := filters.NewArgs(filters.Arg("label", "berth.bench.run="+runID))
	cs, err1 := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	ns, err2 := dc.NetworkList(ctx, network.ListOptions{Filters: f})
	vs, err3 := dc.VolumeList(ctx, volume.ListOptions{Filters: f})
	if err := errors.Join(err1, err2, err3); err != nil {
		return err.Error()
	}
	if len(cs)+len(ns)+len(vs.Volumes) == 0 {
		return ""
	}
	return fmt.Sprintf("%d containers, %d networks, %d volumes", len(cs), len(ns), len(vs.Volumes))
}

// --- statistics and CPU ------------------------------------------------------------------

func benchMean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// benchCPU is CPU time (user + system) of this process, dockerd and containerd.
type benchCPU struct{ self, dockerd, containerd time.Duration }

func (c benchCPU) minus(o benchCPU) benchCPU {
	return benchCPU{c.self - o.self, c.dockerd - o.dockerd, c.containerd - o.containerd}
}

func (c benchCPU) plus(o benchCPU) benchCPU {
	return benchCPU{c.self + o.self, c.dockerd + o.dockerd, c.containerd + o.containerd}
}

// benchDaemonPIDs finds dockerd and containerd (read only: /proc/<pid>/stat).
var benchDaemonPIDs = sync.OnceValue(func() map[string]int {
	out := map[string]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		comm, err := os.ReadFile("/proc/" + e.Name() + "/comm")
		if err != nil {
			continue
		}
		if name := strings.TrimSpace(string(comm)); (name == "dockerd" || name == "containerd") && out[name] == 0 {
			out[name], _ = strconv.Atoi(e.Name())
		}
	}
	return out
})

// benchProcCPU reads utime + stime of pid from /proc (USER_HZ = 100: 10 ms ticks).
func benchProcCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(raw), ')')
	f := strings.Fields(string(raw)[i+1:]) // f[0] is field 3 (state): utime is field 14, stime 15
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}

func benchCPUNow() benchCPU {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	pids := benchDaemonPIDs()
	return benchCPU{
		self:       time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		dockerd:    benchProcCPU(pids["dockerd"]),
		containerd: benchProcCPU(pids["containerd"]),
	}
}

// --- the Docker request trace (BERTH_BENCH_DOCKER_TRACE=1) -----------------------------

type benchTracedRequest struct {
	op         string
	start, end time.Time
}

// benchDockerTrace is a logging reverse proxy in front of Docker's socket.
type benchDockerTrace struct {
	sock string
	mu   sync.Mutex
	reqs []benchTracedRequest
}

func benchStartDockerTrace(b *testing.B) *benchDockerTrace {
	upstream := "/var/run/docker.sock"
	if h, ok := strings.CutPrefix(os.Getenv("DOCKER_HOST"), "unix://"); ok {
		upstream = h
	}
	dir, err := os.MkdirTemp("", "berth-trace-") // short: a unix socket path is at most 108 bytes
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	t := &benchDockerTrace{sock: filepath.Join(dir, "docker.sock")}
	ln, err := net.Listen("unix", t.sock)
	if err != nil {
		b.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host, r.Out.Host = "http", "docker", "docker"
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", upstream)
		}},
		FlushInterval: -1, // the event stream
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rp.ServeHTTP(w, r)
		t.mu.Lock()
		t.reqs = append(t.reqs, benchTracedRequest{op: benchTraceOp(r.Method, r.URL.Path), start: start, end: time.Now()})
		t.mu.Unlock()
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	return t
}

var benchTraceVersion = regexp.MustCompile(`^/v[0-9.]+/`)

// benchTraceOp names a request by method and path template ("GET /containers/{id}/json").
func benchTraceOp(method, path string) string {
	path = benchTraceVersion.ReplaceAllString(path, "/")
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(seg) == 1:
	case len(seg) == 2 && (seg[1] == "create" || seg[1] == "json"):
	case len(seg) == 2:
		seg = []string{seg[0], "{id}"}
	default: // an image name carries slashes: keep the first and last segment
		seg = []string{seg[0], "{id}", seg[len(seg)-1]}
	}
	return method + " /" + strings.Join(seg, "/")
}

// report places berthd's Docker requests on each restart's timeline: per segment,
// which calls ran and how long they took (mean per restart). At concurrency > 1
// requests of other leases fall in a restart's window too, so only the per-op
// counts and latencies are shown there.
func (t *benchDockerTrace) report(sb *strings.Builder, berthd []benchRestartTiming) {
	t.mu.Lock()
	reqs := slices.Clone(t.reqs)
	t.mu.Unlock()
	first, last := berthd[0].sent, berthd[0].callback
	for _, lt := range berthd {
		first, last = minTime(first, lt.sent), maxTime(last, lt.callback)
	}
	concurrent := false
	for i := range berthd {
		for j := range berthd {
			if i != j && berthd[i].sent.Before(berthd[j].callback) && berthd[j].sent.Before(berthd[i].callback) {
				concurrent = true
			}
		}
	}
	type agg struct {
		n   int
		sum time.Duration
	}
	byOp := map[string]*agg{}
	var inWindows []benchTracedRequest
	for _, r := range reqs {
		if r.op == "GET /events" {
			continue
		}
		in := false
		for _, lt := range berthd {
			if !r.start.Before(lt.sent) && !r.start.After(lt.callback) {
				in = true
			}
		}
		if !in {
			continue
		}
		inWindows = append(inWindows, r)
		a := byOp[r.op]
		if a == nil {
			a = &agg{}
			byOp[r.op] = a
		}
		a.n++
		a.sum += r.end.Sub(r.start)
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	fmt.Fprintf(sb, "traced Docker requests of berthd during the restarts (through the proxy), per restart: count, mean latency\n")
	for _, op := range ops {
		a := byOp[op]
		fmt.Fprintf(sb, "  %-34s ×%5.2f  %7.2f ms each\n", op, float64(a.n)/float64(len(berthd)), benchMs(a.sum)/float64(a.n))
	}
	if concurrent {
		return
	}
	segments := []string{"a POST → target created", "b created → source removed", "c removed → target started", "d started → callback"}
	bySeg := map[string]map[string]*agg{}
	segTotal := map[string]time.Duration{}
	for _, lt := range berthd {
		for _, r := range inWindows {
			if r.start.Before(lt.sent) || r.start.After(lt.callback) {
				continue
			}
			var s string
			switch {
			case r.start.Before(lt.targetCreated):
				s = segments[0]
			case r.start.Before(lt.sourceDestroyed):
				s = segments[1]
			case r.start.Before(lt.targetStarted):
				s = segments[2]
			default:
				s = segments[3]
			}
			if bySeg[s] == nil {
				bySeg[s] = map[string]*agg{}
			}
			a := bySeg[s][r.op]
			if a == nil {
				a = &agg{}
				bySeg[s][r.op] = a
			}
			a.n++
			a.sum += r.end.Sub(r.start)
			segTotal[s] += r.end.Sub(r.start)
		}
	}
	n := float64(len(berthd))
	fmt.Fprintf(sb, "traced requests by restart segment (mean per restart; sums overlap where berthd runs calls in parallel):\n")
	for _, s := range segments {
		fmt.Fprintf(sb, "  %s: %.1f ms in Docker calls\n", s, benchMs(segTotal[s])/n)
		ops := make([]string, 0, len(bySeg[s]))
		for op := range bySeg[s] {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		for _, op := range ops {
			a := bySeg[s][op]
			fmt.Fprintf(sb, "      %-34s ×%5.2f  %7.2f ms\n", op, float64(a.n)/n, benchMs(a.sum)/n)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
