package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// runOnce runs berthd in-process with args and returns its exit code and output.
func runOnce(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out syncBuffer
	sigs := make(chan os.Signal, 1)
	done := make(chan int, 1)
	go func() { done <- run(args, nil, &out, &out, sigs) }()
	select {
	case code := <-done:
		return code, out.String()
	case <-time.After(30 * time.Second):
		sigs <- os.Interrupt
		return <-done, out.String()
	}
}

func TestRun_Version_PrintsAndExits0(t *testing.T) {
	t.Parallel()
	code, out := runOnce(t, "-version")
	if code != 0 || !strings.HasPrefix(out, "berthd ") {
		t.Fatalf("-version: %d %q", code, out)
	}
	if code, _ := runOnce(t, "-no-such-flag"); code != 2 {
		t.Fatalf("unknown flag exit %d, want 2", code)
	}
	if code, _ := runOnce(t, "-initialize-storage-identity", "old"); code != 2 {
		t.Fatalf("bad -initialize-storage-identity exit %d, want 2", code)
	}
}

func TestRun_InvalidConfig_ListsEveryProblemAndExits2(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bad.yaml")
	body := "callback_secret: short\nhost_address: \"\"\nsku_profiles: {}\ntotal_cpu_cores: -1\nreconcile_interval: 7d\ntls_cert_file: /x.pem\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runOnce(t, "-config", path)
	if code != 2 {
		t.Fatalf("exit %d, want 2\n%s", code, out)
	}
	for _, want := range []string{"callback_secret", "host_address", "sku_profiles", "total_cpu_cores", "reconcile_interval", "tls_"} {
		if !strings.Contains(out, want) {
			t.Errorf("output does not report %s:\n%s", want, out)
		}
	}
}

func TestRun_SecondDaemonOnSameDataDir_RefusedWithExit1(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	d := newDaemonDir(t).startChild(true)
	code, out := runOnce(t, "-config", d.cfgPath)
	if code != 1 || !strings.Contains(out, "another berthd owns") {
		t.Fatalf("second daemon: exit %d\n%s", code, out)
	}
	// The first one is unaffected.
	d.waitHealthy(5 * time.Second)
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := d.waitExit(75 * time.Second); code != 0 {
		t.Fatalf("SIGTERM exit %d, want 0\n%s", code, d.log.String())
	}
}

func fileFingerprint(t *testing.T, path string) (string, time.Time) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return string(sum[:]), fi.ModTime()
}

func TestRun_CorruptStateDB_RefusedWithOneLineAndUntouched(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	d := newDaemonDir(t).startInProcess()
	if code := d.stop(); code != 0 {
		t.Fatalf("clean stop exit %d", code)
	}
	state := filepath.Join(d.dir, "data", "state.db")
	for name, mutate := range map[string]func([]byte) []byte{
		"garbage":   func(b []byte) []byte { return bytes.Repeat([]byte{0xA5}, len(b)) },
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
	} {
		t.Run(name, func(t *testing.T) {
			orig, err := os.ReadFile(state)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = os.WriteFile(state, orig, 0o600) }()
			if err := os.WriteFile(state, mutate(orig), 0o600); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Hour)
			_ = os.Chtimes(state, old, old)
			sum, mtime := fileFingerprint(t, state)
			code, out := runOnce(t, "-config", d.cfgPath)
			if code != 1 || !strings.Contains(out, "state.db") {
				t.Fatalf("exit %d, want 1 with a state.db message\n%s", code, out)
			}
			if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 {
				t.Fatalf("refusal is %d lines, want one:\n%s", n+1, out)
			}
			if s2, m2 := fileFingerprint(t, state); s2 != sum || !m2.Equal(mtime) {
				t.Fatal("refused state.db was modified")
			}
		})
	}
}

