package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/facade"
	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/actors/netpool"
	"github.com/berth-dev/berth/actors/outbox"
	"github.com/berth-dev/berth/actors/reaper"
	"github.com/berth-dev/berth/actors/reclaimer"
	"github.com/berth-dev/berth/actors/reconciler"
	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/actors/volumehold"
	"github.com/berth-dev/berth/actors/watcher"
	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/addresspool"
	"github.com/berth-dev/berth/dockerio/engine"
	"github.com/berth-dev/berth/http/api"
	"github.com/berth-dev/berth/http/debug"
	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Paths of the root's children (PID ids), fixed so actors can address siblings.
const (
	registryPath   = supervisors.RootPath + "/registry"
	outboxPath     = supervisors.RootPath + "/outbox"
	watcherPath    = supervisors.RootPath + "/watcher"
	reconcilerPath = supervisors.RootPath + "/reconciler"
	reclaimerPath  = supervisors.RootPath + "/reclaimer"
	netpoolPath    = supervisors.RootPath + "/netpool"
	reaperPath     = supervisors.RootPath + "/reaper"
	volumeHoldPath = supervisors.RootPath + "/volumehold"
)

// daemon is a running berthd: what start opened, and how to stop it.
type daemon struct {
	lock   *persistence.Lock
	store  *persistence.Store
	diag   *persistence.Diagnostics
	engine dockerio.Engine
	docker *engine.Engine   // the real engine behind engine; nil when testHooks.engine supplied it
	vols   dockerio.Volumes // nil: no volume_data_path (diskless SKUs only)
	tree   *supervisors.Tree
	log    zerolog.Logger

	// replayed is what the startup verification replayed, taken by the
	// registry's and each lease actor's first start.
	replayed *registry.Replayed

	recovered     chan struct{} // closed when the registry's startup recovery completes
	recoveredOnce sync.Once
	apiAddr       string              // listen_addr: READY=1 also waits for it to accept
	accepting     atomic.Bool         // apiAddr accepted once
	systemd       *systemdSupervision // READY/WATCHDOG/STOPPING (notify.go)
}

// Hooks lets tests shorten the guardian's backoff, swap the clock, and run the
// daemon on an in-memory engine (the scale benchmark: 10k leases are beyond what
// a test host's dockerd holds).
type hooks struct {
	guardian supervisors.Backoff
	now      func() time.Time
	// engine, when set, replaces engine.New: it is called with the store's
	// installation ID on every start, so one engine can outlive a restart as
	// Docker does.
	engine func(installationID string) (dockerio.Engine, error)
}

var testHooks hooks

