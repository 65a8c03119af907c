// Command workload is berth's test workload: one small static binary that the
// integration tests run as a tenant container to make it serve, fail health
// checks, exit, ignore SIGTERM, write files and print logs on demand.
//
// Every flag also reads a WORKLOAD_* environment variable (flag -exit-after is
// WORKLOAD_EXIT_AFTER), so a flat manifest can drive it with env alone; a flag
// given on the command line wins over the environment.
//
//	workload [serve] [-port 8080] [-unhealthy] [-health-after D] [-logs N]
//	                 [-exit-after D -exit-code N] [-ignore-sigterm] [-write P=content]...
//	workload probe URL           exit 0 when GET URL answers 2xx within 2 s, else 1
//	workload exit -code N -after D
//	workload logs -n N           print N lines, then wait for SIGTERM
//	workload fetch URL           GET URL once, print the body, exit 0 on 2xx else 1
//	workload ioctl DIR           try the btrfs subvolume/snapshot-create ioctls on DIR
//	                             and FIONREAD on a pipe; print each one's errno
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches to a mode and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	mode := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		mode, args = args[0], args[1:]
	}
	modes := map[string]func(args []string, stdout, stderr io.Writer) int{
		"serve": runServe, "probe": runProbe, "exit": runExit, "logs": runLogs, "fetch": runFetch, "ioctl": runIoctl,
	}
	if m, ok := modes[mode]; ok {
		return m(args, stdout, stderr)
	}
	fmt.Fprintf(stderr, "workload: unknown mode %q (want serve, probe, exit, logs, fetch or ioctl)\n", mode)
	return 2
}

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
