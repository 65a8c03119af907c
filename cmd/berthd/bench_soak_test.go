package main

// BenchmarkSoak: a host that runs for months, compressed (issue 30 item 6). On the
// real engine, a child berthd takes cycles of provision → ready → restart or update
// (alternating) → close, several at once, over a rotation of distinct images built
// for the run (each its own ~1 MiB layer, pushed to the local registry and removed
// locally, so berthd pulls it); one lease in BERTH_SOAK_RETAIN_EVERY is stateful,
// retained at close, restored into a new lease and closed again (that copy is left
// to the reaper). Every BERTH_SOAK_KILL_EVERY cycles berthd is killed -9 mid-work
// and started again. Retention windows are short (releases, retained data and
// diagnostics are kept a minute or two) so compaction and reaping happen during
// the run, not after it.
//
// At the start, every checkpoint and the end (the workers paused: nothing live) it
// reads state.db (size, journal streams, events, snapshot bytes, outbox rows),
// diagnostics.db, berthd's RSS and goroutines, the image store (`docker system df`
// and this run's images), the volume root's bytes, the retention records and the
// Docker objects of the installation; it prints a table and the growth per 1,000
// closed leases. It fails when a lease is lost (a provision not ending Ready, then
// closed), when a figure still grows in the last quarter of the checkpoints at
// half or more of its rate in the first quarter (and above a noise floor), or when
// anything of the installation but the warm pool's free networks is left in Docker.
//
//	make soak                                   # 2,000 cycles, 40 images, kill -9 every 300
//	BERTH_SOAK_CYCLES=60 BERTH_SOAK_IMAGES=6 BERTH_SOAK_KILL_EVERY=25 make soak
//
// Knobs: BERTH_SOAK_CYCLES, BERTH_SOAK_IMAGES, BERTH_SOAK_KILL_EVERY,
// BERTH_SOAK_CONCURRENCY (4), BERTH_SOAK_RETAIN_EVERY (10), BERTH_SOAK_CHECKPOINT
// (cycles between checkpoints; default cycles/20 within [10, 1000]),
// BERTH_SOAK_IMAGE_BUDGET_MB (the image collector's budget, set when this berthd
// has the image_store_budget_mb key) and BERTH_SOAK_CONFIG (extra config lines,
// newline-separated).

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// soakSettings are the run's knobs.
type soakSettings struct {
	cycles, images, killEvery, concurrency, retainEvery, checkpointEvery, imageBudgetMB int
}

func soakSettingsFromEnv() soakSettings {
	s := soakSettings{
		cycles:      envInt("BERTH_SOAK_CYCLES", 2000),
		images:      envInt("BERTH_SOAK_IMAGES", 40),
		killEvery:   envInt("BERTH_SOAK_KILL_EVERY", 300),
		concurrency: envInt("BERTH_SOAK_CONCURRENCY", 4),
		retainEvery: envInt("BERTH_SOAK_RETAIN_EVERY", 10),
		// Below the rotation's bytes (each image ≈ 1 MiB over the shared workload
		// layer), so a collector has to act during the run.
		imageBudgetMB: envInt("BERTH_SOAK_IMAGE_BUDGET_MB", 16),
	}
	s.checkpointEvery = envInt("BERTH_SOAK_CHECKPOINT", min(max(s.cycles/20, 10), 1000))
	return s
}

// soakRetention are the short windows the soak runs with, so that what a closed
// lease leaves (superseded releases, retained data, diagnostics) is compacted or
// reaped during the run and a figure that only grows is a leak, not a window.
var soakRetention = []string{
	"releases_max_age: 1m",
	"retention_max_age: 1m",
	"retention_reap_interval: 15s",
	"diagnostics_max_age: 2m",
	"retain_on_close: true",
}

// soakConfig is the daemon's config: a diskless SKU for most leases, a stateful
// one (btrfs when the test mount is there) for the retained ones, a pool no cycle
// exhausts, the short windows, and the image budget when this berthd has the key.
func soakConfig(b *testing.B, s soakSettings) []string {
	cfg := []string{
		"total_cpu_cores: 64", "total_memory_mb: 65536", "total_disk_mb: 100000",
		"sku_profiles: {soak: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 0}, soak-disk: {cpu_cores: 0.25, memory_mb: 128, disk_mb: 16}}",
		"reconcile_interval: 30s",
		"provision_timeout: 3m",
		"network_pool_size: 8",
	}
	cfg = append(cfg, soakRetention...)
	if mnt := os.Getenv("BERTH_TEST_BTRFS"); mnt != "" {
		root := filepath.Join(mnt, "berthd-soak-"+uuid.NewString()[:8])
		b.Cleanup(func() { cleanBtrfsRoot(root) })
		cfg = append(cfg, "volume_data_path: "+root, "volume_mount_path: "+mnt, "volume_filesystem: btrfs")
	} else if dockerRequired() {
		b.Fatal("BERTH_TEST_BTRFS is not set: the soak's stateful leases run on the btrfs test mount (make btrfs-up)")
	}
	// The image collector (issue 30 item 1) is not in every berthd: its budget is
	// set only when the embedded defaults know the key (an unknown key refuses start).
	if soakHasImageCollector() {
		cfg = append(cfg, fmt.Sprintf("image_store_budget_mb: %d", s.imageBudgetMB), "image_store_min_free_mb: 0", "image_gc_interval: 30s")
	}
	for _, l := range strings.Split(os.Getenv("BERTH_SOAK_CONFIG"), "\n") {
		if strings.TrimSpace(l) != "" {
			cfg = append(cfg, l)
		}
	}
	return cfg
}

