package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
)

// benchCallback is one delivered callback as the bench's receiver saw it.
type benchCallback struct {
	Lease  string
	Status string
	Error  string
	URI    string // request URI it arrived at (path + query)
	At     time.Time
}

// callbackSink is the bench's stand-in for Fred's callback endpoint: it verifies
// every signature with berthd's secret (refusing a bad one with 401, as Fred
// would, so berthd retries it) and records what it accepted.
type callbackSink struct {
	url string
	srv *http.Server

	mu           sync.Mutex
	got          []benchCallback
	seenDelivery map[string]bool // X-Berth-Delivery-Id already recorded: a redelivery counts once
	verified     int             // requests whose signature verified
	bad          int             // requests refused for their signature
	garbled      int             // verified requests whose body was not a callback
	notify       chan struct{}
}

// startCallbackSink listens on 127.0.0.1 with an ephemeral port: berthd's
// callback policy admits loopback receivers on any port but its own listeners'.
func startCallbackSink(secret []byte) (*callbackSink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("callback receiver: %w", err)
	}
	s := &callbackSink{url: "http://" + ln.Addr().String(), seenDelivery: map[string]bool{}, notify: make(chan struct{}, 1)}
	v := &hmac.Verifier{Secret: secret, Observe: func(outcome string) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if outcome == hmac.OutcomeOK {
			s.verified++
		} else {
			s.bad++
		}
	}}
	s.srv = &http.Server{Handler: v.Middleware(http.HandlerFunc(s.receive)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *callbackSink) close() { _ = s.srv.Close() }

func (s *callbackSink) receive(w http.ResponseWriter, r *http.Request) {
	var cb messages.Callback
	if err := json.NewDecoder(r.Body).Decode(&cb); err != nil || cb.LeaseUUID == "" {
		s.mu.Lock()
		s.garbled++
		s.mu.Unlock()
		http.Error(w, `{"error":"not a callback"}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	id := r.Header.Get("X-Berth-Delivery-Id")
	if id == "" || !s.seenDelivery[id] {
		s.seenDelivery[id] = id != ""
		s.got = append(s.got, benchCallback{Lease: cb.LeaseUUID, Status: cb.Status, Error: cb.Error,
			URI: r.URL.RequestURI(), At: time.Now()})
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// first is the earliest callback of lease with one of statuses.
func (s *callbackSink) first(lease string, statuses ...string) (benchCallback, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.got {
		if c.Lease == lease && slices.Contains(statuses, c.Status) {
			return c, true
		}
	}
	return benchCallback{}, false
}

// counts are the signature and delivery tallies so far.
func (s *callbackSink) counts() (received, verified, bad, garbled int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got), s.verified, s.bad, s.garbled
}

// waitUntil returns true once done() holds, false when ctx ends first. done is
// checked after every callback and at least every 200 ms.
func (s *callbackSink) waitUntil(ctx context.Context, done func() bool) bool {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for !done() {
		select {
		case <-ctx.Done():
			return done()
		case <-s.notify:
		case <-tick.C:
		}
	}
	return true
}
