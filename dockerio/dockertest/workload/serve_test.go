package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// do sends one request to the workload's routes and returns status and body.
func do(t *testing.T, w *workload, method, target string, body string) (int, string) {
	t.Helper()
	req := httptest.NewRequest(method, target, strings.NewReader(body))
	rec := httptest.NewRecorder()
	w.routes().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func healthyWorkload() *workload {
	w := newWorkload("box")
	w.healthy.Store(true)
	return w
}

func TestRoot_AnswersOkWithHostname(t *testing.T) {
	code, body := do(t, healthyWorkload(), "GET", "/", "")
	if code != 200 || body != "ok box\n" {
		t.Fatalf("GET / = %d %q, want 200 %q", code, body, "ok box\n")
	}
	if code, _ := do(t, healthyWorkload(), "GET", "/nope", ""); code != 404 {
		t.Fatalf("GET /nope = %d, want 404", code)
	}
}

func TestHealthz_FailAndPassToggleIt(t *testing.T) {
	w := healthyWorkload()
	steps := []struct {
		method, path string
		wantHealthz  int
	}{
		{"", "", 200},
		{"POST", "/health/fail", 503},
		{"POST", "/health/fail", 503},
		{"POST", "/health/pass", 200},
	}
	for _, s := range steps {
		if s.method != "" {
			if code, _ := do(t, w, s.method, s.path, ""); code != 200 {
				t.Fatalf("%s %s = %d, want 200", s.method, s.path, code)
			}
		}
		if code, _ := do(t, w, "GET", "/healthz", ""); code != s.wantHealthz {
			t.Fatalf("after %s %s: GET /healthz = %d, want %d", s.method, s.path, code, s.wantHealthz)
		}
	}
	if code, _ := do(t, w, "GET", "/health/fail", ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /health/fail = %d, want 405", code)
	}
}

func TestFile_PutCreatesParentsAndGetReadsItBack(t *testing.T) {
	w := healthyWorkload()
	p := filepath.Join(t.TempDir(), "a", "b", "c.txt")
	q := "/file?path=" + url.QueryEscape(p)
	if code, body := do(t, w, "PUT", q, "hello volume"); code != 200 {
		t.Fatalf("PUT = %d %q", code, body)
	}
	if code, body := do(t, w, "GET", q, ""); code != 200 || body != "hello volume" {
		t.Fatalf("GET = %d %q, want 200 %q", code, body, "hello volume")
	}
	onDisk, err := os.ReadFile(p)
	if err != nil || string(onDisk) != "hello volume" {
		t.Fatalf("file on disk = %q, %v", onDisk, err)
	}
}

func TestFile_MissingIs404_RelativeIs400_UnwritableIs500(t *testing.T) {
	w := healthyWorkload()
	dir := t.TempDir()
	if code, _ := do(t, w, "GET", "/file?path="+url.QueryEscape(filepath.Join(dir, "none")), ""); code != 404 {
		t.Fatalf("GET missing = %d, want 404", code)
	}
	if code, _ := do(t, w, "GET", "/file?path=rel/x", ""); code != 400 {
		t.Fatalf("GET relative = %d, want 400", code)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// A regular file cannot be a parent directory, even for root.
	code, body := do(t, w, "PUT", "/file?path="+url.QueryEscape(filepath.Join(plain, "child")), "x")
	if code != 500 || !strings.Contains(body, "not a directory") {
		t.Fatalf("PUT under a file = %d %q, want 500 mentioning 'not a directory'", code, body)
	}
}

func TestFetch_RelaysUpstreamStatusAndBody(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.WriteHeader(http.StatusTeapot)
		io.WriteString(rw, "short and stout")
	}))
	defer upstream.Close()
	code, body := do(t, healthyWorkload(), "GET", "/fetch?url="+url.QueryEscape(upstream.URL), "")
	if code != http.StatusTeapot || body != "short and stout" {
		t.Fatalf("fetch = %d %q, want 418 %q", code, body, "short and stout")
	}
}

func TestFetch_DNSFailureIs502WithErrorText(t *testing.T) {
	code, body := do(t, healthyWorkload(), "GET", "/fetch?url="+url.QueryEscape("http://no-such-host.invalid/"), "")
	if code != http.StatusBadGateway || !strings.Contains(body, "no-such-host.invalid") {
		t.Fatalf("fetch unknown host = %d %q, want 502 naming the host", code, body)
	}
}

func TestFetch_RefusedIs502_SilentIs504(t *testing.T) {
	// A port nobody listens on: connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/"
	ln.Close()
	if code, body := do(t, healthyWorkload(), "GET", "/fetch?url="+url.QueryEscape(refused), ""); code != 502 {
		t.Fatalf("fetch refused = %d %q, want 502", code, body)
	}

	// A listener that never accepts: the kernel completes the handshake, no
	// answer ever comes, the 2 s client timeout fires.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	code, body := do(t, healthyWorkload(), "GET", "/fetch?url="+url.QueryEscape("http://"+silent.Addr().String()+"/"), "")
	if code != http.StatusGatewayTimeout {
		t.Fatalf("fetch silent = %d %q, want 504", code, body)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("fetch silent took %s; the client timeout is 2 s", took)
	}
	if code, _ := do(t, healthyWorkload(), "GET", "/fetch", ""); code != 400 {
		t.Fatalf("fetch without url = %d, want 400", code)
	}
}

func TestExit_AnswersThenRequestsTheCode(t *testing.T) {
	w := healthyWorkload()
	if code, _ := do(t, w, "POST", "/exit?code=300", ""); code != 400 {
		t.Fatalf("exit code=300 = %d, want 400", code)
	}
	select {
	case c := <-w.exit:
		t.Fatalf("rejected exit request still asked to exit with %d", c)
	default:
	}
	code, body := do(t, w, "POST", "/exit?code=7", "")
	if code != 200 || body != "exiting with code 7\n" {
		t.Fatalf("exit = %d %q", code, body)
	}
	do(t, w, "POST", "/exit?code=9", "") // later requests do not replace the first
	if c := <-w.exit; c != 7 {
		t.Fatalf("requested exit code = %d, want 7", c)
	}
}

func TestEnv_PrintsSetVariable_404WhenUnset(t *testing.T) {
	t.Setenv("BERTH_WORKLOAD_TEST_VAR", "forty-two")
	if code, body := do(t, healthyWorkload(), "GET", "/env?name=BERTH_WORKLOAD_TEST_VAR", ""); code != 200 || body != "forty-two\n" {
		t.Fatalf("env = %d %q", code, body)
	}
	if code, _ := do(t, healthyWorkload(), "GET", "/env?name=BERTH_WORKLOAD_TEST_UNSET", ""); code != 404 {
		t.Fatalf("env unset = %d, want 404", code)
	}
}

func TestID_ReportsUidAndGid(t *testing.T) {
	code, body := do(t, healthyWorkload(), "GET", "/id", "")
	want := "uid=" + itoa(os.Getuid()) + " gid=" + itoa(os.Getgid()) + "\n"
	if code != 200 || body != want {
		t.Fatalf("id = %d %q, want %q", code, body, want)
	}
}