// soakHasImageCollector reports whether this berthd has the image collector's
// budget key: its embedded defaults (the package's config/defaults.yaml) name it.
func soakHasImageCollector() bool {
	raw, err := os.ReadFile(filepath.Join("config", "defaults.yaml"))
	return err == nil && bytes.Contains(raw, []byte("\nimage_store_budget_mb:"))
}

// --- the images ---------------------------------------------------------------

// soakBuildImages builds n distinct images — the test workload plus a file of 1 MiB
// of random bytes — pushes each to the local registry under repo and removes the
// local copy, so each lease's first use of one is a real pull.
func soakBuildImages(b *testing.B, dc *client.Client, repo string, n int) []string {
	ctx := context.Background()
	refs := make([]string, 0, n)
	for i := range n {
		ref := fmt.Sprintf("%s:%d", repo, i)
		c, err := dc.ContainerCreate(ctx, &container.Config{Image: testImage(), Labels: map[string]string{"berth.soak": repo}}, nil, nil, nil, "")
		if err != nil {
			b.Fatalf("image %d: %v", i, err)
		}
		payload := make([]byte, 1<<20)
		_, _ = rand.Read(payload)
		var tarball bytes.Buffer
		tw := tar.NewWriter(&tarball)
		_ = tw.WriteHeader(&tar.Header{Name: "soak-payload.bin", Mode: 0o644, Size: int64(len(payload)), ModTime: time.Now()})
		_, _ = tw.Write(payload)
		_ = tw.Close()
		err = dc.CopyToContainer(ctx, c.ID, "/", &tarball, container.CopyToContainerOptions{})
		if err == nil {
			_, err = dc.ContainerCommit(ctx, c.ID, container.CommitOptions{Reference: ref})
		}
		_ = dc.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil {
			b.Fatalf("image %d: %v", i, err)
		}
		if err := soakPush(ctx, dc, ref); err != nil {
			b.Fatal(err)
		}
		if _, err := dc.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
			b.Fatalf("remove the local %s: %v", ref, err)
		}
		refs = append(refs, ref)
	}
	return refs
}

func soakPush(ctx context.Context, dc *client.Client, ref string) error {
	rc, err := dc.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: base64.StdEncoding.EncodeToString([]byte("{}"))})
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	out, _ := io.ReadAll(rc)
	rc.Close()
	if bytes.Contains(out, []byte(`"error"`)) {
		return fmt.Errorf("push %s: %s", ref, out)
	}
	return nil
}

// soakImagesOf lists the local images of the run's repository (pulled by digest,
// so matched on RepoDigests as well as tags).
func soakImagesOf(ctx context.Context, dc *client.Client, repo string) ([]image.Summary, error) {
	all, err := dc.ImageList(ctx, image.ListOptions{All: true})
	if err != nil {
		return nil, err
	}
	var out []image.Summary
	for _, img := range all {
		for _, r := range append(append([]string{}, img.RepoTags...), img.RepoDigests...) {
			if strings.HasPrefix(r, repo+":") || strings.HasPrefix(r, repo+"@") {
				out = append(out, img)
				break
			}
		}
	}
	return out, nil
}

// soakRemoveImages removes the run's images from Docker. The registry keeps its
// copies: the Debian docker-registry runs without deletion enabled.
func soakRemoveImages(dc *client.Client, repo string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	imgs, _ := soakImagesOf(ctx, dc, repo)
	for _, img := range imgs {
		_, _ = dc.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
	}
}

// --- the run ------------------------------------------------------------------

// soakRun is what the workers share.
type soakRun struct {
	b      *testing.B
	d      *daemonProc
	cb     *callbackReceiver
	dc     *client.Client
	http   *http.Client
	images []string
	s      soakSettings

	closed atomic.Int64 // leases closed (a restored lease counts as one)
	kills  atomic.Int64 // kill -9s so far, counted before the kill
	cut    atomic.Int64 // maintenances a kill cut: failed, the source recreated (by design)
	mu     sync.Mutex
	errs   []string // cycles that did not end Ready, then closed
}

