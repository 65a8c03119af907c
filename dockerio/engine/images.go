package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"golang.org/x/sync/singleflight"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/policy"
)

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

// ResolveImage makes ref's current content, as its registry says, present and
// admitted. A tag is resolved to a manifest digest through the daemon's
// distribution endpoint (one registry round trip, no layer download); a
// digest-pinned reference needs no resolution. The exact content repo@digest is
// then pulled only when no local image carries that digest, inspected and
// admitted. The local copy of a tag is never consulted: when the registry cannot
// be reached or refuses, the call fails wrapping dockerio.ErrImagePull, so a
// stale cache can never launch in place of what the tag names now.
// Bounded by Options.PullTimeout on top of ctx.
func (e *Engine) ResolveImage(ctx context.Context, ref string) (dockerio.ImageInfo, error) {
	return e.resolveImage(ctx, ref, true)
}

// AdmitImage is ResolveImage without resolving the image's user: no image
// helper runs (UID and GID are left 0), so a launch can check what the
// metadata implies (the lease mount budget) before its first helper.
func (e *Engine) AdmitImage(ctx context.Context, ref string) (dockerio.ImageInfo, error) {
	return e.resolveImage(ctx, ref, false)
}

func (e *Engine) resolveImage(ctx context.Context, ref string, user bool) (dockerio.ImageInfo, error) {
	if isImageID(ref) {
		return dockerio.ImageInfo{}, fmt.Errorf("resolve image %s: %w: an image ID is not a registry reference", trimID(ref), dockerio.ErrImagePull)
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return dockerio.ImageInfo{}, fmt.Errorf("resolve image %q: %w: invalid reference: %w", ref, dockerio.ErrImagePull, err)
	}
	pctx, cancel := context.WithTimeout(ctx, e.opts.PullTimeout)
	defer cancel()

	var pinned reference.Canonical
	if d, ok := named.(reference.Digested); ok {
		if pinned, err = reference.WithDigest(reference.TrimNamed(named), d.Digest()); err != nil {
			return dockerio.ImageInfo{}, fmt.Errorf("resolve image %q: %w: %w", ref, dockerio.ErrImagePull, err)
		}
	} else {
		tagged := reference.TagNameOnly(named)
		// Concurrent provisions of one tag share one registry round trip: each
		// caller's answer is the registry's, asked after that caller arrived or at
		// most one round trip before.
		shared := e.resolving.DoChan(tagged.String(), func() (any, error) {
			// Not one caller's ctx: its cancellation must not fail the others.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(pctx), e.opts.PullTimeout)
			defer cancel()
			return e.docker.DistributionInspect(sctx, tagged.String(), "")
		})
		var res singleflight.Result
		select {
		case res = <-shared:
		case <-pctx.Done():
			res.Err = pctx.Err()
		}
		if res.Err != nil {
			return dockerio.ImageInfo{}, e.pullErr(ctx, pctx, "resolve "+tagged.String()+" through its registry", res.Err)
		}
		dist := res.Val.(registry.DistributionInspect)
		if err := dist.Descriptor.Digest.Validate(); err != nil {
			return dockerio.ImageInfo{}, fmt.Errorf("resolve %s: %w: registry answered no usable digest: %w", tagged, dockerio.ErrImagePull, err)
		}
		if pinned, err = reference.WithDigest(reference.TrimNamed(named), dist.Descriptor.Digest); err != nil {
			return dockerio.ImageInfo{}, fmt.Errorf("resolve %s: %w: %w", tagged, dockerio.ErrImagePull, err)
		}
	}
	resp, err := e.presentByDigest(ctx, pctx, pinned)
	if err != nil {
		return dockerio.ImageInfo{}, err
	}
	return e.admitWithUser(pctx, resp, pinned.String(), user)
}

// PinnedImage admits exactly the recorded content: the local image whose ID is
// pin.ID, else pin.Digest fetched from its registry and required to be pin.ID.
// The tag is never looked at. Bounded by Options.PullTimeout on top of ctx.
func (e *Engine) PinnedImage(ctx context.Context, pin messages.ImagePin) (dockerio.ImageInfo, error) {
	return e.pinnedImage(ctx, pin, true)
}

// AdmitPinned is PinnedImage without resolving the image's user (no helper;
// UID and GID left 0), as AdmitImage.
func (e *Engine) AdmitPinned(ctx context.Context, pin messages.ImagePin) (dockerio.ImageInfo, error) {
	return e.pinnedImage(ctx, pin, false)
}

