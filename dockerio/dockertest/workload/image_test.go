package main

// These tests run the built image on the real Docker engine. They need
// BERTH_TEST_IMAGE (set by `make test`, which builds and pushes the image
// first) and skip without it, so `go test` on a bare checkout still works.

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
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testLabel marks every container these tests create.
const testLabel = "berth.test=testworkload"

var containerSeq atomic.Int64

func testImage(t *testing.T) string {
	t.Helper()
	img := os.Getenv("BERTH_TEST_IMAGE")
	if img == "" {
		if os.Getenv("BERTH_REQUIRE_DOCKER") == "1" || os.Getenv("CI") == "true" {
			t.Fatal("BERTH_TEST_IMAGE is not set: make test sets it, and BERTH_REQUIRE_DOCKER/CI demand this test runs")
		}
		t.Skip("BERTH_TEST_IMAGE is not set (make test sets it)")
	}
	return img
}

// novolumeImage is the :novolume twin of the test image.
func novolumeImage(img string) string {
	if v := os.Getenv("BERTH_TEST_IMAGE_NOVOLUME"); v != "" {
		return v
	}
	slash := strings.LastIndex(img, "/")
	if colon := strings.LastIndex(img, ":"); colon > slash {
		img = img[:colon]
	}
	return img + ":novolume"
}