// start opens storage (refusing anything it cannot trust), connects Docker and
// starts the actor tree. Every error is one line for the operator log.
func start(cfg *config.Config, opts persistence.Options, log zerolog.Logger) (*daemon, error) {
	d := &daemon{log: log, recovered: make(chan struct{}), apiAddr: cfg.ListenAddr}
	ok := false
	defer func() {
		if !ok {
			d.closeStorage()
		}
	}()
	phases := newStartupPhases(log)
	mark := time.Now()
	lock, err := persistence.AcquireLock(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	d.lock = lock
	store, info, err := persistence.Open(opts)
	if err != nil {
		return nil, err
	}
	d.store = store
	mark = phases.done("store_open", mark)
	if info.Initialized {
		log.Warn().Str("data_dir", cfg.DataDir).Str("storage_id", store.Identity().StorageID).
			Msg("empty data dir initialised with a new storage identity (production mode requires -initialize-storage-identity new)")
	}
	if info.LocationBound {
		log.Info().Str("location", info.Location).Msg("installation identity bound to the data dir's location")
	}
	if r := info.Rekey; r != nil {
		log.Warn().Str("old_installation_id", r.OldInstallationID).Str("installation_id", r.NewInstallationID).
			Str("old_location", r.OldLocation).Str("location", r.NewLocation).Msg(r.OperatorMessage())
	}
	for _, f := range store.Findings() {
		log.Error().Str("path", store.Path()).Msg(f)
	}
	d.replayed = registry.NewReplayed()
	if err := registry.VerifyInto(store, d.replayed); err != nil {
		return nil, fmt.Errorf("refusing to start: %s: %w", store.Path(), err)
	}
	if _, _, err := volumehold.Load(store); err != nil {
		return nil, fmt.Errorf("refusing to start: %s: %w", store.Path(), err)
	}
	if _, _, err := netpool.Load(store); err != nil {
		return nil, fmt.Errorf("refusing to start: %s: %w", store.Path(), err)
	}
	mark = phases.done("journal_verify", mark)
	dopts := opts
	if dopts.DiagnosticsFile, err = filepath.Abs(cfg.DiagnosticsDBPath); err != nil {
		return nil, fmt.Errorf("diagnostics_db_path %s: %w", cfg.DiagnosticsDBPath, err)
	}
	if d.diag, err = persistence.OpenDiagnostics(dopts); err != nil {
		return nil, err
	}
	if sa, ok := d.diag.SetAside(); ok {
		// Diagnostics carry no authority: a damaged file is set aside, never a reason to refuse start.
		log.Error().Str("set_aside", sa.Path).Str("reason", sa.Reason).Msg(sa.OperatorMessage())
	}
	secret, secretPath, err := config.CallbackSecret(cfg)
	if err != nil {
		return nil, err
	}
	if secretPath != "" {
		log.Info().Str("path", secretPath).Msg("callback secret generated or read from the data dir (value not logged)")
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), phases.gauge)
	if testHooks.engine != nil {
		if d.engine, err = testHooks.engine(store.Identity().InstallationID); err != nil {
			return nil, fmt.Errorf("test engine: %w", err)
		}
	} else {
		d.docker, err = engine.New(engine.Options{Host: cfg.DockerHost, BackendName: cfg.Name, InstallationID: store.Identity().InstallationID,
			PullTimeout: cfg.ImagePullTimeout, CreateTimeout: cfg.ContainerCreateTimeout, StartTimeout: cfg.ContainerStartTimeout,
			MaxInFlight: cfg.DockerMaxInFlight, MaxStartsInFlight: cfg.DockerMaxStartsInFlight,
			Registerer: reg, Logger: log.With().Str("component", "docker").Logger()})
		if err != nil {
			return nil, fmt.Errorf("docker client: %w", err)
		}
		d.engine = d.docker
	}
	mark = phases.done("docker_connect", mark)
	if d.docker != nil {
		warnNetworkCapacity(d.docker, cfg, log)
	}
	if d.vols, err = openVolumes(cfg, store.Identity().InstallationID, log); err != nil {
		return nil, err
	}
	phases.done("volumes_open", mark)

	now := time.Now
	if testHooks.now != nil {
		now = testHooks.now
	}
	id := store.Identity()

	d.tree, err = supervisors.Start(supervisors.Options{
		Logger:     log,
		Registerer: reg,
		Chaos:      cfg.Debug.Chaos,
		Guardian:   testHooks.guardian,
		Children: func(tree *supervisors.Tree) []supervisors.Spec {
			return children(cfg, secret, id, d, tree, reg, now, log, phases)
		},
	})
	if err != nil {
		return nil, err
	}
	log.Info().Str("version", version).Str("data_dir", cfg.DataDir).Str("storage_id", id.StorageID).
		Str("listen_addr", cfg.ListenAddr).Str("debug_listen_addr", cfg.DebugListenAddr).Msg("berthd started")
	ok = true
	return d, nil
}

