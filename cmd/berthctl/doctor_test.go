package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/dockerio/isolation"
	"github.com/berth-dev/berth/persistence"
)

// mustRunDocker is set under make test (BERTH_REQUIRE_DOCKER=1) and in CI: a
// Docker-gated test that cannot run there fails instead of skipping (the same
// rule as cmd/berthd's harness).
var mustRunDocker = os.Getenv("BERTH_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true"

func dockerRequired() bool { return mustRunDocker }

// TestMain drops the test run's own BERTH_* variables (BERTH_REQUIRE_DOCKER,
// BERTH_TEST_*): berthd's config loader would take each for a misspelt key,
// and a test that wants one sets it itself.
func TestMain(m *testing.M) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "BERTH_") {
			_ = os.Unsetenv(name)
		}
	}
	os.Exit(m.Run())
}

func skipOrFail(t testing.TB, why string) {
	t.Helper()
	if dockerRequired() {
		t.Fatalf("cannot run: %s (BERTH_REQUIRE_DOCKER/CI demand it)", why)
	}
	t.Skip("SKIPPING: " + why)
}

func requireDocker(t *testing.T) {
	t.Helper()
	d, err := newDockerAPI("unix:///var/run/docker.sock")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.get(ctx, "/_ping", nil); err != nil {
		skipOrFail(t, "no Docker engine at /var/run/docker.sock: "+err.Error())
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// runDoctorCLI runs `berthctl -config cfg doctor -o format` and returns the
// output and whether it failed the way a failed check makes it.
func runDoctorCLI(t *testing.T, cfg, format string) (string, bool) {
	t.Helper()
	var out bytes.Buffer
	err := run([]string{"-config", cfg, "doctor", "-o", format}, nil, &out)
	if err != nil && !errors.Is(err, errDoctorFailed) {
		t.Fatalf("doctor: %v\n%s", err, out.String())
	}
	return out.String(), err != nil
}

func doctorJSON(t *testing.T, cfg string) doctorReport {
	t.Helper()
	out, failed := runDoctorCLI(t, cfg, "json")
	var rep doctorReport
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("doctor -o json: %v\n%s", err, out)
	}
	if failed != (rep.Verdict == verdictFail) {
		t.Fatalf("exit status (failed %t) disagrees with the verdict %q", failed, rep.Verdict)
	}
	return rep
}

// checkNames is the fixed order of the report.
var checkNames = []string{"config", "data_dir", "store", "identity", "lock", "docker", "address_pools", "isolation_guard", "clock", "installations", "fred_v013", "adoption", "volumes", "health"}

// verdicts is the golden projection of a report: "name verdict" per check. The
// installations check is left out: its verdict depends on what other
// installations on this shared engine hold (installations_test.go judges it);
// so is the isolation guard, which any berthd on this host may have put in
// place before (TestDoctor_IsolationGuard_* judges it).
func verdicts(rep doctorReport) string {
	var lines []string
	for _, c := range rep.Checks {
		if c.Name == "installations" || c.Name == "isolation_guard" {
			continue
		}
		lines = append(lines, c.Name+" "+c.Verdict)
	}
	return strings.Join(lines, "\n")
}

func checkOf(t *testing.T, rep doctorReport, name string) checkResult {
	t.Helper()
	for _, c := range rep.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s check in %+v", name, rep)
	return checkResult{}
}

// brokenSetup is a data dir made by persistence.Open (no daemon) and a config
// for it; extra lines replace the defaults' keys.
func brokenSetup(t *testing.T, extra ...string) (dataDir, cfg string) {
	t.Helper()
	root := t.TempDir()
	dataDir = filepath.Join(root, "data")
	s, _, err := persistence.Open(persistence.Options{Dir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lines := map[string]string{
		"data_dir":          dataDir,
		"listen_addr":       freeAddr(t), // nothing answers: health fails
		"debug_listen_addr": freeAddr(t),
		"callback_secret":   secret,
		"docker_host":       "unix:///nonexistent.sock",
		"volume_data_path":  filepath.Join(root, "volumes"),
	}
	for _, e := range extra {
		k, v, _ := strings.Cut(e, ": ")
		lines[k] = v
	}
	var body []string
	for k, v := range lines {
		body = append(body, k+": "+v)
	}
	return dataDir, writeDaemonConfig(t, body...)
}

func TestDoctor_DockerSocketPointingNowhere_FailsWithTheFix(t *testing.T) {
	_, cfg := brokenSetup(t)
	rep := doctorJSON(t, cfg)
	d := checkOf(t, rep, "docker")
	if d.Verdict != verdictFail || !strings.Contains(d.Finding, "unix:///nonexistent.sock") || !strings.Contains(d.Fix, "start dockerd") {
		t.Fatalf("docker check: %+v", d)
	}
	for _, dependent := range []string{"address_pools", "clock", "installations", "fred_v013"} {
		if c := checkOf(t, rep, dependent); c.Verdict != verdictWarn || !strings.Contains(c.Finding, "see docker") {
			t.Errorf("%s without Docker: %+v", dependent, c)
		}
	}
	if rep.Verdict != verdictFail {
		t.Fatalf("verdict %q", rep.Verdict)
	}
	// The store, the identity and the data dir are fine: only Docker and the
	// (absent) daemon are the problem.
	want := "config ok\ndata_dir ok\nstore ok\nidentity ok\nlock warn\ndocker fail\naddress_pools warn\nclock warn\nfred_v013 warn\nadoption ok\nvolumes warn\nhealth fail"
	if got := verdicts(rep); got != want {
		t.Fatalf("verdicts:\n%s\nwant:\n%s", got, want)
	}
}

func TestDoctor_StateDBMode0644_Fails(t *testing.T) {
	dataDir, cfg := brokenSetup(t)
	state := filepath.Join(dataDir, "state.db")
	if err := os.Chmod(state, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := doctorJSON(t, cfg)
	if c := checkOf(t, rep, "data_dir"); c.Verdict != verdictFail || !strings.Contains(c.Finding, "state.db has mode 0644") || !strings.Contains(c.Fix, "chmod 600 "+state) {
		t.Errorf("data_dir: %+v", c)
	}
	if c := checkOf(t, rep, "store"); c.Verdict != verdictFail || !strings.Contains(c.Finding, "mode 0644") || !strings.Contains(c.Fix, "chmod 600") {
		t.Errorf("store: %+v", c)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("doctor changed state.db: %v %v", fi.Mode(), err)
	}
}

func TestDoctor_AForeignStorageIdentity_Fails(t *testing.T) {
	dataDir, cfg := brokenSetup(t)
	otherDir, _ := brokenSetup(t)
	foreign, err := os.ReadFile(filepath.Join(otherDir, "storage-identity"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "storage-identity"), foreign, 0o600); err != nil {
		t.Fatal(err)
	}
	rep := doctorJSON(t, cfg)
	c := checkOf(t, rep, "identity")
	if c.Verdict != verdictFail || !strings.Contains(c.Finding, "different installations") || !strings.Contains(c.Fix, "never copy a marker") {
		t.Fatalf("identity: %+v", c)
	}
	if s := checkOf(t, rep, "store"); s.Verdict != verdictFail {
		t.Fatalf("store with a foreign marker: %+v", s)
	}
}

func TestDoctor_ADirVolumeRoot_WarnsQuotaNotEnforced(t *testing.T) {
	_, cfg := brokenSetup(t, "volume_filesystem: dir")
	c := checkOf(t, doctorJSON(t, cfg), "volumes")
	if c.Verdict != verdictWarn || !strings.Contains(c.Finding, "quota not enforced") {
		t.Fatalf("volumes: %+v", c)
	}
}

func TestDoctor_AVolumeRootThatIsNotAMount_FailsWithStatefulSKUs(t *testing.T) {
	root := t.TempDir()
	_, cfg := brokenSetup(t, "volume_mount_path: "+root, "volume_data_path: "+filepath.Join(root, "volumes"))
	c := checkOf(t, doctorJSON(t, cfg), "volumes")
	if c.Verdict != verdictFail || !regexp.MustCompile(`not (an|the) active mount`).MatchString(c.Finding) || !strings.Contains(c.Fix, "mount") {
		t.Fatalf("volumes: %+v", c)
	}
}

// A store whose berthd has started (it claims its volume root at every start)
// beside a volume root without the claim: what is there is not the filesystem
// berthd put its volumes on — the case a running berthd holds its closes for.
func TestDoctor_AVolumeRootWithoutTheClaim_FailsNamingTheUnmountedFilesystem(t *testing.T) {
	dataDir, cfg := brokenSetup(t)
	vols := filepath.Join(filepath.Dir(dataDir), "volumes")
	if err := os.Mkdir(vols, 0o711); err != nil {
		t.Fatal(err)
	}
	c := checkOf(t, doctorJSON(t, cfg), "volumes")
	if c.Verdict != verdictFail || !strings.Contains(c.Finding, "carries no .berth-installation") ||
		!strings.Contains(c.Finding, "not mounted there") || !strings.Contains(c.Fix, "mount") {
		t.Fatalf("volumes: %+v", c)
	}
}

func TestDoctorReport_GoldenTableAndJSON(t *testing.T) {
	rep := doctorReport{Verdict: verdictFail, Checks: []checkResult{
		ok("config", "/etc/berth/berthd.yaml loads and validates (production_mode)"),
		warn("volumes", "/srv/v is on ext4 at /: the dir driver is used, quota not enforced", "use btrfs"),
		fail("docker", "Docker does not answer", "start dockerd"),
	}}
	var table bytes.Buffer
	if err := rep.write(&table, "table"); err != nil {
		t.Fatal(err)
	}
	wantTable := `CHECK    VERDICT  FINDING
config   ok       /etc/berth/berthd.yaml loads and validates (production_mode)
volumes  warn     /srv/v is on ext4 at /: the dir driver is used, quota not enforced
                  fix: use btrfs
docker   fail     Docker does not answer
                  fix: start dockerd
verdict: fail (1 ok, 1 warn, 1 fail)
`
	if table.String() != wantTable {
		t.Errorf("table:\n%s\nwant:\n%s", table.String(), wantTable)
	}
	var js bytes.Buffer
	if err := rep.write(&js, "json"); err != nil {
		t.Fatal(err)
	}
	wantJSON := `{
  "checks": [
    {
      "name": "config",
      "verdict": "ok",
      "finding": "/etc/berth/berthd.yaml loads and validates (production_mode)",
      "fix": ""
    },
    {
      "name": "volumes",
      "verdict": "warn",
      "finding": "/srv/v is on ext4 at /: the dir driver is used, quota not enforced",
      "fix": "use btrfs"
    },
    {
      "name": "docker",
      "verdict": "fail",
      "finding": "Docker does not answer",
      "fix": "start dockerd"
    }
  ],
  "verdict": "fail"
}
`
	if js.String() != wantJSON {
		t.Errorf("json:\n%s\nwant:\n%s", js.String(), wantJSON)
	}
}

var (
	berthdOnce sync.Once
	berthdBin  string
	berthdErr  error
)

// buildBerthd builds the real daemon once per test binary (berthctl's tests
// cannot import berthd's package main).
func buildBerthd(t *testing.T) string {
	t.Helper()
	berthdOnce.Do(func() {
		dir, err := os.MkdirTemp("", "berthctl-test-berthd-")
		if err != nil {
			berthdErr = err
			return
		}
		berthdBin = filepath.Join(dir, "berthd")
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", berthdBin, "../berthd")
		if out, err := cmd.CombinedOutput(); err != nil {
			berthdErr = fmt.Errorf("go build berthd: %v\n%s", err, out)
		}
	})
	if berthdErr != nil {
		t.Fatal(berthdErr)
	}
	return berthdBin
}

// btrfsEnv is BERTH_TEST_BTRFS as the run was started with (TestMain drops it).
var btrfsEnv = os.Getenv("BERTH_TEST_BTRFS")

// btrfsRoot is the test btrfs mount (with quotas) when there is one.
func btrfsRoot() string {
	p := btrfsEnv
	if p == "" {
		p = "/var/lib/berth-ci/btrfs"
	}
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil || !regexp.MustCompile(`(?m)^\S+ \S+ \S+ \S+ `+regexp.QuoteMeta(p)+` .* - btrfs `).Match(raw) {
		return ""
	}
	return p
}

// A real berthd, started from its own binary, next to which doctor runs: every
// check ok (the volume root on the btrfs test mount when there is one, else the
// dir driver's warning), the lock held by that very process, and the daemon
// undisturbed — it still answers, and a signed request through -config works.
func TestDoctor_HealthySetupBesideARunningBerthd(t *testing.T) {
	requireDocker(t)
	bin := buildBerthd(t)
	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	api, dbg := freeAddr(t), freeAddr(t)
	lines := []string{
		"data_dir: " + dataDir,
		"listen_addr: " + api,
		"debug_listen_addr: " + dbg,
		"callback_secret: " + secret,
		"log_level: warn",
		"reconcile_interval: 3s",
		"network_pool_size: 0", // nothing of this daemon outlives the test in Docker
		"debug:",
		"  token: doctor-test-debug-token-0123",
	}
	wantVolumes := verdictWarn
	if mnt := btrfsRoot(); mnt != "" && os.Geteuid() == 0 {
		vols, err := os.MkdirTemp(mnt, "doctor-test-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(vols) })
		lines = append(lines, "volume_mount_path: "+mnt, "volume_data_path: "+filepath.Join(vols, "volumes"), "volume_filesystem: btrfs")
		wantVolumes = verdictOK
	} else {
		if dockerRequired() {
			t.Fatalf("no btrfs test mount with quotas (make btrfs-up) or not root: the healthy setup needs it under BERTH_REQUIRE_DOCKER")
		}
		lines = append(lines, "volume_data_path: "+filepath.Join(root, "volumes"), "volume_filesystem: dir")
	}
	cfg := writeDaemonConfig(t, lines...)
	cmd, log := runBerthd(t, bin, cfg)
	waitHealthy(t, "http://"+api, log)

	for round := 0; round < 3; round++ { // again and again: doctor must leave the daemon alone
		rep := doctorJSON(t, cfg)
		want := strings.Join([]string{"config ok", "data_dir ok", "store ok", "identity ok", "lock ok", "docker ok",
			"address_pools ok", "clock ok", "fred_v013 ok", "adoption ok", "volumes " + wantVolumes, "health ok"}, "\n")
		if got := verdicts(rep); got != want {
			t.Fatalf("round %d verdicts:\n%s\nwant:\n%s\nreport: %+v\nlog:\n%s", round, got, want, rep, log.String())
		}
		if c := checkOf(t, rep, "lock"); !strings.Contains(c.Finding, fmt.Sprintf("pid %d", cmd.Process.Pid)) {
			t.Fatalf("lock: %+v, want berthd's pid %d", c, cmd.Process.Pid)
		}
		if c := checkOf(t, rep, "store"); !strings.Contains(c.Finding, filepath.Join(dataDir, "state.db")) {
			t.Fatalf("store: %+v", c)
		}
	}

	// The table: a header, one line per check in order (plus fix lines for
	// warnings), the verdicts in one column, and the summary.
	table, failed := runDoctorCLI(t, cfg, "table")
	if failed {
		t.Fatalf("doctor failed on a healthy setup:\n%s", table)
	}
	lines = strings.Split(strings.TrimRight(table, "\n"), "\n")
	col := strings.Index(lines[0], "VERDICT")
	var names []string
	for _, l := range lines[1 : len(lines)-1] {
		if strings.HasPrefix(strings.TrimSpace(l), "fix: ") {
			continue
		}
		names = append(names, strings.Fields(l)[0])
		if v := strings.Fields(l[col:])[0]; v != verdictOK && v != verdictWarn {
			t.Errorf("verdict column of %q reads %q", l, v)
		}
	}
	if strings.Join(names, " ") != strings.Join(checkNames, " ") {
		t.Fatalf("table rows %v, want %v\n%s", names, checkNames, table)
	}
	if !regexp.MustCompile(`^verdict: (ok|warn) \(\d+ ok, \d+ warn, 0 fail\)$`).MatchString(lines[len(lines)-1]) {
		t.Fatalf("summary %q", lines[len(lines)-1])
	}

	// The daemon is undisturbed, and -config signs like providerd for it.
	var out bytes.Buffer
	if err := run([]string{"-config", cfg, "get", "/stats"}, nil, &out); err != nil || !strings.HasPrefix(out.String(), "200 OK") {
		t.Fatalf("signed GET /stats through -config: %v %q", err, out.String())
	}
	if strings.Contains(log.String(), `"level":"error"`) {
		t.Fatalf("berthd logged errors beside doctor:\n%s", log.String())
	}
}

type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncLog) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncLog) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitHealthy(t *testing.T, api string, log *syncLog) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(api + "/health")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `"healthy"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("berthd not healthy within 60s (last: %v)\n%s", err, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runBerthd starts the daemon binary on cfg, its output kept in the returned
// log, and stops it (SIGINT, then SIGKILL after 90 s) when the test ends.
func runBerthd(t *testing.T, bin, cfg string) (*exec.Cmd, *syncLog) {
	t.Helper()
	log := &syncLog{}
	// Registered first, so it runs after the stop below.
	t.Cleanup(func() { checkLeftovers(t, cfg) })
	cmd := exec.Command(bin, "-config", cfg)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(90 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd, log
}

// TestDoctor_IsolationGuard_InPlaceOK_ChangedWarnsWithTheFix: the guard as
// berthd writes it is ok; a changed chain (a rule gone) is a warning naming
// what it leaves open and how to get it back.
func TestDoctor_IsolationGuard_InPlaceOK_ChangedWarnsWithTheFix(t *testing.T) {
	if os.Geteuid() != 0 {
		if dockerRequired() {
			t.Fatal("the isolation guard check needs root under BERTH_REQUIRE_DOCKER")
		}
		t.Skip("SKIPPING: the isolation guard check needs root")
	}
	ctx := context.Background()
	if _, err := isolation.Host.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	// Other tests' daemons put it back within a reconcile pass; this one
	// restores it itself.
	t.Cleanup(func() { _, _ = isolation.Host.Ensure(ctx) })
	env := &doctorEnv{cfg: &config.Config{}}
	if c := checkIsolationGuard(ctx, env); c.Verdict != verdictOK {
		t.Fatalf("guard in place: %+v", c)
	}
	rule := []string{"-w", "-t", "mangle", "-D", "BERTH-ISOLATION", "-i", "docker0", "-o", "br-+", "-m", "conntrack", "!", "--ctstate", "DNAT", "-j", "DROP"}
	if out, err := exec.Command("iptables", rule...).CombinedOutput(); err != nil {
		t.Fatalf("remove a rule: %v %s", err, out)
	}
	c := checkIsolationGuard(ctx, env)
	if c.Verdict != verdictWarn || !strings.Contains(c.Finding, "leases can reach each other") || !strings.Contains(c.Fix, "start berthd") {
		t.Fatalf("guard changed: %+v", c)
	}
}
