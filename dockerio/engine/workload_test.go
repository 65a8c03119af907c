package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/google/uuid"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/volumes"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// The engine's tests run against the real Docker engine and the local registry.
// TestMain builds a tiny static workload, imports it as an image (no base image:
// Docker Hub is unreachable), pushes it to 127.0.0.1:5000 under a random tag and
// removes the local copy, so ResolveImage really fetches it.

const (
	dockerSocket = "/var/run/docker.sock"
	testRepo     = "127.0.0.1:5000/berth-enginetest/workload"
	testMarker   = "berth.enginetest" // label on every object a test creates by hand
)

// workloadSource is the test workload: serve HTTP, fetch a URL, print lines, exit
// with a code, write a file. Stdlib only, static.
const workloadSource = `package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	mode, args := "serve", os.Args[1:]
	if len(args) > 0 {
		mode, args = args[0], args[1:]
	}
	switch mode {
	case "serve":
		serve()
	case "get": // get URL: exit 0 on 2xx
		c := &http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(args[0])
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Print(string(body))
		if resp.StatusCode/100 != 2 {
			os.Exit(1)
		}
	case "lines": // lines N SIZE: N numbered lines of SIZE bytes, odd ones on stderr; then serve
		n, _ := strconv.Atoi(args[0])
		size, _ := strconv.Atoi(args[1])
		for i := 1; i <= n; i++ {
			head := fmt.Sprintf("line %06d ", i)
			line := head + strings.Repeat("x", max(0, size-len(head)-1)) + "\n"
			if i%2 == 1 {
				os.Stderr.WriteString(line)
			} else {
				os.Stdout.WriteString(line)
			}
		}
		serve()
	case "exit": // exit CODE DELAY
		code, _ := strconv.Atoi(args[0])
		d, _ := time.ParseDuration(args[1])
		fmt.Println("exiting with", code, "after", d)
		time.Sleep(d)
		os.Exit(code)
	case "write": // write PATH: exit 0 when the file could be written
		if err := os.WriteFile(args[0], []byte("x"), 0o644); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
	default:
		fmt.Println("unknown mode", mode)
		os.Exit(2)
	}
}

func serve() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; os.Exit(0) }()
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "ok %s\n", host) })
	if err := http.ListenAndServe(":8080", nil); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}
`

var (
	dockerPresent bool
	fx            fixture
)

type fixture struct {
	docker  *client.Client
	rootfs  []byte // the workload rootfs tar, for image variants
	image   string // pushed tag; absent locally until a test pulls it
	imageID string
	tag     string
}

func TestMain(m *testing.M) {
	if _, err := os.Stat(dockerSocket); err != nil {
		fmt.Fprintf(os.Stderr, "\n!!! %s absent: every Docker test of dockerio/engine SKIPS !!!\n\n", dockerSocket)
		os.Exit(m.Run())
	}
	dockerPresent = true
	cleanup, err := setupFixture()
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine test fixture:", err)
		if cleanup != nil {
			cleanup()
		}
		os.Exit(1)
	}
	code := m.Run()
	if leftovers := leftoverObjects(); len(leftovers) > 0 {
		fmt.Fprintf(os.Stderr, "\n!!! the engine tests left Docker objects behind (removed now):\n  %s\n", strings.Join(leftovers, "\n  "))
		code = max(code, 1)
	}
	cleanup()
	os.Exit(code)
}

// testInstallations is every installation an engine of this run acted for.
var testInstallations sync.Map

