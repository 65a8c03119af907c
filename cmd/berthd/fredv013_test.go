package main

// Against fred v0.13's real docker backend (../shared/peers): the host it
// leaves when it stops — its leases' containers running — is refused by
// berthd in production mode (issue 29: "the guard, first"), warned about
// loudly otherwise, and named by berthctl doctor. Nothing of fred's is touched.

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// fredBinary unpacks fred v0.13's docker-backend daemon: $BERTH_FRED_V013, or
// shared/peers beside the checkout (CI has it there).
func fredBinary(t *testing.T) string {
	t.Helper()
	gz := os.Getenv("BERTH_FRED_V013")
	if gz == "" {
		gz = filepath.Join(repoRoot(t), "..", "shared", "peers", "fred-docker-backend-v0.13.0.gz")
	}
	in, err := os.Open(gz)
	if err != nil {
		skipOrFail(t, "fred v0.13's daemon is not at "+gz+" (shared/peers beside the checkout, or BERTH_FRED_V013)")
	}
	defer in.Close()
	r, err := gzip.NewReader(in)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fred-docker-backend")
	out, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, r); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return bin
}

// fredHost is a fred v0.13 daemon under a backend name of its own (fred
// recovers every fred.managed container of its name, berth's included: the
// name keeps it off every other test's leases).
type fredHost struct {
	t       *testing.T
	name    string
	api     string
	cmd     *exec.Cmd
	log     *syncBuffer
	volumes string
	dir     string // its config and its four .db files
	bin     string
	cfgPath string
}

// startFred runs fred v0.13 on its own backend name with its volumes on the
// btrfs test mount (fred refuses any other filesystem), and removes whatever
// it left when the test ends.
func startFred(t *testing.T) *fredHost {
	t.Helper()
	return startFredWith(t, "sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}")
}

// startFredWith is startFred with more config lines.
func startFredWith(t *testing.T, extra ...string) *fredHost {
	t.Helper()
	bin := fredBinary(t)
	_, root := btrfsRoot(t)
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := &fredHost{t: t, name: "fredv013-" + uuid.NewString()[:8], api: freePort(t), log: &syncBuffer{}, volumes: root, dir: dir}
	cfg := strings.Join([]string{
		"name: " + f.name, "listen_addr: " + f.api, "host_address: 127.0.0.1", "host_bind_ip: 127.0.0.1",
		"callback_secret: " + testSecret, `allowed_registries: ["127.0.0.1:5000"]`,
		"total_cpu_cores: 4", "total_memory_mb: 8192", "total_disk_mb: 2000",
		"volume_data_path: " + root, "startup_verify_duration: 1s",
		"callback_db_path: " + filepath.Join(dir, "callbacks.db"), "diagnostics_db_path: " + filepath.Join(dir, "diagnostics.db"),
		"releases_db_path: " + filepath.Join(dir, "releases.db"), "retention_db_path: " + filepath.Join(dir, "retention.db"),
	}, "\n") + "\n" + strings.Join(extra, "\n") + "\n"
	f.cfgPath = filepath.Join(dir, "docker-backend.yaml")
	if err := os.WriteFile(f.cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	f.bin = bin
	t.Cleanup(f.removeAll)
	f.start()
	return f
}

// start runs the fred daemon on its config and waits until it is healthy.
func (f *fredHost) start() {
	f.t.Helper()
	f.cmd = exec.Command(f.bin, "-config", f.cfgPath)
	f.cmd.Stdout, f.cmd.Stderr = f.log, f.log
	if err := f.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + f.api + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("fred v0.13 not healthy within 30 s:\n%s", f.log.String())
		}
	}
}

// provision asks fred for one lease of the test workload, signed as
// providerd signs, and waits until its container runs.
func (f *fredHost) provision(cb *callbackReceiver) (lease string, ctr container.Summary) {
	f.t.Helper()
	lease = uuid.NewString()
	raw, _ := json.Marshal(flatManifest(nil))
	body, _ := json.Marshal(messages.ProvisionRequest{LeaseUUID: lease, Tenant: f.tenant(), ProviderUUID: "p",
		Items: []messages.LeaseItem{{SKU: "docker-micro", Quantity: 1}}, CallbackURL: cb.callbackURL(), Payload: encodeB64(raw)})
	req, _ := http.NewRequest(http.MethodPost, "http://"+f.api+"/provision", strings.NewReader(string(body)))
	if err := signRequest(req, body); err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		f.t.Fatalf("fred's POST /provision: %d %s\n%s", resp.StatusCode, answer, f.log.String())
	}
	dc := dockerClient(f.t)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		cs, err := dc.ContainerList(context.Background(), container.ListOptions{Filters: filters.NewArgs(
			filters.Arg("label", "fred.backend_name="+f.name), filters.Arg("label", "fred.lease_uuid="+lease))})
		if err == nil && len(cs) == 1 && cs[0].State == "running" {
			return lease, cs[0]
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("fred's lease %s never ran (%v %v)\n%s", lease, cs, err, f.log.String())
		}
	}
}

