package engine

// The image store as the image collector (actors/imagegc) sees it: what Docker
// holds, which images any container uses, the free space on Docker's data root,
// and removal by exact reference.

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"

	"github.com/berth-dev/berth/dockerio"
)

// StoreImages lists every image in Docker's store (intermediate layers aside).
func (e *Engine) StoreImages(ctx context.Context) ([]dockerio.StoredImage, error) {
	list, err := e.docker.ImageList(ctx, image.ListOptions{})
	if err != nil {
		return nil, dockerErr("list images", err)
	}
	out := make([]dockerio.StoredImage, 0, len(list))
	for _, s := range list {
		out = append(out, dockerio.StoredImage{ID: s.ID, RepoTags: names(s.RepoTags), RepoDigests: names(s.RepoDigests),
			Size: s.Size, Created: time.Unix(s.Created, 0)})
	}
	return out, nil
}

// names are Docker's familiar names ("nginx@sha256:…") normalized the way
// berth records a pull ("docker.io/library/nginx@sha256:…"), its "<none>"
// placeholders dropped; a name that does not parse is kept as is (it is
// nobody berth knows, so it keeps the image someone else's).
func names(in []string) []string {
	var out []string
	for _, n := range in {
		if strings.HasPrefix(n, "<none>") {
			continue
		}
		if named, err := reference.ParseNormalizedNamed(n); err == nil {
			n = named.String()
		}
		out = append(out, n)
	}
	return out
}

// ImagesInUse counts, by image ID, the containers of any state, installation or
// owner that use each image: none of them may lose its image.
func (e *Engine) ImagesInUse(ctx context.Context) (map[string]int, error) {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return nil, dockerErr("list containers", err)
	}
	out := map[string]int{}
	for _, c := range list {
		out[c.ImageID]++
	}
	return out, nil
}

// RemoveImageRef removes one reference (an image ID, or repo@digest) without
// force: Docker itself refuses (a conflict) while a container uses the image or,
// by ID, while more than one repository names it. Removing an image's last
// reference deletes it. An image already gone is a NotFound.
func (e *Engine) RemoveImageRef(ctx context.Context, ref string) error {
	_, err := e.docker.ImageRemove(ctx, ref, image.RemoveOptions{Force: false, PruneChildren: true})
	if err == nil {
		e.images.forget(ref)
		return nil
	}
	switch {
	case cerrdefs.IsNotFound(err):
		e.images.forget(ref)
		return fmt.Errorf("remove image %s: %w", trimID(ref), cerrdefs.ErrNotFound)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("remove image %s: %w: %w", trimID(ref), cerrdefs.ErrConflict, err)
	}
	return dockerErr("remove image "+trimID(ref), err)
}

// DataRootSpace is the free and total bytes of the filesystem holding Docker's
// data root (docker info's DockerRootDir, asked once), as this host sees it:
// berthd runs on the Docker host.
func (e *Engine) DataRootSpace(ctx context.Context) (free, total uint64, err error) {
	root := e.dataRoot.Load()
	if root == nil {
		info, err := e.info(ctx)
		if err != nil {
			return 0, 0, err
		}
		if info.DockerRootDir == "" {
			return 0, 0, fmt.Errorf("docker info names no DockerRootDir")
		}
		root = &info.DockerRootDir
		e.dataRoot.Store(root)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(*root, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs docker data root %s: %w", *root, err)
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}

// OnPulled sets what is told of every image this engine pulled itself (absent
// before): its ID and the repo@digest it was pulled by. The image collector
// records those as this installation's; nothing else is ever collected.
func (e *Engine) OnPulled(f func(id, ref string)) { e.pulled.Store(&f) }

func (e *Engine) tellPulled(id, ref string) {
	if f := e.pulled.Load(); f != nil && *f != nil {
		(*f)(id, ref)
	}
}
