package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/berth-dev/berth/http/hmac"
)

const testDebugToken = "debug-token-for-tests"

// fakeDaemon is a stand-in for both berthd listeners: the debug one answers
// the canned bodies of debug (keyed by path, or path?query when the query
// matters) behind the bearer token, the API one the bodies of api behind the
// signature check. Anything else is a 404 {"error"}.
type fakeDaemon struct {
	t      *testing.T
	debug  *httptest.Server
	api    *httptest.Server
	mu     sync.Mutex
	routes map[string]cannedAnswer
	seen   []string // request URIs, in order, both listeners
}

type cannedAnswer struct {
	status int
	body   string
}

func newFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{t: t, routes: map[string]cannedAnswer{}}
	f.debug = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testDebugToken {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"missing or invalid debug token"}`)
			return
		}
		f.answer(w, r)
	}))
	v := &hmac.Verifier{Secret: []byte(secret)}
	f.api = httptest.NewServer(v.Middleware(http.HandlerFunc(f.answer)))
	t.Cleanup(f.debug.Close)
	t.Cleanup(f.api.Close)
	return f
}

func (f *fakeDaemon) answer(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.seen = append(f.seen, r.URL.RequestURI())
	a, ok := f.routes[r.URL.RequestURI()]
	if !ok {
		a, ok = f.routes[r.URL.Path]
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":"not found"}`)
		return
	}
	if a.status != 0 {
		w.WriteHeader(a.status)
	}
	_, _ = io.WriteString(w, a.body)
}

// on answers uri (a path, or a path with its exact query) with body.
func (f *fakeDaemon) on(uri, body string) { f.onStatus(uri, http.StatusOK, body) }

func (f *fakeDaemon) onStatus(uri string, status int, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routes[uri] = cannedAnswer{status: status, body: body}
}

func (f *fakeDaemon) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// run runs berthctl against the fake daemon and returns its output.
func (f *fakeDaemon) run(args ...string) (string, error) {
	f.t.Helper()
	var out bytes.Buffer
	global := []string{"-api", f.api.URL, "-debug", f.debug.URL, "-debug-token", testDebugToken, "-secret-file", secretFile(f.t)}
	err := run(append(global, args...), nil, &out)
	return out.String(), err
}

// lockedBuffer is an output written by one goroutine while a test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// wantText compares output line by line, so a failure shows where it differs.
func wantText(t *testing.T, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("output differs at line %d:\n got: %q\nwant: %q\n--- got ---\n%s\n--- want ---\n%s", i+1, gl, wl, got, want)
		}
	}
}
