package main

// Golden tests of berthctl's operator views against a live daemon: the built
// berthctl binary runs every table subcommand and its -o json against one
// in-process berthd driven through a fixed scenario, and each output —
// normalised (see normaliser) — must equal testdata/berthctl/<name>.golden.
// `go test -run TestBerthctl ./cmd/berthd/ -update` rewrites the files.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

var updateGolden = flag.Bool("update", false, "rewrite cmd/berthd/testdata/berthctl/*.golden from this run")

// buildBerthctl compiles cmd/berthctl into dir.
func buildBerthctl(t *testing.T, dir string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go tool on PATH to build berthctl: %v", err)
	}
	bin := filepath.Join(dir, "berthctl")
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/berth-dev/berth/cmd/berthctl")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build berthctl: %v\n%s", err, out)
	}
	return bin
}

// berthctlRun is one finished berthctl run.
type berthctlRun struct {
	stdout, stderr string
	code           int
}

// berthctlCmd is berthctl with the daemon's addresses, secret and token.
func berthctlCmd(bin string, d *daemonProc, args ...string) *exec.Cmd {
	global := []string{"-api", "http://" + d.api, "-debug", "http://" + d.debug, "-debug-token", testDebugToken}
	cmd := exec.Command(bin, append(global, args...)...)
	cmd.Env = append(os.Environ(), "BERTH_CALLBACK_SECRET="+testSecret)
	return cmd
}

func runBerthctl(t *testing.T, bin string, d *daemonProc, args ...string) berthctlRun {
	t.Helper()
	cmd := berthctlCmd(bin, d, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("berthctl %v: %v", args, err)
	}
	return berthctlRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// berthctlOK runs berthctl and requires exit 0.
func berthctlOK(t *testing.T, bin string, d *daemonProc, args ...string) string {
	t.Helper()
	r := runBerthctl(t, bin, d, args...)
	if r.code != 0 {
		t.Fatalf("berthctl %v exited %d\nstdout:\n%s\nstderr:\n%s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// eventsFollower is a `berthctl events` running in the background.
type eventsFollower struct {
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
}

func startEventsFollower(t *testing.T, bin string, d *daemonProc, args ...string) *eventsFollower {
	t.Helper()
	f := &eventsFollower{cmd: berthctlCmd(bin, d, append([]string{"events"}, args...)...), stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	f.cmd.Stdout, f.cmd.Stderr = f.stdout, f.stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("start berthctl events: %v", err)
	}
	t.Cleanup(func() {
		if f.cmd.ProcessState == nil {
			_ = f.cmd.Process.Kill()
			_ = f.cmd.Wait()
		}
	})
	return f
}

// interrupt stops the follower as Ctrl-C would, once its output holds want,
// and returns its output; an interrupted follow exits 0.
func (f *eventsFollower) interrupt(t *testing.T, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(f.stdout.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("berthctl events never printed %q\nstdout:\n%s\nstderr:\n%s", want, f.stdout.String(), f.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("interrupted berthctl events: %v\nstderr:\n%s", err, f.stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("berthctl events did not stop on an interrupt\nstderr:\n%s", f.stderr.String())
	}
	return f.stdout.String()
}

// checkGolden compares got with testdata/berthctl/<name>.golden, or rewrites
// the file under -update.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "berthctl", name+".golden")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s (run with -update to accept):\n%s", name, path, lineDiff(string(want), got))
	}
}

// lineDiff shows the lines of want and got that differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d\n  want: %q\n   got: %q\n", i+1, wl, gl)
		}
	}
	return b.String() + "--- got ---\n" + got
}

// normaliser replaces what differs from run to run with placeholders, so a
// golden file holds only what berthctl decides: the layout, the columns, the
// order, the statuses and the fixed texts.
//
//   - The scenario's leases by name (<lease-a>…), the test image as <image>
//     (its repository <repo>: BERTH_TEST_IMAGE may name another registry);
//     any other UUID is <uuid>.
//   - RFC 3339 times are <time> (the zero time stays: it means "not set"),
//     clock times in summaries ("deadline 12:24:05Z") <clock>;
//     Docker IDs (64 or 12 hex) <id>; digests sha256:<digest>; loopback
//     addresses 127.0.0.1:<port>; published host ports <port>->.
//   - Tables: the cells of columns that are timing or sizes (AGE, OLDEST,
//     MAILBOX, IN-FLIGHT, SIZE, USED, and per view e.g. ATTEMPTS) are masked,
//     then every table is re-aligned — a placeholder is not as wide as what
//     it replaced, and berthctl's own alignment follows the widths. Columns are
//     found by splitting on runs of two or more spaces, which berthctl
//     guarantees never occur inside a cell.
//   - JSON: the values of keys that are timing or sizes (age_seconds, bytes,
//     host_port, mailbox_depth, a release's base64 manifest, …) are masked
//     line by line, so the daemon's field order stays as it is.
type normaliser struct {
	names []nameFor // replaced in order: a longer string before its prefix
}

type nameFor struct{ real, name string }

// newNormaliser names the scenario's leases and the test image.
func newNormaliser(leases map[string]string) normaliser {
	var n normaliser
	for real, name := range leases {
		n.names = append(n.names, nameFor{real, name})
	}
	image := testImage()
	n.names = append(n.names, nameFor{image, "<image>"})
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		n.names = append(n.names, nameFor{image[:i], "<repo>"})
	}
	return n
}