// call is one signed request that survives the daemon going away: a transport
// error, a 503 (recovering, lifecycle pending) and a 409 of a completion still
// being delivered are asked again until the deadline; any other answer is
// returned, with whether an earlier try may have reached berthd.
func (r *soakRun) call(method, uri string, v any, timeout time.Duration) (code int, resp []byte, retried bool, err error) {
	var body []byte
	if v != nil {
		if body, err = json.Marshal(v); err != nil {
			return 0, nil, false, err
		}
	}
	deadline := time.Now().Add(timeout)
	for ; ; retried = true {
		code, resp, err = r.once(method, uri, body)
		retry := err != nil || code == http.StatusServiceUnavailable ||
			(code == http.StatusConflict && bytes.Contains(resp, []byte("still being delivered")))
		if !retry {
			return code, resp, retried, nil
		}
		if time.Now().After(deadline) {
			return code, resp, retried, fmt.Errorf("%s %s: still %d %s %v after %s", method, uri, code, resp, err, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (r *soakRun) once(method, uri string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, "http://"+r.d.api+uri, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if err := signRequest(req, body); err != nil {
		return 0, nil, err
	}
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// waitCallback waits for the lease's first callback that match accepts.
func (r *soakRun) waitCallback(lease, what string, match func(messages.Callback) bool, timeout time.Duration) (messages.Callback, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, c := range r.cb.forLease(lease) {
			if match(c.Body) {
				return c.Body, nil
			}
		}
		if time.Now().After(deadline) {
			var got []string
			for _, c := range r.cb.forLease(lease) {
				got = append(got, c.Body.Status+"/"+c.Body.Error)
			}
			return messages.Callback{}, fmt.Errorf("lease %s: no %s callback within %s (got %v)", lease, what, timeout, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// admit provisions (or restores, from != "") lease and waits for its success.
func (r *soakRun) admit(lease, from, sku string, manifest any) error {
	var uri string
	var req any
	items := []messages.LeaseItem{{SKU: sku, Quantity: 1}}
	if from == "" {
		raw, _ := json.Marshal(manifest)
		uri, req = "/provision", messages.ProvisionRequest{LeaseUUID: lease, Tenant: "tenant-soak", ProviderUUID: "provider-soak",
			Items: items, CallbackURL: r.cb.callbackURL(), Payload: base64.StdEncoding.EncodeToString(raw)}
	} else {
		uri, req = "/restore", messages.RestoreRequest{LeaseUUID: lease, FromLeaseUUID: from, Tenant: "tenant-soak",
			ProviderUUID: "provider-soak", Items: items, CallbackURL: r.cb.callbackURL()}
	}
	if err := r.accept(uri, req); err != nil {
		return err
	}
	cb, err := r.waitCallback(lease, "provision", func(c messages.Callback) bool {
		return c.MaintenanceID == "" && (c.Status == messages.CallbackSuccess || c.Status == messages.CallbackFailed)
	}, 5*time.Minute)
	if err == nil && cb.Status != messages.CallbackSuccess {
		err = fmt.Errorf("lease %s: %s ended %s: %s", lease, uri, cb.Status, cb.Error)
	}
	return err
}

// tookEarlier are the refusals that, after a retry, say an earlier try (whose
// answer a kill cut) was taken: the lease exists, or the maintenance ID names a
// release or is running.
var tookEarlier = []string{"already_provisioned", "already names a release", "lease is restarting", "lease is updating"}

// accept posts until the request is taken.
func (r *soakRun) accept(uri string, req any) error {
	code, body, retried, err := r.call(http.MethodPost, uri, req, 3*time.Minute)
	if err != nil {
		return err
	}
	if code == http.StatusAccepted {
		return nil
	}
	for _, s := range tookEarlier {
		if retried && code == http.StatusConflict && bytes.Contains(body, []byte(s)) {
			return nil
		}
	}
	return fmt.Errorf("POST %s: %d %s", uri, code, body)
}

// close deprovisions lease and waits for its deprovisioned callback.
func (r *soakRun) close(lease string, wantRetained bool) error {
	code, body, _, err := r.call(http.MethodPost, "/deprovision", messages.DeprovisionRequest{LeaseUUID: lease}, 3*time.Minute)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("deprovision %s: %d %s", lease, code, body)
	}
	cb, err := r.waitCallback(lease, "deprovisioned", func(c messages.Callback) bool { return c.Status == messages.CallbackDeprovisioned }, 3*time.Minute)
	if err != nil {
		return err
	}
	if cb.Retained != wantRetained {
		return fmt.Errorf("lease %s: deprovisioned with retained %v, want %v", lease, cb.Retained, wantRetained)
	}
	r.closed.Add(1)
	return nil
}

// cycle is one lease's life: provision → ready → restart (even cycles) or update
// (odd) → close; a stateful one is then restored into a new lease, which is closed
// in turn (its data retained again, left to the reaper).
func (r *soakRun) cycle(i int) error {
	lease := uuid.NewString()
	ref := r.images[i%len(r.images)]
	stateful := r.s.retainEvery > 0 && i%r.s.retainEvery == r.s.retainEvery-1
	sku := "soak"
	if stateful {
		sku = "soak-disk"
	}
	if err := r.admit(lease, "", sku, flatManifest(map[string]any{"image": ref})); err != nil {
		return r.abandon(lease, err)
	}
	var data []byte
	if stateful {
		data = make([]byte, soakDataBytes)
		_, _ = rand.Read(data)
		if err := r.writeData(lease, data); err != nil {
			return r.abandon(lease, err)
		}
	}
	if err := r.maintain(i, lease, ref); err != nil {
		return r.abandon(lease, err)
	}
	if err := r.close(lease, stateful); err != nil {
		return err
	}
	if !stateful {
		return nil
	}
	dest := uuid.NewString()
	if err := r.admit(dest, lease, sku, nil); err != nil {
		return r.abandon(dest, err)
	}
	if err := r.readData(dest, data); err != nil {
		return r.abandon(dest, err)
	}
	return r.close(dest, true)
}

// soakDataBytes is what a stateful lease writes to its volume, read back after
// the restore: retention and restore carry real bytes, the volume root holds them.
const soakDataBytes = 1 << 20

// dataPort is the published port of the lease's one instance.
func (r *soakRun) dataPort(lease string) (string, error) {
	code, body, _, err := r.call(http.MethodGet, "/info/"+lease, nil, time.Minute)
	if err != nil || code != http.StatusOK {
		return "", fmt.Errorf("GET /info/%s: %d %s %v", lease, code, body, err)
	}
	var info messages.LeaseInfo
	if err := json.Unmarshal(body, &info); err != nil {
		return "", err
	}
	for _, inst := range info.Services["app"].Instances {
		if p := inst.Ports["8080/tcp"].HostPort; p != "" {
			return p, nil
		}
	}
	return "", fmt.Errorf("lease %s publishes no 8080/tcp: %s", lease, body)
}

// writeData puts data into the lease's volume through the workload.
func (r *soakRun) writeData(lease string, data []byte) error {
	port, err := r.dataPort(lease)
	if err != nil {
		return err
	}
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:"+port+"/file?path=/data/soak.bin", bytes.NewReader(data))
	resp, err := r.http.Do(req)
	if err != nil {
		return fmt.Errorf("lease %s: write its volume: %w", lease, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("lease %s: write its volume: %d %s", lease, resp.StatusCode, msg)
	}
	return nil
}

// readData checks the restored lease reads back what its source wrote.
func (r *soakRun) readData(lease string, want []byte) error {
	port, err := r.dataPort(lease)
	if err != nil {
		return err
	}
	resp, err := r.http.Get("http://127.0.0.1:" + port + "/file?path=/data/soak.bin")
	if err != nil {
		return fmt.Errorf("restored lease %s: read its volume: %w", lease, err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
		return fmt.Errorf("restored lease %s: read %d, %d bytes, want the %d its source wrote", lease, resp.StatusCode, len(got), len(want))
	}
	return nil
}

// maintain restarts (even cycles) or updates (odd) a ready lease and waits for the
// completion. A maintenance a kill -9 cut ends failed with the source recreated —
// berthd's recovery, by design — and is counted, not lost; one no kill touched
// must succeed.
func (r *soakRun) maintain(i int, lease, ref string) error {
	id := uuid.NewString()
	uri, req := "/restart", messages.MaintenanceRequest{LeaseUUID: lease, MaintenanceID: id,
		MaintenanceAdmittedAt: time.Now().UTC().Format(time.RFC3339)}
	if i%2 == 1 {
		raw, _ := json.Marshal(flatManifest(map[string]any{"image": ref, "env": map[string]string{"SOAK_CYCLE": strconv.Itoa(i)}}))
		uri, req.Payload = "/update", base64.StdEncoding.EncodeToString(raw)
	}
	kills := r.kills.Load()
	if err := r.accept(uri, req); err != nil {
		return err
	}
	cb, err := r.waitCallback(lease, uri, func(c messages.Callback) bool { return c.MaintenanceID == id }, 5*time.Minute)
	switch {
	case err != nil:
		return err
	case cb.Status == messages.CallbackSuccess:
		return nil
	case r.kills.Load() != kills:
		r.cut.Add(1)
		return nil
	}
	return fmt.Errorf("lease %s: %s ended %s: %s", lease, uri, cb.Status, cb.Error)
}

// abandon closes a lease whose cycle failed, so the run leaves nothing behind, and
// returns the cycle's error with what berthd logged about the lease.
func (r *soakRun) abandon(lease string, cause error) error {
	_, _, _, _ = r.call(http.MethodPost, "/deprovision", messages.DeprovisionRequest{LeaseUUID: lease}, 3*time.Minute)
	return fmt.Errorf("%w\n    berthd about it:\n%s", cause, tail(r.d.logLines(lease), 2000))
}

// batch runs cycles [from, to) concurrency at a time; when a worker takes a cycle
// on the kill schedule, berthd is killed -9 a moment later (that cycle and its
// neighbours in flight) and started again.
func (r *soakRun) batch(from, to int) {
	jobs := make(chan int)
	killNow := make(chan struct{}, 1)
	var wg sync.WaitGroup
	for range r.s.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if r.s.killEvery > 0 && i > 0 && i%r.s.killEvery == 0 {
					select {
					case killNow <- struct{}{}:
					default:
					}
				}
				if err := r.cycle(i); err != nil {
					r.mu.Lock()
					r.errs = append(r.errs, fmt.Sprintf("cycle %d: %v", i, err))
					r.mu.Unlock()
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		for i := from; i < to; i++ {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		close(done)
	}()
	for {
		select {
		case <-killNow:
			time.Sleep(time.Duration(500+mrand.IntN(2500)) * time.Millisecond)
			r.kills.Add(1)
			r.d.kill9()
			r.d.startChild(true)
		case <-done:
			return
		}
	}
}

// --- the figures --------------------------------------------------------------

// soakFigure is one measured quantity: how it prints, the growth per 1,000
// closed leases below which it counts as flat, and the change across the last
// quarter that is noise whatever the rate (GC, bbolt's file growing in steps,
// leases in their retention window at the moment of the look); a negative floor
// marks a figure shown but not judged.
type soakFigure struct {
	name  string
	unit  string // "B" prints as MiB
	floor float64
	noise float64
}

var soakFigures = []soakFigure{
	// bbolt grows its file by doubling its mapping (1, 2, 4 MiB …): the file's
	// size is shown; what is judged is the pages holding data, by bucket.
	{"state.db file", "B", -1, 0},
	{"state.db in use", "B", 256 << 10, 256 << 10},
	{"  journal", "B", 256 << 10, 256 << 10},
	{"  retired names", "B", 256 << 10, 64 << 10},
	{"  the rest", "B", 256 << 10, 256 << 10},
	{"journal streams", "", 10, 2},
	{"journal events", "", 100, 40},
	{"snapshot bytes", "B", 256 << 10, 256 << 10},
	{"outbox rows", "", 10, 4},
	{"diagnostics.db", "B", 256 << 10, 1 << 20},
	{"data dir", "B", 512 << 10, 1 << 20},
	{"berthd RSS", "B", 16 << 20, 24 << 20},
	{"goroutines", "", 25, 10},
	{"retentions", "", 5, 5},
	{"volume root", "B", 8 << 20, 8 << 20},
	{"image store (df)", "B", -1, 0}, // host-wide: other users' images move it
	{"run images", "", 4, 2},
	{"run image bytes", "B", 8 << 20, 8 << 20}, // each image with its shared base layers
	{"containers", "", 2, 0},
	{"lease networks", "", 2, 0},
	{"pool networks", "", 2, 0},
	{"docker volumes", "", 2, 0},
}

// soakCheckpoint is every figure at one moment.
type soakCheckpoint struct {
	cycles int
	leases int64
	at     time.Duration
	v      map[string]float64
}

// measure reads every figure. The workers are paused: nothing is live.
func (r *soakRun) measure(repo, installation string, cycles int, since time.Time) soakCheckpoint {
	b := r.b
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dataDir := filepath.Join(r.d.dir, "data")
	cp := soakCheckpoint{cycles: cycles, leases: r.closed.Load(), at: time.Since(since), v: map[string]float64{}}
	cp.v["state.db file"] = float64(fileSize(filepath.Join(dataDir, "state.db")))
	cp.v["diagnostics.db"] = float64(fileSize(filepath.Join(dataDir, "diagnostics.db")))
	cp.v["data dir"] = float64(duBytes(dataDir))
	j, err := soakJournalStats(dataDir)
	if err != nil {
		b.Errorf("journal stats: %v", err)
	}
	cp.v["journal streams"], cp.v["journal events"] = float64(j.streams), float64(j.events)
	cp.v["state.db in use"], cp.v["  journal"], cp.v["  retired names"] = float64(j.inUse), float64(j.buckets["journal"]), float64(j.buckets["retired"])
	cp.v["  the rest"] = float64(j.inUse - j.buckets["journal"] - j.buckets["retired"])
	cp.v["snapshot bytes"], cp.v["outbox rows"] = float64(j.snapshotBytes), float64(j.outboxRows)
	cp.v["berthd RSS"] = float64(vmRSS(r.d.cmd.Process.Pid))
	if g, ok := r.metric("go_goroutines"); ok {
		cp.v["goroutines"] = g
	}
	if v, ok := r.metric("berth_image_store_bytes"); ok {
		cp.v["collector's image store"] = v
	}
	if code, body, _, err := r.call(http.MethodGet, "/retentions", nil, time.Minute); err == nil && code == 200 {
		var page struct {
			Retentions []messages.Retention `json:"retentions"`
		}
		_ = json.Unmarshal(body, &page)
		cp.v["retentions"] = float64(len(page.Retentions))
	}
	cp.v["volume root"] = float64(duBytes(r.d.volumeRoot()))
	if du, err := r.dc.DiskUsage(ctx, types.DiskUsageOptions{Types: []types.DiskUsageObject{types.ImageObject}}); err == nil {
		cp.v["image store (df)"] = float64(du.LayersSize)
	} else {
		b.Errorf("docker system df: %v", err)
	}
	if imgs, err := soakImagesOf(ctx, r.dc, repo); err == nil {
		var size int64
		for _, img := range imgs {
			size += img.Size
		}
		cp.v["run images"], cp.v["run image bytes"] = float64(len(imgs)), float64(size)
	}
	o := soakObjects(ctx, r.dc, installation)
	cp.v["containers"], cp.v["lease networks"], cp.v["pool networks"], cp.v["docker volumes"] =
		float64(o.containers), float64(o.leaseNetworks), float64(o.poolNetworks), float64(o.volumes)
	return cp
}

// metric is one unlabelled sample of berthd's /metrics.
func (r *soakRun) metric(name string) (float64, bool) {
	resp, err := r.http.Get("http://" + r.d.api + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// duBytes is du's apparent-or-allocated total of a tree (allocated: what a disk
// fills with), 0 when it cannot tell.
func duBytes(path string) int64 {
	if path == "" {
		return 0
	}
	out, err := exec.Command("du", "-s", "-B1", path).Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.Fields(string(out) + " 0")[0], 10, 64)
	return n
}

// vmRSS is a process's resident set in bytes (/proc/<pid>/status VmRSS).
func vmRSS(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	return 0
}

type soakJournal struct {
	streams, events, snapshotBytes, outboxRows int
	inUse                                      int            // bytes of the pages holding data, every bucket
	buckets                                    map[string]int // the same by top-level bucket
}

// soakJournalStats counts state.db's journal from a copy (berthd holds the live
// file's flock); a copy torn by a concurrent commit fails to open or read and is
// taken again.
func soakJournalStats(dataDir string) (j soakJournal, err error) {
	for range 20 {
		if j, err = soakJournalCopy(dataDir); err == nil {
			return j, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return j, err
}

func soakJournalCopy(dataDir string) (j soakJournal, err error) {
	raw, err := os.ReadFile(filepath.Join(dataDir, "state.db"))
	if err != nil {
		return j, err
	}
	tmp := filepath.Join(os.TempDir(), "berth-soak-"+uuid.NewString()+".db")
	defer os.Remove(tmp)
	if err := os.WriteFile(tmp, raw, 0o600); err != nil {
		return j, err
	}
	defer func() {
		if p := recover(); p != nil { // a torn copy can trip bbolt's page assertions
			err = fmt.Errorf("torn copy: %v", p)
		}
	}()
	db, err := bolt.Open(tmp, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return j, err
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		j.buckets = map[string]int{}
		if err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			s := b.Stats()
			n := s.BranchAlloc + s.LeafAlloc
			j.buckets[string(name)] += n
			j.inUse += n
			return nil
		}); err != nil {
			return err
		}
		journal := tx.Bucket([]byte("journal"))
		if journal == nil {
			return errors.New("no journal bucket")
		}
		if err := journal.ForEachBucket(func(k []byte) error {
			j.streams++
			j.events += journal.Bucket(k).Stats().KeyN
			return nil
		}); err != nil {
			return err
		}
		if snaps := tx.Bucket([]byte("snapshot")); snaps != nil {
			_ = snaps.ForEachBucket(func(k []byte) error {
				return snaps.Bucket(k).ForEach(func(_, v []byte) error { j.snapshotBytes += len(v); return nil })
			})
		}
		if outbox := tx.Bucket([]byte("outbox")); outbox != nil {
			_ = outbox.ForEachBucket(func(k []byte) error { j.outboxRows += outbox.Bucket(k).Stats().KeyN; return nil })
		}
		return nil
	})
	return j, err
}

type soakObjectCount struct{ containers, leaseNetworks, poolNetworks, volumes int }

// soakObjects counts the installation's Docker objects; a network labelled
// fred.network_scope=pool is the warm pool's.
func soakObjects(ctx context.Context, dc *client.Client, installation string) (o soakObjectCount) {
	f := filters.NewArgs(filters.Arg("label", dockerio.LabelInstallation+"="+installation))
	if cs, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
		o.containers = len(cs)
	}
	if ns, err := dc.NetworkList(ctx, network.ListOptions{Filters: f}); err == nil {
		for _, n := range ns {
			if n.Labels[dockerio.LabelNetworkScope] == "pool" {
				o.poolNetworks++
			} else {
				o.leaseNetworks++
			}
		}
	}
	if vs, err := dc.VolumeList(ctx, volume.ListOptions{Filters: f}); err == nil {
		o.volumes = len(vs.Volumes)
	}
	return o
}

// --- the report ---------------------------------------------------------------

func soakFormat(f soakFigure, v float64) string {
	if f.unit == "B" && (v >= 1<<20 || v <= -1<<20) {
		return fmt.Sprintf("%.2f MiB", v/(1<<20))
	}
	if f.unit == "B" {
		return fmt.Sprintf("%.0f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f", v)
}

// soakTable prints every checkpoint so far as one row per figure.
func soakTable(cps []soakCheckpoint) string {
	var sb strings.Builder
	cols := cps
	if len(cols) > 12 { // the first, then the last eleven
		cols = append([]soakCheckpoint{cps[0]}, cps[len(cps)-11:]...)
	}
	fmt.Fprintf(&sb, "%-24s", "cycles / closed leases")
	for _, cp := range cols {
		fmt.Fprintf(&sb, " %12s", fmt.Sprintf("%d/%d", cp.cycles, cp.leases))
	}
	fmt.Fprintf(&sb, "\n%-24s", "elapsed")
	for _, cp := range cols {
		fmt.Fprintf(&sb, " %12s", cp.at.Round(time.Second))
	}
	for _, f := range soakAllFigures(cps) {
		fmt.Fprintf(&sb, "\n%-24s", f.name)
		for _, cp := range cols {
			fmt.Fprintf(&sb, " %12s", soakFormat(f, cp.v[f.name]))
		}
	}
	return sb.String()
}

// soakAllFigures are the figures plus the collector's metric when berthd has one.
func soakAllFigures(cps []soakCheckpoint) []soakFigure {
	out := soakFigures
	if _, ok := cps[len(cps)-1].v["collector's image store"]; ok {
		out = append(out[:len(out):len(out)], soakFigure{"collector's image store", "B", 8 << 20, 8 << 20})
	}
	return out
}

// soakRate is a figure's growth per 1,000 closed leases between two checkpoints.
func soakRate(f soakFigure, a, b soakCheckpoint) float64 {
	if b.leases == a.leases {
		return 0
	}
	return (b.v[f.name] - a.v[f.name]) * 1000 / float64(b.leases-a.leases)
}

// soakUnbounded judges the growth: the first and the last quarter of the
// checkpoints after the start (the start is before any image was pulled) compared.
// A figure is unbounded when its last-quarter rate is above its floor and at least
// half its first-quarter rate, its last-quarter change is more than noise — it has
// not levelled off — and the last quarter's lowest value is above the first
// quarter's highest: a figure a housekeeping pass saws up and down (journal
// streams between two compactions) can show any rate between two looks, but
// what has grown stays above where it was. With fewer than four intervals there
// is no trend to judge.
func soakUnbounded(cps []soakCheckpoint) (report string, unbounded []string) {
	var sb strings.Builder
	n := len(cps) - 1 // checkpoints after the start
	if n < 4 {
		return fmt.Sprintf("growth not judged: %d checkpoints after the start, at least 4 needed", n), nil
	}
	k := max(1, n/4)
	first0, first1 := cps[1], cps[1+k]
	last0, last1 := cps[n-k], cps[n]
	fmt.Fprintf(&sb, "growth per 1,000 closed leases: first quarter (leases %d→%d), last quarter (leases %d→%d), whole run (%d→%d)\n",
		first0.leases, first1.leases, last0.leases, last1.leases, first0.leases, last1.leases)
	envelope := func(name string, w []soakCheckpoint) (lo, hi float64) {
		lo, hi = w[0].v[name], w[0].v[name]
		for _, cp := range w[1:] {
			lo, hi = min(lo, cp.v[name]), max(hi, cp.v[name])
		}
		return lo, hi
	}
	for _, f := range soakAllFigures(cps) {
		fr, lr := soakRate(f, first0, first1), soakRate(f, last0, last1)
		_, firstHi := envelope(f.name, cps[1:2+k])
		lastLo, _ := envelope(f.name, cps[n-k:])
		verdict := "flat"
		switch {
		case f.floor < 0:
			verdict = "(not judged)"
		case lr > f.floor && lr >= fr/2 && last1.v[f.name]-last0.v[f.name] > f.noise && lastLo <= firstHi:
			verdict = "within its swing"
		case lr > f.floor && lr >= fr/2 && last1.v[f.name]-last0.v[f.name] > f.noise:
			verdict = "UNBOUNDED"
			unbounded = append(unbounded, f.name)
		case lr > f.floor && lr < fr/2:
			verdict = "levelling off"
		case lr > f.floor:
			verdict = "within noise"
		}
		fmt.Fprintf(&sb, "  %-24s %14s → %14s  whole %14s  (floor %s, noise %s) %s\n", f.name, soakFormat(f, fr), soakFormat(f, lr),
			soakFormat(f, soakRate(f, first0, last1)), soakFormat(f, max(f.floor, 0)), soakFormat(f, f.noise), verdict)
	}
	return sb.String(), unbounded
}

// --- the benchmark ------------------------------------------------------------

func BenchmarkSoak(b *testing.B) {
	s := soakSettingsFromEnv()
	dc := dockerClient(b)
	runID := uuid.NewString()[:8]
	repo := strings.TrimSuffix(os.Getenv("BERTH_TEST_REGISTRY"), "/")
	if repo == "" {
		repo = "127.0.0.1:5000"
	}
	repo += "/berth/soak-" + runID
	b.Cleanup(func() { soakRemoveImages(dc, repo) })

	start := time.Now()
	images := soakBuildImages(b, dc, repo, s.images)
	benchPrint(b, fmt.Sprintf("soak %s: %d cycles, %d images (%s), kill -9 every %d, %d at once, 1 in %d retained and restored, checkpoint every %d cycles; images built in %s; image collector: %v; windows: %s",
		runID, s.cycles, s.images, repo, s.killEvery, s.concurrency, s.retainEvery, s.checkpointEvery,
		time.Since(start).Round(time.Second), soakHasImageCollector(), strings.Join(soakRetention, ", ")+"\n"))

	cb := newCallbackReceiver(b)
	d := newDaemonDir(b, soakConfig(b, s)...).startChild(true)
	installation := benchInstallationID(b, filepath.Join(d.dir, "data"))
	r := &soakRun{b: b, d: d, cb: cb, dc: dc, images: images, s: s,
		http: &http.Client{Timeout: 40 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}}

	b.ResetTimer()
	runStart := time.Now()
	cps := []soakCheckpoint{r.measure(repo, installation, 0, runStart)}
	for from := 0; from < s.cycles; from += s.checkpointEvery {
		to := min(from+s.checkpointEvery, s.cycles)
		r.batch(from, to)
		cps = append(cps, r.measure(repo, installation, to, runStart))
		benchPrint(b, fmt.Sprintf("soak checkpoint after %d cycles (%d kills, %d maintenances cut by one, %d cycles lost so far):\n%s\n", to, r.kills.Load(), r.cut.Load(), len(r.errs), soakTable(cps)))
	}
	elapsed := time.Since(runStart)
	b.StopTimer()

	// The end: every lease closed and its copies reaped; only the warm pool's free
	// networks may remain in Docker.
	if len(r.errs) > 0 {
		b.Errorf("%d of %d cycles lost (did not end Ready, then closed):\n  %s", len(r.errs), s.cycles, strings.Join(r.errs[:min(len(r.errs), 20)], "\n  "))
	}
	benchWaitInstallationEmpty(b, dc, installation, 3*time.Minute)
	reapDeadline := time.Now().Add(3 * time.Minute)
	for {
		code, body, _, err := r.call(http.MethodGet, "/retentions", nil, time.Minute)
		if err == nil && code == 200 && bytes.Contains(body, []byte(`"retentions":[]`)) {
			break
		}
		if time.Now().After(reapDeadline) {
			b.Errorf("retained data not reaped 3 min after the last close (retention_max_age 1m): %d %s %v", code, body, err)
			break
		}
		time.Sleep(2 * time.Second)
	}
	var st messages.Stats
	if code, body, _, err := r.call(http.MethodGet, "/stats", nil, time.Minute); err != nil || code != 200 || json.Unmarshal(body, &st) != nil {
		b.Errorf("GET /stats: %d %s %v", code, body, err)
	} else if st.AllocatedCPUCores != 0 || st.AllocatedMemoryMB != 0 || st.AllocatedDiskMB != 0 || st.ActiveContainers != 0 {
		b.Errorf("the pool is not empty after every lease closed and its data was reaped: %+v", st)
	}
	end := r.measure(repo, installation, s.cycles, runStart)
	if o := end.v["containers"] + end.v["lease networks"] + end.v["docker volumes"]; o != 0 {
		b.Errorf("the installation holds %v containers, lease networks or volumes at the end", o)
	}
	if pool := end.v["pool networks"]; pool > 8 {
		b.Errorf("%v pool networks at the end, network_pool_size is 8", pool)
	}
	if soakHasImageCollector() && end.v["collector's image store"] > float64(s.imageBudgetMB<<20) {
		b.Errorf("the image store holds %s at the end, over its budget of %d MiB", soakFormat(soakFigure{unit: "B"}, end.v["collector's image store"]), s.imageBudgetMB)
	}
	cps = append(cps, end)

	judged, unbounded := soakUnbounded(cps[:len(cps)-1])
	perCycle := elapsed / time.Duration(s.cycles)
	benchPrint(b, fmt.Sprintf("soak %s done: %d cycles, %d leases closed, %d kills (%d maintenances cut by one) in %s (%s per cycle; 2,000 cycles ≈ %s); lost %d\n%s\nat the end (reaped):\n%s\n",
		runID, s.cycles, r.closed.Load(), r.kills.Load(), r.cut.Load(), elapsed.Round(time.Second), perCycle.Round(10*time.Millisecond),
		(2000*perCycle).Round(time.Minute), len(r.errs), judged, soakTable(cps)))
	if len(unbounded) > 0 {
		b.Errorf("figures growing without bound: %s", strings.Join(unbounded, ", "))
	}
	b.ReportMetric(perCycle.Seconds(), "s/cycle")
}

// The judgement, without Docker: a figure that keeps its rate is unbounded, in a
// line or in steps; one that levels off, one that moves within its noise, one a
// housekeeping pass saws up and down, and one not judged pass.
func TestSoakJudgement_LinearGrowthFails_PlateauNoiseSawAndUnjudgedPass(t *testing.T) {
	figs := soakFigures
	defer func() { soakFigures = figs }()
	// "noisy" and "jump" both rise by 40 at the last look: a rate above the floor,
	// a change within noisy's noise and above jump's — but one look above the
	// rest is a swing's peak until the next looks stay up. "saw" swings between
	// 60 and 140 with each pass; "steps" grows by 60 every other look.
	soakFigures = []soakFigure{{"linear", "", 10, 5}, {"plateau", "", 10, 5}, {"noisy", "", 10, 50}, {"jump", "", 10, 5},
		{"saw", "", 10, 5}, {"steps", "", 10, 5}, {"host", "", -1, 0}}
	var cps []soakCheckpoint
	for i := range 9 {
		last := 0.0
		if i == 8 {
			last = 40
		}
		cps = append(cps, soakCheckpoint{leases: int64(i * 100), v: map[string]float64{
			"linear": float64(i * 20), "plateau": float64(min(i, 3) * 100), "noisy": last, "jump": last,
			"saw": float64(60 + 80*(i%2)), "steps": float64(60 * (i / 2)), "host": float64(i * 1000)}})
	}
	report, unbounded := soakUnbounded(cps)
	if strings.Join(unbounded, ",") != "linear,steps" {
		t.Fatalf("unbounded %v, want [linear steps]\n%s", unbounded, report)
	}
	if _, unbounded := soakUnbounded(cps[:4]); unbounded != nil {
		t.Fatalf("three intervals judged: %v", unbounded)
	}
}
