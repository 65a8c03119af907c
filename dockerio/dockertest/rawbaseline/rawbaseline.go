// Package rawbaseline is the raw-Docker side of `berthctl bench`: what the
// launches berthd does cost without berthd, measured on the same engine in the
// same run, so berthd's overhead can be stated as a ratio; and the check that
// closed leases left nothing in Docker. It lives under dockerio/engine because
// only that tree links the Docker SDK, in a package of its own so berthctl
// links the SDK's client without Compose (the engine package would make the
// operator's CLI four times its size).
package rawbaseline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/go-connections/nat"
	"github.com/google/uuid"

	"github.com/berth-dev/berth/dockerio"
)

// RunLabel marks every container and network of one baseline run (its value
// is the run ID). It is deliberately not a fred.* label: berthd's reclaimer and
// inventory never see these objects as theirs.
const RunLabel = "berth.bench.run"

// Options describe one batch of raw launches, each equivalent to one
// instance of a flat berthd lease.
type Options struct {
	Host  string // docker_host; "" = the environment's (DOCKER_HOST, else the default socket)
	Image string // pulled first (untimed) when the engine does not hold it
	Count int    // launches, all at once

	// VerifyDuration is berthd's startup_verify_duration: each launch waits
	// this long after its start before the inspect that proves it running, as
	// berthd's verification does for a service without a health check.
	VerifyDuration time.Duration

	// Port is a container port ("8080/tcp") published on HostBindIP with an
	// ephemeral host port, as berthd publishes a flat manifest's ports; "" = none.
	Port       string
	HostBindIP string // "" = 127.0.0.1

	// The SKU profile's limits and berthd's container hardening settings
	// (container_pids_limit, container_readonly_rootfs, container_tmpfs_size_mb);
	// zero values leave the engine's defaults.
	CPUCores       float64
	MemoryMB       int64
	PidsLimit      int64
	ReadonlyRootfs bool
	TmpfsSizeMB    int64
}

// Launch is one timed launch: a fresh bridge network, container create,
// start, the verify wait, inspect.
type Launch struct {
	Name    string        // container and network name
	Total   time.Duration // network create → inspect done
	Network time.Duration
	Create  time.Duration
	Start   time.Duration
	Inspect time.Duration // the inspect after the verify wait
	Err     error         // nil when the container was running with its port published
}

// Result is one run: every launch, the batch's wall time, and what
// was still present after its cleanup.
type Result struct {
	RunID       string
	ImagePulled bool // the image was absent and pulled before the timed batch
	Launches    []Launch
	Wall        time.Duration // first launch begins → last launch done
	// Leftovers names every object of the run (container, network, volume)
	// still present after cleanup; empty when the run left nothing.
	Leftovers []string
}

// Run runs opts.Count raw launches at once, then removes everything the
// run created and verifies it is gone. The error is for a run that could not be
// set up (no engine, no image); a failed launch is recorded in its Launch,
// and cleanup runs even when ctx has ended.
func Run(ctx context.Context, opts Options) (Result, error) {
	res := Result{RunID: uuid.NewString()}
	if opts.Count <= 0 || opts.Image == "" {
		return res, fmt.Errorf("raw baseline: need a positive count and an image (got %d, %q)", opts.Count, opts.Image)
	}
	dc, err := dockerClient(ctx, opts.Host)
	if err != nil {
		return res, err
	}
	defer dc.Close()
	imageVolumes, pulled, err := ensureImage(ctx, dc, opts.Image)
	if err != nil {
		return res, err
	}
	res.ImagePulled = pulled

	res.Launches = make([]Launch, opts.Count)
	volumes := make([][]string, opts.Count) // volumes of each container, for the leftover check
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range res.Launches {
		res.Launches[i].Name = fmt.Sprintf("berth-bench-%s-%d", res.RunID[:8], i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			volumes[i] = launch(ctx, dc, opts, imageVolumes, res.RunID, &res.Launches[i])
		}()
	}
	begin := time.Now()
	close(gate)
	wg.Wait()
	res.Wall = time.Since(begin)

	// Cleanup must happen even when the caller gave up (Ctrl-C): the objects
	// would otherwise stay on the host with nothing to reclaim them.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	removeRun(cctx, dc, res.RunID)
	res.Leftovers, err = leftovers(cctx, dc, res.RunID, slices.Concat(volumes...))
	if err != nil {
		return res, err
	}
	return res, nil
}