func TestRun_ForeignIdentityMarker_Refused(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	d := newDaemonDir(t).startInProcess()
	d.stop()
	other := newDaemonDir(t).startInProcess()
	other.stop()
	marker := filepath.Join(d.dir, "data", "storage-identity")
	foreign, err := os.ReadFile(filepath.Join(other.dir, "data", "storage-identity"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(marker, foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := runOnce(t, "-config", d.cfgPath)
	if code != 1 || !strings.Contains(out, "state.db") {
		t.Fatalf("foreign marker: exit %d\n%s", code, out)
	}
}

func TestProductionMode_RequiresInitializedIdentity(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	// Production takes host_address and sku_profiles only from the operator,
	// refuses loopback listen and bind addresses, and keeps stateful data on a
	// verified btrfs mount with quotas.
	mnt, root := btrfsRoot(t)
	api := nonLoopbackAddr(t)
	ip, _, _ := net.SplitHostPort(api)
	d := newDaemonDir(t, "production_mode: true", "host_address: 203.0.113.10",
		"listen_addr: "+api, "host_bind_ip: "+ip,
		"sku_profiles:\n  docker-micro: {cpu_cores: 0.25, memory_mb: 256, disk_mb: 512}",
		"volume_data_path: "+root, "volume_mount_path: "+mnt, "volume_filesystem: btrfs")
	d.api = api
	code, out := runOnce(t, "-config", d.cfgPath)
	if code != 1 || !strings.Contains(out, "initialize-storage-identity") {
		t.Fatalf("uninitialised production start: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "data", "state.db")); !os.IsNotExist(err) {
		t.Fatalf("a refused production start created state.db (%v)", err)
	}
	if code, out := runOnce(t, "-config", d.cfgPath, "-initialize-storage-identity", "new"); code != 0 {
		t.Fatalf("initialize: exit %d\n%s", code, out)
	}
	if code, out := runOnce(t, "-config", d.cfgPath, "-initialize-storage-identity", "new"); code != 1 {
		t.Fatalf("second initialize must refuse: exit %d\n%s", code, out)
	}
	d.startInProcess()
	if code := d.stop(); code != 0 {
		t.Fatalf("stop exit %d", code)
	}
}

func TestRootGiveUp_ExitsProcessWith1(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	d := newDaemonDir(t).startChild(true, "BERTH_TEST_GUARDIAN=10ms,40ms,3")
	for i := 0; i < 20 && !d.hasExited(); i++ {
		resp, err := debugPost("http://" + d.debug + "/debug/chaos/crash?actor=root")
		if err != nil {
			break // the process is going down
		}
		_ = resp
		time.Sleep(300 * time.Millisecond)
	}
	if code := d.waitExit(75 * time.Second); code != 1 {
		t.Fatalf("exit %d after root gave up, want 1\n%s", code, d.log.String())
	}
	if !strings.Contains(d.log.String(), "root gave up") {
		t.Fatalf("no give-up cause logged:\n%s", d.log.String())
	}
	// A give-up is a crash, not a stop: nothing trims the pool (a restart would
	// adopt it), so the test removes it.
	d.discardObjects()
}

func TestStorageLatch_DrainsAndExits1(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	pd := newDaemonDir(t)
	cfg, err := config.Load(pd.cfgPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	log := newLogger("info", &out)
	dm, err := start(cfg, persistence.Options{Dir: cfg.DataDir, MaxFileBytes: cfg.MaxStoreSizeMB << 20}, log)
	if err != nil {
		t.Fatal(err)
	}
	pd.waitHealthy(30 * time.Second)
	dm.store.Latch(errors.New("injected fsync failure"))
	done := make(chan int, 1)
	go func() { done <- dm.wait(make(chan os.Signal)) }()
	select {
	case code := <-done:
		if code != 1 {
			t.Fatalf("exit %d after latch, want 1", code)
		}
	case <-time.After(80 * time.Second):
		t.Fatal("daemon did not drain after the store latched")
	}
	if !strings.Contains(out.String(), "injected fsync failure") {
		t.Fatalf("first cause not logged:\n%s", out.String())
	}
}

func TestDebugActors_ShowsTreeAndACrashedRestartedActor(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	d := newDaemonDir(t).startInProcess()
	d.crash("root/outbox")
	var root messages.NodeInfo
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := d.debugGet("/debug/actors")
		if err := json.Unmarshal(r.Body, &root); err != nil {
			t.Fatalf("decode: %v %s", err, r.Body)
		}
		if n := find(root, "root/outbox"); n != nil && n.Restarts == 1 && n.Status == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("outbox never shown restarted: %s", r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, p := range []string{"root", "root/registry", "root/outbox", "root/watcher", "root/reconciler", "root/reclaimer", "root/facade"} {
		if n := find(root, p); n == nil || n.Status != "ok" || n.Kind == "" {
			t.Fatalf("%s missing or not ok in %+v", p, root)
		}
	}
	text := string(d.debugGet("/debug/actors?format=text").Body)
	if !strings.Contains(text, "outbox [outbox] ok") || !strings.Contains(text, "restarts=1") {
		t.Fatalf("text tree:\n%s", text)
	}
	dot := string(d.debugGet("/debug/actors?format=dot").Body)
	if !strings.HasPrefix(dot, "digraph berth {") || !strings.Contains(dot, `"root" -> "root/outbox"`) {
		t.Fatalf("dot tree:\n%s", dot)
	}
	metrics := string(d.get("/metrics").Body)
	for _, want := range []string{`berth_actor_restarts_total{directive="restart",kind="outbox"} 1`,
		`berth_actor_panics_total{kind="outbox"} 1`, `berth_actors_live{kind="registry"} 1`, "berth_actor_messages_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func find(n messages.NodeInfo, path string) *messages.NodeInfo {
	if n.Path == path {
		return &n
	}
	for _, c := range n.Children {
		if f := find(c, path); f != nil {
			return f
		}
	}
	return nil
}

func TestActorCrash_RestartsWithSamePIDAndStateRebuiltFromJournal(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t).startInProcess()
	lease := uuid.NewString()
	if r := d.provision(lease, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision: %d %s", r.Status, r.Body)
	}
	cb.waitFor(lease, 1, 2*time.Minute)
	// The callback can arrive before the registry hears the lease's report:
	// the pool is read once the registry says ready.
	d.waitStatus(lease, "ready", 10*time.Second)
	before := d.stats()
	leasePath := "root/registry/lease-" + lease

	for _, path := range []string{leasePath, "root/registry"} {
		d.crash(path)
		deadline := time.Now().Add(20 * time.Second)
		for {
			var root messages.NodeInfo
			if err := json.Unmarshal(d.debugGet("/debug/actors").Body, &root); err != nil {
				t.Fatal(err)
			}
			n := find(root, path)
			if n != nil && n.Restarts >= 1 && n.Status == "ok" && find(root, leasePath) != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not restarted under its own path", path)
			}
			time.Sleep(100 * time.Millisecond)
		}
		// A restarted registry holds admissions and /stats until its recovery pass.
		d.waitHealthy(30 * time.Second)
		// State came back from the journal: still ready, same pool, same cohort.
		if info := d.waitStatus(lease, "ready", 10*time.Second); info.FailCount != 0 {
			t.Fatalf("after crashing %s: %+v", path, info)
		}
		if after := d.stats(); after != before {
			t.Fatalf("after crashing %s the pool changed: %+v → %+v", path, before, after)
		}
		if r := d.get("/info/" + lease); r.Status != 200 {
			t.Fatalf("after crashing %s: /info %d", path, r.Status)
		}
	}
	if n := len(cb.forLease(lease)); n != 1 {
		t.Fatalf("crashes produced %d callbacks, want the one success", n)
	}
	d.closeAll(dc, lease)
}

func TestRun_JournalEventUnknownTypeOrNewerVersion_RefusedWithOneLineAndUntouched(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	lease := uuid.NewString()
	for name, tc := range map[string]struct {
		stream string
		ev     persistence.Event
		named  string // what the one line must name
	}{
		"unknown type":  {"lease/" + lease, persistence.Event{Type: "provision.teleported", V: 1, At: time.Now(), Data: []byte(`{}`)}, lease},
		"newer version": {"lease/" + lease, persistence.Event{Type: "provision.started", V: 2, At: time.Now(), Data: []byte(`{}`)}, lease},
		// The network pool's journal is verified at startup too.
		"netpool unbinds what was never bound": {"netpool", persistence.Event{Type: "pool.unbound", V: 1, At: time.Now(),
			Data: []byte(`{"network":"0123456789abcdef","lease":"` + lease + `","reason":"released"}`)}, "netpool"},
		// And the image collector's: it cannot forget an image it never recorded.
		"imagegc forgets what it never recorded": {"imagegc", persistence.Event{Type: "images.forgotten", V: 1, At: time.Now(),
			Data: []byte(`{"ids":["sha256:0123"]}`)}, "imagegc"},
	} {
		t.Run(name, func(t *testing.T) {
			d := newDaemonDir(t).startInProcess()
			d.stop()
			store, _, err := persistence.Open(persistence.Options{Dir: filepath.Join(d.dir, "data")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: tc.stream, Events: []persistence.Event{tc.ev}}}}); err != nil {
				t.Fatal(err)
			}
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(d.dir, "data", "state.db")
			old := time.Now().Add(-time.Hour)
			_ = os.Chtimes(state, old, old)
			sum, mtime := fileFingerprint(t, state)
			code, out := runOnce(t, "-config", d.cfgPath)
			if code != 1 || !strings.Contains(out, tc.named) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Fatalf("exit %d, want 1 with one line naming %s:\n%s", code, tc.named, out)
			}
			if s2, m2 := fileFingerprint(t, state); s2 != sum || !m2.Equal(mtime) {
				t.Fatal("refused state.db was modified")
			}
		})
	}
}

// TestVolumeRoot_SharedWithAnotherInstallation_Refused: volume names carry the
// lease, not the installation, so a second installation pointed at a volume root
// the first one claimed must refuse to start (one line naming both), while the
// owner keeps starting on it.
func TestVolumeRoot_SharedWithAnotherInstallation_Refused(t *testing.T) {
	t.Parallel()
	dockerClient(t)
	shared := filepath.Join(t.TempDir(), "volumes")
	owner := newDaemonDir(t, "volume_data_path: "+shared).startInProcess()
	if code := owner.stop(); code != 0 {
		t.Fatalf("owner stop exit %d", code)
	}
	other := newDaemonDir(t, "volume_data_path: "+shared)
	code, out := runOnce(t, "-config", other.cfgPath)
	ownerID := benchInstallationID(t, filepath.Join(owner.dir, "data"))
	if code != 1 || !strings.Contains(out, "belongs to installation "+ownerID) || !strings.Contains(out, "must not share a volume root") {
		t.Fatalf("second installation on the same volume root: exit %d\n%s", code, out)
	}
	owner.startInProcess() // the owner's own root still opens
}

// nonLoopbackAddr is a free host:port on this host's first non-loopback IPv4
// address (a bridge such as docker0 will do): production_mode refuses loopback
// listen and bind addresses, and the test should not listen on every interface.
func nonLoopbackAddr(t testing.TB) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.To4() == nil || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ipn.IP.String(), "0"))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	t.Fatal("no non-loopback IPv4 address on this host")
	return ""
}

