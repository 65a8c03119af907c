package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asMainEnv makes the test binary behave as the workload itself, so signal
// handling and exit codes are tested on a real process.
const asMainEnv = "BERTH_WORKLOAD_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// workloadProcess is the workload running as a child process.
type workloadProcess struct {
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line; closed at EOF
	exited chan int    // exit code, once
}

func startWorkload(t *testing.T, env []string, args ...string) *workloadProcess {
	t.Helper()
	// Our own pipe (not StdoutPipe) so reading and Wait do not race.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asMainEnv+"=1"), env...)
	if _, set := os.LookupEnv("GORACE"); !set {
		// A -race binary otherwise sleeps 1 s at exit.
		cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
	}
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	p := &workloadProcess{cmd: cmd, lines: make(chan string, 100), exited: make(chan int, 1)}
	go func() {
		defer r.Close()
		defer close(p.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
	go func() {
		err := cmd.Wait()
		var exitErr *exec.ExitError
		switch {
		case err == nil:
			p.exited <- 0
		case errors.As(err, &exitErr):
			p.exited <- exitErr.ExitCode()
		default:
			p.exited <- -1
		}
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return p
}

// line returns the next stdout line, failing after a generous timeout.
func (p *workloadProcess) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatal("workload closed stdout")
		}
		return l
	case <-time.After(60 * time.Second):
		t.Fatal("no stdout line from the workload within 60 s")
		return ""
	}
}

func (p *workloadProcess) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v: %v", sig, err)
	}
}

// exitCode waits for the process to exit and returns its exit code.
func (p *workloadProcess) exitCode(t *testing.T) int {
	t.Helper()
	select {
	case code := <-p.exited:
		return code
	case <-time.After(60 * time.Second):
		t.Fatal("workload did not exit within 60 s")
		return -1
	}
}

