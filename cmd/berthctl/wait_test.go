package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
)

// stagedServer answers POST /provision with 202 and then each GET /provisions/…
// with the next of states (the last one repeats).
func stagedServer(t *testing.T, states ...messages.ProvisionInfo) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	n := 0
	v := &hmac.Verifier{Secret: []byte(secret)}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusAccepted)
			_, _ = w.Write([]byte(`{"provision_id":"x"}`))
			return
		}
		mu.Lock()
		st := states[min(n, len(states)-1)]
		n++
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(st)
	})))
	t.Cleanup(srv.Close)
	return srv
}

func TestProvisionWait_FollowsStatesToReady(t *testing.T) {
	srv := stagedServer(t, messages.ProvisionInfo{Status: "provisioning"}, messages.ProvisionInfo{Status: "provisioning"},
		messages.ProvisionInfo{Status: "ready"})
	var out bytes.Buffer
	err := run([]string{"-api", srv.URL, "-secret-file", secretFile(t), "provision", "-image", "127.0.0.1:5000/x:1", "-wait"}, nil, &out)
	if err != nil {
		t.Fatalf("-wait on a lease that got ready: %v\n%s", err, out.String())
	}
	if got := out.String(); strings.Count(got, "provisioning") != 1 || !strings.Contains(got, "ready") {
		t.Fatalf("output %q: each state once, in order", got)
	}
}

func TestProvisionWait_FailedExitsWithTheReason(t *testing.T) {
	srv := stagedServer(t, messages.ProvisionInfo{Status: "provisioning"},
		messages.ProvisionInfo{Status: "failed", Reason: "ImagePullFailed", Message: "image could not be pulled"})
	var out bytes.Buffer
	err := run([]string{"-api", srv.URL, "-secret-file", secretFile(t), "provision", "-image", "127.0.0.1:5000/x:1", "-wait"}, nil, &out)
	if err == nil || !strings.Contains(err.Error(), "ImagePullFailed: image could not be pulled") {
		t.Fatalf("-wait on a failed lease: %v, want an error with the reason\n%s", err, out.String())
	}
}

func TestProvisionWait_RefusedProvisionIsAnError(t *testing.T) {
	v := &hmac.Verifier{Secret: []byte(secret)}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"unknown sku"}`))
	})))
	t.Cleanup(srv.Close)
	var out bytes.Buffer
	err := run([]string{"-api", srv.URL, "-secret-file", secretFile(t), "provision", "-image", "127.0.0.1:5000/x:1", "-wait"}, nil, &out)
	if err == nil || !strings.Contains(err.Error(), "unknown sku") {
		t.Fatalf("-wait on a refused provision: %v", err)
	}
}