func (e *Engine) pinnedImage(ctx context.Context, pin messages.ImagePin, user bool) (dockerio.ImageInfo, error) {
	if !isImageID(pin.ID) {
		return dockerio.ImageInfo{}, fmt.Errorf("pinned image %q: %w: the pin has no image ID", pin.Ref, dockerio.ErrImagePull)
	}
	resp, err := e.docker.ImageInspect(ctx, pin.ID)
	switch {
	case err == nil && resp.ID == pin.ID:
		e.images.put(resp)
		return e.admitWithUser(ctx, resp, pin.Digest, user)
	case err != nil && !isNotFound(err):
		return dockerio.ImageInfo{}, dockerErr("inspect pinned image "+trimID(pin.ID), err)
	}
	if pin.Digest == "" {
		return dockerio.ImageInfo{}, fmt.Errorf("pinned image %s (%s): %w: not present and no digest recorded to fetch it by",
			trimID(pin.ID), pin.Ref, dockerio.ErrImagePull)
	}
	named, err := reference.ParseNormalizedNamed(pin.Digest)
	canonical, ok := named.(reference.Canonical)
	if err != nil || !ok {
		return dockerio.ImageInfo{}, fmt.Errorf("pinned image %s: %w: recorded digest %q is not repository@sha256:…", trimID(pin.ID), dockerio.ErrImagePull, pin.Digest)
	}
	pctx, cancel := context.WithTimeout(ctx, e.opts.PullTimeout)
	defer cancel()
	resp, err = e.presentByDigest(ctx, pctx, canonical)
	if err != nil {
		return dockerio.ImageInfo{}, err
	}
	if resp.ID != pin.ID {
		return dockerio.ImageInfo{}, fmt.Errorf("pinned image %s: %w: %s is image %s, not the recorded one",
			trimID(pin.ID), dockerio.ErrImagePull, pin.Digest, trimID(resp.ID))
	}
	return e.admitWithUser(pctx, resp, pin.Digest, user)
}

// imageByID inspects the image whose content ID is exactly id, answered from
// the cache when it was inspected before: an ID names immutable content.
func (e *Engine) imageByID(ctx context.Context, id string) (image.InspectResponse, error) {
	if resp, ok := e.images.get(id); ok {
		return resp, nil
	}
	resp, err := e.docker.ImageInspect(ctx, id)
	if err != nil {
		return image.InspectResponse{}, dockerErr("inspect image "+trimID(id), err)
	}
	if resp.ID != id {
		return image.InspectResponse{}, fmt.Errorf("image %s: %w: no image has exactly this ID", trimID(id), cerrdefs.ErrNotFound)
	}
	e.images.put(resp)
	return resp, nil
}

// imageVolumes are the VOLUME targets an inspected image declares, unchecked.
func imageVolumes(resp image.InspectResponse) []string {
	var out []string
	if resp.Config != nil {
		for v := range resp.Config.Volumes {
			out = append(out, v)
		}
	}
	return out
}

// admitWithUser admits the image and, with user, resolves its user to the
// numeric uid/gid its volumes' mount points are given to (imageuser.go).
func (e *Engine) admitWithUser(ctx context.Context, resp image.InspectResponse, pinned string, user bool) (dockerio.ImageInfo, error) {
	info, err := admit(resp, pinned)
	if err != nil {
		return dockerio.ImageInfo{}, err
	}
	if !user {
		return info, nil
	}
	return e.withUser(ctx, info, info.Volumes)
}

// presentByDigest returns the local image carrying repo@digest, pulling exactly
// that reference first when no local image does.
func (e *Engine) presentByDigest(ctx, pctx context.Context, pinned reference.Canonical) (image.InspectResponse, error) {
	name := pinned.String()
	resp, err := e.docker.ImageInspect(pctx, name)
	if err == nil {
		e.images.put(resp)
		return resp, nil
	}
	if !isNotFound(err) {
		return image.InspectResponse{}, e.pullErr(ctx, pctx, "inspect image "+name, err)
	}
	if err := e.pull(pctx, name); err != nil {
		return image.InspectResponse{}, e.pullErr(ctx, pctx, "pull "+name, err)
	}
	if resp, err = e.docker.ImageInspect(pctx, name); err != nil {
		return image.InspectResponse{}, e.pullErr(ctx, pctx, "inspect pulled image "+name, err)
	}
	e.images.put(resp)
	e.tellPulled(resp.ID, name)
	return resp, nil
}

// pullErr classifies a failure while resolving or fetching an image: the caller's
// own end, Docker itself unreachable, image_pull_timeout, or (anything the
// registry or daemon refused) ErrImagePull.
func (e *Engine) pullErr(ctx, pctx context.Context, op string, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", op, ctx.Err())
	case client.IsErrConnectionFailed(err):
		return dockerErr(op, err)
	case pctx.Err() != nil:
		return fmt.Errorf("%s: %w: not finished within image_pull_timeout %s: %w", op, dockerio.ErrImagePull, e.opts.PullTimeout, err)
	}
	return fmt.Errorf("%s: %w: %w", op, dockerio.ErrImagePull, err)
}

// admit checks an inspected image's metadata and returns what a launch needs.
func admit(resp image.InspectResponse, pinned string) (dockerio.ImageInfo, error) {
	info := dockerio.ImageInfo{ID: resp.ID, Digest: pinned}
	var labels map[string]string
	if resp.Config != nil {
		info.User = resp.Config.User
		labels = resp.Config.Labels
	}
	admitted, err := policy.Admit(imageVolumes(resp), labels)
	if err != nil {
		return dockerio.ImageInfo{}, fmt.Errorf("image %s (%s): %w", pinned, trimID(resp.ID), err)
	}
	info.Volumes, info.MaskLabels = admitted.Volumes, admitted.MaskLabels
	return info, nil
}

// pull runs one pull and drains its progress stream; errors reported inside the
// stream (the daemon has already answered 200 by then) are returned as errors.
func (e *Engine) pull(ctx context.Context, ref string) error {
	rc, err := e.docker.ImagePull(ctx, ref, image.PullOptions{})
	if err != nil {
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
