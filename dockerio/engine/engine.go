// Package engine is berth's real Docker engine: the Docker Engine SDK for
// objects berth manages one by one (images, networks, volumes, containers, events,
// logs) and Compose v2 for launching and tearing down a lease's project. It talks
// to Docker Engine 20.10 (API 1.41) through API version negotiation and uses no
// endpoint newer than that.
package engine

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/compose/v2/pkg/compose"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"golang.org/x/sync/singleflight"

	"github.com/berth-dev/berth/dockerio"
)

// Options configure an Engine.
type Options struct {
	Host        string // docker_host, e.g. "unix:///var/run/docker.sock"; "" = client.FromEnv
	BackendName string // "docker": fred.backend_name on everything we create
	// InstallationID scopes every call: only objects labelled
	// fred.installation_id=<InstallationID>, and the Adopted ones, are listed,
	// attributed, changed or removed.
	InstallationID string
	// Adopted is the closed allow-list of fred v0.13's containers and networks
	// (exact IDs) a takeover's adoption recorded: each is owned as this
	// installation's while its labels still say what they said when adopted
	// (dockerio.Adopted). nil: none, and nothing is asked of Docker for them.
	Adopted     *dockerio.Adopted
	PullTimeout time.Duration // image_pull_timeout: bounds ResolveImage and PinnedImage on top of ctx (default 5m)
	// CreateTimeout and StartTimeout bound each POST /containers/create and
	// /containers/{id}/start (compose's included) unless the caller's context
	// ends earlier: container_create_timeout, container_start_timeout (default 30s).
	CreateTimeout time.Duration
	StartTimeout  time.Duration
	// MaxInFlight bounds the requests in flight at once, long streams (events,
	// logs, pulls) aside; 0 = unlimited.
	MaxInFlight int
	// MaxStartsInFlight bounds container starts in flight at once, first come
	// first served (0: unlimited). dockerd shares its start path among all it
	// is given: a hundred at once all finish near the end of the burst, while a
	// few at a time finish one after another at the same throughput.
	MaxStartsInFlight int
	// Contract, when set, is the runtime contract every launch creates its
	// containers under (a test hook: leases from before a contract bump).
	Contract int
	// Registerer receives berth_docker_requests_total{op}; nil = counted, not registered.
	Registerer prometheus.Registerer
	Logger     zerolog.Logger
}

// Engine is the Docker + Compose adapter. Safe for concurrent use.
type Engine struct {
	docker    *client.Client
	base      *http.Transport // the client's own transport, under boundedTransport
	requests  *prometheus.CounterVec
	durations *prometheus.HistogramVec
	busy      *atomic.Int64  // requests in flight, streams and other unbounded ops aside
	refusals  *startRefusals // starts the daemon refused (startrefusals.go)
	compose   api.Compose
	opts      Options
	log       zerolog.Logger
	// incarnation is random per Engine: helpers carry it, so a sweep knows a
	// dead daemon's helper (one berthd per installation: the state dir's lock).
	incarnation string

	netLocks leaseLocks            // serialises EnsureNetwork per lease (Docker allows duplicate names)
	users    boundedCache[userIDs] // image ID + user → numeric uid/gid (imageuser.go)
	images   *imageCache           // image inspect answers by content ID (launchfacts.go)

	resolving singleflight.Group      // tag → its registry's digest, one round trip for concurrent callers
	scans     boundedCache[imageScan] // image ID → what it holds under the writable-path parents (writable.go)
	scanning  singleflight.Group      // image ID → one helper for concurrent scans
	infos     singleflight.Group      // one `docker info` for concurrent callers (info, below)
	seeds     boundedCache[[]byte]    // image ID + "\x00" + writable path → its archive (seed.go)

	composeMu    sync.Mutex
	composeReady bool // compose's process-wide API-version cache holds a good value

	dataRoot atomic.Pointer[string]               // docker info's DockerRootDir, once asked (imagestore.go)
	pulled   atomic.Pointer[func(id, ref string)] // told of every image pulled (OnPulled)
}

// pinnedAPIVersion is Docker Engine 20.10's API, used when negotiation cannot run.
const pinnedAPIVersion = "1.41"

// defaultPullTimeout applies when Options.PullTimeout is zero (config default 5m).
const defaultPullTimeout = 5 * time.Minute

// New builds an Engine, negotiating the API version with the engine when it
// answers within a few seconds.
func New(opts Options) (*Engine, error) {
	if opts.InstallationID == "" {
		return nil, fmt.Errorf("docker engine: an installation ID is required (every object berth touches carries it)")
	}
	if opts.PullTimeout <= 0 {
		opts.PullTimeout = defaultPullTimeout
	}
	if opts.CreateTimeout <= 0 {
		opts.CreateTimeout = defaultCallTimeout
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = defaultCallTimeout
	}
	if opts.BackendName == "" {
		opts.BackendName = "docker"
	}
	requests, err := newRequestCounter(opts.Registerer)
	if err != nil {
		return nil, err
	}
	durations, err := newRequestDurations(opts.Registerer)
	if err != nil {
		return nil, err
	}
	busy, refusals := new(atomic.Int64), &startRefusals{}
	var base *http.Transport
	bounded := withBoundedTransport(boundedTransport{requests: requests, durations: durations, create: opts.CreateTimeout, start: opts.StartTimeout,
		busy: busy, slots: semaphore(opts.MaxInFlight), starts: semaphore(opts.MaxStartsInFlight), refusals: refusals}, &base)
	docker, err := dockerClient(opts, bounded, &base)
	if err != nil {
		return nil, err
	}
	images := &imageCache{}
	cli, err := newComposeCLI(&composeAPI{APIClient: docker, images: images})
	if err != nil {
		_ = docker.Close()
		return nil, fmt.Errorf("compose cli: %w", err)
	}
	routeComposeLogs(opts.Logger)
	e := &Engine{
		docker:   docker,
		base:     base,
		requests: requests, durations: durations,
		busy: busy, refusals: refusals,
		// The prompt is only asked about destructive changes (e.g. recreating a
		// diverged volume); berth never agrees to them unattended.
		compose: compose.NewComposeService(cli, compose.WithPrompt(func(string, bool) (bool, error) { return false, nil })),
		opts:    opts,
		log:     opts.Logger.With().Str("component", "dockerio").Logger(),
		images:  images,
		users:   boundedCache[userIDs]{max: maxUserCache},
		scans:   boundedCache[imageScan]{max: maxScanCache},
		seeds:   boundedCache[[]byte]{max: maxSeedCache},

		incarnation: newIncarnation(),
	}
	return e, nil
}

