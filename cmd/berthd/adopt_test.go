package main

// Against fred v0.13's real docker backend: berthd takes over a live fred host
// (issue 29) — fred provisions, restarts, is left with an undelivered callback,
// and stops; the preflight says ready; the adoption writes berthd's data dir
// and nothing else; berthd starts on fred's port and serves fred's leases as
// fred did, without restarting a tenant; an adopted container's death fails
// its lease; a restart moves a lease onto berthd's own containers; closing the
// leases leaves nothing of fred's behind.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// adoptInto adopts this (stopped) fred's host into a new berthd on fred's name,
// port and volume root (with extra config lines), wanting an adoption that says
// each of want; the daemon is not started.
func (f *fredHost) adoptInto(want []string, extra ...string) *daemonProc {
	f.t.Helper()
	berth := newDaemonDir(f.t, append([]string{"name: " + f.name, "listen_addr: " + f.api, "volume_data_path: " + f.volumes,
		"volume_mount_path: " + os.Getenv("BERTH_TEST_BTRFS"), "volume_filesystem: btrfs"}, extra...)...)
	berth.api = f.api
	code, out := runOnce(f.t, "-config", berth.cfgPath, "-initialize-storage-identity", "adopt", "-v013-dir", f.dir)
	for _, w := range want {
		if !strings.Contains(out, w) {
			code = -1
		}
	}
	if code != 0 {
		f.t.Fatalf("adopt: exit %d, want 0 saying %q\n%s", code, want, out)
	}
	return berth
}

// fredTotals are the pool sizes startFred gives fred, for berthd's config.
const fredTotals = "total_cpu_cores: 4\ntotal_memory_mb: 8192\ntotal_disk_mb: 2000"

// containerLives are the IDs, PIDs and start times of a backend's containers.
func containerLives(t *testing.T, backend string) string {
	t.Helper()
	dc := dockerClient(t)
	cs, err := dc.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", "fred.backend_name="+backend), filters.Arg("label", "fred.managed=true"))})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, c := range cs {
		if _, berth := c.Labels["fred.installation_id"]; berth {
			continue
		}
		in, err := dc.ContainerInspect(context.Background(), c.ID)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("%s %s started %s pid %d restarts %d", in.ID, in.State.Status, in.State.StartedAt, in.State.Pid, in.RestartCount))
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// sameAnswer compares fred's and berthd's answers to one GET, as JSON, on
// fred's fields (berthd's answers carry the newer contract's fields too:
// tenant, terminal_budget).
func sameAnswer(t *testing.T, what string, fred, berth []byte, norm func(map[string]any)) {
	t.Helper()
	var f, b any
	if err := json.Unmarshal(fred, &f); err != nil {
		t.Fatalf("%s: fred's answer %s: %v", what, fred, err)
	}
	if err := json.Unmarshal(berth, &b); err != nil {
		t.Fatalf("%s: berthd's answer %s: %v", what, berth, err)
	}
	for _, v := range []any{f, b} {
		if m, ok := v.(map[string]any); ok && norm != nil {
			norm(m)
		}
	}
	fj, _ := json.Marshal(f)
	bj, _ := json.Marshal(onShapeOf(b, f))
	if string(fj) != string(bj) {
		t.Fatalf("%s differs:\nfred:   %s\nberthd: %s", what, fj, bj)
	}
}

