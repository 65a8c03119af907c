package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// watchSignals returns a channel that receives SIGTERM and SIGINT. With
// ignoreSigterm, SIGTERM is ignored at the OS level instead: the process keeps
// running until SIGKILL (as PID 1 in a container, an ignored signal is simply
// dropped).
func watchSignals(ignoreSigterm bool) chan os.Signal {
	ch := make(chan os.Signal, 1)
	if ignoreSigterm {
		signal.Ignore(syscall.SIGTERM)
		signal.Notify(ch, syscall.SIGINT)
	} else {
		signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	}
	return ch
}

func stopSignals(ch chan os.Signal) { signal.Stop(ch) }

// urlArg returns the URL of probe/fetch: the positional argument, else -url
// (WORKLOAD_URL).
func urlArg(mode string, args []string, stderr io.Writer) (string, bool) {
	fs := newFlagSet(mode, stderr)
	u := fs.String("url", "", "URL to GET (or give it as the argument)")
	if !parseOrReport(fs, args, nil, stderr) {
		return "", false
	}
	if fs.NArg() > 0 {
		*u = fs.Arg(0)
	}
	if *u == "" || fs.NArg() > 1 {
		fmt.Fprintf(stderr, "usage: workload %s URL\n", mode)
		return "", false
	}
	return *u, true
}

// runProbe is the health-check command: exit 0 when GET URL answers 2xx.
func runProbe(args []string, stdout, stderr io.Writer) int {
	target, ok := urlArg("probe", args, stderr)
	if !ok {
		return 2
	}
	resp, err := newFetchClient().Get(target)
	if err != nil {
		fmt.Fprintf(stdout, "probe %s: %v\n", target, err)
		return 1
	}
	resp.Body.Close()
	fmt.Fprintf(stdout, "probe %s: %s\n", target, resp.Status)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 1
	}
	return 0
}

// runFetch GETs URL once and prints the body.
func runFetch(args []string, stdout, stderr io.Writer) int {
	target, ok := urlArg("fetch", args, stderr)
	if !ok {
		return 2
	}
	resp, err := newFetchClient().Get(target)
	if err != nil {
		fmt.Fprintf(stderr, "fetch %s: %v\n", target, err)
		return 1
	}
	defer resp.Body.Close()
	if _, err := io.Copy(stdout, io.LimitReader(resp.Body, maxFileBody)); err != nil {
		fmt.Fprintf(stderr, "fetch %s: read body: %v\n", target, err)
		return 1
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		fmt.Fprintf(stderr, "fetch %s: %s\n", target, resp.Status)
		return 1
	}
	return 0
}

// runExit prints a line, sleeps -after, then exits with -code. SIGTERM while
// sleeping exits 0 unless -ignore-sigterm.
func runExit(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("exit", stderr)
	code := fs.Int("code", 0, "exit code (0-255)")
	after := fs.Duration("after", 0, "sleep this long first")
	ignoreSigterm := fs.Bool("ignore-sigterm", false, "ignore SIGTERM while sleeping")
	aliases := map[string]string{"code": "WORKLOAD_EXIT_CODE", "after": "WORKLOAD_EXIT_AFTER"}
	if !parseOrReport(fs, args, aliases, stderr) {
		return 2
	}
	if *code < 0 || *code > 255 {
		fmt.Fprintf(stderr, "workload exit: -code %d is outside 0-255\n", *code)
		return 2
	}
	signals := watchSignals(*ignoreSigterm)
	defer stopSignals(signals)
	fmt.Fprintf(stdout, "exiting with code %d after %s\n", *code, *after)
	t := time.NewTimer(*after)
	defer t.Stop()
	select {
	case <-t.C:
		return *code
	case <-signals:
		return 0
	}
}

// runLogs prints -n numbered lines, then waits for SIGTERM (exit 0).
func runLogs(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("logs", stderr)
	n := fs.Int("n", 0, "number of lines to print")
	ignoreSigterm := fs.Bool("ignore-sigterm", false, "ignore SIGTERM afterwards")
	aliases := map[string]string{"n": "WORKLOAD_LOGS"}
	if !parseOrReport(fs, args, aliases, stderr) {
		return 2
	}
	signals := watchSignals(*ignoreSigterm)
	defer stopSignals(signals)
	printLines(stdout, *n)
	<-signals
	return 0
}
