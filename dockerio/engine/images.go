package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
)

// normalizeRef turns a docker-style reference into its canonical form
// ("nginx" → "docker.io/library/nginx:latest"); digested is true when the
// reference pins content by digest.
func normalizeRef(ref string) (canonical string, digested bool, err error) {
	if isImageID(ref) {
		return "", false, fmt.Errorf("%q is an image ID, not a reference", ref)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", false, err
	}
	_, digested = named.(reference.Digested)
	return reference.TagNameOnly(named).String(), digested, nil
}

// isImageID reports a content ID ("sha256:<64 hex>"), which the reference parser
// would otherwise read as repository "sha256" with a tag.
func isImageID(ref string) bool {
	hexPart, ok := strings.CutPrefix(ref, "sha256:")
	if !ok || len(hexPart) != 64 {
		return false
	}
	for _, r := range hexPart {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// PullImage pulls ref within ctx and the configured image_pull_timeout.
//
// A digest-pinned reference already present locally is not pulled: its content
// cannot have changed. A tag is always pulled (the registry is authoritative for
// where a tag points), with one exception: when the registry cannot be reached
// at all (connection refused, DNS failure, network timeout) and the tag is
// present locally, the local copy is used and a warning logged. Refusals the
// registry does answer (unknown manifest, denied auth) still fail the pull, so a
// withdrawn tag never launches from a stale cache; the launch runs the resolved
// image ID, so the lease is consistent with what InspectImage reported either way.
func (e *Engine) PullImage(ctx context.Context, ref string) error {
	if isImageID(ref) { // nothing to pull by ID: it is either here or not
		if _, err := e.docker.ImageInspect(ctx, ref); err != nil {
			if isNotFound(err) {
				return fmt.Errorf("pull %s: %w: image ID not present locally", trimID(ref), dockerio.ErrImagePull)
			}
			return dockerErr("pull "+trimID(ref), err)
		}
		return nil
	}
	canonical, digested, err := normalizeRef(ref)
	if err != nil {
		return fmt.Errorf("pull %q: %w: invalid reference: %w", ref, dockerio.ErrImagePull, err)
	}
	if digested {
		_, err := e.docker.ImageInspect(ctx, canonical)
		if err == nil {
			return nil
		}
		if !isNotFound(err) {
			return dockerErr("pull "+canonical+": look up local copy", err)
		}
	}

	pullCtx, cancel := context.WithTimeout(ctx, e.opts.PullTimeout)
	defer cancel()
	err = e.pull(pullCtx, canonical)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("pull %s: %w", canonical, ctx.Err())
	case errors.Is(err, dockerio.ErrUnavailable):
		return err
	case pullCtx.Err() != nil:
		return fmt.Errorf("pull %s: %w: not finished within image_pull_timeout %s", canonical, dockerio.ErrImagePull, e.opts.PullTimeout)
	}
	if !digested && registryUnreachable(err) {
		if _, ierr := e.docker.ImageInspect(ctx, canonical); ierr == nil {
			e.log.Warn().Err(err).Str("image", canonical).Msg("registry unreachable; launching the locally present copy of the tag")
			return nil
		}
	}
	return fmt.Errorf("pull %s: %w: %w", canonical, dockerio.ErrImagePull, err)
}

// pull runs one pull and drains its progress stream; errors reported inside the
// stream (the daemon has already answered 200 by then) are returned as errors.
func (e *Engine) pull(ctx context.Context, ref string) error {
	rc, err := e.docker.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
		if client.IsErrConnectionFailed(err) {
			return dockerErr("pull "+ref, err)
		}
		return err
	}
	defer rc.Close()
	dec := json.NewDecoder(rc)
	for {
		var msg jsonmessage.JSONMessage
		if err := dec.Decode(&msg); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read pull progress: %w", err)
		}
		if msg.Error != nil {
			return msg.Error
		}
		if msg.ErrorMessage != "" {
			return errors.New(msg.ErrorMessage)
		}
	}
}

// registryUnreachable recognises the daemon's report of a registry it could not
// talk to at all (as opposed to one that answered with a refusal).
func registryUnreachable(err error) bool {
	s := err.Error()
	for _, marker := range []string{
		"connection refused", "no such host", "i/o timeout", "network is unreachable",
		"no route to host", "TLS handshake timeout", "connection reset by peer",
		"Client.Timeout exceeded",
	} {
		if strings.Contains(s, marker) {
			return true
		}
	}
	return false
}

// InspectImage reports the image's ID, its declared VOLUMEs (sorted) and user.
// More than labels.MaxImageVolumes VOLUMEs is refused (wrapping ErrImagePull: the
// image can never be launched here).
func (e *Engine) InspectImage(ctx context.Context, ref string) (dockerio.ImageInfo, error) {
	name := ref
	if canonical, _, err := normalizeRef(ref); err == nil {
		name = canonical
	}
	resp, err := e.docker.ImageInspect(ctx, name)
	if err != nil {
		return dockerio.ImageInfo{}, dockerErr("inspect image "+name, err)
	}
	info := dockerio.ImageInfo{ID: resp.ID}
	if resp.Config != nil {
		info.User = resp.Config.User
		for path := range resp.Config.Volumes {
			info.Volumes = append(info.Volumes, path)
		}
	}
	slices.Sort(info.Volumes)
	if len(info.Volumes) > labels.MaxImageVolumes {
		return dockerio.ImageInfo{}, fmt.Errorf("inspect image %s: %w: it declares %d VOLUMEs, at most %d are supported",
			name, dockerio.ErrImagePull, len(info.Volumes), labels.MaxImageVolumes)
	}
	return info, nil
}

// ResolveImage pulls ref and inspects it. (Transitional: the registry-confirmed
// digest resolution replaces this.)
func (e *Engine) ResolveImage(ctx context.Context, ref string) (dockerio.ImageInfo, error) {
	if err := e.PullImage(ctx, ref); err != nil {
		return dockerio.ImageInfo{}, err
	}
	return e.InspectImage(ctx, ref)
}

// PinnedImage inspects the recorded image ID. (Transitional: fetching the
// recorded digest when the image is absent replaces this.)
func (e *Engine) PinnedImage(ctx context.Context, pin dockerio.ImagePin) (dockerio.ImageInfo, error) {
	info, err := e.InspectImage(ctx, pin.ID)
	if err != nil {
		return dockerio.ImageInfo{}, err
	}
	info.Digest = pin.Digest
	return info, nil
}
