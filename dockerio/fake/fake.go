// Package fake is an in-memory dockerio.Engine for unit tests of actor logic. It
// keeps the real engine's semantics where actors can observe them: the same
// fred.* labels (built by dockerio/engine/labels, shared with the real engine),
// the same Compose key attribution, ownership checks on lease networks,
// idempotent teardown, start/kill/die/oom events, bounded log reads. Every
// behaviour a user relies on is also proven against real Docker in
// dockerio/engine; this fake only makes actor tests fast and deterministic.
// Safe for concurrent use.
package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
)

// Op names an Engine method, for Delay and Calls.
type Op string

// The operations of dockerio.Engine.
const (
	OpPing             Op = "ping"
	OpPullImage        Op = "pull_image"
	OpInspectImage     Op = "inspect_image"
	OpEnsureNetwork    Op = "ensure_network"
	OpInspectNetwork   Op = "inspect_network"
	OpLeaseNetworks    Op = "lease_networks"
	OpRemoveNetwork    Op = "remove_network"
	OpUp               Op = "up"
	OpCohort           Op = "cohort"
	OpInspect          Op = "inspect"
	OpDown             Op = "down"
	OpRemoveContainers Op = "remove_containers"
	OpStopRemove       Op = "stop_remove"
	OpListManaged      Op = "list_managed"
	OpLogs             Op = "logs"
	OpEvents           Op = "events"
)

// Options tune the fake.
type Options struct {
	// HealthyAfter is how long a container with an active health check reports
	// "starting" before it turns "healthy" (unless SetHealth or PinHealth said
	// otherwise). Zero means 20 ms.
	HealthyAfter time.Duration
	// Now is the clock for timestamps; nil means time.Now.
	Now func() time.Time
	// InstallationID is the installation the fake engine acts for: only objects
	// labelled with it are listed, streamed or removed (see dockerio.Engine).
	InstallationID string
}

// Engine is the in-memory fake. The zero value is not usable; call New.
type Engine struct {
	mu          sync.Mutex
	opts        Options
	images      map[string]dockerio.ImageInfo // by reference as added
	networks    map[string]*fakeNetwork       // by ID
	containers  map[string]*fakeContainer     // by ID
	volumes     map[string]map[string]string  // name → labels
	pinned      map[string]string             // lease/service → health for future containers
	delays      map[Op]time.Duration
	calls       map[Op]int
	failNextUp  error
	unavailable bool
	subs        map[*subscriber]struct{}
	nextPort    int
	seq         int64
}

var _ dockerio.Engine = (*Engine)(nil)

// New returns an empty fake engine.
func New(opts Options) *Engine {
	if opts.HealthyAfter <= 0 {
		opts.HealthyAfter = 20 * time.Millisecond
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Engine{
		opts:       opts,
		images:     map[string]dockerio.ImageInfo{},
		networks:   map[string]*fakeNetwork{},
		containers: map[string]*fakeContainer{},
		volumes:    map[string]map[string]string{},
		pinned:     map[string]string{},
		delays:     map[Op]time.Duration{},
		calls:      map[Op]int{},
		subs:       map[*subscriber]struct{}{},
		nextPort:   32768,
	}
}

// --- test controls --------------------------------------------------------

// AddImage makes ref pullable and inspectable. An empty info.ID gets a random
// sha256 ID. Returns the stored info.
func (e *Engine) AddImage(ref string, info dockerio.ImageInfo) dockerio.ImageInfo {
	if info.ID == "" {
		info.ID = "sha256:" + randomHex(32)
	}
	info.Volumes = append([]string(nil), info.Volumes...)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.images[ref] = info
	return info
}

// RemoveImage makes ref missing again (PullImage → ErrImagePull).
func (e *Engine) RemoveImage(ref string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.images, ref)
}

// AddForeignNetwork creates an unlabelled network named name (e.g. fred-<lease>,
// to make that lease's EnsureNetwork fail) and returns its ID.
func (e *Engine) AddForeignNetwork(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.createNetworkLocked(name, map[string]string{})
}

// FailNextUp makes the next Up return err (wrapped) without creating anything.
func (e *Engine) FailNextUp(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.failNextUp = err
}