// docker runs the docker CLI and returns its combined output.
func docker(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func mustDocker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := docker(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// containerName returns a unique, labelled-by-convention name and registers
// removal of that container (and its anonymous volumes) at the end of the test.
func containerName(t *testing.T) string {
	name := fmt.Sprintf("berth-testworkload-%d-%d", os.Getpid(), containerSeq.Add(1))
	t.Cleanup(func() { docker(t, "rm", "-f", "-v", name) })
	return name
}

// runDetached starts a container publishing 8080 on 127.0.0.1 and returns its
// name and base URL.
func runDetached(t *testing.T, opts ...string) (string, string) {
	t.Helper()
	name := containerName(t)
	args := append([]string{"run", "-d", "--name", name, "--label", testLabel, "-p", "127.0.0.1::8080"}, opts...)
	mustDocker(t, args...)
	hostPort := mustDocker(t, "port", name, "8080/tcp")
	hostPort = strings.SplitN(hostPort, "\n", 2)[0] // one line per address family
	return name, "http://" + hostPort
}

// eventually polls cond every 100 ms for up to 60 s.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		ok, state := cond()
		if ok {
			return
		}
		last = state
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within 60 s (last: %s)", what, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var client = &http.Client{Timeout: 10 * time.Second}

// engineAPI sends one JSON request to the Docker Engine API (version 1.41,
// what Debian's dockerd speaks) on its unix socket and fails the test unless
// it answers 2xx.
func engineAPI(t *testing.T, method, path string, body any) {
	t.Helper()
	sock := "/var/run/docker.sock"
	if h := os.Getenv("DOCKER_HOST"); strings.HasPrefix(h, "unix://") {
		sock = strings.TrimPrefix(h, "unix://")
	}
	payload, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	req, err := http.NewRequest(method, "http://docker/v1.41"+path, bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("engine API %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("engine API %s %s = %d %s", method, path, resp.StatusCode, answer)
	}
}

func request(method, url, body string) (int, string, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func mustRequest(t *testing.T, method, url, body string, wantStatus int) string {
	t.Helper()
	code, got, err := request(method, url, body)
	if err != nil || code != wantStatus {
		t.Fatalf("%s %s = %d %q, %v; want %d", method, url, code, got, err, wantStatus)
	}
	return got
}

func waitServing(t *testing.T, base string) string {
	var body string
	eventually(t, "GET "+base+"/", func() (bool, string) {
		code, b, err := request("GET", base+"/", "")
		body = b
		return err == nil && code == 200, fmt.Sprintf("%d %v", code, err)
	})
	return body
}

func waitHealth(t *testing.T, name, want string) {
	eventually(t, name+" health "+want, func() (bool, string) {
		got, err := docker(t, "inspect", "--format", "{{.State.Health.Status}}", name)
		return err == nil && got == want, got
	})
}

func TestImage_HardenedServeHealthFilesLogsAndCleanStop(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	// Created through the Engine API: the CLI's --health-cmd is always
	// CMD-SHELL, and the image has no shell. Exec form is what berth uses.
	name := containerName(t)
	engineAPI(t, "POST", "/containers/create?name="+name, map[string]any{
		"Image":        img,
		"Labels":       map[string]string{"berth.test": "testworkload"},
		"Env":          []string{"WORKLOAD_LOGS=3"},
		"ExposedPorts": map[string]any{"8080/tcp": map[string]any{}},
		"Healthcheck": map[string]any{
			"Test":     []string{"CMD", "/workload", "probe", "http://127.0.0.1:8080/healthz"},
			"Interval": int64(time.Second),
			"Timeout":  int64(5 * time.Second),
			"Retries":  1,
		},
		"HostConfig": map[string]any{
			"PortBindings":   map[string]any{"8080/tcp": []map[string]string{{"HostIp": "127.0.0.1", "HostPort": ""}}},
			"ReadonlyRootfs": true,
			"Tmpfs":          map[string]string{"/tmp": "", "/run": ""},
			"CapDrop":        []string{"ALL"},
			"SecurityOpt":    []string{"no-new-privileges"},
		},
	})
	mustDocker(t, "start", name)
	base := "http://" + strings.SplitN(mustDocker(t, "port", name, "8080/tcp"), "\n", 2)[0]

	id := mustDocker(t, "inspect", "--format", "{{.Id}}", name)
	if body := waitServing(t, base); body != "ok "+id[:12]+"\n" {
		t.Fatalf("GET / = %q, want %q", body, "ok "+id[:12]+"\n")
	}
	waitHealth(t, name, "healthy")
	mustRequest(t, "POST", base+"/health/fail", "", 200)
	waitHealth(t, name, "unhealthy")
	mustRequest(t, "POST", base+"/health/pass", "", 200)
	waitHealth(t, name, "healthy")

	// The volume and the tmpfs are writable, the read-only rootfs is not.
	mustRequest(t, "PUT", base+"/file?path=/data/sub/f", "on the volume", 200)
	if got := mustRequest(t, "GET", base+"/file?path=/data/sub/f", "", 200); got != "on the volume" {
		t.Fatalf("read back %q", got)
	}
	mustRequest(t, "PUT", base+"/file?path=/tmp/f", "x", 200)
	if got := mustRequest(t, "PUT", base+"/file?path=/etc/f", "x", 500); !strings.Contains(got, "read-only file system") {
		t.Fatalf("PUT /etc/f = %q, want a read-only error", got)
	}
	if got := mustRequest(t, "GET", base+"/fetch?url=http://no-such-host.invalid/", "", 502); !strings.Contains(got, "no-such-host.invalid") {
		t.Fatalf("fetch unknown host = %q", got)
	}

	if logs := mustDocker(t, "logs", name); logs != "line 1\nline 2\nline 3" {
		t.Fatalf("docker logs = %q, want three numbered lines", logs)
	}

	// SIGTERM is handled: a clean exit 0 long before the 60 s kill.
	mustDocker(t, "stop", "-t", "60", name)
	if code := mustDocker(t, "inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
		t.Fatalf("exit code after docker stop = %s, want 0", code)
	}
}

func TestImage_AppUserIgnoringSigtermIsKilled(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	name, base := runDetached(t, "--user", "app", "-e", "WORKLOAD_IGNORE_SIGTERM=true", img)
	waitServing(t, base)
	if got := mustRequest(t, "GET", base+"/id", "", 200); got != "uid=1000 gid=1000\n" {
		t.Fatalf("GET /id = %q, want uid=1000 gid=1000", got)
	}
	mustRequest(t, "PUT", base+"/file?path=/data/owned-by-app", "x", 200)
	if got := mustRequest(t, "GET", base+"/env?name=WORKLOAD_IGNORE_SIGTERM", "", 200); got != "true\n" {
		t.Fatalf("GET /env = %q", got)
	}

	// SIGTERM ignored: docker stop has to SIGKILL after its 2 s grace.
	mustDocker(t, "stop", "-t", "2", name)
	if code := mustDocker(t, "inspect", "--format", "{{.State.ExitCode}}", name); code != "137" {
		t.Fatalf("exit code after docker stop = %s, want 137 (SIGKILL)", code)
	}
}

func TestImage_ExitModesReturnTheirCodes(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	cases := []struct {
		name string
		args []string
		want int
	}{
		{"exit subcommand", []string{img, "exit", "-code", "3", "-after", "100ms"}, 3},
		{"serve driven by env alone", []string{"-e", "WORKLOAD_EXIT_AFTER=100ms", "-e", "WORKLOAD_EXIT_CODE=4", img}, 4},
	}
	for _, c := range cases {
		name := containerName(t)
		args := append([]string{"run", "--name", name, "--label", testLabel}, c.args...)
		out, err := docker(t, args...)
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != c.want {
			t.Fatalf("%s: docker run = %v (%q), want exit code %d", c.name, err, out, c.want)
		}
	}
}

func TestImage_ConfigAndNovolumeTwin(t *testing.T) {
	t.Parallel()
	img := testImage(t)
	type config struct {
		Entrypoint   []string
		Cmd          []string
		WorkingDir   string
		ExposedPorts map[string]struct{}
		Volumes      map[string]struct{}
	}
	inspect := func(ref string) config {
		var c config
		if err := json.Unmarshal([]byte(mustDocker(t, "image", "inspect", "--format", "{{json .Config}}", ref)), &c); err != nil {
			t.Fatalf("decode config of %s: %v", ref, err)
		}
		return c
	}
	for ref, wantVolume := range map[string]bool{img: true, novolumeImage(img): false} {
		c := inspect(ref)
		_, hasData := c.Volumes["/data"]
		_, exposes := c.ExposedPorts["8080/tcp"]
		if strings.Join(c.Entrypoint, " ") != "/workload" || strings.Join(c.Cmd, " ") != "serve" ||
			c.WorkingDir != "/" || !exposes || hasData != wantVolume || len(c.Volumes) > 1 {
			t.Fatalf("%s config = %+v; want entrypoint /workload, cmd serve, workdir /, 8080/tcp, /data volume %v",
				ref, c, wantVolume)
		}
	}
}