// children builds the root's children, in spawn order: the facade last, so it is
// the first to stop when the tree drains.
func children(cfg *config.Config, secret []byte, id persistence.Identity, d *daemon, tree *supervisors.Tree,
	reg *prometheus.Registry, now func() time.Time, log zerolog.Logger, phases *startupPhases) []supervisors.Spec {
	eng := d.engine
	leaseDeps := &lease.Deps{Store: d.store, Diag: d.diag, Engine: eng, Volumes: d.vols, Preloaded: d.replayed.Leases, Log: log, Now: now, Metrics: lease.NewMetrics(reg), Settings: &lease.Settings{
		BackendName:      cfg.Name,
		HostAddress:      cfg.HostAddress,
		HostBindIP:       cfg.HostBindIP,
		StorageID:        id.StorageID,
		InstallationID:   id.InstallationID,
		ProvisionTimeout: cfg.ProvisionTimeout,
		PullTimeout:      cfg.ImagePullTimeout,
		VerifyDuration:   cfg.StartupVerifyDuration,
		StopTimeout:      cfg.ContainerStopTimeout,
		HealthPoll:       2 * time.Second,
		ResumePoll:       5 * time.Second,
		TeardownRetry:    5 * time.Second,
		ReadonlyRootfs:   cfg.ContainerReadonlyRootfs,
		PidsLimit:        cfg.ContainerPidsLimit,
		TmpfsSizeMB:      int(cfg.ContainerTmpfsSizeMB),
		OutboxPath:       outboxPath,
		SnapshotEvery:    64,
		WorkerDrain:      cfg.ContainerStopTimeout + time.Minute,
		ReleasesMaxAge:   cfg.ReleasesMaxAge,
		HistoryBytes:     32 << 20,
		VolumeHoldPath:   volumeHoldPath,
		RetentionMaxAge:  cfg.RetentionMaxAge,
	}}
	if cfg.NetworkPoolSize > 0 {
		leaseDeps.Networks = &netpool.Client{Tree: tree, Path: netpoolPath, Timeout: 10 * time.Second}
	}
	// Callbacks never reach berthd's own listeners (nor link-local addresses):
	// refused at admission, and again on the address the outbox dials.
	callbacks := callback.Policy{Self: []string{cfg.ListenAddr, cfg.DebugListenAddr}}
	profiles := make(map[string]lease.Profile, len(cfg.SKUProfiles))
	for name, p := range cfg.SKUProfiles {
		profiles[name] = lease.Profile{CPUCores: p.CPUCores, MemoryMB: p.MemoryMB, DiskMB: p.DiskMB}
	}
	// A burst of admissions is answered before its provisions start their Docker
	// work (supervisors.Quiet): measured at 100 concurrent POSTs on real Docker.
	leaseDeps.Quiet = &supervisors.Quiet{Window: admissionQuietWindow, Max: admissionQuietMax}
	registryDeps := &registry.Deps{Store: d.store, Diag: d.diag, Tree: tree, LeaseDeps: leaseDeps, Log: log, Now: now, Replayed: d.replayed, Quiet: leaseDeps.Quiet,
		Phase: func(p string, took time.Duration) {
			phases.record(p, took)
			if p == "recovery" {
				d.recoveredOnce.Do(func() { close(d.recovered) })
			}
		},
		Transitions: registry.NewTransitions(messages.TransitionsKept),
		AdmissionBatches: promauto.With(reg).NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_admission_batch_size",
			Help:    "Admissions carried by each registry journal commit (a burst of concurrent provisions shares one).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		ClosureBatches: promauto.With(reg).NewHistogram(prometheus.HistogramOpts{
			Name:    "berth_closure_batch_size",
			Help:    "Lease closes carried by each registry journal commit (a mass close shares a few).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		Settings: &registry.Settings{
			Totals: registry.Resources{CPUMilli: registry.CPU(cfg.TotalCPUCores), MemoryMB: cfg.TotalMemoryMB, DiskMB: cfg.TotalDiskMB},
			TenantQuota: registry.Resources{CPUMilli: registry.CPU(cfg.TenantQuota.MaxCPUCores),
				MemoryMB: cfg.TenantQuota.MaxMemoryMB, DiskMB: cfg.TenantQuota.MaxDiskMB},
			SKUMapping:        cfg.SKUMapping,
			SKUProfiles:       profiles,
			ScratchMB:         cfg.ContainerTmpfsSizeMB,
			AllowedRegistries: cfg.AllowedRegistries,
			LeaseMailboxLimit: 256,
			SnapshotEvery:     256,
			ReconcilerPath:    reconcilerPath,
			ReclaimerPath:     reclaimerPath,
			NetpoolPath:       netpoolPath,
			Callbacks:         callbacks,
			// Retention: a close keeps the volumes only when there are volumes to keep.
			RetainOnClose:        cfg.RetainOnClose && d.vols != nil,
			MaxRetainedDiskMB:    cfg.MaxRetainedDiskMB,
			MaxRetainedPerTenant: cfg.MaxRetainedLeasesPerTenant,
			ReaperPath:           reaperPath,
			QuotaEnforced:        d.vols != nil && d.vols.Enforced(),
		}}

	outSet := outbox.DefaultSettings(secret, callbacks) // signs with the wall clock: receivers check it
	if cfg.CallbackInsecureSkipVerify {
		// Dev only (refused in production): same guarded client, TLS unchecked.
		outSet.Client = outbox.NewClient(callbacks, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec
	}

	apiMetrics := api.NewMetrics(reg)
	verifier := &hmac.Verifier{Secret: secret, MaxBody: cfg.MaxRequestBodySize, Observe: apiMetrics.AuthOutcome}
	if cfg.CallbackSecretNext != "" {
		verifier.NextSecret = []byte(cfg.CallbackSecretNext)
	}
	apiHandler := api.Handler(&api.Deps{Tree: tree, RegistryPath: registryPath, WatcherPath: watcherPath,
		Verifier: verifier, Callbacks: callbacks, Gatherer: reg, Metrics: apiMetrics, Log: log.With().Str("component", "http").Logger(),
		AskTimeout: 10 * time.Second, CloseWait: 25 * time.Second, Now: now})
	debugHandler := debug.Handler(tree, debug.Options{Chaos: cfg.Debug.Chaos, Token: string(cfg.Debug.Token),
		RegistryPath: registryPath, OutboxPath: outboxPath, PassPaths: []string{reconcilerPath, reclaimerPath, netpoolPath, reaperPath},
		Reads: debugReads{store: d.store, diag: d.diag}, Now: now})

	env := supervisors.Env{Tree: tree, Log: log, Now: now}
	return []supervisors.Spec{
		{Name: "registry", Kind: "registry", Producer: registry.New(registryDeps), MailboxLimit: 1024,
			Supervisor: supervisors.LeaseStrategy()},
		{Name: "outbox", Kind: "outbox", Producer: outbox.New(d.store, outSet, log, outbox.NewMetrics(reg, d.store, now))},
		{Name: "watcher", Kind: "watcher", Producer: watcher.New(&watcher.Deps{Env: env.For("watcher"), Engine: eng,
			Metrics: watcher.NewMetrics(reg), Settings: &watcher.Settings{InstallationID: id.InstallationID,
				RegistryPath: registryPath, ReconcilerPath: reconcilerPath, QueueSize: 4096, BackoffBase: time.Second, BackoffCap: 30 * time.Second}})},
		{Name: "reconciler", Kind: "reconciler", Producer: reconciler.New(&reconciler.Deps{Env: env.For("reconciler"), Engine: eng, Diag: d.diag,
			Metrics: reconciler.NewMetrics(reg), ClosedReceipt: lease.ClosedReceipt(d.store), Settings: &reconciler.Settings{
				Interval: cfg.ReconcileInterval, PassTimeout: 2 * time.Minute, AckTimeout: 30 * time.Second,
				RegistryPath: registryPath, StopTimeout: cfg.ContainerStopTimeout, MaxRemovals: 100,
				RemoveTimeout: 30 * time.Second, DiagnosticsMaxAge: cfg.DiagnosticsMaxAge, PruneEvery: time.Hour}})},
		{Name: "reclaimer", Kind: "reclaimer", Producer: reclaimer.New(&reclaimer.Deps{Env: env.For("reclaimer"), Engine: eng,
			Metrics: reclaimer.NewMetrics(reg), Settings: &reclaimer.Settings{Interval: cfg.ReconcileInterval,
				AfterClose: 5 * time.Second, Budget: 30 * time.Second, InstallationID: id.InstallationID,
				BackendName: cfg.Name, RegistryPath: registryPath}})},
		{Name: "netpool", Kind: "netpool", Producer: netpool.New(&netpool.Deps{Env: env.For("netpool"), Store: d.store, Engine: eng,
			Metrics: netpool.NewMetrics(reg), Settings: &netpool.Settings{Size: cfg.NetworkPoolSize,
				Interval: cfg.ReconcileInterval, Quiet: 2 * time.Second, Budget: time.Minute, IdleWait: 40 * time.Second,
				RegistryPath: registryPath, BackendName: cfg.Name, InstallationID: id.InstallationID}})},
		{Name: "volumehold", Kind: "volumehold", Producer: volumehold.New(&volumehold.Deps{Env: env.For("volumehold"), Store: d.store,
			Volumes: d.vols, Metrics: volumehold.NewMetrics(reg), Settings: &volumehold.Settings{RegistryPath: registryPath,
				BackoffBase: time.Second, BackoffCap: time.Minute}})},
		{Name: "reaper", Kind: "reaper", Producer: reaper.New(&reaper.Deps{Env: env.For("reaper"), Volumes: d.vols,
			Metrics: reaper.NewMetrics(reg), Settings: &reaper.Settings{Interval: cfg.RetentionReapInterval,
				OrphanConfirmations: cfg.RetentionOrphanConfirmations, PassTimeout: 10 * time.Minute,
				RegistryPath: registryPath, VolumeHoldPath: volumeHoldPath}})},
		{Name: "facade", Kind: "facade", Producer: facade.New(&facade.Deps{Tree: tree, API: apiHandler,
			Debug: debugHandler, Log: log, Settings: &facade.Settings{
				ListenAddr: cfg.ListenAddr, DebugListenAddr: cfg.DebugListenAddr, TLSCertFile: cfg.TLSCertFile,
				TLSKeyFile: cfg.TLSKeyFile, TLSClientCAFile: cfg.TLSClientCAFile, TLSClientAllowed: cfg.TLSClientAllowedNames,
				ShutdownGrace: 30 * time.Second, ReadHeaderTimeout: 10 * time.Second}})},
	}
}

