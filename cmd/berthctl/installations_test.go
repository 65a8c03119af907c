package main

// Other installations' objects on the real engine: doctor reports them by
// installation (counts, ages, what is attached or running, live or dead), and
// prune-installations removes only a dead installation's idle objects — only
// when asked with -yes, never a network something is attached to, never
// anything of an installation whose data dir lock is held or whose container
// runs.

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/berth-dev/berth/dockerio"
)

// fakeInstallation makes labelled objects in Docker for a test and removes
// whatever is left of them at its end.
type fakeInstallation struct {
	t  *testing.T
	d  *dockerAPI
	id string
}

func newFakeInstallation(t *testing.T, d *dockerAPI) *fakeInstallation {
	f := &fakeInstallation{t: t, d: d, id: "test-" + uuid.NewString()}
	t.Cleanup(func() { removeInstallationObjects(t, d, f.id) })
	return f
}

func (f *fakeInstallation) labels() map[string]string {
	return map[string]string{dockerio.LabelManaged: "true", dockerio.LabelInstallation: f.id}
}

func (f *fakeInstallation) network() string {
	f.t.Helper()
	var out struct {
		ID string `json:"Id"`
	}
	name := "berth-test-" + uuid.NewString()[:12]
	if err := f.d.do(context.Background(), "POST", "/networks/create", map[string]any{"Name": name, "Labels": f.labels()}, &out); err != nil {
		f.t.Fatal(err)
	}
	return out.ID
}

func (f *fakeInstallation) volume() string {
	f.t.Helper()
	var out struct{ Name string }
	if err := f.d.do(context.Background(), "POST", "/volumes/create", map[string]any{"Labels": f.labels()}, &out); err != nil {
		f.t.Fatal(err)
	}
	return out.Name
}

// container creates one on network (and, with run, starts it); labels nil
// makes it nobody's.
func (f *fakeInstallation) container(labels map[string]string, network string, run bool) string {
	f.t.Helper()
	ctx := context.Background()
	if err := f.d.do(ctx, "POST", "/images/create?fromImage="+url.QueryEscape(benchTestImage), nil, nil); err != nil {
		f.t.Fatal(err)
	}
	var out struct {
		ID string `json:"Id"`
	}
	// The image's VOLUME /data under a tmpfs, as berth covers it: prune removes
	// gently (v=0), which would leave the anonymous volume Docker makes otherwise.
	body := map[string]any{"Image": benchTestImage, "Cmd": []string{"serve"}, "Labels": labels,
		"HostConfig": map[string]any{"NetworkMode": network, "Tmpfs": map[string]string{"/data": ""}}}
	if err := f.d.do(ctx, "POST", "/containers/create", body, &out); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = f.d.do(ctx, "DELETE", "/containers/"+out.ID+"?force=1&v=1", nil, nil) })
	if run {
		if err := f.d.do(ctx, "POST", "/containers/"+out.ID+"/start", nil, nil); err != nil {
			f.t.Fatal(err)
		}
	}
	return out.ID
}

// objectsOf lists what Docker holds of one installation, by ID.
func objectsOf(t testing.TB, d *dockerAPI, installation string) map[string]installationObject {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	invs, err := inventoryInstallations(ctx, d, "", nil, 0, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]installationObject{}
	for _, inv := range invs {
		if inv.ID == installation {
			for _, o := range inv.Objects {
				out[o.ID] = o
			}
		}
	}
	return out
}

// removeInstallationObjects force-removes everything labelled with the installation.
func removeInstallationObjects(t testing.TB, d *dockerAPI, installation string) {
	ctx := context.Background()
	for _, kind := range []string{"container", "network", "volume"} {
		for _, o := range objectsOf(t, d, installation) {
			switch {
			case o.Kind == kind && kind == "container":
				_ = d.do(ctx, "DELETE", "/containers/"+o.ID+"?force=1&v=1", nil, nil)
			case o.Kind == kind && kind == "network":
				_ = d.do(ctx, "DELETE", "/networks/"+o.ID, nil, nil)
			case o.Kind == kind:
				_ = d.do(ctx, "DELETE", "/volumes/"+o.ID+"?force=1", nil, nil)
			}
		}
	}
}

// lockedDataDir is a data dir naming the installation whose daemon.lock this
// test process holds, as a running berthd does.
func lockedDataDir(t *testing.T, installation string) {
	dir := t.TempDir()
	marker, _ := json.Marshal(map[string]string{"installation_id": installation})
	if err := os.WriteFile(filepath.Join(dir, "storage-identity"), marker, 0o600); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "daemon.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Close() })
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
}

