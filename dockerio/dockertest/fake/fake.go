// Package fake is an in-memory Docker engine for unit tests of actor logic. It
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containerd/errdefs"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/policy"
)

// Op names an Engine method, for Delay and Calls.
type Op string

// The operations of dockerio.Engine.
const (
	OpPing         Op = "ping"
	OpResolveImage Op = "resolve_image"
	OpPinnedImage  Op = "pinned_image"
	OpImageUser    Op = "image_user"
	// OpPullImage is the old name of OpResolveImage, kept so tests counting
	// image resolutions under it keep compiling.
	//
	// Deprecated: use OpResolveImage (and OpPinnedImage).
	OpPullImage Op = OpResolveImage
	// OpInspectImage counts InspectImage, a test control (not an Engine method).
	OpInspectImage      Op = "inspect_image"
	OpEnsureNetwork     Op = "ensure_network"
	OpInspectNetwork    Op = "inspect_network"
	OpLeaseNetworks     Op = "lease_networks"
	OpRemoveNetwork     Op = "remove_network"
	OpCreatePool        Op = "create_pool_network"
	OpPoolNetworks      Op = "pool_networks"
	OpUp                Op = "up"
	OpCohort            Op = "cohort"
	OpLaunched          Op = "launched"
	OpInspect           Op = "inspect"
	OpDown              Op = "down"
	OpRemoveContainers  Op = "remove_containers"
	OpStopRemove        Op = "stop_remove"
	OpListManaged       Op = "list_managed"
	OpLogs              Op = "logs"
	OpEvents            Op = "events"
	OpDetectWritable    Op = "detect_writable_paths"
	OpSeedWritable      Op = "seed_writable_paths"
	OpSeccompEnabled    Op = "seccomp_enabled"
	OpSweepHelpers      Op = "sweep_helpers"
	OpGuardIsolation    Op = "guard_isolation"
	OpDefaultBridge     Op = "default_bridge"
	OpUnadoptedFredV013 Op = "unadopted_fred_v013"
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
	// BackendName is fred.backend_name on the pool networks it creates; "" means "docker".
	BackendName string
	// Contract, when set, is the runtime contract every Up creates under.
	Contract int
}

func (e *Engine) backendName() string {
	if e.opts.BackendName == "" {
		return "docker"
	}
	return e.opts.BackendName
}

// Engine is the in-memory fake. The zero value is not usable; call New.
type Engine struct {
	mu          sync.Mutex
	opts        Options
	local       map[string]*fakeImage     // images present "locally", by ID
	tags        map[string]string         // the registry's tags: reference as added → repo@sha256 digest
	blobs       map[string]*fakeImage     // the registry's content, by repo@sha256 digest
	down        map[string]bool           // repositories whose registry cannot be reached
	networks    map[string]*fakeNetwork   // by ID
	containers  map[string]*fakeContainer // by ID
	pinned      map[string]string         // lease/service → health for future containers
	delays      map[Op]time.Duration
	calls       map[Op]int
	failNextUp  error
	refuseStart error // the next Up creates its containers, starts none and returns this
	unavailable bool
	writable    map[string]writableAnswer // image ID → what detection and seeding answer (writable.go)
	seeded      []dockerio.SeedRequest
	noSeccomp   bool
	guardGone   bool                 // the next GuardIsolation reinstalls (RemoveGuard)
	bridge      dockerio.BridgeFacts // what DefaultBridge answers (networks.go)
	subs        map[*subscriber]struct{}
	nextPort    int
	seq         int64

	// Indexes of containers and networks by what the engine looks them up by,
	// so a call about one lease costs the same with ten thousand others held
	// (the scale benchmark); labels never change once an object exists.
	byProject map[string]map[string]*fakeContainer // Compose project label → ID → container
	byLease   map[string]map[string]*fakeContainer // fred.lease_uuid label → ID → container
	byNetwork map[string]map[string]*fakeContainer // network ID → ID → container
	netByName map[string]map[string]*fakeNetwork   // network name → ID → network
}

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
		local:      map[string]*fakeImage{},
		tags:       map[string]string{},
		blobs:      map[string]*fakeImage{},
		down:       map[string]bool{},
		networks:   map[string]*fakeNetwork{},
		containers: map[string]*fakeContainer{},
		byProject:  map[string]map[string]*fakeContainer{},
		byLease:    map[string]map[string]*fakeContainer{},
		byNetwork:  map[string]map[string]*fakeContainer{},
		netByName:  map[string]map[string]*fakeNetwork{},
		pinned:     map[string]string{},
		delays:     map[Op]time.Duration{},
		calls:      map[Op]int{},
		subs:       map[*subscriber]struct{}{},
		writable:   map[string]writableAnswer{},
		nextPort:   32768,
		bridge:     dockerio.BridgeFacts{ID: randomHex(32), Subnet: "10.200.0.0/20", Isolated: true, Capacity: 4000},
	}
}

