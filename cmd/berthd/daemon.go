package main

import (
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
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/berth-dev/berth/actors/imagegc"
	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/actors/netpool"
	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/actors/volumehold"
	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/cmd/berthd/takeover"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/addresspool"
	"github.com/berth-dev/berth/dockerio/engine"
	"github.com/berth-dev/berth/dockerio/volumes"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// daemon is a running berthd: what start opened, and how to stop it.
type daemon struct {
	lock   *persistence.Lock
	store  *persistence.Store
	diag   *persistence.Diagnostics
	engine docker
	docker *engine.Engine   // the real engine behind engine; nil when testHooks.engine supplied it
	vols   dockerio.Volumes // nil: no volume_data_path (diskless SKUs only)
	// volRoot is vols' root proof (nil with vols): every volume operation proves
	// the root first, and /health and the metrics say when it is not proven.
	volRoot *volumes.Guard
	// adoption is the takeover of a fred v0.13 host this data dir was made by
	// (nil: none); releaseFred gives back the lock that keeps fred from starting.
	adoption    *takeover.Record
	releaseFred func()
	// bridge is Docker's default bridge as found at start; bridged: new
	// single-container leases go on it (single_container_network and the
	// daemon isolating it).
	bridge  dockerio.BridgeFacts
	bridged bool
	tree    *supervisors.Tree
	log     zerolog.Logger

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
	engine func(installationID string) (docker, error)
	// contract, when set, is the runtime contract the engine creates
	// containers under: leases from before a contract bump.
	contract int
	// diag, when set, wraps what lease actors write failure captures to (a
	// diagnostics.db whose writes fail on demand).
	diag func(lease.Diagnostics) lease.Diagnostics
	// askTimeout, when set, is how long the facade waits for an actor (10 s).
	askTimeout time.Duration
	// tenantImagePins, when set, replaces the seed's 10,000 images per tenant.
	tenantImagePins int
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
	w := &wiring{cfg: cfg, d: d, log: log, phases: newStartupPhases(log), now: time.Now,
		callbacks: callback.Policy{Self: []string{cfg.ListenAddr, cfg.DebugListenAddr}}}
	if testHooks.now != nil {
		w.now, w.leaseNow = testHooks.now, testHooks.now
	}
	if err := d.openStore(cfg, opts, w.phases); err != nil {
		return nil, err
	}
	w.id = d.store.Identity()
	var err error
	if d.adoption, err = takeover.LoadRecord(d.store); err != nil {
		return nil, err
	}
	if d.adoption != nil {
		if d.releaseFred, err = lockOutFred(d.adoption); err != nil {
			return nil, err
		}
	}
	if w.secret, err = loadSecret(cfg, log); err != nil {
		return nil, err
	}
	w.reg = prometheus.NewRegistry()
	w.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), w.phases.gauge)
	// Replaying the journals and asking Docker both grow with the leases (at a
	// thousand, 0.1–0.4 s and 0.3–0.6 s here) and need nothing of each other:
	// they run at once. A store that cannot be trusted still refuses first, and
	// nothing is changed on the host (the guard, the volume root) before both
	// said yes.
	docker := make(chan error, 1)
	go func() { docker <- d.askDocker(cfg, w) }()
	stored, asked := d.verifyStore(cfg, opts, w.phases), <-docker
	if stored != nil {
		return nil, stored
	}
	if asked != nil {
		return nil, asked
	}
	mark := time.Now()
	if err := d.guardIsolation(cfg); err != nil {
		return nil, err
	}
	mark = w.phases.done("isolation_guard", mark)
	if d.volRoot, err = openVolumes(cfg, w.id.InstallationID, log); err != nil {
		return nil, err
	}
	if d.volRoot != nil {
		d.vols = d.volRoot
		registerVolumeRoot(w.reg, d.volRoot)
	}
	w.phases.done("volumes_open", mark)
	d.tree, err = supervisors.Start(supervisors.Options{Logger: log, Registerer: w.reg, Chaos: cfg.Debug.Chaos,
		Guardian: testHooks.guardian, Children: func(tree *supervisors.Tree) []supervisors.Spec {
			w.tree = tree
			return w.children()
		}})
	if err != nil {
		return nil, err
	}
	log.Info().Str("version", version).Str("data_dir", cfg.DataDir).Str("storage_id", w.id.StorageID).
		Str("listen_addr", cfg.ListenAddr).Str("debug_listen_addr", cfg.DebugListenAddr).Msg("berthd started")
	ok = true
	return d, nil
}