// stop drains the tree (the facade first), then closes storage and the lock.
func (d *daemon) stop(budget time.Duration) error {
	ctx, cancel := stopCtx(budget)
	defer cancel()
	var errs []error
	if d.tree != nil {
		if err := d.tree.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if d.docker != nil {
		_ = d.docker.Close()
	}
	d.closeStorage()
	return errors.Join(errs...)
}

func (d *daemon) closeStorage() {
	if d.diag != nil {
		if err := d.diag.Close(); err != nil {
			d.log.Warn().Err(err).Msg("close diagnostics.db")
		}
		d.diag = nil
	}
	if d.store != nil {
		if err := d.store.Close(); err != nil {
			d.log.Warn().Err(err).Msg("close state.db")
		}
	}
	if d.lock != nil {
		_ = d.lock.Release()
		d.lock = nil
	}
}

// newLogger is zerolog JSON on out, or the console format when out is a terminal.
func newLogger(level string, out io.Writer) zerolog.Logger {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		lvl = zerolog.InfoLevel
	}
	if f, ok := out.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			out = zerolog.ConsoleWriter{Out: f, TimeFormat: time.RFC3339}
		}
	}
	return zerolog.New(out).Level(lvl).With().Timestamp().Logger()
}

// startupPhases records how long each startup phase took, as log lines and as
// berth_startup_phase_seconds{phase} (store_open, journal_verify, docker_connect,
// registry_rebuild, recovery — the last from the registry's start to the first
// complete reconciliation, i.e. to /health turning healthy).
type startupPhases struct {
	log   zerolog.Logger
	gauge *prometheus.GaugeVec
}

