package engine

// What a launch already knows, answered without asking Docker again. Up verifies
// the lease network by its exact ID and lists the project's containers right
// before handing the project to Compose, and every image it runs was inspected by
// content ID when it was admitted. Compose then asks Docker the same questions
// (its external-network list and inspect, its image inspect, its first project
// listing) a few milliseconds later; composeAPI, the client compose runs on,
// answers them from the launch's facts instead. Everything else, and every
// question asked outside a launch, goes to Docker.

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/docker/compose/v2/pkg/api"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
)

// launchFacts is what Up established for one compose call.
type launchFacts struct {
	network network.Inspect     // the lease network, verified by ID (a pool network: known by ID)
	project string              // the Compose project name
	listing []container.Summary // every container of the project, any state
	used    atomic.Bool         // the listing answered compose's first look

	mu      sync.Mutex
	started []container.Summary // compose's listing of what it starts (after its creates)
	listed  bool
}

// startListing is what compose listed to start the project, if it did.
func (f *launchFacts) startListing() ([]container.Summary, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started, f.listed
}

type launchFactsKey struct{}

func withLaunchFacts(ctx context.Context, f *launchFacts) context.Context {
	return context.WithValue(ctx, launchFactsKey{}, f)
}

func launchFactsOf(ctx context.Context) *launchFacts {
	f, _ := ctx.Value(launchFactsKey{}).(*launchFacts)
	return f
}

// composeAPI is the Docker client compose runs on.
type composeAPI struct {
	client.APIClient
	images *imageCache
}

// NetworkList answers compose's look-up of the external lease network (a list
// filtered by name, where the name is the verified ID) with the verified network.
func (c *composeAPI) NetworkList(ctx context.Context, opts network.ListOptions) ([]network.Summary, error) {
	if f := launchFactsOf(ctx); f != nil && opts.Filters.Len() == 1 && slices.Equal(opts.Filters.Get("name"), []string{f.network.ID}) {
		return []network.Summary{f.network}, nil
	}
	return c.APIClient.NetworkList(ctx, opts)
}

// NetworkInspect answers for the verified lease network by its exact ID.
func (c *composeAPI) NetworkInspect(ctx context.Context, id string, opts network.InspectOptions) (network.Inspect, error) {
	if f := launchFactsOf(ctx); f != nil && id == f.network.ID && opts == (network.InspectOptions{}) {
		return f.network, nil
	}
	return c.APIClient.NetworkInspect(ctx, id, opts)
}

// ImageInspect answers for an image inspected by its content ID before: an ID
// names immutable content, so the answer cannot have changed.
func (c *composeAPI) ImageInspect(ctx context.Context, ref string, opts ...client.ImageInspectOption) (image.InspectResponse, error) {
	if len(opts) == 0 && isImageID(ref) {
		if resp, ok := c.images.get(ref); ok {
			return resp, nil
		}
	}
	return c.APIClient.ImageInspect(ctx, ref, opts...)
}

// ContainerList answers compose's first listing of the project (project and
// config-hash labels, one-off containers included or excluded, any state) from
// the listing Up made a moment before; later listings (after compose created
// something) go to Docker.
func (c *composeAPI) ContainerList(ctx context.Context, opts container.ListOptions) ([]container.Summary, error) {
	if f := launchFactsOf(ctx); f != nil && opts.All {
		if excludeOneOff, ok := projectListing(opts, f.project); ok && f.used.CompareAndSwap(false, true) {
			var out []container.Summary
			for _, s := range f.listing {
				if _, hashed := s.Labels[api.ConfigHashLabel]; hashed && (!excludeOneOff || s.Labels[api.OneoffLabel] == "False") {
					out = append(out, s)
				}
			}
			return out, nil
		}
	}
	list, err := c.APIClient.ContainerList(ctx, opts)
	if f := launchFactsOf(ctx); f != nil && err == nil && startListing(opts, f.project) {
		// Kept: the launched cohort is this listing (Engine.Launch), not another.
		f.mu.Lock()
		f.started, f.listed = slices.Clone(list), true
		f.mu.Unlock()
	}
	return list, err
}

// startListing reports whether opts is compose start's listing of the project's
// service containers (project label and one-off False, any state), made after
// every create of the up.
func startListing(opts container.ListOptions, project string) bool {
	return opts.All && labelsOnly(opts, api.ProjectLabel+"="+project, api.OneoffLabel+"=False")
}

// labelsOnly reports whether opts filters by exactly these labels and nothing
// else (no other filter, limit, paging or size).
func labelsOnly(opts container.ListOptions, want ...string) bool {
	if opts.Filters.Len() != 1 || opts.Limit != 0 || opts.Since != "" || opts.Before != "" || opts.Size || opts.Latest {
		return false
	}
	return slices.Equal(slices.Sorted(slices.Values(opts.Filters.Get("label"))), slices.Sorted(slices.Values(want)))
}

// projectListing reports whether opts is compose's listing of every service
// container of project (its getContainers filter), and whether it excludes
// one-off containers.
func projectListing(opts container.ListOptions, project string) (excludeOneOff, ok bool) {
	base := []string{api.ProjectLabel + "=" + project, api.ConfigHashLabel}
	switch {
	case labelsOnly(opts, base...):
		return false, true
	case labelsOnly(opts, append(base, api.OneoffLabel+"=False")...):
		return true, true
	}
	return false, false
}

// imageCache holds image inspect answers by content ID (bounded; cleared whole
// when full: a miss only costs one inspect).
type imageCache struct {
	mu sync.Mutex
	m  map[string]image.InspectResponse
}

const maxImageCache = 256

func (c *imageCache) get(id string) (image.InspectResponse, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp, ok := c.m[id]
	return resp, ok
}

// forget drops id's answer: the image was removed.
func (c *imageCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

func (c *imageCache) put(resp image.InspectResponse) {
	if !isImageID(resp.ID) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxImageCache {
		c.m = make(map[string]image.InspectResponse)
	}
	c.m[resp.ID] = resp
}