// leftoverObjects finds, and removes, the containers, networks and volumes of this
// run's installations, and the managed ones its tests made by hand (fred v0.13's
// carry no installation), that a test's cleanup did not.
func leftoverObjects() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ours := func(l map[string]string) bool {
		_, ok := testInstallations.Load(l[dockerio.LabelInstallation])
		return ok || l[testMarker] == fx.tag
	}
	var out []string
	managed := filters.NewArgs(filters.Arg("label", dockerio.LabelManaged+"=true"))
	cs, err := fx.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: managed})
	if err != nil {
		return []string{"list containers: " + err.Error()}
	}
	for _, c := range cs {
		if ours(c.Labels) {
			out = append(out, "container "+strings.Join(c.Names, ",")+" ("+c.State+")")
			_ = fx.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
	}
	ns, err := fx.docker.NetworkList(ctx, network.ListOptions{Filters: managed})
	if err != nil {
		return append(out, "list networks: "+err.Error())
	}
	for _, n := range ns {
		if ours(n.Labels) {
			out = append(out, "network "+n.Name)
			_ = fx.docker.NetworkRemove(ctx, n.ID)
		}
	}
	vs, err := fx.docker.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", dockerio.LabelInstallation))})
	if err != nil {
		return append(out, "list volumes: "+err.Error())
	}
	for _, v := range vs.Volumes {
		if ours(v.Labels) {
			out = append(out, "volume "+v.Name)
			_ = fx.docker.VolumeRemove(ctx, v.Name, true)
		}
	}
	return out
}

func setupFixture() (func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	docker, err := client.NewClientWithOpts(client.WithHost("unix://"+dockerSocket), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, err
	}
	fx.docker = docker
	fx.tag = strings.ReplaceAll(uuid.NewString(), "-", "")[:16]
	fx.image = testRepo + ":" + fx.tag
	cleanup := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		removeTestImages(ctx)
		_ = docker.Close()
	}
	if fx.rootfs, err = buildRootfs(); err != nil {
		return cleanup, err
	}
	if err := importImage(ctx, fx.image, []string{"VOLUME /data"}); err != nil {
		return cleanup, err
	}
	info, err := docker.ImageInspect(ctx, fx.image)
	if err != nil {
		return cleanup, err
	}
	fx.imageID = info.ID
	if err := pushImage(ctx, fx.image); err != nil {
		return cleanup, err
	}
	// Drop the local copy so the first ResolveImage really pulls.
	if _, err := docker.ImageRemove(ctx, fx.image, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
		return cleanup, err
	}
	return cleanup, nil
}

// removeTestImages removes every local tag of this run (and thereby its images).
func removeTestImages(ctx context.Context) {
	list, err := fx.docker.ImageList(ctx, image.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", testMarker+"="+fx.tag))})
	if err != nil {
		return
	}
	for _, img := range list {
		_, _ = fx.docker.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
	}
}

// buildRootfs compiles the workload statically and tars a minimal rootfs.
func buildRootfs() ([]byte, error) {
	dir, err := os.MkdirTemp("", "berth-enginetest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"main.go": workloadSource,
		"go.mod":  "module workload\n\ngo 1.22\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", "workload", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOWORK=off", "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build workload: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(dir, "workload"))
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"tmp/", "run/", "data/", "etc/"} {
		if err := tw.WriteHeader(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o1777}); err != nil {
			return nil, err
		}
	}
	add := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(body))}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	if err := add("etc/passwd", 0o644, []byte("root:x:0:0:root:/:/workload\napp:x:1000:1000:app:/:/workload\n")); err != nil {
		return nil, err
	}
	if err := add("etc/group", 0o644, []byte("root:x:0:\napp:x:1000:\n")); err != nil {
		return nil, err
	}
	if err := add("workload", 0o755, bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// importImage imports the workload rootfs as ref with extra Dockerfile changes.
func importImage(ctx context.Context, ref string, changes []string) error {
	changes = append([]string{`ENTRYPOINT ["/workload"]`, `CMD ["serve"]`, "LABEL " + testMarker + "=" + fx.tag}, changes...)
	rc, err := fx.docker.ImageImport(ctx, image.ImportSource{Source: bytes.NewReader(fx.rootfs), SourceName: "-"}, ref, image.ImportOptions{Changes: changes})
	if err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	defer rc.Close()
	return drainJSON(rc)
}

func pushImage(ctx context.Context, ref string) error {
	auth := base64.URLEncoding.EncodeToString([]byte("{}"))
	rc, err := fx.docker.ImagePush(ctx, ref, image.PushOptions{RegistryAuth: auth})
	if err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	defer rc.Close()
	return drainJSON(rc)
}

func drainJSON(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m jsonmessage.JSONMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.Error != nil {
			return m.Error
		}
	}
}