// TestStart_HealthyOnceAccountingIsWhole_NotAfterTheHousekeeping: /health turns
// healthy as soon as the first reconcile pass has handed every lease its
// containers, not after the pass's housekeeping (image helpers, the isolation
// guard, diagnostics) — with a thousand containers Docker's answers to those
// were a fifth of a restart. The fake engine's helper sweep takes 5 s here:
// berthd is healthy while it runs and the pass has not ended.
func TestStart_HealthyOnceAccountingIsWhole_NotAfterTheHousekeeping(t *testing.T) {
	// Sequential: sets testHooks.engine, which every in-process daemon reads.
	engines := make(chan *fake.Engine, 1)
	testHooks.engine = func(installationID string) (docker, error) {
		e := fake.New(fake.Options{InstallationID: installationID})
		e.Delay(fake.OpSweepHelpers, 5*time.Second)
		engines <- e
		return e, nil
	}
	t.Cleanup(func() { testHooks.engine = nil })
	d := newDaemonDir(t).startInProcess()
	e := <-engines
	var fr struct {
		Passes []messages.Freshness `json:"passes"`
	}
	d.debugJSON("/debug/freshness", &fr)
	for _, p := range fr.Passes {
		if p.Name == "reconciler" && p.Passes != 0 {
			t.Fatalf("healthy only after the first reconcile pass ended (%d passes): readiness waited for the housekeeping", p.Passes)
		}
	}
	// Running: begun, and no pass has ended. A pass the reconciler began before
	// the registry's recovery ask is canceled and begun again for it (issue 27),
	// so on a busy machine the sweep may have begun twice.
	if n := e.Calls(fake.OpSweepHelpers); n == 0 {
		t.Fatalf("the helper sweep was never called when berthd turned healthy, want it running")
	}
}
