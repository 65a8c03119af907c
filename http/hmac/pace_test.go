package hmac_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	auth "github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages/callback"
)

// trickle opens a real TCP connection to addr, sends a POST head announcing
// length body bytes, then one body byte every every until the server answers or
// closes. It returns the status line (or "" when the server closed without one)
// and how long the server took to answer 200, or to answer otherwise and close.
func trickle(t *testing.T, addr, sig string, length int, every time.Duration) (string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Errorf("dial: %v", err)
		return "", 0
	}
	defer conn.Close()
	start := time.Now()
	head := fmt.Sprintf("POST /provision HTTP/1.1\r\nHost: berthd\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", length)
	if sig != "" {
		head += callback.Header + ": " + sig + "\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		t.Errorf("write head: %v", err)
		return "", 0
	}
	done := make(chan string, 1)
	go func() {
		r := bufio.NewReader(conn)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			done <- ""
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			_, _ = io.Copy(io.Discard, r) // a refusal must also end the connection
		}
		done <- fmt.Sprintf("HTTP/1.1 %d", resp.StatusCode)
	}()
	tick := time.NewTicker(every)
	defer tick.Stop()
	giveUp := time.After(60 * time.Second)
	for sent := 0; ; {
		select {
		case status := <-done:
			return status, time.Since(start)
		case <-giveUp:
			t.Errorf("the connection was still open after 60 s (%d body bytes sent)", sent)
			return "", time.Since(start)
		case <-tick.C:
			if sent < length {
				if _, err := conn.Write([]byte{'{'}); err == nil {
					sent++
				}
			}
		}
	}
}

// Measured before the pace: 50 connections sending one body byte every 5 s stayed
// open past 60 s. With the production defaults every one is cut off within about
// the grace, signed or not.
func TestMiddleware_TricklingBodies_AreCutOffWithProductionDefaults(t *testing.T) {
	h := newHarness(t, &auth.Verifier{Secret: secret})
	addr := strings.TrimPrefix(h.srv.URL, "http://")
	sig := callback.Sign(secret, http.MethodPost, "/provision", []byte("{}"), time.Now())
	const conns = 50
	var wg sync.WaitGroup
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := sig
			if i%2 == 0 {
				s = "" // unauthenticated: the body is still read (and paced) before 401
			}
			status, took := trickle(t, addr, s, 1000, 5*time.Second)
			if took >= 20*time.Second {
				t.Errorf("connection %d held for %s, want < 20 s", i, took)
			}
			want := "HTTP/1.1 503"
			if s == "" {
				want = "HTTP/1.1 401"
			}
			if !strings.HasPrefix(status, want) {
				t.Errorf("connection %d answered %q, want %s", i, status, want)
			}
		}()
	}
	wg.Wait()
	if n := h.handlerCalls(); n != 0 {
		t.Fatalf("handler ran %d times for cut-off bodies", n)
	}
	slow := 0
	for _, o := range h.observed() {
		if o == auth.OutcomeSlow {
			slow++
		}
	}
	if slow != conns/2 {
		t.Fatalf("observed %d %q outcomes, want %d (the signed ones)", slow, auth.OutcomeSlow, conns/2)
	}
}

// The pace is an average after the grace: a body arriving steadily above the
// minimum rate goes through, one below it is cut off, and the absolute deadline
// holds even for a body above the rate.
func TestMiddleware_Pace_RateAndAbsoluteDeadline(t *testing.T) {
	cases := []struct {
		name    string
		v       auth.Verifier
		length  int
		every   time.Duration
		wantOK  bool
		maxTook time.Duration
	}{
		{"above the rate", auth.Verifier{BodyGrace: 200 * time.Millisecond, BodyMinRate: 20}, 30, 10 * time.Millisecond, true, 5 * time.Second},
		{"below the rate", auth.Verifier{BodyGrace: 200 * time.Millisecond, BodyMinRate: 20}, 30, 200 * time.Millisecond, false, 2 * time.Second},
		{"above the rate, past the timeout", auth.Verifier{BodyGrace: 100 * time.Millisecond, BodyMinRate: 1, BodyTimeout: time.Second}, 300, 10 * time.Millisecond, false, 2500 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := bytes.Repeat([]byte{'{'}, c.length)
			v := c.v
			v.Secret = secret
			h := newHarness(t, &v)
			status, took := trickle(t, strings.TrimPrefix(h.srv.URL, "http://"),
				callback.Sign(secret, http.MethodPost, "/provision", body, time.Now()), c.length, c.every)
			if took > c.maxTook {
				t.Errorf("took %s, want at most %s", took, c.maxTook)
			}
			// The echo answers 200 for the whole (signed) body.
			if gotOK := strings.HasPrefix(status, "HTTP/1.1 200"); gotOK != c.wantOK {
				t.Errorf("status %q, want ok=%v", status, c.wantOK)
			}
		})
	}
}

// A normal client sending the largest allowed body at once is unaffected, over a
// real connection, and the connection stays usable for the next request.
func TestMiddleware_Pace_2MiBBodyFromANormalClientWorks(t *testing.T) {
	h := newHarness(t, &auth.Verifier{Secret: secret})
	body := bytes.Repeat([]byte{'a'}, 2<<20)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	for i := 0; i < 2; i++ {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/update", bytes.NewReader(body))
		req.Header.Set(callback.Header, callback.Sign(secret, http.MethodPost, "/update", body, time.Now()))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
			t.Fatalf("request %d: %d, %d bytes echoed; want 200 and the 2 MiB body", i, resp.StatusCode, len(got))
		}
	}
}

// After a paced read the connection's deadline is cleared: a handler that takes
// longer than the pace allowed (an ask waiting on an actor) still answers.
func TestMiddleware_Pace_DeadlineClearedForASlowHandler(t *testing.T) {
	v := &auth.Verifier{Secret: secret, BodyGrace: 100 * time.Millisecond, BodyTimeout: 200 * time.Millisecond}
	srv := httptest.NewServer(v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(time.Second):
			w.WriteHeader(http.StatusAccepted)
		case <-r.Context().Done(): // a read deadline left behind would fail the background read and cancel this
			w.WriteHeader(http.StatusTeapot)
		}
	})))
	t.Cleanup(srv.Close)
	body := []byte(`{"lease_uuid":"x"}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/restart", bytes.NewReader(body))
	req.Header.Set(callback.Header, callback.Sign(secret, http.MethodPost, "/restart", body, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202", resp.StatusCode)
	}
}
