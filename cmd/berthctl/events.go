package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/berth-dev/berth/messages"
)

// events follows live lease transitions from the debug listener's event
// stream (GET /debug/events, server-sent events) until interrupted, or with
// -n prints the last N from GET /debug/transitions and exits.
func (c *client) events(args []string) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	since := fs.Uint64("since", 0, "first replay the transitions after this seq, then follow")
	last := fs.Int("n", 0, "print the last N transitions and exit (no following)")
	const usage = "usage: berthctl events [-since SEQ] [-n N] [-o table|json]"
	_, asJSON, err := parseView(fs, args, 0, usage)
	if err != nil {
		return err
	}
	if *last < 0 {
		return errors.New(usage)
	}
	sinceSet := false
	fs.Visit(func(f *flag.Flag) { sinceSet = sinceSet || f.Name == "since" })
	p := &transitionPrinter{out: c.out, json: asJSON}
	if *last > 0 {
		return c.lastTransitions(*last, *since, sinceSet, p)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f := &follower{c: c, print: p, notices: os.Stderr, idle: 60 * time.Second,
		minBackoff: 250 * time.Millisecond, maxBackoff: 10 * time.Second}
	if sinceSet {
		f.cursor, f.positioned = *since, true
	}
	return f.run(ctx)
}

// lastTransitions prints the newest n transitions (of those after since, when
// given), paging through the daemon's ring oldest first.
func (c *client) lastTransitions(n int, since uint64, sinceSet bool, p *transitionPrinter) error {
	var last []json.RawMessage
	cursor := since
	for first := true; ; first = false {
		page, err := c.transitionsAfter(cursor, transitionPageSize)
		if err != nil {
			return err
		}
		if first && sinceSet && page.Missed > 0 {
			fmt.Fprintf(os.Stderr, "berthctl: events: %d transitions after %d are no longer held by the daemon\n", page.Missed, since)
		}
		last = append(last, page.Transitions...)
		if len(last) > n {
			last = last[len(last)-n:]
		}
		if len(page.Transitions) == 0 || page.Next <= cursor {
			break
		}
		cursor = page.Next
	}
	for _, raw := range last {
		if _, err := p.print(raw); err != nil {
			return err
		}
	}
	return nil
}

// transitionsAfter is one page of GET /debug/transitions: at most limit
// transitions after seq since, oldest first.
func (c *client) transitionsAfter(since uint64, limit int) (transitionsPage, error) {
	var page transitionsPage
	uri := "/debug/transitions?" + url.Values{"since": {strconv.FormatUint(since, 10)}, "limit": {strconv.Itoa(limit)}}.Encode()
	body, err := c.getDebug(uri)
	if err != nil {
		return page, err
	}
	return page, decode(uri, body, &page)
}

// transitionPrinter prints transitions as they come: fixed-width columns (a
// stream cannot be aligned after the fact), or one JSON object per line.
type transitionPrinter struct {
	out    io.Writer
	json   bool
	header bool // printed
}

const transitionLine = "%-6s  %-24s  %-36s  %-29s  %s\n"

// outputError is a failure to write the output (a closed pipe): following
// cannot go on.
type outputError struct{ err error }

func (e *outputError) Error() string { return e.err.Error() }
func (e *outputError) Unwrap() error { return e.err }

// print writes one transition and returns it decoded.
func (p *transitionPrinter) print(raw json.RawMessage) (messages.Transition, error) {
	var tr messages.Transition
	if err := json.Unmarshal(raw, &tr); err != nil {
		return tr, fmt.Errorf("unexpected transition %s: %w", raw, err)
	}
	if p.json {
		line, err := compactJSON(raw)
		if err != nil {
			return tr, err
		}
		if _, err := fmt.Fprintf(p.out, "%s\n", line); err != nil {
			return tr, &outputError{err}
		}
		return tr, nil
	}
	if !p.header {
		if _, err := fmt.Fprintf(p.out, transitionLine, "SEQ", "TIME", "LEASE", "TRANSITION", "REASON"); err != nil {
			return tr, &outputError{err}
		}
		p.header = true
	}
	if _, err := fmt.Fprintf(p.out, transitionLine, strconv.FormatUint(tr.Seq, 10), timestampMilli(tr.At), cell(tr.LeaseUUID),
		cell(tr.From)+" → "+cell(tr.To), cell(tr.Reason)); err != nil {
		return tr, &outputError{err}
	}
	return tr, nil
}

func compactJSON(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, fmt.Errorf("unexpected transition %s: %w", raw, err)
	}
	return b.Bytes(), nil
}