func TestFredV013Host_AdoptedLeasesRunOnUntouched_ServedAsFredServedThem_AndCloseCleanly(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	fred := startFred(t)
	micro := func(svc string, n int) messages.LeaseItem {
		return messages.LeaseItem{SKU: "docker-micro", Quantity: n, ServiceName: svc}
	}
	single := fred.provisionAs([]messages.LeaseItem{micro("", 1)}, flatManifest(nil), cb.callbackURL())
	stack := fred.provisionAs([]messages.LeaseItem{micro("web", 2), micro("cache", 1)},
		map[string]any{"services": map[string]any{"web": flatManifest(nil), "cache": flatManifest(nil)}}, cb.callbackURL())
	fred.waitFor(single, "/provisions/", `"status":"ready"`)
	owed := fred.provisionAs([]messages.LeaseItem{micro("", 1)}, flatManifest(nil), cb.callbackURL())
	cb.failNext(owed, 1_000_000) // fred's delivery fails: the callback stays owed
	fred.waitFor(stack, "/provisions/", `"status":"ready"`)
	fred.waitFor(owed, "/provisions/", `"status":"ready"`)
	if code, answer := fred.signed(http.MethodPost, "/restart", map[string]string{"lease_uuid": single, "callback_url": cb.callbackURL()}); code != http.StatusAccepted {
		t.Fatalf("fred's POST /restart: %d %s", code, answer)
	}
	fred.waitFor(single, "/releases/", `"version":2,"image":"stack","status":"active"`)
	// A lease whose container dies while fred verifies it: fred removes it, and
	// after fred's restart knows it only by its diagnostics.
	failed := fred.provisionAs([]messages.LeaseItem{micro("", 1)},
		flatManifest(map[string]any{"command": []string{"/workload", "exit", "-code", "3", "-after", "300ms"}}), cb.callbackURL())
	fred.waitFor(failed, "/provisions/", `"status":"failed"`)
	leases := []string{single, stack, owed}
	// The answers to match are fred's after its own restart: berthd's takeover
	// must do what fred's restart does, and change nothing else.
	fred.stop()
	fred.start()
	fredSaid := map[string][]byte{}
	_, fredStats := fred.signed(http.MethodGet, "/stats", nil)
	for _, l := range leases {
		for _, path := range []string{"/provisions/", "/info/", "/releases/", "/logs/"} {
			_, answer := fred.signed(http.MethodGet, path+l, nil)
			fredSaid[path+l] = []byte(answer)
		}
	}
	_, fredList := fred.signed(http.MethodGet, "/provisions", nil)
	for _, path := range []string{"/provisions/", "/logs/"} {
		code, answer := fred.signed(http.MethodGet, path+failed, nil)
		if code != http.StatusOK {
			t.Fatalf("fred's GET %s of its diagnostics-only lease: %d %s", path+failed, code, answer)
		}
		fredSaid[path+failed] = []byte(answer)
	}
	fred.stop()
	lives := containerLives(t, fred.name)
	files, err := takeover.FileHashes(fred.dir)
	if err != nil {
		t.Fatal(err)
	}

	berth := fred.adoptInto([]string{"adopted 3 leases", "1 leases' failure diagnostics", "1 undelivered callbacks"},
		"sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}", fredTotals)
	berth.startInProcess()

	// Served as fred served them: the same answers (the clock-free fields).
	for _, l := range leases {
		berth.waitStatus(l, messages.StatusReady, 30*time.Second)
		for _, path := range []string{"/provisions/", "/info/"} {
			r := berth.get(path + l)
			sameAnswer(t, path+l, fredSaid[path+l], r.Body, normalizeAnswer)
		}
		if f, b := logKeys(t, fredSaid["/logs/"+l]), logKeys(t, berth.get("/logs/"+l).Body); !slices.Equal(f, b) || len(f) == 0 {
			t.Fatalf("/logs/%s: fred has %v, berthd %v", l, f, b)
		}
		var fredReleases, berthReleases []messages.Release
		_ = json.Unmarshal(fredSaid["/releases/"+l], &fredReleases)
		berth.get("/releases/"+l).json(t, &berthReleases)
		if len(fredReleases) == 0 || len(berthReleases) != len(fredReleases) {
			t.Fatalf("/releases/%s: fred %+v, berthd %+v", l, fredReleases, berthReleases)
		}
		for i := range fredReleases {
			f, b := fredReleases[i], berthReleases[i]
			if f.Version != b.Version || f.Status != b.Status || f.Manifest != b.Manifest || !f.CreatedAt.Equal(b.CreatedAt) {
				t.Fatalf("/releases/%s v%d: fred %+v, berthd %+v", l, f.Version, f, b)
			}
		}
	}
	// The failed lease fred knew only by its diagnostics: answered as fred
	// answered it (failed, its logs), and listed by neither.
	sameAnswer(t, "/provisions/"+failed, fredSaid["/provisions/"+failed], berth.get("/provisions/"+failed).Body, normalizeAnswer)
	var fredLogs, berthLogs map[string]string
	_ = json.Unmarshal(fredSaid["/logs/"+failed], &fredLogs)
	berth.get("/logs/"+failed).json(t, &berthLogs)
	if len(fredLogs) == 0 || !maps.Equal(fredLogs, berthLogs) {
		t.Fatalf("/logs/%s: fred %v, berthd %v", failed, fredLogs, berthLogs)
	}
	if f, b := listedLeases(t, []byte(fredList)), listedLeases(t, berth.get("/provisions").Body); !slices.Equal(f, b) || slices.Contains(b, failed) {
		t.Fatalf("GET /provisions: fred lists %v, berthd %v", f, b)
	}
	// The pool as fred counted it: CPU, memory and containers alike; disk is
	// fred's plus berthd's scratch allowance of each diskless instance
	// (container_tmpfs_size_mb, 64 by default), which fred never counted.
	var fs, bs messages.Stats
	_ = json.Unmarshal([]byte(fredStats), &fs)
	berth.get("/stats").json(t, &bs)
	if bs.AllocatedCPUCores != fs.AllocatedCPUCores || bs.AllocatedMemoryMB != fs.AllocatedMemoryMB ||
		bs.ActiveContainers != fs.ActiveContainers || bs.AllocatedDiskMB != fs.AllocatedDiskMB+5*64 || bs.TotalCPUCores != fs.TotalCPUCores {
		t.Fatalf("GET /stats: fred %+v, berthd %+v", fs, bs)
	}
	// Fred's containers predate the runtime contract: the refresh lists them stale.
	var refresh messages.RuntimeRefreshStatus
	berth.get("/runtime_refresh").json(t, &refresh)
	for _, l := range leases {
		if !slices.Contains(refresh.StaleLeases, l) {
			t.Fatalf("GET /runtime_refresh: adopted lease %s not stale: %+v", l, refresh)
		}
	}
	// The callback fred owed arrives once, signed.
	cb.failNext(owed, 0)
	if got := cb.waitFor(owed, 1, time.Minute); got[0].Body.Status != messages.CallbackSuccess || cb.badSignatures() != 0 {
		t.Fatalf("the owed callback: %+v (bad signatures %d)", got, cb.badSignatures())
	}
	// berthctl doctor counts the adopted objects as berthd's, and says the host
	// can still go back to fred: berthd has changed nothing yet.
	berthctl := buildBerthctl(t, t.TempDir())
	doc := runBerthctl(t, berthctl, berth, "-config", berth.cfgPath, "doctor")
	if !strings.Contains(doc.stdout, "that berthd has not adopted (6 adopted)") || !strings.Contains(doc.stdout, "rollback_safe: true") ||
		!strings.Contains(doc.stdout, "berthd delivered 1 of the callbacks fred owed") {
		t.Fatalf("doctor on the adopted host:\n%s%s", doc.stdout, doc.stderr)
	}
	// No tenant restarted.
	if now := containerLives(t, fred.name); now != lives {
		t.Fatalf("fred's containers changed:\nbefore:\n%s\nafter:\n%s", lives, now)
	}
	if now, _ := takeover.FileHashes(fred.dir); !equalMaps(now, files) {
		t.Fatalf("fred's files changed: %v → %v", files, now)
	}

	// An adopted container's death fails its lease, with a lifecycle callback.
	dc := dockerClient(t)
	cs := leaseContainers(t, dc, single)
	before := len(cb.forLease(single))
	if err := dc.ContainerKill(context.Background(), cs[0].ID, "KILL"); err != nil {
		t.Fatal(err)
	}
	berth.waitStatus(single, messages.StatusFailed, 30*time.Second)
	if got := cb.waitFor(single, before+1, 30*time.Second); got[len(got)-1].Body.Status != messages.CallbackFailed {
		t.Fatalf("death callback: %+v", got)
	}

	// Once berthd has acted, it says the way back is closed.
	if doc := runBerthctl(t, berthctl, berth, "-config", berth.cfgPath, "doctor"); !strings.Contains(doc.stdout, "rollback_safe: false: lease "+single+" changed") {
		t.Fatalf("doctor after an adopted lease failed:\n%s%s", doc.stdout, doc.stderr)
	}
	// A restart moves an adopted lease onto berthd's own containers (and network).
	relaunchOntoBerthd(t, berth, stack, 3)

	// Closed, nothing of fred's is left: containers, and the tenant network.
	for _, l := range leases {
		berth.deprovisionUntilGone(l)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mine := filters.NewArgs(filters.Arg("label", "fred.backend_name="+fred.name))
		cs, _ := dc.ContainerList(context.Background(), container.ListOptions{All: true, Filters: mine})
		ns, _ := dc.NetworkList(context.Background(), network.ListOptions{Filters: mine})
		var freds []string // berthd's own (its warm pool) carry its installation
		for _, c := range cs {
			if dockerio.MadeByFredV013(c.Labels, fred.name) {
				freds = append(freds, "container "+c.ID[:12])
			}
		}
		for _, n := range ns {
			if dockerio.MadeByFredV013(n.Labels, fred.name) {
				freds = append(freds, "network "+n.Name)
			}
		}
		if len(freds) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fred's objects left after every adopted lease closed: %v", freds)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// logKeys are the instances a GET /logs answer has logs of.
func logKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var logs map[string]string
	if err := json.Unmarshal(body, &logs); err != nil {
		t.Fatalf("GET /logs: %v: %s", err, body)
	}
	return slices.Sorted(maps.Keys(logs))
}

// listedLeases are the leases a GET /provisions answer lists.
func listedLeases(t *testing.T, body []byte) []string {
	t.Helper()
	var list messages.ProvisionsReply
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatalf("GET /provisions: %v: %s", err, body)
	}
	var out []string
	for _, p := range list.Provisions {
		out = append(out, p.LeaseUUID)
	}
	slices.Sort(out)
	return out
}

