package debug_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/http/debug"
	"github.com/berth-dev/berth/supervisors"
)

const (
	token      = "debug-token-4b1f0c"
	victimPath = "root/victim"
)

type victim struct{}

func (victim) Receive(actor.Context) {}

// serve is a real tree (chaos as the daemon would set it) with one child, behind
// the debug handler on a real server.
func serve(t *testing.T, opts debug.Options) (*httptest.Server, *supervisors.Tree) {
	t.Helper()
	tree, err := supervisors.Start(supervisors.Options{Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(), Chaos: opts.Chaos,
		Children: func(*supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{{Name: "victim", Kind: "victim", Producer: func() actor.Actor { return victim{} }}}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tree.Stop(ctx)
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := tree.Dir.Get(victimPath); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("victim never spawned")
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv := httptest.NewServer(debug.Handler(tree, opts))
	t.Cleanup(srv.Close)
	return srv, tree
}

func call(t *testing.T, srv *httptest.Server, method, path, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func restarts(tree *supervisors.Tree) int {
	n, ok := tree.Dir.Get(victimPath)
	if !ok {
		return -1
	}
	return n.Restarts()
}

func TestToken_EveryEndpointRequiresTheBearerToken(t *testing.T) {
	srv, tree := serve(t, debug.Options{Chaos: true, Token: token})
	for _, ep := range []struct{ method, path string }{
		{http.MethodGet, "/debug/actors"},
		{http.MethodGet, "/debug/actors?format=text"},
		{http.MethodGet, "/debug/pprof/"},
		{http.MethodGet, "/debug/pprof/cmdline"},
		{http.MethodPost, "/debug/chaos/crash?actor=" + victimPath},
		{http.MethodGet, "/no-such-page"},
		{http.MethodGet, "/"},
		{http.MethodGet, "/debug/leases"},
		{http.MethodGet, "/debug/leases/" + "00000000-0000-4000-8000-000000000000"},
		{http.MethodGet, "/debug/outbox"},
		{http.MethodGet, "/debug/freshness"},
		{http.MethodGet, "/debug/transitions"},
		{http.MethodGet, "/debug/events"},
	} {
		for _, auth := range []string{"", "Bearer wrong-token", "Bearer " + token + "x", "Basic " + token, token, "Bearer"} {
			status, body := call(t, srv, ep.method, ep.path, auth)
			if status != http.StatusUnauthorized || !strings.Contains(body, `"error"`) {
				t.Errorf("%s %s with Authorization %q: %d %s, want a JSON 401", ep.method, ep.path, auth, status, body)
			}
		}
	}
	if r := restarts(tree); r != 0 {
		t.Fatalf("an unauthenticated chaos request crashed the victim (%d restarts)", r)
	}
	if status, body := call(t, srv, http.MethodGet, "/debug/actors", "Bearer "+token); status != http.StatusOK || !strings.Contains(body, victimPath) {
		t.Fatalf("GET /debug/actors with the token: %d %s", status, body)
	}
	if status, _ := call(t, srv, http.MethodGet, "/debug/actors", "bearer "+token); status != http.StatusOK {
		t.Fatalf("the scheme is case-insensitive: got %d", status)
	}
}

func TestChaos_WithTokenCrashesTheActor(t *testing.T) {
	srv, tree := serve(t, debug.Options{Chaos: true, Token: token})
	status, body := call(t, srv, http.MethodPost, "/debug/chaos/crash?actor="+victimPath, "Bearer "+token)
	if status != http.StatusAccepted {
		t.Fatalf("crash: %d %s", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for restarts(tree) < 1 {
		if time.Now().After(deadline) {
			t.Fatal("the victim was never restarted")
		}
		// The crash happens on the victim's next message.
		tree.Send(victimPath, "poke")
		time.Sleep(10 * time.Millisecond)
	}
}

func TestChaos_OffAnswers403EvenWithTheToken(t *testing.T) {
	srv, tree := serve(t, debug.Options{Chaos: false, Token: token})
	if status, body := call(t, srv, http.MethodPost, "/debug/chaos/crash?actor="+victimPath, "Bearer "+token); status != http.StatusForbidden {
		t.Fatalf("chaos off: %d %s, want 403", status, body)
	}
	if r := restarts(tree); r != 0 {
		t.Fatalf("victim restarted %d times with chaos off", r)
	}
}

// Without a token nothing authenticates a chaos request, so chaos stays off even
// when debug.chaos is set; the other endpoints stay open as before.
func TestChaos_WithoutATokenIsRefused(t *testing.T) {
	srv, tree := serve(t, debug.Options{Chaos: true})
	for _, auth := range []string{"", "Bearer ", "Bearer anything"} {
		if status, body := call(t, srv, http.MethodPost, "/debug/chaos/crash?actor="+victimPath, auth); status != http.StatusForbidden {
			t.Errorf("chaos without debug.token, Authorization %q: %d %s, want 403", auth, status, body)
		}
	}
	tree.Send(victimPath, "poke")
	time.Sleep(50 * time.Millisecond)
	if r := restarts(tree); r != 0 {
		t.Fatalf("victim restarted %d times", r)
	}
	if status, _ := call(t, srv, http.MethodGet, "/debug/actors", ""); status != http.StatusOK {
		t.Fatalf("GET /debug/actors without a configured token: %d, want 200", status)
	}
}
