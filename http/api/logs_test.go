package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/berth-dev/berth/messages"
)

// One log response at a time: a second reader queues for its turn and is served
// when the first is done; one still waiting after LogsWait is refused 503 with
// Retry-After: 1 and never reaches a lease.
func TestLogs_OneResponseAtATime_TheNextQueuesThen503RetryAfter(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	e.s.set(func(s *script) {
		s.logs = func(m *messages.GetLogs) {
			go func() {
				<-release
				m.Reply <- messages.LogsReply{Logs: map[string]string{"app/0": "hello\n"}}
			}()
		}
	})
	first := make(chan reply, 1)
	go func() { first <- e.do(http.MethodGet, "/logs/"+lease, nil, "") }()
	waitAsked(t, e, "logs", 1)

	// Refused after waiting its turn (3 × 300 ms here): nothing asked of the lease.
	start := time.Now()
	r := e.do(http.MethodGet, "/logs/"+lease, nil, "")
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" || time.Since(start) < 800*time.Millisecond {
		t.Fatalf("a log read while another is served: %d %s Retry-After %q after %s, want 503 Retry-After 1 after ~900 ms",
			r.status, r.body, r.header.Get("Retry-After"), time.Since(start))
	}
	if n := countAsked(e, "logs"); n != 1 {
		t.Fatalf("the lease was asked for logs %d times, want 1", n)
	}

	// Queued behind the first: served once it is done.
	second := make(chan reply, 1)
	go func() { second <- e.do(http.MethodGet, "/logs/"+lease, nil, "") }()
	time.Sleep(100 * time.Millisecond)
	close(release)
	for i, c := range []chan reply{first, second} {
		if r := <-c; r.status != http.StatusOK || r.json(t)["app/0"] != "hello\n" {
			t.Fatalf("reader %d: %d %s, want 200 with the logs", i+1, r.status, r.body)
		}
	}
}

func countAsked(e *env, what string) int {
	n := 0
	for _, a := range e.s.log() {
		if a == what {
			n++
		}
	}
	return n
}

func waitAsked(t *testing.T, e *env, what string, n int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); countAsked(e, what) < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s asked %d times, want %d", what, countAsked(e, what), n)
		}
	}
}
