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
	first := true
	_, err := c.transitionPages(since, func(page transitionsPage) {
		if first && sinceSet && page.Missed > 0 {
			fmt.Fprintf(os.Stderr, "berthctl: events: %d transitions after %d are no longer held by the daemon\n", page.Missed, since)
		}
		first = false
		last = append(last, page.Transitions...)
		if len(last) > n {
			last = last[len(last)-n:]
		}
	})
	if err != nil {
		return err
	}
	for _, raw := range last {
		if _, err := p.print(raw); err != nil {
			return err
		}
	}
	return nil
}

// transitionPages visits the pages of GET /debug/transitions after seq since,
// oldest first, and returns the seq after the last one.
func (c *client) transitionPages(since uint64, visit func(transitionsPage)) (uint64, error) {
	for {
		var page transitionsPage
		uri := "/debug/transitions?" + url.Values{"since": {strconv.FormatUint(since, 10)},
			"limit": {strconv.Itoa(transitionPageSize)}}.Encode()
		body, err := c.getDebug(uri)
		if err == nil {
			err = decode(uri, body, &page)
		}
		if err != nil {
			return 0, err
		}
		visit(page)
		if len(page.Transitions) == 0 || page.Next <= since {
			return page.Next, nil
		}
		since = page.Next
	}
}

// transitionPrinter prints transitions as they come: fixed-width columns (a
// stream cannot be aligned after the fact), or one JSON object per line.
type transitionPrinter struct {
	out    io.Writer
	json   bool
	header bool // printed
}

const transitionLine = "%-6s  %-24s  %-36s  %-29s  %s\n"

// print writes one transition and returns it decoded. Failing to write the
// output (a closed pipe) is a fatalError: following cannot go on.
func (p *transitionPrinter) print(raw json.RawMessage) (messages.Transition, error) {
	var tr messages.Transition
	if err := json.Unmarshal(raw, &tr); err != nil {
		return tr, fmt.Errorf("unexpected transition %s: %w", raw, err)
	}
	var line bytes.Buffer
	if p.json {
		_ = json.Compact(&line, raw) // valid JSON: it unmarshalled
		line.WriteByte('\n')
	} else {
		if !p.header {
			fmt.Fprintf(&line, transitionLine, "SEQ", "TIME", "LEASE", "TRANSITION", "REASON")
			p.header = true
		}
		fmt.Fprintf(&line, transitionLine, strconv.FormatUint(tr.Seq, 10), timestampMilli(tr.At), cell(tr.LeaseUUID),
			cell(tr.From)+" → "+cell(tr.To), cell(tr.Reason))
	}
	if _, err := p.out.Write(line.Bytes()); err != nil {
		return tr, &fatalError{err}
	}
	return tr, nil
}