// requireDocker skips loudly when there is no Docker engine on this machine.
func requireDocker(t *testing.T) {
	t.Helper()
	if !dockerPresent {
		if os.Getenv("BERTH_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true" {
			t.Fatalf("%s absent: this test needs a real Docker engine, and BERTH_REQUIRE_DOCKER/CI demand it runs", dockerSocket)
		}
		t.Skipf("SKIPPED: %s absent, this test needs a real Docker engine", dockerSocket)
	}
}

// testLogger keeps engine warnings visible without tying them to a *testing.T
// (compose logs through a process-global logger that outlives any one test).
func testLogger() zerolog.Logger {
	return zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr}).Level(zerolog.WarnLevel).With().Timestamp().Logger()
}

// newTestEngine is an engine of a fresh installation of its own.
func newTestEngine(t *testing.T) *Engine {
	t.Helper()
	return newTestEngineFor(t, newInstallation())
}

func newInstallation() string { return "inst-" + uuid.NewString()[:8] }

// newTestEngineFor is an engine acting for installation.
func newTestEngineFor(t *testing.T, installation string, opts ...func(*Options)) *Engine {
	t.Helper()
	requireDocker(t)
	o := Options{Host: "unix://" + dockerSocket, BackendName: "docker", InstallationID: installation,
		PullTimeout: 2 * time.Minute, Logger: testLogger()}
	for _, f := range opts {
		f(&o)
	}
	testInstallations.Store(o.InstallationID, true)
	e, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

// ensurePulled makes the workload image present and admitted through ResolveImage.
func ensurePulled(t *testing.T, e *Engine) dockerio.ImageInfo {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	info, err := e.ResolveImage(ctx, fx.image)
	if err != nil {
		t.Fatalf("ResolveImage(%s): %v", fx.image, err)
	}
	return info
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testLease is a fresh lease with its network, torn down (containers, network)
// when the test ends.
type testLease struct {
	Lease        string
	Installation string
	NetworkID    string
}

func newTestLease(t *testing.T, e *Engine) testLease {
	t.Helper()
	return newTestLeaseAs(t, e, uuid.NewString())
}

// newTestLeaseAs is newTestLease with a given lease UUID (two installations may
// share one).
func newTestLeaseAs(t *testing.T, e *Engine, lease string) testLease {
	t.Helper()
	installation := e.opts.InstallationID
	l := testLease{Lease: lease, Installation: installation}
	ctx := testCtx(t, time.Minute)
	id, err := e.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: l.Lease, Tenant: "tenant-" + l.Lease[:8], BackendName: "docker", InstallationID: installation})
	if err != nil {
		t.Fatalf("EnsureNetwork: %v", err)
	}
	l.NetworkID = id
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := e.Down(ctx, l.Lease, dockerio.DownOptions{StopTimeout: time.Second, RemoveVolumes: true}); err != nil {
			t.Errorf("cleanup Down(%s): %v", l.Lease, err)
		}
		if err := e.RemoveNetwork(ctx, l.NetworkID); err != nil {
			t.Errorf("cleanup RemoveNetwork(%s): %v", l.Lease, err)
		}
	})
	return l
}

// plan builds a launch plan for the lease with sane hardening defaults.
func (l testLease) plan(services ...dockerio.ServicePlan) dockerio.Plan {
	return dockerio.Plan{
		Lease:          l.Lease,
		Tenant:         "tenant-" + l.Lease[:8],
		ProviderUUID:   "prov-0000",
		BackendName:    "docker",
		InstallationID: l.Installation,
		OperationID:    "op-" + l.Lease[:8],
		Generation:     1,
		FailCount:      0,
		CallbackURL:    "http://127.0.0.1:1/callback?operation_id=x",
		LifecycleURL:   "http://127.0.0.1:1/callback?lifecycle_id=x",
		NetworkID:      l.NetworkID,
		HostBindIP:     "127.0.0.1",
		ReadonlyRootfs: true,
		PidsLimit:      64,
		TmpfsSizeMB:    16,
		Services:       services,
	}
}