// mask replaces one volatile value.
type mask func(string) string

func fixed(placeholder string) mask { return func(string) string { return placeholder } }

// countsMasked keeps an actor's state summary but its numbers ("3 passes, last
// ok: 2 leases" → "<n> passes, last ok: <n> leases"): the background passes
// run on their own clocks.
func countsMasked(s string) string {
	return reNumber.ReplaceAllString(strings.ReplaceAll(s, "127.0.0.1:<port>", "<addr>"), "<n>")
}

var (
	reDigest    = regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	reUUID      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	reLongID    = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	reShortID   = regexp.MustCompile(`\b[0-9a-f]{12}\b`)
	reTime      = regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})`)
	reClock     = regexp.MustCompile(`\b\d{2}:\d{2}:\d{2}(\.\d+)?Z\b`)
	reLoopback  = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	rePortArrow = regexp.MustCompile(`\b\d{2,5}->`)
	reAgo       = regexp.MustCompile(`\(\d+[smhd](\d+[smh])? ago\)`)
	reNumber    = regexp.MustCompile(`\d+(\.\d+)?`)
	reColumns   = regexp.MustCompile(`\s{2,}`)
	reHeader    = regexp.MustCompile(`^[A-Z][A-Z -]*$`)
	reJSONField = regexp.MustCompile(`^(\s*)"([a-z_]+)": (.*?)(,?)$`)
	reTasks     = regexp.MustCompile(`(?m)^\s*"tasks": \{[^}]*\},?\n`)
)

// volatileColumns are the table columns masked in every view.
var volatileColumns = map[string]mask{
	"AGE": fixed("<age>"), "OLDEST": fixed("<age>"), "MAILBOX": fixed("<n>"), "IN-FLIGHT": fixed("<n>"),
	"SIZE": fixed("<size>"), "USED": fixed("<size>"),
}

// volatileKeys are the JSON keys masked in every view.
var volatileKeys = map[string]mask{
	"age_seconds": fixed("<n>"), "oldest_age_seconds": fixed("<n>"), "bytes": fixed("<n>"), "used_bytes": fixed("<n>"),
	"host_port": fixed("<port>"), "mailbox_depth": fixed("<n>"), "in_flight": fixed("<n>"),
	"manifest": fixed("<base64>"), // names the test image
}

func (n normaliser) tokens(s string) string {
	for _, nf := range n.names {
		s = strings.ReplaceAll(s, nf.real, nf.name)
	}
	s = reDigest.ReplaceAllString(s, "sha256:<digest>")
	s = reUUID.ReplaceAllString(s, "<uuid>")
	s = reLongID.ReplaceAllString(s, "<id>")
	s = reShortID.ReplaceAllString(s, "<id>")
	s = reLoopback.ReplaceAllString(s, "127.0.0.1:<port>")
	s = reTime.ReplaceAllStringFunc(s, func(ts string) string {
		if strings.HasPrefix(ts, "0001-01-01T00:00:00") {
			return ts
		}
		return "<time>"
	})
	return reClock.ReplaceAllString(s, "<clock>")
}

// table normalises berthctl's table output; columns masks more columns.
func (n normaliser) table(out string, columns map[string]mask) string {
	lines := strings.Split(strings.TrimSuffix(n.tokens(out), "\n"), "\n")
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	var header []string // the current table's columns, nil outside a table
	for _, line := range lines {
		indent := len(line) - len(strings.TrimLeft(line, " "))
		cells := reColumns.Split(strings.TrimSpace(line), -1)
		switch {
		case len(cells) == 1:
			header = nil
		case allHeaders(cells):
			header = cells
		case header != nil:
			for i := range cells {
				if i >= len(header) {
					continue
				}
				if m, ok := columns[header[i]]; ok {
					cells[i] = m(cells[i])
				} else if m, ok := volatileColumns[header[i]]; ok {
					cells[i] = m(cells[i])
				}
			}
		}
		for i := range cells {
			cells[i] = rePortArrow.ReplaceAllString(cells[i], "<port>->")
			cells[i] = reAgo.ReplaceAllString(cells[i], "(<age> ago)")
		}
		cells[0] = strings.Repeat(" ", indent) + cells[0]
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	return b.String()
}

func allHeaders(cells []string) bool {
	for _, c := range cells {
		if !reHeader.MatchString(c) {
			return false
		}
	}
	return true
}

// json normalises berthctl's pretty-printed -o json output (one scalar field
// a line); keys masks more keys.
func (n normaliser) json(out string, keys map[string]mask) string {
	// An actor's running tasks (goroutines, timers) depend on timing alone.
	out = reTasks.ReplaceAllString(out, "")
	lines := strings.Split(n.tokens(out), "\n")
	for i, line := range lines {
		m := reJSONField.FindStringSubmatch(line)
		if m == nil || m[3] == "{" || m[3] == "[" {
			continue
		}
		mk, ok := keys[m[2]]
		if !ok {
			mk, ok = volatileKeys[m[2]]
		}
		if ok {
			value := strings.Trim(m[3], `"`)
			lines[i] = m[1] + `"` + m[2] + `": "` + mk(value) + `"` + m[4]
		}
	}
	return strings.Join(lines, "\n")
}

