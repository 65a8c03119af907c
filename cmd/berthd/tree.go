package main

import (
	"cmp"
	"crypto/tls"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/domaingate"
	"github.com/berth-dev/berth/actors/facade"
	"github.com/berth-dev/berth/actors/imagegc"
	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/actors/netpool"
	"github.com/berth-dev/berth/actors/outbox"
	"github.com/berth-dev/berth/actors/reaper"
	"github.com/berth-dev/berth/actors/reclaimer"
	"github.com/berth-dev/berth/actors/reconciler"
	"github.com/berth-dev/berth/actors/refresh"
	"github.com/berth-dev/berth/actors/registry"
	"github.com/berth-dev/berth/actors/volumehold"
	"github.com/berth-dev/berth/actors/watcher"
	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/http/api"
	"github.com/berth-dev/berth/http/debug"
	"github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/messages/policy"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// wiring is what the tree's rows are built from: the config, what start
// opened, and the process-wide pieces every actor shares.
type wiring struct {
	cfg    *config.Config
	d      *daemon
	tree   *supervisors.Tree
	reg    *prometheus.Registry
	id     persistence.Identity
	secret []byte
	now    func() time.Time
	// leaseNow is a test's clock for the leases (nil: lease.NewProcessClock,
	// bounded by the monotonic clock within the process).
	leaseNow func() time.Time
	log      zerolog.Logger
	phases   *startupPhases
	// callbacks: a callback never reaches berthd's own listeners (nor a
	// link-local address) — refused at admission, and again on the address the
	// outbox dials.
	callbacks callback.Policy
}

// children is the root's children in spawn order, one row each (the facade
// last, so it is the first to stop when the tree drains). A row maps only what
// the configuration decides; everything else is its package's DefaultSettings.
func (w *wiring) children() []supervisors.Spec {
	cfg, id, env := w.cfg, w.id, supervisors.Env{Tree: w.tree, Log: w.log, Now: w.now}
	rows := []supervisors.Spec{
		registry.Spec(w.registry()),
		supervisors.At(messages.Outbox, outbox.New(w.d.store, w.outbox(), w.log, outbox.NewMetrics(w.reg, w.d.store, w.now))),
		supervisors.At(messages.Watcher, watcher.New(&watcher.Deps{Env: env.For("watcher"), Engine: w.d.engine, Metrics: watcher.NewMetrics(w.reg),
			Settings: with(watcher.DefaultSettings(), func(s *watcher.Settings) { s.InstallationID = id.InstallationID })})),
		supervisors.At(messages.Reconciler, reconciler.New(&reconciler.Deps{Env: env.For("reconciler"), Engine: w.d.engine, Diag: w.d.diag,
			Metrics: reconciler.NewMetrics(w.reg), ClosedReceipt: lease.ClosedReceipt(w.d.store), ClosedStreams: lease.ClosedStreams(w.d.store),
			Settings: with(reconciler.DefaultSettings(), func(s *reconciler.Settings) {
				s.Interval, s.StopTimeout, s.DiagnosticsMaxAge = cfg.ReconcileInterval, cfg.ContainerStopTimeout, cfg.DiagnosticsMaxAge
				s.ClosedMaxAge, s.Bridged = cfg.ReleasesMaxAge, w.d.bridged
			})})),
		supervisors.At(messages.Reclaimer, reclaimer.New(&reclaimer.Deps{Env: env.For("reclaimer"), Engine: w.d.engine, Metrics: reclaimer.NewMetrics(w.reg),
			Settings: with(reclaimer.DefaultSettings(), func(s *reclaimer.Settings) {
				s.Interval, s.InstallationID, s.BackendName = cfg.ReconcileInterval, id.InstallationID, cfg.Name
			})})),
		supervisors.At(messages.Netpool, netpool.New(&netpool.Deps{Env: env.For("netpool"), Store: w.d.store, Engine: w.d.engine, Metrics: netpool.NewMetrics(w.reg),
			Settings: with(netpool.DefaultSettings(), func(s *netpool.Settings) {
				s.Size, s.Interval, s.BackendName, s.InstallationID = cfg.NetworkPoolSize, cfg.ReconcileInterval, cfg.Name, id.InstallationID
				s.Bridge, s.Bridged = w.d.bridge, w.d.bridged
			})})),
		supervisors.At(messages.VolumeHold, volumehold.New(&volumehold.Deps{Env: env.For("volumehold"), Store: w.d.store, Volumes: w.d.vols,
			Metrics: volumehold.NewMetrics(w.reg), Settings: with(volumehold.DefaultSettings(), nil)})),
		supervisors.At(messages.Reaper, reaper.New(&reaper.Deps{Env: env.For("reaper"), Volumes: w.d.vols, Metrics: reaper.NewMetrics(w.reg),
			Settings: with(reaper.DefaultSettings(), func(s *reaper.Settings) {
				s.Interval, s.OrphanConfirmations = cfg.RetentionReapInterval, cfg.RetentionOrphanConfirmations
			})})),
		w.imageGC(env),
		supervisors.At(messages.Refresh, refresh.New(&refresh.Deps{Env: env.For("refresh"), Store: w.d.store, Engine: w.d.engine,
			Metrics: refresh.NewMetrics(w.reg), Settings: with(refresh.DefaultSettings(), func(s *refresh.Settings) {
				s.Concurrency, s.Interval = cfg.RuntimeRefreshMaxConcurrency, cfg.ReconcileInterval
			})})),
	}
	if w.cfg.Ingress.Enabled {
		rows = append(rows, w.domainGate(env))
	}
	return append(rows,
		supervisors.At(messages.Facade, facade.New(&facade.Deps{Tree: w.tree, API: w.api(), Debug: w.debug(), Log: w.log,
			Settings: with(facade.DefaultSettings(), func(s *facade.Settings) {
				s.ListenAddr, s.DebugListenAddr, s.TLSClientAllowed = cfg.ListenAddr, cfg.DebugListenAddr, cfg.TLSClientAllowedNames
				s.TLSCertFile, s.TLSKeyFile, s.TLSClientCAFile = cfg.TLSCertFile, cfg.TLSKeyFile, cfg.TLSClientCAFile
			})})))
}

// with is a package's defaults with the config's part set.
func with[S any](defaults S, set func(*S)) *S {
	if set != nil {
		set(&defaults)
	}
	return &defaults
}

// registry is the registry's row: the pool, SKUs and retention policy, and
// its lease actors' settings.
func (w *wiring) registry() *registry.Deps {
	cfg := w.cfg
	profiles := make(map[string]lease.Profile, len(cfg.SKUProfiles))
	for name, p := range cfg.SKUProfiles {
		profiles[name] = lease.Profile{CPUCores: p.CPUCores, MemoryMB: p.MemoryMB, DiskMB: p.DiskMB}
	}
	leases := w.leases()
	return &registry.Deps{Store: w.d.store, Diag: w.d.diag, Tree: w.tree, LeaseDeps: leases, Log: w.log, Now: w.now,
		Replayed: w.d.replayed, Quiet: leases.Quiet, Phase: w.phase, Transitions: registry.NewTransitions(messages.TransitionsKept),
		AdmissionBatches: batchSizes(w.reg, "berth_admission_batch_size",
			"Admissions carried by each registry journal commit (a burst of concurrent provisions shares one)."),
		ClosureBatches: batchSizes(w.reg, "berth_closure_batch_size",
			"Lease closes carried by each registry journal commit (a mass close shares a few)."),
		DemoteRefused: promauto.With(w.reg).NewCounter(prometheus.CounterOpts{Name: "berth_restore_demote_refused_total",
			Help: "Restores refused 422 demote_exceeds_tier: the retained data does not fit the requested smaller (or diskless) tier."}),
		Settings: with(registry.DefaultSettings(), func(s *registry.Settings) {
			s.Totals = registry.Resources{CPUMilli: registry.CPU(cfg.TotalCPUCores), MemoryMB: cfg.TotalMemoryMB, DiskMB: cfg.TotalDiskMB}
			s.TenantQuota = registry.Resources{CPUMilli: registry.CPU(cfg.TenantQuota.MaxCPUCores),
				MemoryMB: cfg.TenantQuota.MaxMemoryMB, DiskMB: cfg.TenantQuota.MaxDiskMB}
			s.SKUMapping, s.SKUProfiles, s.ScratchMB = cfg.SKUMapping, profiles, cfg.ContainerTmpfsSizeMB
			s.AllowedRegistries, s.Callbacks = cfg.AllowedRegistries, w.callbacks
			// A close keeps volumes only when there are volumes to keep.
			s.RetainOnClose = cfg.RetainOnClose && w.d.vols != nil
			s.MaxRetainedDiskMB, s.MaxRetainedPerTenant = cfg.MaxRetainedDiskMB, cfg.MaxRetainedLeasesPerTenant
			s.QuotaEnforced = w.d.vols != nil && w.d.vols.Enforced()
			if cfg.Ingress.Enabled {
				s.CustomDomains = &policy.CustomDomains{Wildcard: cfg.Ingress.WildcardDomain}
			}
			s.TenantImagePins = cmp.Or(testHooks.tenantImagePins, s.TenantImagePins)
		})}
}

// leases are every lease actor's collaborators and settings.
func (w *wiring) leases() *lease.Deps {
	cfg, id, now := w.cfg, w.id, w.leaseNow
	if now == nil {
		now = lease.NewProcessClock()
	}
	var diag lease.Diagnostics = w.d.diag
	if testHooks.diag != nil {
		diag = testHooks.diag(diag)
	}
	deps := &lease.Deps{Store: w.d.store, Diag: diag, Engine: leaseDocker(w.d.engine), Volumes: w.d.vols, Preloaded: w.d.replayed.Leases,
		Log: w.log, Now: now, Metrics: lease.NewMetrics(w.reg),
		// A burst of admissions is answered before its provisions start their
		// Docker work: measured at 100 concurrent POSTs on real Docker.
		Quiet:      &supervisors.Quiet{Window: admissionQuietWindow, Max: admissionQuietMax},
		ImageHolds: imageHolds,
		Settings: with(lease.DefaultSettings(), func(s *lease.Settings) {
			s.BackendName, s.HostAddress, s.HostBindIP = cfg.Name, cfg.HostAddress, cfg.HostBindIP
			s.StorageID, s.InstallationID = id.StorageID, id.InstallationID
			s.ProvisionTimeout, s.PullTimeout, s.VerifyDuration = cfg.ProvisionTimeout, cfg.ImagePullTimeout, cfg.StartupVerifyDuration
			s.StopTimeout, s.WorkerDrain = cfg.ContainerStopTimeout, cfg.ContainerStopTimeout+time.Minute
			s.ReadonlyRootfs, s.PidsLimit, s.TmpfsSizeMB = cfg.ContainerReadonlyRootfs, cfg.ContainerPidsLimit, int(cfg.ContainerTmpfsSizeMB)
			s.MinAvgFileBytes = cfg.MinAvgFileBytes
			s.ReleasesMaxAge, s.RetentionMaxAge = cfg.ReleasesMaxAge, cfg.RetentionMaxAge
			s.Ingress, s.CustomDomainsUngated = ingressConfig(cfg.Ingress), cfg.Ingress.CustomDomainDNSCheckDisabled
		})}
	// Asked even without a warm pool: it holds the leases bound to the default
	// bridge (a lease once bridged stays so, whatever the config says now).
	deps.Networks = &netpool.Client{Tree: w.tree, Path: messages.Netpool, Timeout: 10 * time.Second}
	deps.Settings.NoWarmPool = cfg.NetworkPoolSize == 0
	return deps
}

// imageHolds are the images the admissions in flight of this process hold
// against the image collector: one per process, so daemons a test runs side by
// side on one Docker engine protect each other's admissions too.
var imageHolds = dockerio.NewImageHolds()

// imageGC is the image collector's row. The engine tells it of every image it
// pulled; an engine without an image store (a benchmark's in-memory one) gives
// it nothing to collect.
func (w *wiring) imageGC(env supervisors.Env) supervisors.Spec {
	cfg := w.cfg
	dk, _ := w.d.engine.(imagegc.Docker)
	if w.d.docker != nil {
		tree := w.tree
		w.d.docker.OnPulled(func(id, ref string) { tree.Send(messages.ImageGC, &messages.ImagePulled{ID: id, Ref: ref}) })
	}
	return supervisors.At(messages.ImageGC, imagegc.New(&imagegc.Deps{Env: env.For("imagegc"), Store: w.d.store, Docker: dk,
		Holds: imageHolds, Metrics: imagegc.NewMetrics(w.reg), Settings: with(imagegc.DefaultSettings(), func(s *imagegc.Settings) {
			s.Interval, s.BudgetBytes, s.MinFreeBytes = cfg.ImageGCInterval, cfg.ImageStoreBudgetMB<<20, cfg.ImageStoreMinFreeMB<<20
		})}))
}

// ingressConfig is what the Traefik labels need of the ingress.* keys; nil
// when ingress is off.
func ingressConfig(in config.Ingress) *ingress.Config {
	if !in.Enabled {
		return nil
	}
	return &ingress.Config{WildcardDomain: in.WildcardDomain, Entrypoint: in.Entrypoint,
		CertResolver: in.CustomDomainCertResolver, Middlewares: in.CustomDomainMiddlewares}
}

// domainGate is the custom-domain DNS readiness gate's row (only with ingress
// on: there are no custom domains to route otherwise).
func (w *wiring) domainGate(env supervisors.Env) supervisors.Spec {
	in := w.cfg.Ingress
	return supervisors.At(messages.DomainGate, domaingate.New(&domaingate.Deps{Env: env.For("domaingate"), Store: w.d.store,
		Settings: with(domaingate.DefaultSettings(), func(s *domaingate.Settings) {
			s.Resolvers.Servers, s.Resolvers.Quorum, s.Resolvers.Host = in.CustomDomainDNSResolvers, in.CustomDomainDNSQuorum, w.cfg.HostAddress
			s.CheckDisabled = in.CustomDomainDNSCheckDisabled
		})}))
}

// phase records a startup phase; recovery's is the daemon's readiness too.
func (w *wiring) phase(p string, took time.Duration) {
	w.phases.record(p, took)
	if p == "recovery" {
		w.d.recoveredOnce.Do(func() { close(w.d.recovered) })
	}
}

func batchSizes(reg prometheus.Registerer, name, help string) prometheus.Observer {
	return promauto.With(reg).NewHistogram(prometheus.HistogramOpts{Name: name, Help: help,
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}})
}