func newStartupPhases(log zerolog.Logger) *startupPhases {
	return &startupPhases{log: log, gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "berth_startup_phase_seconds", Help: "Duration of each phase of the last startup."}, []string{"phase"})}
}

func (p *startupPhases) record(phase string, took time.Duration) {
	p.gauge.WithLabelValues(phase).Set(took.Seconds())
	p.log.Info().Str("phase", phase).Dur("took", took).Msg("startup phase")
}

// done records the phase that began at since and returns now, the next phase's start.
func (p *startupPhases) done(phase string, since time.Time) time.Time {
	now := time.Now()
	p.record(phase, now.Sub(since))
	return now
}

// warnNetworkCapacity warns when Docker's address pools hold fewer networks than
// the resource pool could admit leases (each lease has its own network, and a
// failed network create fails the lease). `berthctl doctor` judges the same way.
func warnNetworkCapacity(eng *engine.Engine, cfg *config.Config, log zerolog.Logger) {
	ctx, cancel := stopCtx(5 * time.Second)
	defer cancel()
	networks, err := eng.NetworkCapacity(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("could not read Docker's address pools")
		return
	}
	leases := cfg.LeaseCapacity()
	if short := addresspool.Shortfall(networks, leases); short != "" {
		log.Warn().Int("networks", networks).Int("lease_capacity", leases).Msg(short + "; " + addresspool.Fix)
	}
}

// How long a provision's worker waits for admissions to pause (and at most)
// before its first Engine API request.
const (
	admissionQuietWindow = 20 * time.Millisecond
	admissionQuietMax    = 250 * time.Millisecond
)
