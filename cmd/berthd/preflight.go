package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/dockerio/engine"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/persistence"
)

// preflightTimeout bounds the whole read (seed: -storage-identity-operation-timeout,
// default 10m); a timeout is a failure, never proof of anything.
const preflightTimeout = 10 * time.Minute

// takeoverRun is one preflight (and, for an adoption, what it read).
type takeoverRun struct {
	rules  takeover.Rules
	report *takeover.Report
	ev     *takeover.Evidence
}

// judgeFredHost reads and judges the fred v0.13 host this config would take
// over. It writes nothing: not the data dir, not fred's files, not Docker.
func judgeFredHost(cfg *config.Config, fredDir string, requireDrained bool) takeoverRun {
	ctx, cancel := context.WithTimeout(context.Background(), preflightTimeout)
	defer cancel()
	run := takeoverRun{rules: takeover.Rules{Backend: cfg.Name, CallbackMaxAge: cfg.CallbackMaxAge, RequireDrained: requireDrained,
		RetentionMaxAge: cfg.RetentionMaxAge, Ingress: cfg.Ingress.Enabled,
		Profile: func(sku string) (lease.Profile, bool) { return profileOf(cfg, sku) },
		Build: func(raw []byte, items []messages.LeaseItem) (*manifest.Lease, error) {
			return manifest.Build(raw, items, manifest.Options{AllowedRegistries: cfg.AllowedRegistries})
		}}}
	// An engine only lists here; it needs an installation ID to exist, and
	// fred's objects carry none (nothing is made under this one).
	eng, err := engine.New(engine.Options{Host: cfg.DockerHost, BackendName: cfg.Name, InstallationID: "fred-v013-preflight"})
	if err != nil {
		run.report = &takeover.Report{Backend: cfg.Name, Host: []takeover.Finding{{Code: takeover.DockerUnavailable, Detail: err.Error()}}}
		return run
	}
	defer eng.Close()
	run.report, run.ev = takeover.Preflight(ctx, takeover.Inputs{FredDir: fredDir, DataDir: cfg.DataDir, ListenAddr: cfg.ListenAddr,
		VolumeRoot: cfg.VolumeDataPath, Objects: eng.FredV013Objects, Images: eng.FredImages, Now: time.Now(), Rules: run.rules})
	return run
}

// profileOf resolves an on-chain SKU through sku_mapping and sku_profiles, as
// admission does (the scratch allowance of a diskless profile pinned).
func profileOf(cfg *config.Config, sku string) (lease.Profile, bool) {
	if mapped, ok := cfg.SKUMapping[sku]; ok {
		sku = mapped
	}
	p, ok := cfg.SKUProfiles[sku]
	if !ok {
		return lease.Profile{}, false
	}
	prof := lease.Profile{CPUCores: p.CPUCores, MemoryMB: p.MemoryMB, DiskMB: p.DiskMB}
	if p.DiskMB == 0 {
		prof.ScratchMB = cfg.ContainerTmpfsSizeMB
	}
	return prof, true
}

// runPreflight is `berthd -config C -preflight-storage-identity-adoption -v013-dir D`:
// the report, ending with takeover.ReadyLine exactly when nothing is refused
// (exit 0; else 1).
func runPreflight(cfg *config.Config, fredDir string, requireDrained, asJSON bool, stdout io.Writer) int {
	r := judgeFredHost(cfg, fredDir, requireDrained).report
	if asJSON {
		r.PrintJSON(stdout)
	} else {
		r.Print(stdout)
	}
	if !r.Ready() {
		return exitRuntime
	}
	return exitOK
}

// runAdopt is `berthd -config C -initialize-storage-identity adopt -v013-dir D`:
// the preflight again, then a new data dir holding fred's leases as berthd's —
// one transaction, the storage identity marker last. Nothing of fred's and
// nothing in Docker changes. An interrupted adoption leaves no marker: delete
// the data dir and run it again.
func runAdopt(cfg *config.Config, fredDir string, requireDrained bool, opts persistence.Options, stdout io.Writer, log zerolog.Logger) int {
	run := judgeFredHost(cfg, fredDir, requireDrained)
	if !run.report.Ready() || run.ev == nil {
		run.report.Print(stdout)
		log.Error().Msg("adoption refused: the preflight refuses this host (nothing written)")
		return exitRuntime
	}
	hashes, err := takeover.FileHashes(fredDir)
	if err != nil {
		log.Error().Err(err).Msg("adoption refused: fred's files (nothing written)")
		return exitRuntime
	}
	w, rec, err := takeover.Adopt(*run.ev, run.report, run.rules, fredDir, hashes)
	if err != nil {
		log.Error().Err(err).Msg("adoption refused (nothing written)")
		return exitRuntime
	}
	lock, err := persistence.AcquireLock(cfg.DataDir)
	if err != nil {
		log.Error().Msg(err.Error())
		return exitRuntime
	}
	defer func() { _ = lock.Release() }()
	dopts := opts
	if dopts.DiagnosticsFile, err = filepath.Abs(cfg.DiagnosticsDBPath); err != nil {
		log.Error().Err(err).Msg("adoption refused: diagnostics_db_path (nothing written)")
		return exitRuntime
	}
	if err := keepCaptures(dopts, rec.Captures); err != nil {
		log.Error().Err(err).Msg("adoption failed: fred's diagnostics (no state written)")
		return exitRuntime
	}
	id, err := persistence.InitializeIdentityWith(opts, w)
	if err != nil {
		log.Error().Err(err).Msg("adoption failed")
		return exitRuntime
	}
	fmt.Fprintf(stdout, "adopted %d leases, %d retained leases' data, %d leases' failure diagnostics and %d undelivered callbacks of fred v0.13 backend %q into %s (storage identity %s)\n",
		len(rec.Leases), len(rec.Retentions), len(rec.Diagnosed), rec.Callbacks, rec.Backend, cfg.DataDir, id.StorageID)
	return exitOK
}
