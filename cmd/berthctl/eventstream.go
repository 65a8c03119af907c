package main

// Following GET /debug/events across reconnects without losing or repeating a
// transition: the stream is opened first, then what happened while berthctl
// was away is replayed from GET /debug/transitions, and every transition at or
// below the last seq printed is dropped — so each prints once, in seq order.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// catchUpPageSize is how many transitions one replay request asks for.
const catchUpPageSize = 500

// errIdle is a stream that went silent, not even a keepalive ping, for longer
// than the follower waits: the connection is taken for dead.
var errIdle = errors.New("no data (not even a keepalive) on the event stream")

// follower keeps one event stream open, reconnecting with backoff.
type follower struct {
	c       *client
	print   *transitionPrinter
	notices io.Writer // reconnects are reported here (stderr), never on the output

	idle                   time.Duration
	minBackoff, maxBackoff time.Duration

	// cursor is the seq of the last transition printed (or -since);
	// positioned says whether it means anything yet.
	cursor     uint64
	positioned bool
}

// fatalError ends following: retrying cannot help (the daemon refused us, or
// the output is gone).
type fatalError struct{ err error }

func (e *fatalError) Error() string { return e.err.Error() }
func (e *fatalError) Unwrap() error { return e.err }

// run follows until ctx ends (nil: an interrupt is how following ends) or a
// fatal error.
func (f *follower) run(ctx context.Context) error {
	backoff := f.minBackoff
	for {
		connected, err := f.streamOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fatal *fatalError
		if errors.As(err, &fatal) {
			return fatal.err
		}
		if connected {
			backoff = f.minBackoff
		}
		fmt.Fprintf(f.notices, "berthctl: events: %v; reconnecting in %s\n", err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, f.maxBackoff)
	}
}

// streamOnce opens the stream, catches up, and prints transitions until the
// connection ends. connected reports whether the daemon answered at all (a
// connection that worked resets the backoff).
func (f *follower) streamOnce(parent context.Context) (connected bool, err error) {
	if !f.positioned {
		// Where "now" is, taken before subscribing: what happens between the two
		// is then replayed, not lost.
		page, err := f.transitions("/debug/transitions?limit=1")
		if err != nil {
			return false, err
		}
		f.cursor, f.positioned = page.Next, true
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	req, err := f.c.debugRequest(ctx, "/debug/events")
	if err != nil {
		return false, &fatalError{err}
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("GET /debug/events: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return true, &fatalError{&answerError{method: http.MethodGet, uri: "/debug/events", status: resp.Status, body: body}}
	}
	watchdog := time.AfterFunc(f.idle, func() { cancel(errIdle) })
	defer watchdog.Stop()

	// The stream is subscribed: anything from now on reaches it, so replaying
	// up to now leaves no gap.
	if err := f.catchUp(); err != nil {
		return true, err
	}
	stream := newEventReader(resp.Body)
	for {
		ev, err := stream.next(func() { watchdog.Reset(f.idle) })
		if err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errIdle) {
				return true, errIdle
			}
			return true, fmt.Errorf("GET /debug/events: %w", err)
		}
		if ev.name != "transition" {
			continue // the tree, and whatever else the stream grows
		}
		if err := f.deliver(json.RawMessage(ev.data)); err != nil {
			return true, err
		}
	}
}

// catchUp prints what happened after the cursor, page by page.
func (f *follower) catchUp() error {
	for {
		q := url.Values{"since": {strconv.FormatUint(f.cursor, 10)}, "limit": {strconv.Itoa(catchUpPageSize)}}
		page, err := f.transitions("/debug/transitions?" + q.Encode())
		if err != nil {
			return err
		}
		before := f.cursor
		for _, raw := range page.Transitions {
			if err := f.deliver(raw); err != nil {
				return err
			}
		}
		if len(page.Transitions) == 0 || f.cursor == before {
			return nil
		}
	}
}

func (f *follower) transitions(uri string) (transitionsPage, error) {
	var page transitionsPage
	body, err := f.c.getDebug(uri)
	var refused *answerError
	if errors.As(err, &refused) {
		return page, &fatalError{err}
	}
	if err != nil {
		return page, err
	}
	if err := decode(uri, body, &page); err != nil {
		return page, &fatalError{err}
	}
	return page, nil
}

// deliver prints a transition unless it was printed already.
func (f *follower) deliver(raw json.RawMessage) error {
	var head struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		fmt.Fprintf(f.notices, "berthctl: events: skipping an unreadable transition %s: %v\n", raw, err)
		return nil
	}
	if f.positioned && head.Seq <= f.cursor {
		return nil
	}
	if _, err := f.print.print(raw); err != nil {
		return &fatalError{err}
	}
	f.cursor, f.positioned = head.Seq, true
	return nil
}

// sseEvent is one server-sent event.
type sseEvent struct {
	name string // "message" when the server named none
	data string
}

// eventReader reads server-sent events (text/event-stream).
type eventReader struct {
	s *bufio.Scanner
}

func newEventReader(r io.Reader) *eventReader {
	s := bufio.NewScanner(r)
	// A tree event of a host with thousands of leases is one long data line.
	s.Buffer(make([]byte, 64<<10), 64<<20)
	return &eventReader{s: s}
}

// next returns the next event with data; onLine is called for every line read,
// comments (the server's keepalive pings) included.
func (r *eventReader) next(onLine func()) (sseEvent, error) {
	ev := sseEvent{name: "message"}
	var data []string
	for r.s.Scan() {
		onLine()
		line := strings.TrimSuffix(r.s.Text(), "\r")
		if line == "" {
			if data != nil {
				ev.data = strings.Join(data, "\n")
				return ev, nil
			}
			ev = sseEvent{name: "message"}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			ev.name = value
		case "data":
			data = append(data, value)
		}
	}
	if err := r.s.Err(); err != nil {
		return ev, err
	}
	return ev, io.ErrUnexpectedEOF
}