// jsonLines normalises one JSON object a line (events -o json).
func (n normaliser) jsonLines(out string) string {
	out = n.tokens(out)
	for key, mk := range volatileKeys {
		re := regexp.MustCompile(`"` + key + `":("[^"]*"|[0-9.e+-]+)`)
		out = re.ReplaceAllStringFunc(out, func(field string) string {
			value := strings.Trim(strings.TrimPrefix(field, `"`+key+`":`), `"`)
			return `"` + key + `":"` + mk(value) + `"`
		})
	}
	return out
}

// TestBerthctl_GoldenViewsOfALiveDaemon drives one daemon through a fixed
// scenario — a ready two-instance lease (a), a lease whose container exits
// (b), a ready lease whose callback receiver keeps refusing (c), then a
// retaining close of a — and holds every operator view, table and JSON, to its
// golden file.
func TestBerthctl_GoldenViewsOfALiveDaemon(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	bin := buildBerthctl(t, t.TempDir())
	cb := newCallbackReceiver(t)
	d := newDaemonDir(t, "retain_on_close: true").startInProcess()

	leaseA, leaseB, leaseC := uuid.NewString(), uuid.NewString(), uuid.NewString()
	norm := newNormaliser(map[string]string{leaseA: "<lease-a>", leaseB: "<lease-b>", leaseC: "<lease-c>"})

	// Following from seq 0: a follower without -since starts at the newest seq
	// when it is up, which a process start can make later than the first lease.
	followTable := startEventsFollower(t, bin, d, "-since", "0")
	followJSON := startEventsFollower(t, bin, d, "-since", "0", "-o", "json")

	if r := d.provision(leaseA, cb.callbackURL(), flatManifest(nil), messages.LeaseItem{SKU: "docker-small", Quantity: 2}); r.Status != 202 {
		t.Fatalf("provision a: %d %s", r.Status, r.Body)
	}
	if got := cb.waitFor(leaseA, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackSuccess {
		t.Fatalf("a: %+v", got[0].Body)
	}
	d.waitStatus(leaseA, messages.StatusReady, 10*time.Second)

	exits := flatManifest(map[string]any{"args": []string{"exit", "-code", "3", "-after", "100ms"}})
	if r := d.provision(leaseB, cb.callbackURL(), exits); r.Status != 202 {
		t.Fatalf("provision b: %d %s", r.Status, r.Body)
	}
	if got := cb.waitFor(leaseB, 1, 2*time.Minute); got[0].Body.Status != messages.CallbackFailed {
		t.Fatalf("b: %+v", got[0].Body)
	}
	d.waitStatus(leaseB, messages.StatusFailed, 10*time.Second)

	cb.failNext(leaseC, 1<<20)
	if r := d.provision(leaseC, cb.callbackURL(), flatManifest(nil)); r.Status != 202 {
		t.Fatalf("provision c: %d %s", r.Status, r.Body)
	}
	d.waitStatus(leaseC, messages.StatusReady, 2*time.Minute)
	waitOutboxAttempts(t, d, leaseC, 3)

	attempts := map[string]mask{"ATTEMPTS": fixed("<n>"), "attempts": fixed("<n>")} // the outbox's 30 s sweep retries on its own clock
	treeState := map[string]mask{"STATE": countsMasked, "state": countsMasked}
	views := []struct {
		name, args string
		masks      map[string]mask
	}{
		{"leases", "leases", nil},
		{"leases-failed", "leases -status failed", nil},
		{"lease-ready", "lease " + leaseA, nil},
		{"lease-failed", "lease " + leaseB, nil},
		{"tree", "tree", treeState},
		{"outbox", "outbox", attempts},
	}
	for _, v := range views {
		t.Run(v.name, func(t *testing.T) {
			args := strings.Fields(v.args)
			checkGolden(t, v.name, norm.table(berthctlOK(t, bin, d, args...), v.masks))
			checkGolden(t, v.name+".json", norm.json(berthctlOK(t, bin, d, append(args, "-o", "json")...), v.masks))
		})
	}

	d.deprovisionUntilGone(leaseA)
	assertGone(t, dc, leaseA)
	t.Run("retentions", func(t *testing.T) {
		checkGolden(t, "retentions", norm.table(berthctlOK(t, bin, d, "retentions"), nil))
		checkGolden(t, "retentions.json", norm.json(berthctlOK(t, bin, d, "retentions", "-o", "json"), nil))
	})

	t.Run("events", func(t *testing.T) {
		last := berthctlOK(t, bin, d, "events", "-n", "100")
		checkGolden(t, "events-n", norm.table(last, nil))
		lastJSON := berthctlOK(t, bin, d, "events", "-n", "100", "-o", "json")
		checkGolden(t, "events-n.json", norm.jsonLines(lastJSON))
		// The followers saw exactly what the history holds.
		lines := strings.Split(strings.TrimSpace(lastJSON), "\n")
		newest := lines[len(lines)-1]
		followedJSON := followJSON.interrupt(t, newest)
		checkGolden(t, "events.json", norm.jsonLines(followedJSON))
		lastTable := strings.Split(strings.TrimSpace(last), "\n")
		followed := followTable.interrupt(t, lastTable[len(lastTable)-1])
		checkGolden(t, "events", norm.table(followed, nil))
		if followedJSON != lastJSON {
			t.Errorf("followed transitions differ from the history:\n%s\nvs\n%s", followedJSON, lastJSON)
		}
	})

	t.Run("refusals-exit-1", func(t *testing.T) {
		r := runBerthctl(t, bin, d, "lease", uuid.NewString())
		if r.code != 1 || !strings.Contains(r.stderr, "404") {
			t.Fatalf("an unknown lease: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		cmd := berthctlCmd(bin, d, "get", "/provisions")
		cmd.Env = append(cmd.Env, "BERTH_CALLBACK_SECRET="+strings.Repeat("x", 64))
		out, err := cmd.Output()
		if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "401") {
			t.Fatalf("a wrong secret: exit %d (%v)\n%s", cmd.ProcessState.ExitCode(), err, out)
		}
	})

	d.closeAll(dc, leaseB, leaseC)
}

// waitOutboxAttempts waits until lease's head callback has been attempted n
// times (attempts run at 0 s, 1 s and 5 s), so the outbox views are taken
// between attempts rather than racing one.
func waitOutboxAttempts(t *testing.T, d *daemonProc, lease string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		r := d.debugGet("/debug/outbox")
		var page struct {
			Leases []struct {
				LeaseUUID string `json:"lease_uuid"`
				Attempts  int    `json:"attempts"`
			} `json:"leases"`
		}
		if r.Status == 200 {
			r.json(t, &page)
			for _, l := range page.Leases {
				if l.LeaseUUID == lease && l.Attempts >= n {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lease %s: fewer than %d callback attempts after a minute: %d %s", lease, n, r.Status, r.Body)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