// Delay makes every later call of op wait d (or until its ctx ends) first.
func (e *Engine) Delay(op Op, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.delays[op] = d
}

// SetUnavailable makes every call fail with dockerio.ErrUnavailable (true) or
// work again (false); open event streams end with ErrUnavailable.
func (e *Engine) SetUnavailable(down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.unavailable = down
	if down {
		e.endStreamsLocked(fmt.Errorf("docker event stream: %w", dockerio.ErrUnavailable))
	}
}

// BreakEvents ends every open event stream with err, as a dropped connection would.
func (e *Engine) BreakEvents(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endStreamsLocked(err)
}

// Calls reports how many times op was called.
func (e *Engine) Calls(op Op) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[op]
}

// Volumes lists the managed named volumes (stateful instances) by name.
func (e *Engine) Volumes() map[string]map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]map[string]string, len(e.volumes))
	for name, l := range e.volumes {
		out[name] = copyMap(l)
	}
	return out
}

// enter accounts a call of op, applies its delay and the unavailable switch.
func (e *Engine) enter(ctx context.Context, op Op) error {
	e.mu.Lock()
	e.calls[op]++
	d := e.delays[op]
	e.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	down := e.unavailable
	e.mu.Unlock()
	if down {
		return fmt.Errorf("%s: %w", op, dockerio.ErrUnavailable)
	}
	return nil
}

func (e *Engine) now() time.Time { return e.opts.Now() }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// --- images ---------------------------------------------------------------

// ResolveImage admits an added image (by reference), else wraps dockerio.ErrImagePull.
func (e *Engine) ResolveImage(ctx context.Context, ref string) (dockerio.ImageInfo, error) {
	if err := e.PullImage(ctx, ref); err != nil {
		return dockerio.ImageInfo{}, err
	}
	return e.InspectImage(ctx, ref)
}

// PinnedImage admits an added image by its recorded ID.
func (e *Engine) PinnedImage(ctx context.Context, pin dockerio.ImagePin) (dockerio.ImageInfo, error) {
	info, err := e.InspectImage(ctx, pin.ID)
	if err != nil {
		return dockerio.ImageInfo{}, fmt.Errorf("pinned image %s: %w: %w", pin.ID, dockerio.ErrImagePull, err)
	}
	return info, nil
}

// PullImage succeeds for an added image, else wraps dockerio.ErrImagePull.
func (e *Engine) PullImage(ctx context.Context, ref string) error {
	if err := e.enter(ctx, OpPullImage); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.imageLocked(ref); !ok {
		return fmt.Errorf("pull %s: %w: manifest unknown", ref, dockerio.ErrImagePull)
	}
	return nil
}

// imageLocked finds an added image by its reference or, like Docker, by its ID.
func (e *Engine) imageLocked(ref string) (dockerio.ImageInfo, bool) {
	if info, ok := e.images[ref]; ok {
		return info, true
	}
	for _, info := range e.images {
		if info.ID == ref {
			return info, true
		}
	}
	return dockerio.ImageInfo{}, false
}

// InspectImage reports an added image; dockerio.ErrNotFound otherwise.
func (e *Engine) InspectImage(ctx context.Context, ref string) (dockerio.ImageInfo, error) {
	if err := e.enter(ctx, OpInspectImage); err != nil {
		return dockerio.ImageInfo{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	info, ok := e.imageLocked(ref)
	if !ok {
		return dockerio.ImageInfo{}, fmt.Errorf("inspect image %s: %w", ref, dockerio.ErrNotFound)
	}
	if len(info.Volumes) > labels.MaxImageVolumes {
		return dockerio.ImageInfo{}, fmt.Errorf("inspect image %s: %w: it declares %d VOLUMEs, at most %d are supported",
			ref, dockerio.ErrImagePull, len(info.Volumes), labels.MaxImageVolumes)
	}
	info.Volumes = append([]string(nil), info.Volumes...)
	return info, nil
}

// Ping fails only while unavailable.
func (e *Engine) Ping(ctx context.Context) error {
	return e.enter(ctx, OpPing)
}