func TestServe_SIGTERMExitsZero(t *testing.T) {
	p := startWorkload(t, nil, "serve", "-port", "0", "-logs", "1", "-exit-after", "10m", "-exit-code", "7")
	if l := p.line(t); l != "line 1" {
		t.Fatalf("first line = %q", l)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
}

func TestServe_IgnoreSigtermFromEnvKeepsRunningUntilExitAfter(t *testing.T) {
	// Handled, SIGTERM would exit 0 at once; ignored, the process lives on
	// until -exit-after fires with code 7.
	p := startWorkload(t, []string{"WORKLOAD_IGNORE_SIGTERM=true", "WORKLOAD_EXIT_AFTER=4s", "WORKLOAD_EXIT_CODE=7"},
		"serve", "-port", "0", "-logs", "1")
	if l := p.line(t); l != "line 1" {
		t.Fatalf("first line = %q", l)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.exitCode(t); code != 7 {
		t.Fatalf("exit code = %d, want 7 (SIGTERM must be ignored)", code)
	}
}

func TestLogs_PrintsNLinesThenWaitsForSIGTERM(t *testing.T) {
	p := startWorkload(t, []string{"WORKLOAD_LOGS=3"}, "logs")
	for i := 1; i <= 3; i++ {
		if l, want := p.line(t), "line "+itoa(i); l != want {
			t.Fatalf("line %d = %q, want %q", i, l, want)
		}
	}
	select {
	case code := <-p.exited:
		t.Fatalf("logs mode exited (%d) before SIGTERM", code)
	default:
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.exitCode(t); code != 0 {
		t.Fatalf("exit code = %d, want 0", code)
	}
	if l, ok := <-p.lines; ok {
		t.Fatalf("extra stdout line %q", l)
	}
}

func TestExitMode_PrintsALineAndExitsWithTheCode(t *testing.T) {
	var out bytes.Buffer
	start := time.Now()
	code := run([]string{"exit", "-code", "3", "-after", "200ms"}, &out, io.Discard)
	if code != 3 {
		t.Fatalf("exit code = %d, want 3", code)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("exited after %s, before -after 200ms", took)
	}
	if out.String() != "exiting with code 3 after 200ms\n" {
		t.Fatalf("stdout = %q", out.String())
	}
	if code := run([]string{"exit", "-code", "256"}, io.Discard, io.Discard); code != 2 {
		t.Fatalf("exit -code 256 = %d, want usage error 2", code)
	}
}

func TestServe_WritesFilesPrintsLinesAndExitsAfter(t *testing.T) {
	dir := t.TempDir()
	first, second := filepath.Join(dir, "a", "one"), filepath.Join(dir, "two")
	t.Setenv("WORKLOAD_LOGS", "2")
	var out bytes.Buffer
	code := run([]string{"-port", "0", "-exit-after", "100ms", "-exit-code", "4",
		"-write", first + "=hello", "-write", second + "=a=b"}, &out, io.Discard)
	if code != 4 {
		t.Fatalf("exit code = %d, want 4", code)
	}
	if out.String() != "line 1\nline 2\n" {
		t.Fatalf("stdout = %q", out.String())
	}
	for path, want := range map[string]string{first: "hello", second: "a=b"} {
		if got, err := os.ReadFile(path); err != nil || string(got) != want {
			t.Fatalf("%s = %q, %v; want %q", path, got, err, want)
		}
	}
}

func TestServe_UnwritableStartFileExitsOne(t *testing.T) {
	plain := filepath.Join(t.TempDir(), "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	code := run([]string{"serve", "-port", "0", "-write", plain + "/child=x"}, io.Discard, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "not a directory") {
		t.Fatalf("code = %d, stderr %q; want 1 and 'not a directory'", code, errOut.String())
	}
}

func TestServe_HealthAfterFailsThenPassesAndPostExitEndsIt(t *testing.T) {
	addrs := make(chan net.Addr, 1)
	listening = func(a net.Addr) { addrs <- a }
	defer func() { listening = func(net.Addr) {} }()
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"-port", "0", "-health-after", "1s", "-exit-after", "2m"}, io.Discard, io.Discard)
	}()
	var port int
	select {
	case a := <-addrs:
		port = a.(*net.TCPAddr).Port
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not listen within 60 s")
	}
	healthz := "http://127.0.0.1:" + itoa(port) + "/healthz"
	var seen []int
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && (len(seen) == 0 || seen[len(seen)-1] != 200) {
		if resp, err := http.Get(healthz); err == nil {
			resp.Body.Close()
			if len(seen) == 0 || seen[len(seen)-1] != resp.StatusCode {
				seen = append(seen, resp.StatusCode)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(seen) != 2 || seen[0] != 503 || seen[1] != 200 {
		t.Fatalf("healthz statuses = %v, want [503 200]", seen)
	}
	resp, err := http.Post("http://127.0.0.1:"+itoa(port)+"/exit?code=5", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "exiting with code 5\n" {
		t.Fatalf("POST /exit body = %q", body)
	}
	select {
	case code := <-done:
		if code != 5 {
			t.Fatalf("serve returned %d, want 5", code)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not return after POST /exit")
	}
}

func TestProbe_Exit0On2xxElse1(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			rw.WriteHeader(503)
		}
	}))
	defer srv.Close()
	cases := map[string]int{srv.URL + "/ok": 0, srv.URL + "/bad": 1, "http://no-such-host.invalid/": 1}
	for target, want := range cases {
		if code := run([]string{"probe", target}, io.Discard, io.Discard); code != want {
			t.Errorf("probe %s = %d, want %d", target, code, want)
		}
	}
	if code := run([]string{"probe"}, io.Discard, io.Discard); code != 2 {
		t.Errorf("probe without URL = %d, want usage error 2", code)
	}
}

func TestFetchMode_PrintsBodyAndExitsByStatus(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/bad" {
			rw.WriteHeader(500)
		}
		io.WriteString(rw, "body of "+r.URL.Path)
	}))
	defer srv.Close()
	var out bytes.Buffer
	if code := run([]string{"fetch", "-url", srv.URL + "/ok"}, &out, io.Discard); code != 0 || out.String() != "body of /ok" {
		t.Fatalf("fetch /ok = %d %q", code, out.String())
	}
	out.Reset()
	t.Setenv("WORKLOAD_URL", srv.URL+"/bad")
	if code := run([]string{"fetch"}, &out, io.Discard); code != 1 || out.String() != "body of /bad" {
		t.Fatalf("fetch WORKLOAD_URL=/bad = %d %q", code, out.String())
	}
}

func TestRun_UnknownModeIsUsageError(t *testing.T) {
	var errOut bytes.Buffer
	if code := run([]string{"dance"}, io.Discard, &errOut); code != 2 || !strings.Contains(errOut.String(), "dance") {
		t.Fatalf("run dance = %d %q", code, errOut.String())
	}
}
