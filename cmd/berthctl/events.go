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
)

// events follows live lease transitions from the debug listener's event
// stream (GET /debug/events, server-sent events) until interrupted, or with
// -n prints the last N from GET /debug/transitions and exits.
func (c *client) events(args []string) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	since := fs.Uint64("since", 0, "first replay the transitions after this seq, then follow")
	last := fs.Int("n", 0, "print the last N transitions and exit (no following)")
	output := outputFlag(fs)
	rest, err := parseWithArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 || *last < 0 {
		return errors.New("usage: berthctl events [-since SEQ] [-n N] [-o table|json]")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	sinceSet := false
	fs.Visit(func(f *flag.Flag) { sinceSet = sinceSet || f.Name == "since" })
	p := &transitionPrinter{out: c.out, json: *output == outputJSON}
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

// lastTransitions prints the newest n transitions (after since, when given).
func (c *client) lastTransitions(n int, since uint64, sinceSet bool, p *transitionPrinter) error {
	q := url.Values{"limit": {strconv.Itoa(n)}}
	if sinceSet {
		q.Set("since", strconv.FormatUint(since, 10))
	}
	uri := "/debug/transitions?" + q.Encode()
	body, err := c.getDebug(uri)
	if err != nil {
		return err
	}
	var page transitionsPage
	if err := decode(uri, body, &page); err != nil {
		return err
	}
	for _, raw := range page.Transitions {
		if _, err := p.print(raw); err != nil {
			return err
		}
	}
	return nil
}

// transitionPrinter prints transitions as they come: fixed-width columns (a
// stream cannot be aligned after the fact), or one JSON object per line.
type transitionPrinter struct {
	out    io.Writer
	json   bool
	header bool // printed
}

const transitionLine = "%-6s  %-24s  %-36s  %-29s  %s\n"

// print writes one transition and returns it decoded.
func (p *transitionPrinter) print(raw json.RawMessage) (transition, error) {
	var tr transition
	if err := json.Unmarshal(raw, &tr); err != nil {
		return tr, fmt.Errorf("unexpected transition %s: %w", raw, err)
	}
	if p.json {
		line, err := compactJSON(raw)
		if err != nil {
			return tr, err
		}
		_, err = fmt.Fprintf(p.out, "%s\n", line)
		return tr, err
	}
	if !p.header {
		if _, err := fmt.Fprintf(p.out, transitionLine, "SEQ", "TIME", "LEASE", "TRANSITION", "REASON"); err != nil {
			return tr, err
		}
		p.header = true
	}
	_, err := fmt.Fprintf(p.out, transitionLine, strconv.FormatUint(tr.Seq, 10), timestampMilli(tr.At), cell(tr.LeaseUUID),
		cell(tr.From)+" → "+cell(tr.To), cell(tr.Reason))
	return tr, err
}

func compactJSON(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, fmt.Errorf("unexpected transition %s: %w", raw, err)
	}
	return b.Bytes(), nil
}