// dockerClient is an SDK client for host with the API version negotiated once up
// front (the SDK's lazy negotiation races under concurrent calls).
func dockerClient(ctx context.Context, host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	dc, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, fmt.Errorf("raw baseline: docker client for %q: %w", host, err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ping, err := dc.Ping(pctx)
	if err != nil {
		_ = dc.Close()
		return nil, dockerErr("raw baseline: ping docker", err)
	}
	dc.NegotiateAPIVersionPing(ping)
	return dc, nil
}

// ensureImage pulls ref when the engine does not hold it under that name
// (berthd pins images by content, so its pull may not have left the tag), and
// returns the image's VOLUME paths.
func ensureImage(ctx context.Context, dc *client.Client, ref string) (volumes []string, pulled bool, err error) {
	info, err := dc.ImageInspect(ctx, ref)
	if err != nil && !isNotFound(err) {
		return nil, false, dockerErr("raw baseline: inspect image "+ref, err)
	}
	if err != nil {
		rc, err := dc.ImagePull(ctx, ref, image.PullOptions{})
		if err != nil {
			return nil, false, dockerErr("raw baseline: pull "+ref, err)
		}
		// The pull runs as long as its progress stream is read; an error inside
		// the stream shows up in the inspect below.
		_, err = io.Copy(io.Discard, rc)
		_ = rc.Close()
		if err != nil {
			return nil, false, fmt.Errorf("raw baseline: pull %s: %w", ref, err)
		}
		if info, err = dc.ImageInspect(ctx, ref); err != nil {
			return nil, false, dockerErr("raw baseline: image "+ref+" after pull", err)
		}
		pulled = true
	}
	if info.Config != nil {
		volumes = slices.Sorted(maps.Keys(info.Config.Volumes))
	}
	return volumes, pulled, nil
}

// launch times one launch into l and returns the volumes the container got
// (none are expected: each is removed with it and checked after).
func launch(ctx context.Context, dc *client.Client, opts Options, imageVolumes []string, runID string, l *Launch) []string {
	labels := map[string]string{RunLabel: runID}
	cfg, host, netCfg := launchConfig(opts, imageVolumes, labels, l.Name)
	begin := time.Now()
	step := func(d *time.Duration, f func() error) error {
		t := time.Now()
		err := f()
		*d = time.Since(t)
		return err
	}
	if l.Err = step(&l.Network, func() error {
		_, err := dc.NetworkCreate(ctx, l.Name, network.CreateOptions{Driver: "bridge", Labels: labels})
		return dockerErr("create network "+l.Name, err)
	}); l.Err != nil {
		return nil
	}
	var id string
	if l.Err = step(&l.Create, func() error {
		created, err := dc.ContainerCreate(ctx, cfg, host, netCfg, nil, l.Name)
		id = created.ID
		return dockerErr("create container "+l.Name, err)
	}); l.Err != nil {
		return nil
	}
	if l.Err = step(&l.Start, func() error {
		return dockerErr("start container "+l.Name, dc.ContainerStart(ctx, id, container.StartOptions{}))
	}); l.Err != nil {
		return nil
	}
	select {
	case <-time.After(opts.VerifyDuration):
	case <-ctx.Done():
		l.Err = fmt.Errorf("container %s: verify wait: %w", l.Name, ctx.Err())
		return nil
	}
	var info container.InspectResponse
	if l.Err = step(&l.Inspect, func() error {
		var err error
		info, err = dc.ContainerInspect(ctx, id)
		return dockerErr("inspect container "+l.Name, err)
	}); l.Err != nil {
		return nil
	}
	l.Total = time.Since(begin)
	var vols []string
	for _, m := range info.Mounts {
		if m.Type == "volume" {
			vols = append(vols, m.Name)
		}
	}
	switch {
	case info.State == nil || !info.State.Running:
		l.Err = fmt.Errorf("container %s not running after %s", l.Name, opts.VerifyDuration)
	case opts.Port != "" && (info.NetworkSettings == nil || len(info.NetworkSettings.Ports[nat.Port(opts.Port)]) == 0):
		l.Err = fmt.Errorf("container %s has no host port for %s", l.Name, opts.Port)
	}
	return vols
}

// launchConfig is the container of one launch as berthd would create it for
// a flat lease's instance, on its own network name.
func launchConfig(opts Options, imageVolumes []string, labels map[string]string, name string) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	cfg := &container.Config{Image: opts.Image, Labels: labels}
	host := &container.HostConfig{
		NetworkMode:    container.NetworkMode(name),
		CapDrop:        []string{"ALL"},
		SecurityOpt:    []string{"no-new-privileges:true"},
		ReadonlyRootfs: opts.ReadonlyRootfs,
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
	}
	if opts.MemoryMB > 0 {
		host.Memory = opts.MemoryMB << 20
		host.MemorySwap = host.Memory // no swap, as berthd sets it
	}
	if opts.CPUCores > 0 {
		host.NanoCPUs = int64(opts.CPUCores * 1e9)
	}
	if opts.PidsLimit > 0 {
		host.PidsLimit = &opts.PidsLimit
	}
	tmpfs := ""
	if opts.TmpfsSizeMB > 0 {
		tmpfs = fmt.Sprintf("size=%dm", opts.TmpfsSizeMB)
	}
	host.Tmpfs = map[string]string{}
	if opts.ReadonlyRootfs {
		host.Tmpfs["/tmp"], host.Tmpfs["/run"] = tmpfs, tmpfs
	}
	// berthd never lets Docker make an anonymous volume (and copy the image's
	// content into it): an image VOLUME is a bind of the lease's managed
	// volume, or tmpfs when diskless. tmpfs stands in for both here.
	for _, target := range imageVolumes {
		host.Tmpfs[target] = tmpfs
	}
	if opts.Port != "" {
		bindIP := opts.HostBindIP
		if bindIP == "" {
			bindIP = "127.0.0.1"
		}
		port := nat.Port(opts.Port)
		cfg.ExposedPorts = nat.PortSet{port: struct{}{}}
		host.PortBindings = nat.PortMap{port: []nat.PortBinding{{HostIP: bindIP}}}
	}
	netCfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		name: {Aliases: []string{"app"}}, // berthd's in-lease DNS name of a flat service
	}}
	return cfg, host, netCfg
}

