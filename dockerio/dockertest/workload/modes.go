package main

import (
	"fmt"
	"io"
	"net/http"
	"time"
)

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

// getArg GETs the URL argument of mode; when it cannot, resp is nil and code
// the exit code (a failed request is reported on failOut).
func getArg(mode string, args []string, failOut, stderr io.Writer) (resp *http.Response, target string, code int) {
	target, ok := urlArg(mode, args, stderr)
	if !ok {
		return nil, "", 2
	}
	resp, err := newFetchClient().Get(target)
	if err != nil {
		fmt.Fprintf(failOut, "%s %s: %v\n", mode, target, err)
		return nil, target, 1
	}
	return resp, target, 0
}

// runProbe is the health-check command: exit 0 when GET URL answers 2xx.
func runProbe(args []string, stdout, stderr io.Writer) int {
	resp, target, code := getArg("probe", args, stdout, stderr)
	if resp == nil {
		return code
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
	resp, target, code := getArg("fetch", args, stderr, stderr)
	if resp == nil {
		return code
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