// normalizeAnswer drops the admission time, and orders the items by service
// and /info's instance lists by container: fred's restart rebuilds both from
// Docker's container listing, whose order is no order.
func normalizeAnswer(m map[string]any) {
	delete(m, "created_at")
	if items, ok := m["items"].([]any); ok {
		sort.Slice(items, func(i, j int) bool {
			a, _ := items[i].(map[string]any)
			b, _ := items[j].(map[string]any)
			return fmt.Sprint(a["service_name"]) < fmt.Sprint(b["service_name"])
		})
	}
	sortInstances(m)
	if svcs, ok := m["services"].(map[string]any); ok {
		for _, svc := range svcs {
			if sm, ok := svc.(map[string]any); ok {
				sortInstances(sm)
			}
		}
	}
}

func sortInstances(m map[string]any) {
	if insts, ok := m["instances"].([]any); ok {
		sort.Slice(insts, func(i, j int) bool {
			a, _ := insts[i].(map[string]any)
			b, _ := insts[j].(map[string]any)
			return fmt.Sprint(a["container_id"]) < fmt.Sprint(b["container_id"])
		})
	}
}

// onShapeOf is got with only the object keys want has (recursively).
func onShapeOf(got, want any) any {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return got
		}
		out := map[string]any{}
		for k, v := range g {
			if wv, ok := w[k]; ok {
				out[k] = onShapeOf(v, wv)
			}
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return got
		}
		out := make([]any, len(g))
		for i := range g {
			out[i] = onShapeOf(g[i], w[i])
		}
		return out
	}
	return got
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// fredPort is the host port of a fred lease's app/0 8080/tcp, from fred's /info.
func (f *fredHost) port(lease string) string {
	f.t.Helper()
	_, answer := f.signed(http.MethodGet, "/info/"+lease, nil)
	var info messages.LeaseInfo
	if err := json.Unmarshal([]byte(answer), &info); err != nil || len(info.Services["app"].Instances) == 0 {
		f.t.Fatalf("fred's /info/%s: %s (%v)", lease, answer, err)
	}
	return info.Services["app"].Instances[0].Ports["8080/tcp"].HostPort
}