func TestPruneInstallations_RemovesOnlyADeadInstallationsIdleObjects_OnlyWithYes(t *testing.T) {
	requireDocker(t)
	d, err := newDockerAPI("")
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeDaemonConfig(t, "data_dir: "+filepath.Join(t.TempDir(), "data"))

	dead := newFakeInstallation(t, d)
	deadNet, deadVol := dead.network(), dead.volume()
	deadStopped := dead.container(dead.labels(), deadNet, false)
	attachedNet := dead.network()
	dead.container(nil, attachedNet, true) // nobody's container, running on the dead installation's network

	running := newFakeInstallation(t, d) // live: a container of it runs
	runningNet := running.network()
	running.container(running.labels(), runningNet, true)

	locked := newFakeInstallation(t, d) // live: its data dir's lock is held
	lockedNet := locked.network()
	lockedDataDir(t, locked.id)

	prune := func(args ...string) (string, error) {
		var out bytes.Buffer
		args = append([]string{"-config", cfg, "prune-installations", "-installation", dead.id, "-installation", running.id, "-installation", locked.id}, args...)
		err := run(args, nil, &out)
		return out.String(), err
	}
	all := func() map[string]bool {
		ids := map[string]bool{}
		for _, inst := range []string{dead.id, running.id, locked.id} {
			for id := range objectsOf(t, d, inst) {
				ids[id] = true
			}
		}
		return ids
	}
	before := all()
	if len(before) != 7 {
		t.Fatalf("%d objects made, want 7: %v", len(before), before)
	}

	// Young objects: every installation counts as live under the default minimum age.
	out, err := prune("-yes")
	if err != nil || !strings.Contains(out, "removed 0 idle objects, 0 refused") || len(all()) != 7 {
		t.Fatalf("default min-age removed something or failed: %v\n%s", err, out)
	}
	// A dry run lists, removes nothing.
	out, err = prune("-min-age", "0")
	if err != nil || len(all()) != 7 {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	for _, want := range []string{"would remove network", "would remove volume " + deadVol, "would remove container", "keep network", "attached",
		running.id + " 1 containers (1 running), 1 networks (1 attached)", "(live: container ", locked.id + " 1 networks (0 attached)", "(live: pid ", "(dead)"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}

	out, err = prune("-min-age", "0", "-yes")
	if err != nil {
		t.Fatalf("prune: %v\n%s", err, out)
	}
	after := all()
	for _, gone := range []string{deadNet, deadVol, deadStopped} {
		if after[gone] {
			t.Errorf("dead installation's idle %s kept\n%s", gone, out)
		}
	}
	for _, kept := range []string{attachedNet, runningNet, lockedNet} {
		if !after[kept] {
			t.Errorf("network %s removed: attached or of a live installation\n%s", kept, out)
		}
	}
	if len(after) != 4 {
		t.Errorf("%d objects left, want 4 (the attached network, the live installations' 3)\n%s", len(after), out)
	}
}

func TestPruneInstallations_BadInput_ClearErrorNothingRemoved(t *testing.T) {
	requireDocker(t)
	d, err := newDockerAPI("")
	if err != nil {
		t.Fatal(err)
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	cfg := writeDaemonConfig(t, "data_dir: "+dataDir)
	dead := newFakeInstallation(t, d)
	dead.network()
	for name, args := range map[string][]string{
		"unknown installation": {"-installation", "no-such-installation", "-installation", dead.id},
		"stray argument":       {"-yes", "now"},
		"negative min-age":     {"-min-age", "-1s"},
	} {
		var out bytes.Buffer
		if err := run(append([]string{"-config", cfg, "prune-installations", "-min-age", "0"}, args...), nil, &out); err == nil {
			t.Errorf("%s: no error\n%s", name, out.String())
		}
		if n := len(objectsOf(t, d, dead.id)); n != 1 {
			t.Fatalf("%s: %d objects left of 1", name, n)
		}
	}
	// The config's own installation is never a target.
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	marker, _ := json.Marshal(map[string]string{"installation_id": dead.id})
	if err := os.WriteFile(filepath.Join(dataDir, "storage-identity"), marker, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run([]string{"-config", cfg, "prune-installations", "-min-age", "0", "-installation", dead.id, "-yes"}, nil, &out)
	if err == nil || !strings.Contains(err.Error(), "own") || len(objectsOf(t, d, dead.id)) != 1 {
		t.Fatalf("own installation: %v\n%s", err, out.String())
	}
}

func TestDoctor_ReportsOtherInstallationsObjects_CountsAgesAttachedLiveOrDead(t *testing.T) {
	requireDocker(t)
	d, err := newDockerAPI("")
	if err != nil {
		t.Fatal(err)
	}
	other := newFakeInstallation(t, d)
	net := other.network()
	other.volume()
	other.container(nil, net, true)
	dc, err := loadDaemonConfig("", nil)
	if err != nil {
		t.Fatal(err)
	}
	env := &doctorEnv{cfg: dc.cfg, docker: d, info: &dockerInfo{}}
	r := checkInstallations(context.Background(), env)
	// (Other installations on this shared engine may warn: only this one is judged.)
	line := func(state string) *regexp.Regexp {
		return regexp.MustCompile(regexp.QuoteMeta(other.id) + ` 1 networks \(1 attached\), 1 volumes \(0 mounted\), ages \d+s to \d+s \(` + state + `\)`)
	}
	if !line(`live: network \S+ is younger than 1h0m0s`).MatchString(r.Finding) {
		t.Fatalf("installations check, young: %+v", r)
	}
	// Old enough to count: dead, a warning naming the command that removes it.
	env.minAge = time.Nanosecond
	r = checkInstallations(context.Background(), env)
	if r.Verdict != verdictWarn || !line("dead").MatchString(r.Finding) || !strings.Contains(r.Fix, "berthctl prune-installations") {
		t.Fatalf("installations check, dead: %+v", r)
	}
}

// checkLeftovers fails the test for any container, network or volume the
// daemon of cfg left in Docker after it stopped, then removes them so one leak
// does not pile up over runs.
func checkLeftovers(t *testing.T, cfg string) {
	t.Helper()
	dc, err := loadDaemonConfig(cfg, nil)
	if err != nil {
		t.Error(err)
		return
	}
	id := markerInstallation(dc.cfg.DataDir)
	d, err := newDockerAPI(dc.cfg.DockerHost)
	if id == "" || err != nil {
		return
	}
	for _, o := range objectsOf(t, d, id) {
		t.Errorf("installation %s left %s %s (%s) behind after its daemon stopped; removed now", id, o.Kind, o.Name, o.ID)
	}
	removeInstallationObjects(t, d, id)
}
