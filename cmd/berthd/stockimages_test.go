package main

// Stock images as tenants bring them (issue 17), provisioned unmodified through
// berthd on a read-only rootfs (container_readonly_rootfs: true, the default):
// the images are Debian's own nginx-light and redis-server with their upstream
// image configuration (.ci/stock-images.sh), not images written for berth.

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine"
	"github.com/berth-dev/berth/messages"
)

// stockImage is the local registry's stock image named by env.
func stockImage(t testing.TB, env string) string {
	t.Helper()
	ref := os.Getenv(env)
	if ref == "" {
		skipOrFail(t, env+" is not set (make test builds the stock images: .ci/stock-images.sh)")
	}
	return ref
}

// stockManifest is a single-service manifest of image publishing port.
func stockManifest(image, port string, extra map[string]any) map[string]any {
	m := map[string]any{"image": image, "ports": map[string]any{port: map[string]any{}}}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// publishedPort is the host port of lease's app/0 publishing port.
func publishedPort(t *testing.T, d *daemonProc, lease, port string) string {
	t.Helper()
	var info messages.LeaseInfo
	r := d.get("/info/" + lease)
	if r.Status != 200 {
		t.Fatalf("info: %d %s", r.Status, r.Body)
	}
	r.json(t, &info)
	for _, inst := range info.Services["app"].Instances {
		if hp := inst.Ports[port].HostPort; hp != "" {
			return hp
		}
	}
	t.Fatalf("no published %s in %+v", port, info)
	return ""
}

// stockProvision provisions a lease of a stock image and waits for its
// success callback; a failure shows the attempt's logs and debug view.
func stockProvision(t *testing.T, d *daemonProc, cb *callbackReceiver, manifest any, items ...messages.LeaseItem) string {
	t.Helper()
	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), manifest, items...); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	if got := cb.waitFor(lease, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("provision callback: %+v\nlogs: %s\ndebug: %s", got[0].Body, d.get("/logs/"+lease).Body, d.debugGet("/debug/leases/"+lease).Body)
	}
	return lease
}

// assertNotDegraded checks the lease's launch was prepared in full: its
// debug view names no degraded step.
func assertNotDegraded(t *testing.T, d *daemonProc, lease string) {
	t.Helper()
	if r := d.debugGet("/debug/leases/" + lease); r.Status != 200 || strings.Contains(string(r.Body), `"degraded"`) {
		t.Fatalf("debug view of %s: %d %s", lease, r.Status, r.Body)
	}
}

// runningContainerID is the ID of the lease's one running container.
func runningContainerID(t *testing.T, dc *client.Client, lease string) string {
	t.Helper()
	return runningContainer(t, dc, lease).ID
}

// runningContainer is the lease's one running container, checked to run on a
// read-only rootfs under runtime contract 2.
func runningContainer(t *testing.T, dc *client.Client, lease string) container.InspectResponse {
	t.Helper()
	for _, c := range leaseContainers(t, dc, lease) {
		if c.State != "running" {
			continue
		}
		ins, err := dc.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !ins.HostConfig.ReadonlyRootfs || ins.Config.Labels[dockerio.LabelRuntimeContract] != "2" {
			t.Fatalf("container %s: read-only rootfs %v, runtime contract %q", c.ID[:12], ins.HostConfig.ReadonlyRootfs,
				ins.Config.Labels[dockerio.LabelRuntimeContract])
		}
		return ins
	}
	t.Fatalf("lease %s has no running container", lease)
	return container.InspectResponse{}
}

// nginxAsWwwData runs the stock nginx image as Debian's www-data, as a tenant
// asks with the manifest's user: with every capability dropped (the seed's
// hardening) a root master can neither create its temp directories in a
// tree it does not own, chown them, nor switch its workers to www-data.
var nginxAsWwwData = map[string]any{"user": "www-data"}

func TestStockNginx_ReadOnlyRootfs_ReadyAndServesOnItsPort(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	image := stockImage(t, "BERTH_TEST_NGINX_IMAGE")
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := stockProvision(t, d, cb, stockManifest(image, "80/tcp", nginxAsWwwData))
	runningContainer(t, dc, lease)
	code, body, err := httpGetHostPort("127.0.0.1:"+publishedPort(t, d, lease, "80/tcp"), "/")
	if err != nil || code != 200 || !strings.Contains(body, "nginx") {
		t.Fatalf("GET / on nginx's published port: %d %.120q %v", code, body, err)
	}
	assertNotDegraded(t, d, lease)
	d.closeAll(dc, lease)
}