// --- test controls --------------------------------------------------------

// AddImage pushes an image to the fake registry under ref (a tag, or a
// repo@sha256 digest): an empty info.ID gets a random sha256 ID, an empty
// info.Digest a random repo@sha256 digest. ResolveImage of ref then fetches and
// admits it. Adding another image under a tag already added moves the tag, as a
// re-push does: the old content stays fetchable by its digest (and present once
// fetched), so a PinnedImage of it still works. Returns the stored info, with
// MaskLabels empty (AddLabelledImage gives an image labels).
//
// info.UID and info.GID are what the image's user runs as, as the real engine
// reads them from the image's /etc/passwd and /etc/group: set them for a named
// User. A numeric User ("1000" or "1000:1000") fills those parts itself when
// they are left 0; an empty User is root, 0/0.
func (e *Engine) AddImage(ref string, info dockerio.ImageInfo) dockerio.ImageInfo {
	return e.AddLabelledImage(ref, info, nil)
}

// AddLabelledImage is AddImage of an image carrying labels (admitted, and masked
// when reserved, like a real image's).
func (e *Engine) AddLabelledImage(ref string, info dockerio.ImageInfo, imageLabels map[string]string) dockerio.ImageInfo {
	if info.ID == "" {
		info.ID = "sha256:" + randomHex(32)
	}
	if info.Digest == "" {
		info.Digest = repository(ref) + "@sha256:" + randomHex(32)
	}
	info.Volumes = append([]string(nil), info.Volumes...)
	info.MaskLabels = policy.MaskLabels(imageLabels)
	if u, err := policy.ParseUser(info.User); err == nil {
		if u.UID >= 0 && info.UID == 0 {
			info.UID = u.UID
		}
		if u.GID >= 0 && info.GID == 0 {
			info.GID = u.GID
		}
	}
	img := &fakeImage{info: info, labels: copyMap(imageLabels)}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.blobs[info.Digest] = img
	if !strings.Contains(ref, "@") {
		e.tags[ref] = info.Digest
	}
	return img.snapshot()
}

// MoveTag points ref at new content (AddImage under a tag already added).
func (e *Engine) MoveTag(ref string, info dockerio.ImageInfo) dockerio.ImageInfo {
	return e.AddImage(ref, info)
}

// RemoveImage withdraws the tag ref from the registry (ResolveImage → ErrImagePull,
// "manifest unknown"); content already fetched stays present.
func (e *Engine) RemoveImage(ref string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.tags, ref)
}

// RemoveLocalImage drops the local copy of image id, as docker rmi would: a
// PinnedImage of it must fetch its digest again.
func (e *Engine) RemoveLocalImage(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.local, id)
}

