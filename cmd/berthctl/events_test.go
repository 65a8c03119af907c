package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// transitionLog is a stand-in for the daemon's transition history and event
// stream: GET /debug/transitions pages it (since = after that seq, no since
// = the newest limit), GET /debug/events runs the next scripted connection.
type transitionLog struct {
	mu    sync.Mutex
	all   []string // transition JSON by seq (seq = index+1)
	conns []func(w io.Writer, flush func(), r *http.Request)
	n     int // connections so far
}

func fakeTransition(seq int, lease, from, to string) string {
	return fmt.Sprintf(`{"seq":%d,"at":"2025-03-01T10:00:%02d.5Z","lease_uuid":"%s","from":"%s","to":"%s"}`, seq, seq%60, lease, from, to)
}

func (l *transitionLog) add(lease, from, to string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	tr := fakeTransition(len(l.all)+1, lease, from, to)
	l.all = append(l.all, tr)
	return tr
}

func (l *transitionLog) server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testDebugToken {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"missing or invalid debug token"}`)
			return
		}
		switch r.URL.Path {
		case "/debug/transitions":
			l.page(w, r)
		case "/debug/events":
			l.mu.Lock()
			if l.n >= len(l.conns) {
				l.mu.Unlock()
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			conn := l.conns[l.n]
			l.n++
			l.mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fl := w.(http.Flusher)
			fl.Flush()
			conn(w, fl.Flush, r)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// page answers like the daemon's ring: the transitions after since (default
// 0), oldest first, at most limit, and the seq to ask after next time.
func (l *transitionLog) page(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	since, _ := strconv.Atoi(r.URL.Query().Get("since"))
	out, next := []string{}, since
	for i := since; i < len(l.all) && len(out) < limit; i++ {
		out = append(out, l.all[i])
		next = i + 1
	}
	_, _ = fmt.Fprintf(w, `{"transitions":[%s],"next":%d}`, strings.Join(out, ","), next)
}

// after is what the daemon's stream replays first: the transitions after the
// request's since.
func (l *transitionLog) after(r *http.Request) []string {
	since, _ := strconv.Atoi(r.URL.Query().Get("since"))
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.all[min(since, len(l.all)):]...)
}

func sse(w io.Writer, event, data string) {
	_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data)
}

// follow runs a follower against srv until the output has lines lines, then
// stops it as an interrupt would.
func follow(t *testing.T, srv *httptest.Server, since int, asJSON bool, lines int) (string, string) {
	t.Helper()
	out, notices := &lockedBuffer{}, &lockedBuffer{}
	c := &client{debug: srv.URL, debugToken: testDebugToken, out: out}
	f := &follower{c: c, print: &transitionPrinter{out: out, json: asJSON}, notices: notices,
		idle: 300 * time.Millisecond, minBackoff: 10 * time.Millisecond, maxBackoff: 50 * time.Millisecond}
	if since >= 0 {
		f.cursor, f.positioned = uint64(since), true
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "\n") < lines {
		select {
		case err := <-done:
			t.Fatalf("following ended early: %v\n%s\nnotices:\n%s", err, out.String(), notices.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s:\n%s\nnotices:\n%s", out.String(), notices.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("an interrupted follow is no error: %v", err)
	}
	return out.String(), notices.String()
}

const (
	leaseA = "0b6c7e55-1d2e-4f3a-8b9c-0d1e2f3a4b5c"
	leaseB = "6f1c1c8e-8a52-4a4f-9f0c-2a9a3c1f7b10"
)

func TestEvents_ReconnectsWithoutGapsOrRepeats(t *testing.T) {
	log := &transitionLog{}
	log.add(leaseA, "", "provisioning") // 1: before -since
	var sinces []string
	log.conns = []func(io.Writer, func(), *http.Request){
		func(w io.Writer, flush func(), r *http.Request) {
			log.mu.Lock()
			sinces = append(sinces, r.URL.Query().Get("since")+"/tree="+r.URL.Query().Get("tree"))
			log.mu.Unlock()
			_, _ = io.WriteString(w, "retry: 2000\n\n: ping\n\n")
			for _, tr := range log.after(r) {
				sse(w, "transition", tr)
			}
			sse(w, "transition", log.add(leaseA, "provisioning", "ready")) // 2
			sse(w, "tree", `{"path":"root"}`)
			sse(w, "transition", log.add(leaseB, "", "provisioning")) // 3
			flush()
			// 4 happens while the connection is broken (not ended cleanly).
			log.add(leaseB, "provisioning", "failed")
			panic(http.ErrAbortHandler)
		},
		func(w io.Writer, flush func(), r *http.Request) {
			log.mu.Lock()
			sinces = append(sinces, r.URL.Query().Get("since")+"/tree="+r.URL.Query().Get("tree"))
			log.mu.Unlock()
			for _, tr := range log.after(r) {
				sse(w, "transition", tr)
			}
			sse(w, "transition", log.add(leaseA, "ready", "deprovisioning")) // 5
			flush()
			// A clean end (the daemon's stream lifetime): a quiet reconnect.
		},
		func(w io.Writer, flush func(), r *http.Request) {
			log.mu.Lock()
			sinces = append(sinces, r.URL.Query().Get("since")+"/tree="+r.URL.Query().Get("tree"))
			log.mu.Unlock()
			sse(w, "gap", `{"missed":7}`)
			sse(w, "transition", log.add(leaseA, "deprovisioning", "closed")) // 6
			flush()
			<-r.Context().Done()
		},
	}
	srv := log.server(t)
	got, notices := follow(t, srv, 1, false, 6)
	wantText(t, got, ""+
		"SEQ     TIME                      LEASE                                 TRANSITION                     REASON\n"+
		"2       2025-03-01T10:00:02.500Z  "+leaseA+"  provisioning → ready           -\n"+
		"3       2025-03-01T10:00:03.500Z  "+leaseB+"  - → provisioning               -\n"+
		"4       2025-03-01T10:00:04.500Z  "+leaseB+"  provisioning → failed          -\n"+
		"5       2025-03-01T10:00:05.500Z  "+leaseA+"  ready → deprovisioning         -\n"+
		"6       2025-03-01T10:00:06.500Z  "+leaseA+"  deprovisioning → closed        -\n")
	log.mu.Lock()
	defer log.mu.Unlock()
	if strings.Join(sinces, " ") != "1/tree=0 3/tree=0 5/tree=0" {
		t.Fatalf("streams asked from %q, want after 1, then 3, then 5, without trees", sinces)
	}
	if strings.Count(notices, "reconnecting in") != 1 || !strings.Contains(notices, "7 transitions were dropped") {
		t.Fatalf("want one reconnect notice (the broken connection, not the clean end) and the gap: %q", notices)
	}
}

func TestEvents_WithoutSinceStartsAtTheNewest(t *testing.T) {
	log := &transitionLog{}
	log.add(leaseA, "", "provisioning")
	log.add(leaseA, "provisioning", "ready")
	log.conns = []func(io.Writer, func(), *http.Request){
		func(w io.Writer, flush func(), r *http.Request) {
			log.add(leaseB, "", "provisioning") // between berthctl's start and its subscription
			for _, tr := range log.after(r) {
				sse(w, "transition", tr)
			}
			flush()
			<-r.Context().Done()
		},
	}
	got, _ := follow(t, log.server(t), -1, true, 1)
	wantText(t, got, fakeTransition(3, leaseB, "", "provisioning")+"\n")
}

func TestEvents_ARestartedDaemonsNewHistoryIsFollowed(t *testing.T) {
	log := &transitionLog{}
	log.conns = []func(io.Writer, func(), *http.Request){
		func(w io.Writer, flush func(), r *http.Request) {
			// since=40 is beyond this process's seqs: the daemon starts again at 1.
			sse(w, "transition", log.add(leaseA, "", "provisioning"))
			flush()
			<-r.Context().Done()
		},
	}
	got, notices := follow(t, log.server(t), 40, true, 1)
	if !strings.Contains(got, `"seq":1`) || !strings.Contains(notices, "berthd restarted") {
		t.Fatalf("output %q notices %q", got, notices)
	}
}

func TestEvents_ASilentStreamIsTakenForDead(t *testing.T) {
	log := &transitionLog{}
	log.conns = []func(io.Writer, func(), *http.Request){
		func(w io.Writer, flush func(), r *http.Request) { <-r.Context().Done() }, // not even a ping
		func(w io.Writer, flush func(), r *http.Request) {
			sse(w, "transition", log.add(leaseA, "", "provisioning"))
			flush()
			<-r.Context().Done()
		},
	}
	got, notices := follow(t, log.server(t), 0, true, 1)
	if !strings.Contains(got, `"seq":1`) || !strings.Contains(notices, "keepalive") {
		t.Fatalf("output %q notices %q", got, notices)
	}
}

func TestEvents_ARefusalEndsFollowing(t *testing.T) {
	log := &transitionLog{}
	srv := log.server(t)
	c := &client{debug: srv.URL, debugToken: "wrong", out: io.Discard}
	f := &follower{c: c, print: &transitionPrinter{out: io.Discard}, notices: io.Discard, idle: time.Second,
		minBackoff: time.Millisecond, maxBackoff: time.Millisecond}
	err := f.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a 401: %v", err)
	}
}

func TestEvents_LastNPrintsAndExits(t *testing.T) {
	log := &transitionLog{}
	for i := 0; i < transitionPageSize+3; i++ { // more than one page
		log.add(leaseA, "ready", "ready")
	}
	srv := log.server(t)
	var out lockedBuffer
	err := run([]string{"-debug", srv.URL, "-debug-token", testDebugToken, "events", "-n", "2", "-o", "json"}, nil, &out)
	if err != nil {
		t.Fatal(err)
	}
	wantText(t, out.String(), fakeTransition(transitionPageSize+2, leaseA, "ready", "ready")+"\n"+
		fakeTransition(transitionPageSize+3, leaseA, "ready", "ready")+"\n")
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("not one JSON object per line: %q", line)
		}
	}
	out = lockedBuffer{}
	err = run([]string{"-debug", srv.URL, "-debug-token", testDebugToken, "events", "-n", "5", "-since", strconv.Itoa(transitionPageSize + 1)}, nil, &out)
	if err != nil || strings.Count(out.String(), "\n") != 3 {
		t.Fatalf("-n 5 of the 2 after -since: %v\n%s", err, out.String())
	}
}

func TestEventReader_FollowsTheSSEFormat(t *testing.T) {
	r := newEventReader(strings.NewReader(": ping\r\n\r\nevent: transition\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\ndata: plain\n\n\n"))
	lines := 0
	ev, err := r.next(func() { lines++ })
	if err != nil || ev.name != "transition" || ev.data != "{\"a\":\n1}" {
		t.Fatalf("%+v %v", ev, err)
	}
	ev, err = r.next(func() { lines++ })
	if err != nil || ev.name != "message" || ev.data != "plain" {
		t.Fatalf("%+v %v", ev, err)
	}
	if _, err := r.next(func() { lines++ }); err != errStreamEnded {
		t.Fatalf("the end of the stream: %v", err)
	}
	if lines != 9 {
		t.Fatalf("%d lines seen; the watchdog must hear every one, pings too", lines)
	}
}