// askDocker connects the Docker client and reads what start checks of it
// (docker_connect).
func (d *daemon) askDocker(cfg *config.Config, w *wiring) error {
	mark := time.Now()
	if err := d.connectDocker(cfg, w.id.InstallationID, w.reg); err != nil {
		return err
	}
	if err := d.checkDocker(cfg); err != nil {
		return err
	}
	w.phases.done("docker_connect", mark)
	return nil
}

// openStore takes the data dir's lock and opens state.db (store_open).
func (d *daemon) openStore(cfg *config.Config, opts persistence.Options, phases *startupPhases) error {
	mark := time.Now()
	lock, err := persistence.AcquireLock(cfg.DataDir)
	if err != nil {
		return err
	}
	d.lock = lock
	store, info, err := persistence.Open(opts)
	if err != nil {
		return err
	}
	d.store = store
	phases.done("store_open", mark)
	d.logOpened(cfg, info)
	return nil
}

// verifyStore replays every journal (refusing what it cannot read:
// journal_verify), then opens diagnostics.db.
func (d *daemon) verifyStore(cfg *config.Config, opts persistence.Options, phases *startupPhases) error {
	mark, store := time.Now(), d.store
	d.replayed = registry.NewReplayed()
	if err := registry.VerifyInto(store, d.replayed); err != nil {
		return fmt.Errorf("refusing to start: %s: %w", store.Path(), err)
	}
	if _, _, err := volumehold.Load(store); err != nil {
		return fmt.Errorf("refusing to start: %s: %w", store.Path(), err)
	}
	if _, _, err := netpool.Load(store); err != nil {
		return fmt.Errorf("refusing to start: %s: %w", store.Path(), err)
	}
	if _, _, err := imagegc.Load(store); err != nil {
		return fmt.Errorf("refusing to start: %s: %w", store.Path(), err)
	}
	phases.done("journal_verify", mark)
	dopts := opts
	var err error
	if dopts.DiagnosticsFile, err = filepath.Abs(cfg.DiagnosticsDBPath); err != nil {
		return fmt.Errorf("diagnostics_db_path %s: %w", cfg.DiagnosticsDBPath, err)
	}
	if d.diag, err = persistence.OpenDiagnostics(dopts); err != nil {
		return err
	}
	if sa, ok := d.diag.SetAside(); ok {
		// Diagnostics carry no authority: a damaged file is set aside, never a reason to refuse start.
		d.log.Error().Str("set_aside", sa.Path).Str("reason", sa.Reason).Msg(sa.OperatorMessage())
	}
	return nil
}

// logOpened tells the operator what opening the store found.
func (d *daemon) logOpened(cfg *config.Config, info persistence.OpenInfo) {
	log, store := d.log, d.store
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
}

// loadSecret is the callback secret (configured, or generated once into the data dir).
func loadSecret(cfg *config.Config, log zerolog.Logger) ([]byte, error) {
	secret, secretPath, err := config.CallbackSecret(cfg)
	if err != nil {
		return nil, err
	}
	if secretPath != "" {
		log.Info().Str("path", secretPath).Msg("callback secret generated or read from the data dir (value not logged)")
	}
	return secret, nil
}