// redisCLI runs redis-cli in the lease's running container (redis answers
// only loopback clients: protected mode, as its stock configuration has it).
func redisCLI(t *testing.T, dc *client.Client, lease string, args ...string) string {
	t.Helper()
	id := runningContainerID(t, dc, lease)
	out, err := exec.Command("docker", append([]string{"exec", id, "redis-cli"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestStockRedis_ReadOnlyRootfs_WriteKeptAcrossRestartAndUpdate(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	image := stockImage(t, "BERTH_TEST_REDIS_IMAGE")
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "sku_profiles: {stateful: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 256}}").startInProcess()
	lease := stockProvision(t, d, cb, stockManifest(image, "6379/tcp", nil), messages.LeaseItem{SKU: "stateful", Quantity: 1})
	assertNotDegraded(t, d, lease)
	if got := redisCLI(t, dc, lease, "SET", "tenant", "kept"); got != "OK" {
		t.Fatalf("SET: %q", got)
	}
	// SAVE writes /data/dump.rdb now: a write the volume, not the rootfs, takes.
	if got := redisCLI(t, dc, lease, "SAVE"); got != "OK" {
		t.Fatalf("SAVE: %q", got)
	}
	read := func(when string) {
		t.Helper()
		if got := redisCLI(t, dc, lease, "GET", "tenant"); got != "kept" {
			t.Fatalf("after %s GET tenant = %q, want kept", when, got)
		}
	}
	before := runningContainer(t, dc, lease).ID
	restart := uuid.NewString()
	if r := d.maintain(lease, restart, nil); r.Status != 202 {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 2, restart, messages.CallbackSuccess)
	if runningContainer(t, dc, lease).ID == before {
		t.Fatal("the restart kept the container")
	}
	read("restart")
	update := uuid.NewString()
	if r := d.maintain(lease, update, stockManifest(image, "6379/tcp", map[string]any{"env": map[string]string{"V": "2"}})); r.Status != 202 {
		t.Fatalf("update: %d %s", r.Status, r.Body)
	}
	completion(t, cb, lease, 3, update, messages.CallbackSuccess)
	if env := runningContainer(t, dc, lease).Config.Env; !strings.Contains(strings.Join(env, " "), "V=2") {
		t.Fatalf("the update's container runs env %v", env)
	}
	read("update")
	d.closeAll(dc, lease)
}

// undetectingEngine is the real engine with writable-path detection finding
// nothing: berthd's launch as it was before issue 17.
type undetectingEngine struct{ docker }

func (undetectingEngine) DetectWritablePaths(context.Context, dockerio.WritableQuery) (dockerio.Writable, error) {
	return dockerio.Writable{}, nil
}

// The stock nginx image on a read-only rootfs without its writable paths
// exits at start ("Read-only file system" under /var/lib/nginx): the failed
// provision tenants saw before issue 17, and what this test would catch.
func TestStockNginx_WithoutWritablePaths_FailsWithContainerExited(t *testing.T) {
	// Sequential: sets testHooks.engine, which every in-process daemon reads.
	dc := dockerClient(t)
	image := stockImage(t, "BERTH_TEST_NGINX_IMAGE")
	testHooks.engine = func(installationID string) (docker, error) {
		e, err := engine.New(engine.Options{BackendName: "docker", InstallationID: installationID})
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { _ = e.Close() })
		return undetectingEngine{e}, nil
	}
	t.Cleanup(func() { testHooks.engine = nil })
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := failedProvision(t, d, cb, stockManifest(image, "80/tcp", nginxAsWwwData), messages.ReasonContainerExited)
	var logs map[string]string
	if r := d.get("/logs/" + lease); r.Status != 200 {
		t.Fatalf("logs: %d %s", r.Status, r.Body)
	} else {
		r.json(t, &logs)
	}
	if !strings.Contains(logs["app/0"], "Read-only file system") {
		t.Fatalf("the failed attempt's logs = %q, want nginx's read-only file system error", logs["app/0"])
	}
	d.closeAll(dc, lease)
}
