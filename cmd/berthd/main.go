// Command berthd runs tenants' Docker workloads ("leases") for a Fred provider.
//
//	berthd [-config FILE]                       run (embedded defaults without -config)
//	berthd -version                             print the version
//	berthd -initialize-storage-identity new     bind a new, empty data dir to a fresh identity
//	berthd -preflight-storage-identity-adoption -v013-dir DIR
//	                                            judge a fred v0.13 host for takeover (read-only)
//	berthd -initialize-storage-identity adopt -v013-dir DIR
//	                                            adopt it into a new data dir
//
// Exit codes: 0 clean stop, 1 runtime or storage failure, 2 usage or config error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/persistence"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

// drainBudget bounds a stop: HTTP drain, actor tree drain and store close.
const drainBudget = 75 * time.Second

func main() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr, sigs))
}

// flags are berthd's command line.
type flags struct {
	configPath, initIdentity, fredDir  string
	version, preflight, requireDrained bool
	json                               bool // the preflight's report as JSON
}

// parseFlags reads the command line; ok false: exit with code.
func parseFlags(args []string, stderr io.Writer) (f flags, code int, ok bool) {
	fs := flag.NewFlagSet("berthd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.configPath, "config", "", "YAML config file (default: the embedded development config)")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.StringVar(&f.initIdentity, "initialize-storage-identity", "", "with \"new\": bind an empty data dir to a fresh storage identity and exit; "+
		"with \"adopt\" (and -v013-dir): make it hold the fred v0.13 host the preflight judged ready, and exit")
	fs.BoolVar(&f.preflight, "preflight-storage-identity-adoption", false,
		"judge the fred v0.13 host this config would take over (read-only), print what would be adopted, and exit 0 only when nothing is refused")
	fs.StringVar(&f.fredDir, "v013-dir", "", "with -preflight-storage-identity-adoption: the directory holding fred v0.13's callbacks.db, diagnostics.db, releases.db and retention.db")
	output := fs.String("o", "text", "with -preflight-storage-identity-adoption: text, or json (the report as one JSON object; ready_for_v0_13_storage_identity_adoption still ends it when nothing is refused)")
	fs.BoolVar(&f.requireDrained, "require-drained", false, "with -preflight-storage-identity-adoption: refuse while fred holds any undelivered callback (the seed's rule)")
	if err := fs.Parse(args); err != nil {
		return f, exitUsage, false
	}
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "berthd: unexpected arguments: %v\n", fs.Args())
	case (f.preflight || f.initIdentity == "adopt") && f.fredDir == "":
		fmt.Fprintf(stderr, "berthd: -preflight-storage-identity-adoption and -initialize-storage-identity adopt need -v013-dir (where fred v0.13 keeps its four .db files)\n")
	case *output != "text" && *output != "json":
		fmt.Fprintf(stderr, "berthd: -o takes text or json, not %q\n", *output)
	default:
		f.json = *output == "json"
		return f, exitOK, true
	}
	return f, exitUsage, false
}

// run is berthd's whole life; it returns the process exit code.
func run(args, environ []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	f, code, ok := parseFlags(args, stderr)
	if !ok {
		return code
	}
	if f.version {
		fmt.Fprintf(stdout, "berthd %s\n", version)
		return exitOK
	}
	cfg, err := config.Load(f.configPath, environ)
	if err != nil {
		var p *config.Problems
		if errors.As(err, &p) {
			fmt.Fprintf(stderr, "berthd: invalid configuration (%d problems):\n", len(p.List))
			for _, line := range p.List {
				fmt.Fprintf(stderr, "  %s\n", line)
			}
		} else {
			fmt.Fprintf(stderr, "berthd: %v\n", err)
		}
		return exitUsage
	}
	if f.preflight {
		return runPreflight(cfg, f.fredDir, f.requireDrained, f.json, stdout)
	}
	log := newLogger(cfg.LogLevel, stdout)
	for _, w := range cfg.Warnings {
		log.Warn().Msg("config: " + w)
	}
	opts := persistence.Options{Dir: cfg.DataDir, MaxFileBytes: cfg.MaxStoreSizeMB << 20, ProductionMode: cfg.ProductionMode}

	switch f.initIdentity {
	case "":
	case "new":
		lock, err := persistence.AcquireLock(cfg.DataDir)
		if err != nil {
			log.Error().Msg(err.Error())
			return exitRuntime
		}
		defer func() { _ = lock.Release() }()
		id, err := persistence.InitializeIdentity(opts)
		if err != nil {
			log.Error().Msg(err.Error())
			return exitRuntime
		}
		log.Info().Str("data_dir", cfg.DataDir).Str("storage_id", id.StorageID).Msg("storage identity initialised")
		return exitOK
	case "adopt":
		return runAdopt(cfg, f.fredDir, f.requireDrained, opts, stdout, log)
	default:
		fmt.Fprintf(stderr, "berthd: -initialize-storage-identity takes \"new\" or \"adopt\"\n")
		return exitUsage
	}

	d, err := start(cfg, opts, log)
	if err != nil {
		log.Error().Msg(err.Error())
		return exitRuntime
	}
	d.systemd = superviseSystemd(newSDNotifier(environ), d.recovered, d.healthCheck(), log)
	return d.wait(sigs)
}

// wait serves until a signal (exit 0), a fatal tree failure or a latched store
// (exit 1), then drains everything within drainBudget.
func (d *daemon) wait(sigs <-chan os.Signal) int {
	log := d.log
	code := exitOK
	select {
	case sig := <-sigs:
		log.Info().Str("signal", sig.String()).Msg("stopping: draining the actor tree")
	case cause := <-d.tree.Fatal():
		log.Error().Err(cause).Msg("stopping after a fatal failure")
		code = exitRuntime
	case <-d.store.Latched():
		log.Error().Err(d.store.Err()).Msg("stopping: the state store latched a write failure")
		code = exitRuntime
	}
	d.systemd.stopping()
	if err := d.stop(drainBudget); err != nil {
		log.Error().Err(err).Msg("drain incomplete")
		code = exitRuntime
	}
	if err := d.store.Err(); err != nil {
		code = exitRuntime
	}
	log.Info().Int("exit_code", code).Msg("berthd stopped")
	return code
}

// stopCtx is the drain deadline.
func stopCtx(budget time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), budget)
}