// connectDocker makes the Engine (the test hook's, or the real client) and
// warns when Docker's address pools hold fewer networks than leases fit.
func (d *daemon) connectDocker(cfg *config.Config, installationID string, reg prometheus.Registerer) error {
	var err error
	if testHooks.engine != nil {
		if d.engine, err = testHooks.engine(installationID); err != nil {
			return fmt.Errorf("test engine: %w", err)
		}
		return nil
	}
	d.docker, err = engine.New(engine.Options{Host: cfg.DockerHost, BackendName: cfg.Name, InstallationID: installationID,
		Adopted: d.adopted(), PullTimeout: cfg.ImagePullTimeout, CreateTimeout: cfg.ContainerCreateTimeout,
		StartTimeout: cfg.ContainerStartTimeout, MaxInFlight: cfg.DockerMaxInFlight, MaxStartsInFlight: cfg.DockerMaxStartsInFlight,
		Contract: testHooks.contract, Registerer: reg, Logger: d.log.With().Str("component", "docker").Logger()})
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	d.engine = d.docker
	return nil
}

// adopted is the allow-list of fred v0.13's containers and networks this
// installation adopted (its adoption record's), which the engine owns as its own.
func (d *daemon) adopted() *dockerio.Adopted {
	if d.adoption == nil {
		return nil
	}
	return &d.adoption.Allowed
}

// checkDocker asks Docker what start checks, all at once — seccomp, the
// default bridge, the address pools: each is a round trip that grows with the
// containers Docker holds (at a thousand, one after another they were half a
// second of a restart). It changes nothing.
func (d *daemon) checkDocker(cfg *config.Config) error {
	var group errgroup.Group
	group.Go(func() error { return d.checkSeccomp(cfg) })
	group.Go(func() error { return d.checkFredV013(cfg) })
	group.Go(func() error { d.inspectBridge(cfg); return nil })
	if d.docker != nil {
		group.Go(func() error { warnNetworkCapacity(d.docker, cfg, d.log); return nil })
	}
	return group.Wait()
}

// checkSeccomp refuses production on a Docker daemon that applies no seccomp
// profile (the tenant profile would not be enforced, and with it neither the
// btrfs volume quota) and warns about it otherwise. A daemon that cannot be
// asked is only warned about: berthd waits for Docker as it always does.
func (d *daemon) checkSeccomp(cfg *config.Config) error {
	ctx, cancel := stopCtx(10 * time.Second)
	defer cancel()
	on, err := d.engine.SeccompEnabled(ctx)
	switch {
	case err != nil:
		d.log.Warn().Err(err).Msg("could not ask Docker whether it applies seccomp profiles; tenant containers need it")
	case !on && cfg.ProductionMode:
		return errors.New("refusing to start: the Docker daemon applies no seccomp profiles (docker info lists no name=seccomp), " +
			"so the tenant seccomp profile and the volume quotas it protects would not be enforced; run dockerd with seccomp (production_mode requires it)")
	case !on:
		d.log.Warn().Msg("the Docker daemon applies no seccomp profiles: tenant containers run without the tenant seccomp profile, " +
			"and a tenant can escape its btrfs volume quota (production_mode refuses this)")
	}
	return nil
}

// checkFredV013 refuses production on a Docker engine that holds what fred
// v0.13's docker backend made under berthd's backend name (dockerio.MadeByFredV013):
// berthd knows none of those leases, so it would tell providerd they do not
// exist and fail every re-provision providerd sends, while fred's containers
// run on unseen — after three failures providerd closes a lease on-chain. It
// names the objects. Outside production it is an error line, not a refusal. A
// daemon that cannot be asked is only warned about (berthd waits for Docker).
func (d *daemon) checkFredV013(cfg *config.Config) error {
	ctx, cancel := stopCtx(10 * time.Second)
	defer cancel()
	all, err := d.engine.FredV013Objects(ctx)
	if err != nil {
		d.log.Warn().Err(err).Msg("could not ask Docker for fred v0.13's objects")
		return nil
	}
	objs := d.adopted().Unadopted(all, cfg.Name)
	if len(objs) == 0 {
		return nil
	}
	what := dockerio.DescribeFredObjects(objs, cfg.Name)
	if cfg.ProductionMode {
		return errors.New("refusing to start: " + what + "; berthd cannot adopt a live fred v0.13 host yet: keep fred's docker backend " +
			"running, or close its leases first; `berthd -config C -preflight-storage-identity-adoption -v013-dir <fred's .db dir>` " +
			"judges what could be adopted (production_mode refuses this; berthctl doctor lists the objects)")
	}
	d.log.Error().Int("objects", len(objs)).Msg(what + "; berthd does not know these leases: providerd will be told they do not exist " +
		"(production_mode refuses to start here)")
	return nil
}

