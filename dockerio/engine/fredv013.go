package engine

import (
	"context"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// UnadoptedFredV013 are the containers fred v0.13 made under this backend name
// (running or not) that no adoption made this installation's: a fred started
// by mistake beside berthd, or a host berthd never adopted. Only counted: the
// reconciler never touches them.
func (e *Engine) UnadoptedFredV013(ctx context.Context) ([]messages.Container, error) {
	f := filters.NewArgs(filters.Arg("label", dockerio.LabelManaged+"=true"), filters.Arg("label", dockerio.LabelBackend+"="+e.opts.BackendName))
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, dockerErr("list fred v0.13 containers", err)
	}
	var out []messages.Container
	for _, c := range cs {
		if dockerio.MadeByFredV013(c.Labels, e.opts.BackendName) && !e.opts.Adopted.OwnsContainer(c.ID, c.Labels, e.opts.BackendName) {
			name := c.ID[:12]
			if len(c.Names) > 0 {
				name = strings.TrimPrefix(c.Names[0], "/")
			}
			out = append(out, messages.Container{ID: c.ID, Name: name, Lease: c.Labels[dockerio.LabelLease], State: c.State, Labels: c.Labels})
		}
	}
	return out, nil
}

// FredV013Objects lists the containers (running or not) and networks of this
// backend name that fred v0.13's docker backend made (dockerio.MadeByFredV013).
// It changes nothing.
func (e *Engine) FredV013Objects(ctx context.Context) ([]dockerio.FredObject, error) {
	f := filters.NewArgs(filters.Arg("label", dockerio.LabelManaged+"=true"), filters.Arg("label", dockerio.LabelBackend+"="+e.opts.BackendName))
	cs, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, dockerErr("list fred v0.13 containers", err)
	}
	ns, err := e.docker.NetworkList(ctx, network.ListOptions{Filters: f})
	if err != nil {
		return nil, dockerErr("list fred v0.13 networks", err)
	}
	var out []dockerio.FredObject
	for _, c := range cs {
		if dockerio.MadeByFredV013(c.Labels, e.opts.BackendName) {
			name := c.ID[:12]
			if len(c.Names) > 0 {
				name = strings.TrimPrefix(c.Names[0], "/")
			}
			o := dockerio.FredObject{Kind: "container", ID: c.ID, Name: name, Lease: c.Labels[dockerio.LabelLease],
				Labels: c.Labels, State: c.State, ImageID: c.ImageID, Networks: map[string]string{}}
			if c.NetworkSettings != nil {
				for n, es := range c.NetworkSettings.Networks {
					o.Networks[n] = es.NetworkID
				}
			}
			if o.Image, err = e.fredImage(ctx, c.ImageID); cerrdefs.IsNotFound(err) {
				o.ImageID = ""
			} else if err != nil {
				return nil, err
			}
			for _, p := range c.Ports {
				if p.PublicPort != 0 {
					o.Ports = append(o.Ports, dockerio.FredPort{Port: int(p.PrivatePort), Protocol: p.Type, HostIP: p.IP, HostPort: int(p.PublicPort)})
				}
			}
			for _, m := range c.Mounts {
				o.Mounts = append(o.Mounts, dockerio.FredMount{Type: string(m.Type), Source: m.Source, Destination: m.Destination})
			}
			out = append(out, o)
		}
	}
	for _, n := range ns {
		if dockerio.MadeByFredV013(n.Labels, e.opts.BackendName) {
			out = append(out, dockerio.FredObject{Kind: "network", ID: n.ID, Name: n.Name, Labels: n.Labels})
		}
	}
	dockerio.SortFredObjects(out)
	return out, nil
}

// fredImage is what the image a fred container runs declares.
func (e *Engine) fredImage(ctx context.Context, id string) (dockerio.FredImage, error) {
	resp, err := e.imageByID(ctx, id)
	if err != nil {
		return dockerio.FredImage{}, err
	}
	return fredImageOf(resp), nil
}

func fredImageOf(resp image.InspectResponse) dockerio.FredImage {
	img := dockerio.FredImage{Volumes: imageVolumes(resp), RepoDigests: resp.RepoDigests}
	if resp.Config != nil {
		img.Labels = resp.Config.Labels
	}
	return img
}

// FredImages inspects the images of these references present on this host
// (one absent is left out): what a retained fred v0.13 lease's manifest names.
func (e *Engine) FredImages(ctx context.Context, refs []string) (map[string]dockerio.FredImage, error) {
	out := map[string]dockerio.FredImage{}
	for _, ref := range refs {
		resp, err := e.docker.ImageInspect(ctx, ref)
		if cerrdefs.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, dockerErr("inspect image "+ref, err)
		}
		out[ref] = fredImageOf(resp)
	}
	return out, nil
}
