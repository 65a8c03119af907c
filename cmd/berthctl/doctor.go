package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/persistence"
)

// doctor runs read-only checks an operator runs before calling for help: the
// data dir, the store (verified on a private copy, next to a running daemon),
// the storage identity, the lock holder, Docker, its address pools and clock,
// other installations' objects in it, the volume root and berthd's own /health. Nothing is created, changed or
// locked. Every check is bounded by a timeout.

// Verdicts, worst last.
const (
	verdictOK   = "ok"
	verdictWarn = "warn"
	verdictFail = "fail"
)

// Timeouts of the checks that wait on something.
const (
	dockerTimeout = 5 * time.Second
	healthTimeout = 5 * time.Second
	storeTimeout  = 60 * time.Second // a copy of a store at its 1 GiB ceiling, and its full walk
	quotaTimeout  = 10 * time.Second
)

// Clock skew against Docker: berth signs callbacks with its wall clock and
// receivers accept five minutes (http/hmac.DefaultMaxAge); Docker on the same
// host shares berthd's clock, so any visible skew means a remote docker_host or
// a clock being stepped.
const (
	skewWarn = time.Second
	skewFail = time.Minute
)

// minDockerAPI is Docker Engine 20.10's API, the oldest berth is built for.
const minDockerAPI = "1.41"

// checkResult is one line of the report.
type checkResult struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
	Finding string `json:"finding"`
	Fix     string `json:"fix"`
}

// doctorReport is the whole report, as -o json prints it.
type doctorReport struct {
	Checks  []checkResult `json:"checks"`
	Verdict string        `json:"verdict"`
}

// errDoctorFailed makes berthctl exit 1 after printing a report with a failed check.
var errDoctorFailed = errors.New("doctor: a check failed")

func ok(name, finding string) checkResult {
	return checkResult{Name: name, Verdict: verdictOK, Finding: finding}
}
func warn(name, finding, fix string) checkResult {
	return checkResult{Name: name, Verdict: verdictWarn, Finding: finding, Fix: fix}
}
func fail(name, finding, fix string) checkResult {
	return checkResult{Name: name, Verdict: verdictFail, Finding: finding, Fix: fix}
}

func worse(a, b string) string {
	rank := map[string]int{verdictOK: 0, verdictWarn: 1, verdictFail: 2}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

func (c *client) doctor(args []string) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	output := outputFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("doctor -o %q: want table or json", *output)
	}
	daemon := c.daemon
	if daemon == nil { // the embedded defaults
		var err error
		if daemon, err = loadDaemonConfig("", os.Environ()); err != nil {
			return err
		}
	}
	rep := runDoctor(context.Background(), &doctorEnv{cfg: daemon.cfg, api: c.api})
	if err := rep.write(c.out, *output); err != nil {
		return err
	}
	if rep.Verdict == verdictFail {
		return errDoctorFailed
	}
	return nil
}

// doctorEnv is what the checks look at.
type doctorEnv struct {
	cfg     *config.Config // cfg.File "" is the embedded defaults
	api     string         // berthd's API base URL (-api, or listen_addr from -config)
	tempDir string         // for the store's private copy; "" = os.TempDir()
	minAge  time.Duration  // another installation with a younger object counts as live; 0 = defaultMinAge

	// Shared between checks, filled in order.
	store     *persistence.Store // nil when refused: storeErr says why
	storeInfo persistence.ReadOnlyInfo
	storeErr  error
	docker    *dockerAPI
	info      *dockerInfo
	infoAt    time.Time // the local time halfway through the /info request
	dErr      error     // why Docker could not be read
}

// runDoctor runs every check in a fixed order.
func runDoctor(ctx context.Context, env *doctorEnv) doctorReport {
	checks := []func(context.Context, *doctorEnv) checkResult{
		checkConfig, checkDataDir, checkStore, checkIdentity, checkLock,
		checkDocker, checkAddressPools, checkIsolationGuard, checkClock, checkInstallations, checkFredV013, checkAdoption, checkVolumes, checkHealth,
	}
	rep := doctorReport{Verdict: verdictOK}
	defer func() {
		if env.store != nil {
			_ = env.store.Close()
		}
	}()
	for _, check := range checks {
		r := check(ctx, env)
		rep.Checks = append(rep.Checks, r)
		rep.Verdict = worse(rep.Verdict, r.Verdict)
	}
	return rep
}

// write prints the report as an aligned table (a fix on the line under its
// finding) or as JSON.
func (r doctorReport) write(out io.Writer, format string) error {
	if format == "json" {
		return writeJSON(out, r)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tVERDICT\tFINDING")
	counts := map[string]int{}
	for _, c := range r.Checks {
		counts[c.Verdict]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Verdict, c.Finding)
		if c.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", c.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "verdict: %s (%d ok, %d warn, %d fail)\n", r.Verdict, counts[verdictOK], counts[verdictWarn], counts[verdictFail])
	return err
}

func checkConfig(_ context.Context, env *doctorEnv) checkResult {
	const name = "config"
	if env.cfg.File == "" {
		return warn(name, "no -config: checking berthd's embedded development defaults (data_dir "+env.cfg.DataDir+")",
			"run berthctl -config /etc/berth/berthd.yaml doctor with the file berthd runs with")
	}
	mode := "development"
	if env.cfg.ProductionMode {
		mode = "production_mode"
	}
	if len(env.cfg.Warnings) > 0 {
		return warn(name, fmt.Sprintf("%s loads (%s) with %d warnings: %s", env.cfg.File, mode, len(env.cfg.Warnings), strings.Join(env.cfg.Warnings, "; ")),
			"remove the keys and BERTH_* variables the warnings name")
	}
	return ok(name, fmt.Sprintf("%s loads and validates (%s)", env.cfg.File, mode))
}