// SetRegistryDown makes the registry of ref's repository unreachable (true) or
// reachable again (false): resolving a tag or fetching a digest of that
// repository fails with dockerio.ErrImagePull, while content already present
// by digest or ID is still served.
func (e *Engine) SetRegistryDown(ref string, down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if down {
		e.down[repository(ref)] = true
	} else {
		delete(e.down, repository(ref))
	}
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

// RefuseNextStart makes the next Up create its containers, start none and return
// err (wrapped): Docker's definite refusal, the containers left created.
func (e *Engine) RefuseNextStart(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refuseStart = err
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

// inspect is an inspect call of op: the object of kind whose ID is id in
// objects (a map New made, never replaced), as view shows it under the lock;
// errdefs.ErrNotFound when absent.
func inspect[T, V any](ctx context.Context, e *Engine, op Op, kind, id string, objects map[string]T, view func(T) V) (V, error) {
	var zero V
	if err := e.enter(ctx, op); err != nil {
		return zero, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	o, ok := objects[id]
	if !ok {
		return zero, fmt.Errorf("inspect %s %s: %w", kind, id, errdefs.ErrNotFound)
	}
	return view(o), nil
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

func copyMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// --- images ---------------------------------------------------------------

type fakeImage struct {
	info   dockerio.ImageInfo // ID, Digest, declared Volumes, User, MaskLabels
	labels map[string]string
}

func (i *fakeImage) snapshot() dockerio.ImageInfo {
	out := i.info
	out.Volumes = append([]string(nil), i.info.Volumes...)
	out.MaskLabels = append([]string(nil), i.info.MaskLabels...)
	return out
}

// repository is ref without its tag or digest.
func repository(ref string) string {
	name, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name
}

// isImageID reports a content ID ("sha256:<64 hex>"), not a reference.
func isImageID(ref string) bool {
	h, ok := strings.CutPrefix(ref, "sha256:")
	return ok && len(h) == 64 && strings.Trim(h, "0123456789abcdef") == ""
}

// ResolveImage mirrors the real engine: a tag is resolved through the fake
// registry (never from what is present locally), a digest is served locally
// when present, else fetched; the content is admitted with the same rules.
func (e *Engine) ResolveImage(ctx context.Context, ref string) (dockerio.ImageInfo, error) {
	if err := e.enter(ctx, OpResolveImage); err != nil {
		return dockerio.ImageInfo{}, err
	}
	if isImageID(ref) {
		return dockerio.ImageInfo{}, fmt.Errorf("resolve image %s: %w: an image ID is not a registry reference", ref, dockerio.ErrImagePull)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	pinned := ref
	if !strings.Contains(ref, "@") {
		if e.down[repository(ref)] {
			return dockerio.ImageInfo{}, fmt.Errorf("resolve %s through its registry: %w: connection refused", ref, dockerio.ErrImagePull)
		}
		d, ok := e.tags[ref]
		if !ok {
			return dockerio.ImageInfo{}, fmt.Errorf("resolve %s through its registry: %w: manifest unknown", ref, dockerio.ErrImagePull)
		}
		pinned = d
	}
	img, err := e.presentLocked(pinned)
	if err != nil {
		return dockerio.ImageInfo{}, err
	}
	return admitted(img, pinned)
}

// AdmitImage is ResolveImage: the fake resolves no user through a helper
// (an image's UID and GID are what it was added with).
func (e *Engine) AdmitImage(ctx context.Context, ref string) (dockerio.ImageInfo, error) {
	return e.ResolveImage(ctx, ref)
}

// AdmitPinned is PinnedImage, as AdmitImage is ResolveImage.
func (e *Engine) AdmitPinned(ctx context.Context, pin messages.ImagePin) (dockerio.ImageInfo, error) {
	return e.PinnedImage(ctx, pin)
}

// PinnedImage mirrors the real engine: the local image with exactly pin.ID, else
// pin.Digest fetched and required to be pin.ID. Never the tag.
func (e *Engine) PinnedImage(ctx context.Context, pin messages.ImagePin) (dockerio.ImageInfo, error) {
	if err := e.enter(ctx, OpPinnedImage); err != nil {
		return dockerio.ImageInfo{}, err
	}
	if !isImageID(pin.ID) {
		return dockerio.ImageInfo{}, fmt.Errorf("pinned image %q: %w: the pin has no image ID", pin.Ref, dockerio.ErrImagePull)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if img, ok := e.local[pin.ID]; ok {
		return admitted(img, pin.Digest)
	}
	if pin.Digest == "" {
		return dockerio.ImageInfo{}, fmt.Errorf("pinned image %s: %w: not present and no digest recorded to fetch it by", pin.ID, dockerio.ErrImagePull)
	}
	img, err := e.presentLocked(pin.Digest)
	if err != nil {
		return dockerio.ImageInfo{}, err
	}
	if img.info.ID != pin.ID {
		return dockerio.ImageInfo{}, fmt.Errorf("pinned image %s: %w: %s is image %s, not the recorded one", pin.ID, dockerio.ErrImagePull, pin.Digest, img.info.ID)
	}
	return admitted(img, pin.Digest)
}

// presentLocked returns the content of repo@digest, present locally or fetched.
func (e *Engine) presentLocked(pinned string) (*fakeImage, error) {
	for _, img := range e.local {
		if img.info.Digest == pinned {
			return img, nil
		}
	}
	if e.down[repository(pinned)] {
		return nil, fmt.Errorf("pull %s: %w: connection refused", pinned, dockerio.ErrImagePull)
	}
	img, ok := e.blobs[pinned]
	if !ok {
		return nil, fmt.Errorf("pull %s: %w: manifest unknown", pinned, dockerio.ErrImagePull)
	}
	e.local[img.info.ID] = img
	return img, nil
}

// admitted runs the real engine's metadata admission on an image.
func admitted(img *fakeImage, pinned string) (dockerio.ImageInfo, error) {
	a, err := policy.Admit(img.info.Volumes, img.labels)
	if err != nil {
		return dockerio.ImageInfo{}, fmt.Errorf("image %s (%s): %w", pinned, img.info.ID, err)
	}
	info := img.snapshot()
	info.Digest, info.Volumes, info.MaskLabels = pinned, a.Volumes, a.MaskLabels
	return info, nil
}

// InspectImage is a test control, not an Engine method: it reports the image a
// tag, digest or ID names in the fake registry or locally, unadmitted;
// errdefs.ErrNotFound otherwise.
func (e *Engine) InspectImage(ctx context.Context, ref string) (dockerio.ImageInfo, error) {
	if err := e.enter(ctx, OpInspectImage); err != nil {
		return dockerio.ImageInfo{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if img, ok := e.local[ref]; ok {
		return img.snapshot(), nil
	}
	d := ref
	if t, ok := e.tags[ref]; ok {
		d = t
	}
	if img, ok := e.blobs[d]; ok {
		return img.snapshot(), nil
	}
	for _, img := range e.blobs {
		if img.info.ID == ref {
			return img.snapshot(), nil
		}
	}
	return dockerio.ImageInfo{}, fmt.Errorf("inspect image %s: %w", ref, errdefs.ErrNotFound)
}

// installation is the installation a plan or spec acts for: the fake's own (an
// empty one means the fake's; another is refused, as by the real engine).
func (e *Engine) installation(asked string) (string, error) {
	if asked == "" || asked == e.opts.InstallationID {
		return e.opts.InstallationID, nil
	}
	return "", fmt.Errorf("asked to act for installation %q on the engine of installation %q", asked, e.opts.InstallationID)
}

// ours reports whether labels prove a managed object of this installation.
func (e *Engine) ours(l map[string]string) bool {
	return l[dockerio.LabelManaged] == "true" && l[dockerio.LabelInstallation] == e.opts.InstallationID
}

// Ping fails only while unavailable.
func (e *Engine) Ping(ctx context.Context) error {
	return e.enter(ctx, OpPing)
}

// ImageUser mirrors the real engine for what a fake image can answer: numeric
// "uid[:gid]" as is ("" is root), the image's own USER name as the UID/GID it
// was added with; any other name is not in the image's /etc/passwd.
func (e *Engine) ImageUser(ctx context.Context, imageID, user string) (int, int, error) {
	if err := e.enter(ctx, OpImageUser); err != nil {
		return 0, 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	img, ok := e.local[imageID]
	if !ok {
		return 0, 0, fmt.Errorf("image user: image %s: %w", imageID, errdefs.ErrNotFound)
	}
	return imageUser(img, user)
}

// imageUser is ImageUser of a present image.
func imageUser(img *fakeImage, user string) (int, int, error) {
	if user == "" {
		return 0, 0, nil
	}
	if user == img.info.User {
		return img.info.UID, img.info.GID, nil
	}
	name, group, _ := strings.Cut(user, ":")
	uid, err := strconv.Atoi(name)
	if err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("image user %q: %w: no such user in the image", user, dockerio.ErrImageNotAdmissible)
	}
	gid := 0
	if group != "" {
		if gid, err = strconv.Atoi(group); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("image user %q: %w: no such group in the image", user, dockerio.ErrImageNotAdmissible)
		}
	}
	return uid, gid, nil
}