// putData writes a file into a workload's /data and reads it back.
func putData(t *testing.T, port, file, content string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, "http://127.0.0.1:"+port+"/file?path=/data/"+file, strings.NewReader(content))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitData(t, port, file, content)
}

// waitData waits until a workload serves file from /data with content.
func waitData(t *testing.T, port, file, content string) {
	t.Helper()
	waitFile(t, port, "/data/"+file, content)
}

// relaunchOntoBerthd restarts an adopted lease and waits until it is Ready on
// n of berthd's own containers and nothing else (fred's are gone).
func relaunchOntoBerthd(t *testing.T, berth *daemonProc, lease string, n int) {
	t.Helper()
	if r := berth.maintainOnce(lease, uuid.NewString(), nil); r.Status != http.StatusAccepted {
		t.Fatalf("restart of adopted lease %s: %d %s", lease, r.Status, r.Body)
	}
	dc := dockerClient(t)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		cs := leaseContainers(t, dc, lease)
		berths := 0
		for _, c := range cs {
			if c.Labels["fred.installation_id"] != "" && c.State == "running" {
				berths++
			}
		}
		if berths == n && len(cs) == n && berth.provisionInfo(lease).Status == messages.StatusReady {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restarted adopted lease %s runs %d of berthd's containers among %d: %+v\n%s", lease, berths, len(cs), berth.provisionInfo(lease), berth.log.String())
		}
	}
}