// guardIsolation puts the host firewall's isolation guard in place
// (dockerio/isolation): without it, every network Docker creates
// opens a moment in which leases reach each other. Production refuses to run
// without it; otherwise it is warned about (the reconciler tries again each pass).
func (d *daemon) guardIsolation(cfg *config.Config) error {
	ctx, cancel := stopCtx(10 * time.Second)
	defer cancel()
	installed, err := d.engine.GuardIsolation(ctx)
	switch {
	case err != nil && cfg.ProductionMode:
		return fmt.Errorf("refusing to start: the isolation guard could not be put in place (run berthd as root on dockerd's host, with iptables): %w", err)
	case err != nil:
		d.log.Warn().Err(err).Msg("isolation guard not in place: while Docker creates a network, leases can reach each other (production_mode refuses this)")
	case installed:
		d.log.Info().Msg("isolation guard installed (mangle chain BERTH-ISOLATION): Docker's bridges stay apart while Docker rewrites its rules")
	}
	// The guard only covers Docker's rewrite window: the isolation itself is
	// dockerd's rules, which a dockerd run with --iptables=false never writes.
	rules, err := d.engine.DockerFirewall(ctx)
	if err == nil && rules.Isolation {
		return nil
	}
	why := "DOCKER-ISOLATION-STAGE-1 is not in the filter table: is dockerd running with --iptables=false?"
	if err != nil {
		why = "its firewall rules could not be read: " + err.Error()
	}
	if cfg.ProductionMode {
		return fmt.Errorf("refusing to start: dockerd's networks are not proven apart (%s); leases could reach each other", why)
	}
	d.log.Error().Msg("dockerd's networks are not proven apart (" + why + "): leases can reach each other (production_mode refuses this)")
	return nil
}

// inspectBridge decides, once at start, whether single-container leases share
// Docker's default bridge, and says which way it went.
func (d *daemon) inspectBridge(cfg *config.Config) {
	ctx, cancel := stopCtx(10 * time.Second)
	defer cancel()
	facts, err := d.engine.DefaultBridge(ctx)
	why := facts.Reason
	switch {
	case err != nil:
		why = "Docker's default bridge could not be inspected: " + err.Error()
	case cfg.SingleContainerNetwork == config.SingleOnOwnNetwork:
		why = "single_container_network: own"
	case facts.Capacity <= 0:
		why = "the default bridge has no address left (" + facts.Subnet + ")"
	}
	d.bridge, d.bridged = facts, why == ""
	if d.bridged {
		d.log.Info().Int("capacity", facts.Capacity).Str("subnet", facts.Subnet).
			Msgf("single-container leases share the isolated default bridge (capacity %d)", facts.Capacity)
		return
	}
	msg := "single-container leases get their own networks: " + why
	if cfg.SingleContainerNetwork != config.SingleOnOwnNetwork {
		msg += ` (set "icc": false in daemon.json)`
	}
	d.log.Info().Msg(msg)
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
	if d.releaseFred != nil {
		d.releaseFred()
		d.releaseFred = nil
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
// berth_startup_phase_seconds{phase} (store_open; journal_verify and
// docker_connect, which run at once; isolation_guard, volumes_open,
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
