package main

// Following GET /debug/events across reconnects without losing or repeating a
// transition: every connection asks the stream to start after the last seq
// printed (?since=), and the daemon replays what its ring still holds from
// there. Without -since, following starts at the newest seq when berthctl
// starts. Trees are not asked for (?tree=0: pings instead).

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

// transitionPageSize is how many transitions one GET /debug/transitions asks
// for: the daemon's maximum, the size of its whole ring.
const transitionPageSize = 1024

// errIdle is a stream that went silent, not even a keepalive ping, for longer
// than the follower waits: the connection is taken for dead.
var errIdle = errors.New("no data (not even a keepalive) on the event stream")

// errStreamEnded is a stream the daemon closed cleanly (it ends streams after a
// while, and when it shuts down): reconnecting is routine, not news.
var errStreamEnded = errors.New("the daemon ended the event stream")

// follower keeps one event stream open, reconnecting with backoff.
type follower struct {
	c       *client
	print   *transitionPrinter
	notices io.Writer // reconnects and gaps are reported here (stderr), never on the output

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
		if !connected || !errors.Is(err, errStreamEnded) {
			fmt.Fprintf(f.notices, "berthctl: events: %v; reconnecting in %s\n", err, backoff)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		if !connected {
			backoff = min(2*backoff, f.maxBackoff)
		}
	}
}

// streamOnce opens the stream after the cursor and prints transitions until
// the connection ends. connected reports whether the daemon answered at all (a
// connection that worked resets the backoff).
func (f *follower) streamOnce(parent context.Context) (connected bool, err error) {
	if !f.positioned {
		head, err := f.newestSeq()
		if err != nil {
			return false, err
		}
		f.cursor, f.positioned = head, true
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	uri := "/debug/events?" + url.Values{"since": {strconv.FormatUint(f.cursor, 10)}, "tree": {"0"}}.Encode()
	req, err := f.c.debugRequest(ctx, uri)
	if err != nil {
		return false, &fatalError{err}
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, fmt.Errorf("GET %s: %w", uri, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return true, &fatalError{&answerError{method: http.MethodGet, uri: uri, status: resp.Status, body: body}}
	}
	watchdog := time.AfterFunc(f.idle, func() { cancel(errIdle) })
	defer watchdog.Stop()
	stream := newEventReader(resp.Body)
	for {
		ev, err := stream.next(func() { watchdog.Reset(f.idle) })
		if err != nil {
			if cause := context.Cause(ctx); errors.Is(cause, errIdle) {
				return true, errIdle
			}
			if errors.Is(err, errStreamEnded) {
				return true, err
			}
			return true, fmt.Errorf("GET %s: %w", uri, err)
		}
		switch ev.name {
		case "transition":
			if err := f.deliver(json.RawMessage(ev.data)); err != nil {
				return true, err
			}
		case "gap":
			var gap struct {
				Missed uint64 `json:"missed"`
			}
			if json.Unmarshal([]byte(ev.data), &gap) == nil && gap.Missed > 0 {
				fmt.Fprintf(f.notices, "berthctl: events: %d transitions were dropped from the daemon's history "+
					"before they could be sent\n", gap.Missed)
			}
		}
		// Anything else (a tree, whatever the stream grows) is not ours.
	}
}

// newestSeq is the seq of the daemon's newest transition (0: none yet),
// paging through its ring oldest first; a refusal is fatal.
func (f *follower) newestSeq() (uint64, error) {
	next, err := f.c.transitionPages(0, func(transitionsPage) {})
	var refused *answerError
	if errors.As(err, &refused) {
		return 0, &fatalError{err}
	}
	return next, err
}

// deliver prints a transition and moves the cursor to it. The stream only
// sends seqs after the cursor; one at or below it means berthd restarted (seq
// starts again at 1 in every process) and the stream began its new history.
func (f *follower) deliver(raw json.RawMessage) error {
	var head struct {
		Seq uint64 `json:"seq"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		fmt.Fprintf(f.notices, "berthctl: events: skipping an unreadable transition %s: %v\n", raw, err)
		return nil
	}
	if f.positioned && head.Seq <= f.cursor {
		fmt.Fprintf(f.notices, "berthctl: events: seq went back from %d to %d: berthd restarted, following its new history\n", f.cursor, head.Seq)
	}
	if _, err := f.print.print(raw); err != nil {
		var fatal *fatalError
		if errors.As(err, &fatal) {
			return err
		}
		fmt.Fprintf(f.notices, "berthctl: events: skipping a transition: %v\n", err)
		return nil
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
	return ev, errStreamEnded
}
