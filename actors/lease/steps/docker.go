// Package steps is a lease's Docker work as named steps, each where it meets
// Docker: images, network, writable paths, volumes, compose, verify and capture
// (Up, and an idempotent Down where the step made something of the lease's
// own). A lease's worker orders them into its provision,
// resume, replace, teardown and failed-cleanup (actors/lease/worker.go), as
// Nomad's allocrunner orders its hooks. A step says what failed once: a definite
// failure is a *Failed carrying the lease's failure reason and the tenant-safe
// message; any other error left nothing definite to say.
package steps

// The ports: each the few Engine API calls a step makes (dockerio/engine
// implements them all, and so does the in-memory fake). Docker holds the three.

import (
	"context"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// ImagesAPI resolves a release's images and what its launch needs of them.
type ImagesAPI interface {
	// AdmitImage resolves ref through its registry to a digest, fetches that
	// exact content when it is not present, inspects and admits its metadata.
	// When the registry cannot confirm the tag, it fails with ErrImagePull: a
	// locally cached copy of a mutable tag is never launched. The image's user
	// is not resolved (ImageUser does, through a helper): nothing of the image
	// is created before the lease's mount budget is decided.
	AdmitImage(ctx context.Context, ref string) (dockerio.ImageInfo, error)
	// AdmitPinned admits the exact recorded content: the local image with
	// pin.ID, else pin.Digest fetched and checked to be pin.ID. Never the tag.
	// The user is not resolved, as with AdmitImage.
	AdmitPinned(ctx context.Context, pin messages.ImagePin) (dockerio.ImageInfo, error)
	// ImageUser resolves an image's USER or a manifest's user override to the
	// uid:gid a container of image imageID runs as (names through the image's
	// own /etc/passwd), so a stateful volume's mount points belong to whoever
	// will write them.
	ImageUser(ctx context.Context, imageID, user string) (uid, gid int, err error)
	// DetectWritablePaths finds the directories a container of q.ImageID writes
	// at start outside its VOLUMEs. The image's scan is cached by image ID. An
	// error means the detection could not be made (the launch goes on without
	// writable paths, degraded), never that the image is refused.
	DetectWritablePaths(ctx context.Context, q dockerio.WritableQuery) (dockerio.Writable, error)
	// SeedWritablePaths replaces the _wp tree of each of req.Dirs with a copy of
	// the image's content of req.Paths, confined to that tree and capped by
	// req.MaxEntries and req.MaxBytes. An error leaves a dir's previous _wp
	// tree in place; the caller mounts tmpfs instead (degraded).
	SeedWritablePaths(ctx context.Context, req dockerio.SeedRequest) error
}

// NetworksAPI makes the network a lease's first attempt launches on when the
// pool had none for it: its own, or a pool network it then binds.
type NetworksAPI interface {
	EnsureNetwork(ctx context.Context, spec dockerio.NetworkSpec) (string, error)
	// CreatePoolNetwork creates one warm-pool network, berth-pool-<random>,
	// labelled ours with fred.network_scope=pool and no lease.
	CreatePoolNetwork(ctx context.Context) (dockerio.Network, error)
}

// ContainersAPI launches, observes and removes a lease's containers.
type ContainersAPI interface {
	// Launch runs the plan as the lease's Compose project, then reports the
	// cohort it launched from the listing the launch made anyway. A pooled plan
	// whose network is gone fails with ErrPoolNetworkGone, nothing created; a
	// container of the project that is not this installation's fails it with
	// ErrForeignObject.
	Launch(ctx context.Context, plan dockerio.Plan) ([]messages.Container, error)
	Cohort(ctx context.Context, lease string) ([]messages.Container, error)
	Inspect(ctx context.Context, id string) (messages.Container, error)
	Logs(ctx context.Context, id string, tail int, maxBytes int) (string, bool, error)
	Down(ctx context.Context, lease string, opts dockerio.DownOptions) error
	// StopRemove is the gentle removal: re-inspect the exact ID, require this
	// installation's label, stop it within stopTimeout, remove it with
	// Force=false and RemoveVolumes=false. An absent container is success.
	StopRemove(ctx context.Context, id string, stopTimeout time.Duration) error
	// RemoveContainers force-removes this installation's containers by exact ID
	// (a close's stragglers); an absent one is success, a foreign one is refused.
	RemoveContainers(ctx context.Context, ids []string) error
	ListManaged(ctx context.Context) ([]messages.Container, error)
}

// Docker is the lease's three ports (one engine implements all three:
// Docker{ImagesAPI: e, NetworksAPI: e, ContainersAPI: e}).
type Docker struct {
	ImagesAPI
	NetworksAPI
	ContainersAPI
}

// NetworkPool hands a lease a pre-created network (actors/netpool).
type NetworkPool interface {
	// Claim returns the pool network bound to lease (its ID, and its name
	// when the pool knows it), or the default bridge (Bridged) when the lease
	// is bound to it; with bind, a free one is bound when it holds none — the
	// bridge when single (the release runs one container) and the pool offers
	// it. ID "" when there is none to give.
	Claim(ctx context.Context, lease string, bind, single bool) (dockerio.Network, error)
	// Bind binds a pool network the lease's first attempt created because
	// none was free; it answers the network the lease holds (ID "" when the
	// pool would not bind it: the lease uses its own network).
	Bind(ctx context.Context, lease string, made dockerio.Network) (dockerio.Network, error)
	// Drop forgets a bound network the lease found gone or no longer ours
	// ("": whatever a first attempt's unanswered claim bound, unused).
	Drop(lease, id string)
}