// stop stops fred as an operator would (SIGTERM): its containers keep running.
func (f *fredHost) stop() {
	f.t.Helper()
	_ = f.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = f.cmd.Process.Kill()
		<-done
		f.t.Fatalf("fred v0.13 did not stop within 30 s:\n%s", f.log.String())
	}
}

// removeAll stops fred if it still runs and removes everything of its backend
// name: containers, networks, volume directories.
func (f *fredHost) removeAll() {
	if f.cmd.ProcessState == nil {
		_ = f.cmd.Process.Kill()
		_, _ = f.cmd.Process.Wait()
	}
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return
	}
	defer dc.Close()
	ctx := context.Background()
	mine := filters.NewArgs(filters.Arg("label", "fred.backend_name="+f.name))
	cs, _ := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: mine})
	for _, c := range cs {
		_ = dc.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	ns, _ := dc.NetworkList(ctx, network.ListOptions{Filters: mine})
	for _, n := range ns {
		_ = dc.NetworkRemove(ctx, n.ID)
	}
}

func TestFredV013Host_ProductionRefusesToStart_DevelopmentWarns_DoctorNamesIt(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	fred := startFred(t)
	lease, ctr := fred.provision(cb)
	if got := cb.waitFor(lease, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("fred's provision: %+v\n%s", got, fred.log.String())
	}
	fred.stop()
	before, err := dc.ContainerInspect(context.Background(), ctr.ID)
	if err != nil {
		t.Fatalf("fred's container after fred stopped: %v\n%s", err, fred.log.String())
	}
	if !before.State.Running {
		t.Fatalf("fred's container stopped with fred: %+v\n%s", before.State, fred.log.String())
	}
	name := strings.TrimPrefix(ctr.Names[0], "/")

	// Production: refused, naming the container, before anything changes.
	mnt, root := btrfsRoot(t)
	api := nonLoopbackAddr(t)
	ip := api[:strings.LastIndexByte(api, ':')]
	prod := newDaemonDir(t, "production_mode: true", "name: "+fred.name, "host_address: 203.0.113.10",
		"listen_addr: "+api, "host_bind_ip: "+ip,
		"sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 512}",
		"volume_data_path: "+root, "volume_mount_path: "+mnt, "volume_filesystem: btrfs")
	if code, out := runOnce(t, "-config", prod.cfgPath, "-initialize-storage-identity", "new"); code != 0 {
		t.Fatalf("initialize: exit %d\n%s", code, out)
	}
	code, out := runOnce(t, "-config", prod.cfgPath)
	if code != 1 || !strings.Contains(out, "fred v0.13") || !strings.Contains(out, name) {
		t.Fatalf("production start on fred's host: exit %d, want 1 naming fred v0.13's container %s\n%s", code, name, out)
	}

	// Development: it starts, says so loudly, and doctor names the container.
	dev := newDaemonDir(t, "name: "+fred.name).startInProcess()
	if log := dev.log.String(); !strings.Contains(log, "fred v0.13's docker backend made") || !strings.Contains(log, name) {
		t.Fatalf("no error line naming fred's container:\n%s", log)
	}
	// Its reconciler counts the container as fred's, not berthd's, every pass.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		m := string(dev.get("/metrics").Body)
		if strings.Contains(m, `berth_unaccounted_containers{kind="fred_v013"} 1`+"\n") && strings.Contains(m, `berth_unaccounted_containers{kind="berth"} 0`+"\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fred's unadopted container not counted as fred_v013:\n%s", grepLines(m, "berth_unaccounted_containers"))
		}
	}
	bin := buildBerthctl(t, t.TempDir())
	r := runBerthctl(t, bin, dev, "-config", dev.cfgPath, "doctor")
	if r.code == 0 || !strings.Contains(r.stdout, "fred_v013") || !strings.Contains(r.stdout, name) {
		t.Fatalf("doctor on fred's host: exit %d, want a failed fred_v013 check naming %s\n%s%s", r.code, name, r.stdout, r.stderr)
	}
	if code := dev.stop(); code != 0 {
		t.Fatalf("stop exit %d", code)
	}

	// fred's container: the same, untouched.
	after, err := dc.ContainerInspect(context.Background(), ctr.ID)
	if err != nil {
		t.Fatalf("fred's container is gone: %v", err)
	}
	if !after.State.Running || after.State.Pid != before.State.Pid || after.State.StartedAt != before.State.StartedAt {
		t.Fatalf("fred's container was touched: before %+v after %+v (%v)", before.State, after.State, err)
	}
}

// tenant is this fred's one tenant: fred names its per-tenant network after
// the tenant alone, so two fred hosts on one engine must not share one.
func (f *fredHost) tenant() string { return "tenant-" + f.name }