// dockerClient is the SDK client over bounded. It negotiates the API version
// now, once: the SDK's lazy negotiation writes the client's version while
// concurrent calls read it (a data race under -race). When the engine is not
// reachable yet, it pins the API version the engine we target speaks instead.
func dockerClient(opts Options, bounded client.Opt, base **http.Transport) (*client.Client, error) {
	clientOpts := []client.Opt{client.WithAPIVersionNegotiation()}
	if opts.Host == "" {
		clientOpts = append([]client.Opt{client.FromEnv}, clientOpts...)
	} else {
		clientOpts = append(clientOpts, client.WithHost(opts.Host))
	}
	docker, err := client.NewClientWithOpts(append(clientOpts, bounded)...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %q: %w", opts.Host, err)
	}
	pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
	ping, perr := docker.Ping(pctx)
	pcancel()
	if perr == nil {
		docker.NegotiateAPIVersionPing(ping)
		return docker, nil
	}
	_ = docker.Close()
	if *base != nil {
		(*base).CloseIdleConnections()
	}
	pinned := append(clientOpts[:len(clientOpts):len(clientOpts)], client.WithVersion(pinnedAPIVersion), bounded)
	if docker, err = client.NewClientWithOpts(pinned...); err != nil {
		return nil, fmt.Errorf("docker client for %q: %w", opts.Host, err)
	}
	opts.Logger.Warn().Err(perr).Str("api_version", pinnedAPIVersion).Msg("docker not reachable at start; API version pinned")
	return docker, nil
}

// Close releases the Docker client's connections.
func (e *Engine) Close() error {
	err := e.docker.Close()
	if e.base != nil { // the SDK cannot see it under our RoundTripper
		e.base.CloseIdleConnections()
	}
	return err
}

// Ping checks the engine answers.
func (e *Engine) Ping(ctx context.Context) error {
	if _, err := e.docker.Ping(ctx); err != nil {
		return dockerErr("ping docker", err)
	}
	return nil
}

// dockerErr wraps err with op, and an engine that did not answer with
// dockerio.ErrUnavailable; Docker's answers carry their errdefs class already
// (cerrdefs.IsNotFound…), and the cause stays visible in logs.
func dockerErr(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case client.IsErrConnectionFailed(err):
		return fmt.Errorf("%s: %w: %w", op, dockerio.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isNotFound reports a Docker "no such object" answer.
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }

// isConflict reports a Docker "already exists" answer.
func isConflict(err error) bool { return cerrdefs.IsConflict(err) }

// leaseLocks hands out one mutex per lease and forgets it when nobody holds it.
type leaseLocks struct {
	mu    sync.Mutex
	locks map[string]*leaseLock
}

type leaseLock struct {
	mu   sync.Mutex
	refs int
}

// lock blocks until the lease's mutex is held (or ctx ends) and returns its unlock.
func (l *leaseLocks) lock(ctx context.Context, lease string) (func(), error) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = make(map[string]*leaseLock)
	}
	ll := l.locks[lease]
	if ll == nil {
		ll = &leaseLock{}
		l.locks[lease] = ll
	}
	ll.refs++
	l.mu.Unlock()

	release := func() {
		l.mu.Lock()
		ll.refs--
		if ll.refs == 0 {
			delete(l.locks, lease)
		}
		l.mu.Unlock()
	}
	acquired := make(chan struct{})
	go func() {
		ll.mu.Lock()
		close(acquired)
	}()
	select {
	case <-acquired:
		return func() { ll.mu.Unlock(); release() }, nil
	case <-ctx.Done():
		// The goroutine still takes the mutex eventually; hand it straight back.
		go func() { <-acquired; ll.mu.Unlock(); release() }()
		return nil, ctx.Err()
	}
}

// trimID shortens an ID for messages.
func trimID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// InFlight is how many Engine API requests berthd is waiting on now (event and
// log streams, pulls, registry look-ups and stops aside): background upkeep
// waits for zero instead of competing with a burst of provisions.
func (e *Engine) InFlight() int { return int(e.busy.Load()) }

// info is the daemon's `docker info`, one request for concurrent callers:
// startup's checks (seccomp, the bridge, the address pools) read it at once,
// and with a thousand containers each answer costs dockerd 0.1–0.3 s.
func (e *Engine) info(ctx context.Context) (system.Info, error) {
	v, err, _ := e.infos.Do("info", func() (any, error) { return e.docker.Info(ctx) })
	if err != nil {
		return system.Info{}, dockerErr("docker info", err)
	}
	info := v.(system.Info)
	if info.DockerRootDir != "" {
		e.dataRoot.Store(&info.DockerRootDir) // the image collector's statfs needs no second docker info
	}
	return info, nil
}