func TestFredV013Host_AdoptedDataStaysWhereFredKeptIt_ARestartAndARestoreGiveItBack(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	profiles := "sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}\n  docker-small: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 64}"
	fred := startFredWith(t, "retain_on_close: true", profiles)
	small := []messages.LeaseItem{{SKU: "docker-small", Quantity: 1}}
	stateful := fred.provisionAs(small, flatManifest(nil), cb.callbackURL())
	closed := fred.provisionAs(small, flatManifest(nil), cb.callbackURL())
	fred.waitFor(stateful, "/provisions/", `"status":"ready"`)
	fred.waitFor(closed, "/provisions/", `"status":"ready"`)
	putData(t, fred.port(stateful), "kept.txt", "the stateful lease's data")
	putData(t, fred.port(closed), "kept.txt", "the retained lease's data")
	if code, answer := fred.signed(http.MethodPost, "/deprovision", messages.DeprovisionRequest{LeaseUUID: closed}); code != http.StatusOK {
		t.Fatalf("fred's POST /deprovision: %d %s", code, answer)
	}
	fred.waitFor(closed, "/provisions/", `"status":"retained"`)
	// What fred answers for the retained lease after its own restart.
	fred.stop()
	fred.start()
	_, fredRetentions := fred.signed(http.MethodGet, "/retentions", nil)
	_, fredRetained := fred.signed(http.MethodGet, "/provisions/"+closed, nil)
	fred.stop()

	berth := fred.adoptInto([]string{"adopted 1 leases, 1 retained leases' data"}, profiles, "retain_on_close: true")
	berth.startInProcess()
	berth.waitStatus(stateful, messages.StatusReady, 30*time.Second)
	if rs := berth.retentionList(); len(rs) != 1 || rs[0].LeaseUUID != closed {
		t.Fatalf("GET /retentions: %+v", rs)
	}
	sameAnswer(t, "/retentions", []byte(fredRetentions), berth.get("/retentions").Body, func(m map[string]any) {})
	// One field differs, on purpose: a retained lease's quantity is its items'
	// instances for berthd (the contract: total instances, always), 0 for fred.
	sameAnswer(t, "/provisions/"+closed, []byte(fredRetained), berth.get("/provisions/"+closed).Body, func(m map[string]any) {
		normalizeAnswer(m)
		delete(m, "quantity")
	})
	if info := berth.provisionInfo(closed); info.Quantity != 1 {
		t.Fatalf("berthd's retained lease: quantity %d, want its item's 1", info.Quantity)
	}

	// A fred started by mistake cannot open its store while berthd runs: it
	// exits before it touches Docker.
	fred.mustNotStart()
	if rs := berth.retentionList(); len(rs) != 1 {
		t.Fatalf("after fred's attempt: %+v", rs)
	}

	// A restart relaunches the stateful lease on berthd's containers, on its data.
	relaunchOntoBerthd(t, berth, stateful, 1)
	waitData(t, hostPort(t, berth, stateful, "app", 0), "kept.txt", "the stateful lease's data")

	// A restore of what fred retained gives its bytes back.
	dest := uuid.NewString()
	if r := berth.postJSON("/restore", messages.RestoreRequest{LeaseUUID: dest, FromLeaseUUID: closed, Tenant: fred.tenant(),
		ProviderUUID: "p", Items: small, CallbackURL: cb.callbackURL()}); r.Status != http.StatusAccepted {
		t.Fatalf("restore: %d %s", r.Status, r.Body)
	}
	berth.waitStatus(dest, messages.StatusReady, 2*time.Minute)
	waitData(t, hostPort(t, berth, dest, "app", 0), "kept.txt", "the retained lease's data")

	for _, l := range []string{stateful, dest} {
		berth.deprovisionUntilGone(l)
	}
}