// outbox signs with the wall clock (receivers check it).
func (w *wiring) outbox() outbox.Settings {
	set := outbox.DefaultSettings(w.secret, w.callbacks)
	set.MaxAge = w.cfg.CallbackMaxAge
	if w.cfg.CallbackInsecureSkipVerify {
		// Dev only (refused in production): same guarded client, TLS unchecked.
		set.Client = outbox.NewClient(w.callbacks, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec
	}
	return set
}

// api is the API listener's handler.
func (w *wiring) api() http.Handler {
	metrics := api.NewMetrics(w.reg)
	verifier := &hmac.Verifier{Secret: w.secret, MaxBody: w.cfg.MaxRequestBodySize, Observe: metrics.AuthOutcome}
	if w.cfg.CallbackSecretNext != "" {
		verifier.NextSecret = []byte(w.cfg.CallbackSecretNext)
	}
	return api.Handler(&api.Deps{Tree: w.tree, RegistryPath: messages.Registry, WatcherPath: messages.Watcher, RefreshPath: messages.Refresh,
		CleanupPath: messages.Reconciler,
		Diagnostics: w.d.diag.Check, VolumeRoot: w.d.proveVolumeRoot,
		Verifier: verifier, Storage: api.Storage{ID: w.id.StorageID, Attest: w.d.store.Attest}, Callbacks: w.callbacks, Gatherer: w.reg, Metrics: metrics, Log: w.log.With().Str("component", "http").Logger(),
		AskTimeout: cmp.Or(testHooks.askTimeout, 10*time.Second), HealthTimeout: 1500 * time.Millisecond, CloseWait: 25 * time.Second,
		Now: w.now})
}

// debug is the debug listener's handler.
func (w *wiring) debug() http.Handler {
	var gate messages.Address // the gate runs with ingress on only
	if w.cfg.Ingress.Enabled {
		gate = messages.DomainGate
	}
	return debug.Handler(w.tree, debug.Options{Chaos: w.cfg.Debug.Chaos, Token: string(w.cfg.Debug.Token),
		RegistryPath: messages.Registry, OutboxPath: messages.Outbox, DomainGatePath: gate,
		PassPaths: []messages.Address{messages.Reconciler, messages.Reclaimer, messages.Netpool, messages.Reaper, messages.ImageGC},
		Reads:     debugReads{store: w.d.store, diag: w.d.diag}, Now: w.now})
}
