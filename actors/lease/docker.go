package lease

// The lease's Docker ports: each the few Engine API calls one part of a
// lease's Docker work makes (dockerio/engine implements them all, and so does
// the in-memory fake). Docker holds the three; a job calls them by name.

import (
	"context"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Images resolves a release's images and what its launch needs of them.
type Images interface {
	// ResolveImage resolves ref through its registry to a digest, fetches that
	// exact content when it is not present, inspects and admits it. When the
	// registry cannot confirm the tag, it fails with ErrImagePull: a locally
	// cached copy of a mutable tag is never launched.
	ResolveImage(ctx context.Context, ref string) (dockerio.ImageInfo, error)
	// PinnedImage admits the exact recorded content: the local image with
	// pin.ID, else pin.Digest fetched and checked to be pin.ID. Never the tag.
	PinnedImage(ctx context.Context, pin messages.ImagePin) (dockerio.ImageInfo, error)
	// ImageUser resolves a manifest's user override to the uid:gid a container
	// of image imageID runs as (names through the image's own /etc/passwd), so
	// a stateful volume's mount points belong to whoever will write them.
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

// OwnNetworks makes the network a lease's first attempt launches on when the
// pool had none for it: its own, or a pool network it then binds.
type OwnNetworks interface {
	EnsureNetwork(ctx context.Context, spec dockerio.NetworkSpec) (string, error)
	// CreatePoolNetwork creates one warm-pool network, berth-pool-<random>,
	// labelled ours with fred.network_scope=pool and no lease.
	CreatePoolNetwork(ctx context.Context) (dockerio.Network, error)
}

// Containers launches, observes and removes a lease's containers.
type Containers interface {
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
// Docker{Images: e, OwnNetworks: e, Containers: e}).
type Docker struct {
	Images
	OwnNetworks
	Containers
}