// removeRun removes every container of the run (with any volume Docker made for it),
// then its networks. Failures are left to leftovers to report.
func removeRun(ctx context.Context, dc *client.Client, runID string) {
	f := filters.NewArgs(filters.Arg("label", RunLabel+"="+runID))
	if cs, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: f}); err == nil {
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = dc.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
			}()
		}
		wg.Wait()
	}
	if ns, err := dc.NetworkList(ctx, network.ListOptions{Filters: f}); err == nil {
		for _, n := range ns {
			_ = dc.NetworkRemove(ctx, n.ID)
		}
	}
}

// leftovers lists what of the run Docker still holds.
func leftovers(ctx context.Context, dc *client.Client, runID string, volumes []string) ([]string, error) {
	f := filters.NewArgs(filters.Arg("label", RunLabel+"="+runID))
	var left []string
	cs, err := dc.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, dockerErr("raw baseline: list containers of run "+runID, err)
	}
	for _, c := range cs {
		left = append(left, "container "+strings.TrimPrefix(firstName(c.Names), "/"))
	}
	ns, err := dc.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, dockerErr("raw baseline: list networks of run "+runID, err)
	}
	for _, n := range ns {
		left = append(left, "network "+n.Name)
	}
	for _, v := range volumes {
		_, err := dc.VolumeInspect(ctx, v)
		switch {
		case err == nil:
			left = append(left, "volume "+v)
		case !isNotFound(err):
			return nil, dockerErr("raw baseline: inspect volume "+v, err)
		}
	}
	return left, nil
}

func firstName(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// LeaseLeftovers names every container labelled with one of leases and every
// lease network (fred-<lease>) of them that Docker still holds, so a caller
// without the SDK can prove a closed lease left nothing behind.
func LeaseLeftovers(ctx context.Context, host string, leases []string) ([]string, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	dc, err := dockerClient(ctx, host)
	if err != nil {
		return nil, err
	}
	defer dc.Close()
	var left []string
	var errs []error
	// One listing each, filtered on the label's presence; the lease set is
	// matched here (a filter per lease would be one request per lease).
	want := make(map[string]bool, len(leases))
	for _, l := range leases {
		want[l] = true
	}
	cs, err := dc.ContainerList(ctx, container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", dockerio.LabelLease))})
	if err != nil {
		errs = append(errs, dockerErr("list lease containers", err))
	}
	for _, c := range cs {
		if l := c.Labels[dockerio.LabelLease]; want[l] {
			left = append(left, fmt.Sprintf("container %s (lease %s, %s)", strings.TrimPrefix(firstName(c.Names), "/"), l, c.State))
		}
	}
	ns, err := dc.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "fred-"))})
	if err != nil {
		errs = append(errs, dockerErr("list lease networks", err))
	}
	for _, n := range ns {
		if l, ok := strings.CutPrefix(n.Name, "fred-"); ok && want[l] && n.Name == dockerio.ProjectName(l) {
			left = append(left, "network "+n.Name)
		}
	}
	slices.Sort(left)
	return left, errors.Join(errs...)
}

// dockerErr wraps err with op; nil stays nil.
func dockerErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isNotFound reports a Docker "no such object" answer.
func isNotFound(err error) bool { return cerrdefs.IsNotFound(err) }
