package api_test

// The harness: a real supervision tree whose "registry" and "watcher" children are
// stand-in actors answering the facade's asks as a test scripts them, behind the
// real api.Handler on a real HTTP server with the real HMAC middleware.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/http/api"
	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/supervisors"
)

var secret = []byte("api-test-callback-secret-9e1b7d44")

const (
	registryPath = supervisors.RootPath + "/registry"
	watcherPath  = supervisors.RootPath + "/watcher"
	lease        = "6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10"
	otherLease   = "0b7e6f1e-3c1a-4c8e-9d2f-5a6b7c8d9e0f"
	storageID    = "550e8400-e29b-41d4-a716-446655440000" // berthd's storage identity
	// berthd's own listeners, as Deps.Callbacks sees them.
	apiListen   = "127.0.0.1:19001"
	debugListen = "127.0.0.1:19002"
)

// script is what the stand-ins answer, and what they were asked. silent makes an
// actor ignore its asks (an actor that does not answer).
type script struct {
	mu       sync.Mutex
	maintain error
	restore  error
	releases messages.ReleasesReply
	refresh  messages.RefreshReply
	health   messages.HealthReply
	docker   messages.DockerHealthReply
	silent   map[string]bool             // "registry" | "watcher"
	diag     error                       // diagnostics.db's probe answer
	volRoot  error                       // the volume root's proof
	storage  error                       // the storage identity's runtime proof
	close    func(*messages.Deprovision) // the lease's part in a close (nil: answered ok at once)
	logs     func(*messages.GetLogs)     // the lease's log read (nil: answered empty at once); must not block
	asked    []any
}

func (s *script) set(f func(*script)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *script) log() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]any(nil), s.asked...)
}

func (s *script) maintains() []messages.Maintain {
	var out []messages.Maintain
	for _, m := range s.log() {
		if mm, ok := m.(messages.Maintain); ok {
			out = append(out, mm)
		}
	}
	return out
}

// standIn is the registry or the watcher: it answers only what the real one would.
type standIn struct {
	name string
	s    *script
}

func (a *standIn) Receive(c actor.Context) {
	a.s.mu.Lock()
	defer a.s.mu.Unlock()
	if a.s.silent[a.name] {
		return
	}
	switch m := c.Message().(type) {
	case *messages.Deprovision:
		if a.name != "registry" || a.s.close == nil {
			m.Reply <- nil
			return
		}
		a.s.asked = append(a.s.asked, "deprovision")
		a.s.close(m)
	case *messages.GetLogs:
		if a.name != "registry" || a.s.logs == nil {
			m.Reply <- messages.LogsReply{}
			return
		}
		a.s.asked = append(a.s.asked, "logs")
		a.s.logs(m)
	case *messages.Maintain:
		if a.name != "registry" {
			return
		}
		rec := *m
		rec.Reply = nil
		a.s.asked = append(a.s.asked, rec)
		m.Reply <- a.s.maintain
	case *messages.Restore:
		if a.name != "registry" {
			return
		}
		a.s.asked = append(a.s.asked, messages.Restore{Req: m.Req})
		m.Reply <- a.s.restore
	case *messages.GetReleases:
		if a.name != "registry" {
			return
		}
		a.s.asked = append(a.s.asked, messages.GetReleases{Lease: m.Lease})
		m.Reply <- a.s.releases
	case *messages.StartRefresh, *messages.GetRefresh: // the registry's stand-in is the refresh actor's too
		a.s.asked = append(a.s.asked, fmt.Sprintf("%T", m))
		reflect.ValueOf(m).Elem().FieldByName("Reply").Send(reflect.ValueOf(a.s.refresh))
	case *messages.GetHealth:
		if a.name != "registry" {
			return
		}
		a.s.asked = append(a.s.asked, "registry health")
		m.Reply <- a.s.health
	case *messages.GetDockerHealth:
		if a.name != "watcher" {
			return
		}
		a.s.asked = append(a.s.asked, "docker health")
		m.Reply <- a.s.docker
	default:
		// Any other ask (Admit, GetLogs, …) gets its zero reply, so routes these
		// tests do not script still answer at once.
		v := reflect.ValueOf(m)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return
		}
		if reply := v.Elem().FieldByName("Reply"); reply.IsValid() && reply.Kind() == reflect.Chan && !reply.IsNil() {
			reply.TrySend(reflect.Zero(reply.Type().Elem()))
		}
	}
}

type env struct {
	t   *testing.T
	s   *script
	srv *httptest.Server
	now time.Time
}

// newEnv starts the tree and the API; both stand-ins start healthy.
func newEnv(t *testing.T) *env {
	return newEnvWith(t, &hmac.Verifier{Secret: secret}, 300*time.Millisecond)
}

// newEnvWith uses v and waits askTimeout for an actor's answer.
func newEnvWith(t *testing.T, v *hmac.Verifier, askTimeout time.Duration) *env {
	t.Helper()
	s := &script{silent: map[string]bool{},
		health: messages.HealthReply{Ready: true}, docker: messages.DockerHealthReply{Reachable: true}}
	tree, err := supervisors.Start(supervisors.Options{Logger: zerolog.Nop(), Registerer: prometheus.NewRegistry(),
		Children: func(*supervisors.Tree) []supervisors.Spec {
			return []supervisors.Spec{
				{Name: "registry", Kind: "registry", Producer: func() actor.Actor { return &standIn{name: "registry", s: s} }},
				{Name: "watcher", Kind: "watcher", Producer: func() actor.Actor { return &standIn{name: "watcher", s: s} }},
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tree.Stop(ctx)
	})
	for _, p := range []messages.Address{registryPath, watcherPath} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, ok := tree.Dir.Get(p); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never spawned", p)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	e := &env{t: t, s: s, now: time.Date(2030, 5, 6, 7, 8, 9, 0, time.FixedZone("X", 3600))}
	h := api.Handler(&api.Deps{
		Tree: tree, RegistryPath: registryPath, WatcherPath: watcherPath, RefreshPath: registryPath, Verifier: v,
		Diagnostics: func() error { s.mu.Lock(); defer s.mu.Unlock(); return s.diag },
		VolumeRoot:  func() error { s.mu.Lock(); defer s.mu.Unlock(); return s.volRoot },
		Storage:     api.Storage{ID: storageID, Attest: func() error { s.mu.Lock(); defer s.mu.Unlock(); return s.storage }},
		Callbacks:   callback.Policy{Self: []string{apiListen, debugListen}},
		Gatherer:    prometheus.NewRegistry(), Metrics: api.NewMetrics(nil), Log: zerolog.Nop(),
		AskTimeout: askTimeout, CloseWait: askTimeout, LogsWait: 3 * askTimeout,
		Now: func() time.Time { return e.now },
	})
	e.srv = httptest.NewServer(h)
	t.Cleanup(e.srv.Close)
	return e
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends a request signed now (sig "" = sign; "-" = unsigned; else sent as is).
func (e *env) do(method, uri string, body []byte, sig string) reply {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+uri, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	switch sig {
	case "":
		req.Header.Set(callback.Header, callback.Sign(secret, method, uri, body, time.Now()))
	case "-":
	default:
		req.Header.Set(callback.Header, sig)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}

func (e *env) post(uri string, body any) reply {
	e.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.do(http.MethodPost, uri, b, "")
}
