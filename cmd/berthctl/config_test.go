package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/cmd/berthd/config"
)

// writeDaemonConfig writes a berthd config file naming the listeners of the
// given test servers (host:port) and returns its path.
func writeDaemonConfig(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "berthd.yaml")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// unsetenv removes variables for one test (an empty BERTH_* value would set
// its key to "" in berthd's config) and restores them after.
func unsetenv(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		t.Setenv(n, "")
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
}

func hostPort(u string) string { return strings.TrimPrefix(u, "http://") }

func TestConfig_TakesAddressesSecretAndTokenFromBerthdsFile(t *testing.T) {
	unsetenv(t, "BERTH_DEBUG_TOKEN", "BERTH_CALLBACK_SECRET")
	api, reqs, _ := server(t)
	var mu sync.Mutex
	var auth []string
	dbg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, "root [root] ok\n")
	}))
	t.Cleanup(dbg.Close)
	cfg := writeDaemonConfig(t,
		"data_dir: "+filepath.Join(t.TempDir(), "data"),
		"listen_addr: "+hostPort(api.URL),
		"debug_listen_addr: "+hostPort(dbg.URL),
		"callback_secret: "+secret,
		"debug:",
		"  token: token-from-the-config-file",
	)
	var out bytes.Buffer
	if err := run([]string{"-config", cfg, "get", "/provisions"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if len(*reqs) != 1 || !strings.Contains(out.String(), "202") {
		t.Fatalf("signed GET through -config: %d requests, %q", len(*reqs), out.String())
	}
	if err := run([]string{"-config", cfg, "actors"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	// An explicit flag wins over the file.
	if err := run([]string{"-config", cfg, "-debug-token", "from-flag", "actors"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(auth, "|"); got != "Bearer token-from-the-config-file|Bearer from-flag" {
		t.Fatalf("debug Authorization headers %q", got)
	}
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	t.Cleanup(other.Close)
	out.Reset()
	// berthctl exits 1 on a non-2xx answer, after printing it.
	if err := run([]string{"-config", cfg, "-api", other.URL, "get", "/provisions"}, nil, &out); err == nil {
		t.Fatal("a 418 answer did not make berthctl fail")
	}
	if !strings.Contains(out.String(), "418") {
		t.Fatalf("-api did not win over listen_addr: %q", out.String())
	}
}

func TestConfig_UsesTheGeneratedSecretButNeverCreatesOne(t *testing.T) {
	unsetenv(t, "BERTH_CALLBACK_SECRET")
	api, reqs, _ := server(t)
	data := filepath.Join(t.TempDir(), "data")
	cfg := writeDaemonConfig(t, "data_dir: "+data, "listen_addr: "+hostPort(api.URL))
	var out bytes.Buffer
	err := run([]string{"-config", cfg, "get", "/provisions"}, nil, &out)
	if err == nil || !strings.Contains(err.Error(), "does not exist yet") {
		t.Fatalf("no generated secret yet: %v", err)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("berthctl created the data dir: %v", err)
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, config.CallbackSecretFile), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"-config", cfg, "get", "/provisions"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if len(*reqs) != 1 {
		t.Fatalf("the generated secret did not sign: %q", out.String())
	}
}

func TestConfig_AnInvalidFileListsItsProblems(t *testing.T) {
	cfg := writeDaemonConfig(t, "listen_adr: 127.0.0.1:1")
	err := run([]string{"-config", cfg, "actors"}, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "listen_adr") {
		t.Fatalf("a typo in the file: %v", err)
	}
}

func TestDialAddr_WildcardsBecomeLoopback(t *testing.T) {
	for in, want := range map[string]string{
		"0.0.0.0:9001":   "127.0.0.1:9001",
		":9001":          "127.0.0.1:9001",
		"[::]:9001":      "[::1]:9001",
		"10.0.0.5:9001":  "10.0.0.5:9001",
		"127.0.0.1:9002": "127.0.0.1:9002",
	} {
		if got := dialAddr(in); got != want {
			t.Errorf("dialAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