// mustNotStart runs fred on its config and wants it to give up before it
// recovers anything from Docker (berthd holds fred's port too: fred's log says
// how far it got).
func (f *fredHost) mustNotStart() {
	f.t.Helper()
	from := len(f.log.String())
	f.cmd = exec.Command(f.bin, "-config", f.cfgPath)
	f.cmd.Stdout, f.cmd.Stderr = f.log, f.log
	if err := f.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	select {
	case err := <-done:
		said := f.log.String()[from:]
		if err == nil || strings.Contains(said, "state recovered") || strings.Contains(said, "Docker backend started") {
			f.t.Fatalf("fred v0.13 beside berthd: exit %v, and it got as far as:\n%s", err, said)
		}
		f.t.Logf("fred v0.13 started beside berthd gave up: %v\n%s", err, said)
	case <-time.After(30 * time.Second):
		_ = f.cmd.Process.Kill()
		<-done
		f.t.Fatalf("fred v0.13 beside berthd did not give up within 30 s:\n%s", f.log.String()[from:])
	}
}

func TestFredV013Host_AnAdoptedLeaseKeepsFredsNamesThroughARestart(t *testing.T) {
	t.Parallel()
	cb := newCallbackReceiver(t)
	fred := startFredWith(t, ingressTestConfig, "sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}")
	micro := func(svc string, n int) messages.LeaseItem {
		return messages.LeaseItem{SKU: "docker-micro", Quantity: n, ServiceName: svc}
	}
	stack := fred.provisionAs([]messages.LeaseItem{micro("web", 2), micro("cache", 1)},
		map[string]any{"services": map[string]any{"web": flatManifest(nil), "cache": flatManifest(nil)}}, cb.callbackURL())
	fred.waitFor(stack, "/provisions/", `"status":"ready"`)
	fred.stop()
	fred.start()
	_, fredInfo := fred.signed(http.MethodGet, "/info/"+stack, nil)
	fred.stop()
	dc := dockerClient(t)
	names := func(berthOnly bool) map[string]string { // "svc/idx" → fred.fqdn
		out := map[string]string{}
		for _, c := range leaseContainers(t, dc, stack) {
			if _, berth := c.Labels["fred.installation_id"]; berth == berthOnly {
				out[c.Labels["fred.service_name"]+"/"+c.Labels["fred.instance_index"]] = c.Labels["fred.fqdn"]
			}
		}
		return out
	}
	freds := names(false)
	if len(freds) != 3 || freds["web/1"] == "" {
		t.Fatalf("fred's containers carry no fred.fqdn: %v", freds)
	}

	berth := fred.adoptInto(nil, ingressTestConfig, "sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 0}")
	berth.startInProcess()
	berth.waitStatus(stack, messages.StatusReady, 30*time.Second)
	sameAnswer(t, "/info/"+stack, []byte(fredInfo), berth.get("/info/"+stack).Body, normalizeAnswer)
	for svc, want := range map[string][]string{"web": {freds["web/0"], freds["web/1"]}, "cache": {freds["cache/0"]}} {
		if got := berth.provisionInfo(stack).FQDNs[svc]; !slices.Equal(got, want) {
			t.Fatalf("GET /provisions fqdns of %s: %v, fred's %v", svc, got, want)
		}
	}

	if r := berth.maintainOnce(stack, uuid.NewString(), nil); r.Status != http.StatusAccepted {
		t.Fatalf("restart: %d %s", r.Status, r.Body)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if got := names(true); len(got) == 3 && len(names(false)) == 0 && berth.provisionInfo(stack).Status == messages.StatusReady {
			if !maps.Equal(got, freds) {
				t.Fatalf("berthd's containers are named %v, fred's were %v", got, freds)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restart: berthd's %v, fred's %v\n%s", names(true), names(false), berth.log.String())
		}
	}
	berth.deprovisionUntilGone(stack)
}
