package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
)

const secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// server is a stand-in berthd API that verifies signatures like the real one.
func server(t *testing.T) (*httptest.Server, *[]*http.Request, *[][]byte) {
	t.Helper()
	var mu sync.Mutex
	var reqs []*http.Request
	var bodies [][]byte
	v := &hmac.Verifier{Secret: []byte(secret)}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		reqs, bodies = append(reqs, r), append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"ok":true}`))
	})))
	t.Cleanup(srv.Close)
	return srv, &reqs, &bodies
}

func secretFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "callback-secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestProvision_SendsASignedContractRequest(t *testing.T) {
	srv, reqs, bodies := server(t)
	var out bytes.Buffer
	err := run([]string{"-api", srv.URL, "-secret-file", secretFile(t), "provision",
		"-lease", "6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10", "-image", "127.0.0.1:5000/berth/workload:test", "-quantity", "2"}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "202 Accepted") || len(*reqs) != 1 {
		t.Fatalf("output %q, %d requests (a bad signature would be a 401)", out.String(), len(*reqs))
	}
	var req messages.ProvisionRequest
	if err := json.Unmarshal((*bodies)[0], &req); err != nil {
		t.Fatal(err)
	}
	manifest, _ := base64.StdEncoding.DecodeString(req.Payload)
	if req.LeaseUUID != "6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10" || req.Items[0].Quantity != 2 ||
		!strings.Contains(req.CallbackURL, "operation_id=") || !strings.Contains(string(manifest), `"image":"127.0.0.1:5000/berth/workload:test"`) {
		t.Fatalf("request = %+v manifest %s", req, manifest)
	}
}

func TestRestore_SendsASignedContractRequest(t *testing.T) {
	srv, reqs, bodies := server(t)
	var out bytes.Buffer
	err := run([]string{"-api", srv.URL, "-secret-file", secretFile(t), "restore",
		"-from", "6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10", "-lease", "0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c", "-sku", "docker-large"}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(*reqs) != 1 || (*reqs)[0].URL.Path != "/restore" || !strings.Contains(out.String(), "202 Accepted") {
		t.Fatalf("output %q, %d requests", out.String(), len(*reqs))
	}
	var req messages.RestoreRequest
	if err := json.Unmarshal((*bodies)[0], &req); err != nil {
		t.Fatal(err)
	}
	if req.FromLeaseUUID != "6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10" || req.LeaseUUID != "0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c" ||
		req.Items[0].SKU != "docker-large" || req.Tenant == "" || !strings.Contains(req.CallbackURL, "operation_id=") {
		t.Fatalf("request = %+v", req)
	}
	if err := run([]string{"-api", srv.URL, "-secret-file", secretFile(t), "restore"}, nil, &out); err == nil || !strings.Contains(err.Error(), "-from") {
		t.Fatalf("restore without -from: %v", err)
	}
}

func TestGet_SignsTheQueryToo(t *testing.T) {
	srv, reqs, _ := server(t)
	var out bytes.Buffer
	if err := run([]string{"-api", srv.URL, "-secret-file", secretFile(t), "get", "/provisions?limit=5"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	if len(*reqs) != 1 || (*reqs)[0].URL.RawQuery != "limit=5" {
		t.Fatalf("requests: %d, output %q", len(*reqs), out.String())
	}
}

func TestWrongSecret_IsRefusedByTheServer(t *testing.T) {
	srv, reqs, _ := server(t)
	t.Setenv("BERTH_CALLBACK_SECRET", strings.Repeat("x", 64))
	var out bytes.Buffer
	err := run([]string{"-api", srv.URL, "get", "/provisions"}, nil, &out)
	// The answer is printed, and the refusal is an error: berthctl exits 1.
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a 401 answer: err %v, want one naming the 401", err)
	}
	if len(*reqs) != 0 || !strings.Contains(out.String(), "401") || !strings.Contains(out.String(), "invalid signature") {
		t.Fatalf("a wrong key got through, or the answer was not printed: %q", out.String())
	}
}

func TestNon2xx_ExitsNonZeroForEveryRequest(t *testing.T) {
	v := &hmac.Verifier{Secret: []byte(secret)}
	api := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"close pending","code":"lifecycle_pending"}`))
	})))
	t.Cleanup(api.Close)
	dbg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"format must be json, text or dot"}`))
	}))
	t.Cleanup(dbg.Close)
	for _, args := range [][]string{
		{"deprovision", "-lease", "6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10"},
		{"post", "/restart", "-"},
		{"get", "/stats"},
		{"provision", "-image", "127.0.0.1:5000/x:1"},
		{"actors", "-format", "svg"},
	} {
		var out bytes.Buffer
		err := run(append([]string{"-api", api.URL, "-debug", dbg.URL, "-secret-file", secretFile(t)}, args...), strings.NewReader("{}"), &out)
		if err == nil {
			t.Fatalf("%v: a refused request exited 0\n%s", args, out.String())
		}
		if shown := out.String() + err.Error(); !strings.Contains(shown, `"error"`) {
			t.Fatalf("%v: the answer was not printed: %q / %v", args, out.String(), err)
		}
	}
}

func TestActors_SendsTheDebugTokenFromFlagOrEnv(t *testing.T) {
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		_, _ = io.WriteString(w, "root [root] ok\n")
	}))
	t.Cleanup(srv.Close)
	var out bytes.Buffer
	if err := run([]string{"-debug", srv.URL, "-debug-token", "from-flag", "actors"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BERTH_DEBUG_TOKEN", "from-env")
	if err := run([]string{"-debug", srv.URL, "actors"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BERTH_DEBUG_TOKEN", "")
	if err := run([]string{"-debug", srv.URL, "actors"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	want := []string{"Bearer from-flag", "Bearer from-env", ""}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("Authorization headers %q, want %q", got, want)
	}
}