// workloadService is a service running the workload image.
func workloadService(name string, quantity int, info dockerio.ImageInfo, args ...string) dockerio.ServicePlan {
	return dockerio.ServicePlan{
		Service:      manifest.Service{Image: fx.image, Args: args, Ports: map[string]manifest.Port{"8080/tcp": {}}},
		Name:         name,
		SKU:          "small",
		Quantity:     quantity,
		CPUCores:     0.5,
		MemoryMB:     64,
		ImageID:      info.ID,
		ImageVolumes: info.Volumes,
		MaskLabels:   info.MaskLabels,
	}
}

// execIn runs cmd inside a container and returns its exit code and output.
func execIn(t *testing.T, id string, cmd ...string) (int, string) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	ex, err := fx.docker.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("exec create in %s: %v", id[:12], err)
	}
	att, err := fx.docker.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("exec attach: %v", err)
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, att.Reader); err != nil {
		t.Fatalf("exec read: %v", err)
	}
	insp, err := fx.docker.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		t.Fatalf("exec inspect: %v", err)
	}
	return insp.ExitCode, out.String()
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// httpGet fetches url from the test process. Every caller asks a container
// that just started, whose server may not listen yet (docker-proxy then resets
// the connection): a failed connection is retried for up to 10 s; an answer,
// whatever its status, is not.
func httpGet(url string) (string, error) {
	c := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(10 * time.Second)
	resp, err := c.Get(url)
	for err != nil && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		resp, err = c.Get(url)
	}
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), err
}

// createForeignNetwork makes an unlabelled network with the given name, removed at the end.
func createForeignNetwork(t *testing.T, name string) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	resp, err := fx.docker.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Labels: map[string]string{testMarker: fx.tag}})
	if err != nil {
		t.Fatalf("create foreign network %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := fx.docker.NetworkRemove(ctx, resp.ID); err != nil && !isNotFound(err) {
			t.Errorf("remove foreign network: %v", err)
		}
	})
	return resp.ID
}

// leaseVolumes lists the Docker volumes labelled with the lease (berth creates
// none: stateful data is in host volumes).
func leaseVolumes(t *testing.T, lease string) []string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	list, err := fx.docker.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", dockerio.LabelLease+"="+lease))})
	if err != nil {
		t.Fatalf("volume list: %v", err)
	}
	var names []string
	for _, v := range list.Volumes {
		names = append(names, v.Name)
	}
	return names
}

// dirVolumes is a dir-driver volume root of the test's own (quotas not
// enforced): for tests that need a stateful service but prove nothing about
// the quota. The btrfs tests use btrfsVolumes.
func dirVolumes(t *testing.T) dockerio.Volumes {
	t.Helper()
	v, err := volumes.NewDir(filepath.Join(t.TempDir(), "volumes"))
	if err != nil {
		t.Fatalf("dir volumes: %v", err)
	}
	return v
}

// stateful makes svc stateful (diskMB) with a managed volume per instance in v,
// each image VOLUME's subdirectory given to uid:gid, and sets its VolumeDirs.
func stateful(t *testing.T, v dockerio.Volumes, lease string, svc dockerio.ServicePlan, diskMB int64, uid, gid int) dockerio.ServicePlan {
	t.Helper()
	svc.DiskMB = diskMB
	svc.VolumeDirs = nil
	var subdirs []string
	for _, target := range svc.ImageVolumes {
		subdirs = append(subdirs, dockerio.VolumeSubdir(target))
	}
	for i := range svc.Quantity {
		dir, err := v.Ensure(testCtx(t, time.Minute), messages.VolumeName(lease, svc.Name, i), diskMB, subdirs, uid, gid)
		if err != nil {
			t.Fatalf("ensure volume of %s/%d: %v", svc.Name, i, err)
		}
		svc.VolumeDirs = append(svc.VolumeDirs, dir)
	}
	return svc
}
