package steps

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Images admits a release's images. It has no Down: image content is shared
// by every lease that runs it.
type Images struct {
	API         ImagesAPI
	PullTimeout time.Duration
	Log         *zerolog.Logger
}

// Image is one service's image: its reference, and the recorded content to
// admit instead of the tag (Pin.ID "": the tag, resolved through its registry).
type Image struct {
	Service, Ref string
	Pin          messages.ImagePin
}

// Admit admits every image's metadata, each reference once, and answers them
// by service. No helper runs: the images' users are resolved by Users, once
// the lease's mount budget (MountBudget) has been decided. A failure is a
// *Failed (image_pull_failed, or internal).
func (s Images) Admit(ctx context.Context, want []Image) (map[string]dockerio.ImageInfo, error) {
	byRef := map[string]dockerio.ImageInfo{}
	images := map[string]dockerio.ImageInfo{}
	for _, w := range want {
		info, done := byRef[w.Ref]
		if !done {
			pctx, pcancel := context.WithTimeout(ctx, s.PullTimeout)
			var err error
			if w.Pin.ID != "" {
				info, err = s.API.AdmitPinned(pctx, w.Pin)
			} else {
				info, err = s.API.AdmitImage(pctx, w.Ref)
			}
			timedOut := pctx.Err() != nil
			pcancel()
			if err != nil {
				return nil, s.failed(ctx, w.Ref, err, timedOut)
			}
			byRef[w.Ref] = info
		}
		images[w.Service] = info
	}
	return images, nil
}

// Users resolves the user of every admitted image (by service) to the uid:gid
// its containers run as; a user name is read from the image's own files
// through a helper. A failure is a *Failed.
func (s Images) Users(ctx context.Context, images map[string]dockerio.ImageInfo) error {
	type key struct{ id, user string }
	done := map[key][2]int{}
	for _, svc := range slices.Sorted(maps.Keys(images)) {
		info := images[svc]
		k := key{info.ID, info.User}
		ids, ok := done[k]
		if !ok {
			pctx, pcancel := context.WithTimeout(ctx, s.PullTimeout)
			uid, gid, err := s.API.ImageUser(pctx, info.ID, info.User)
			timedOut := pctx.Err() != nil
			pcancel()
			if err != nil {
				return s.failed(ctx, info.ID, err, timedOut)
			}
			ids = [2]int{uid, gid}
			done[k] = ids
		}
		info.UID, info.GID = ids[0], ids[1]
		images[svc] = info
	}
	return nil
}

// failed is how an image's admission failure ends the launch.
func (s Images) failed(ctx context.Context, image string, err error, timedOut bool) error {
	if ctx.Err() == nil {
		s.Log.Warn().Err(err).Str("image", image).Msg("image admission failed")
	}
	switch {
	case errors.Is(err, dockerio.ErrImageNotAdmissible):
		return fail(messages.ReasonImagePullFailed, notAdmissibleMessage(err), err)
	case errors.Is(err, dockerio.ErrImagePull) || timedOut:
		return fail(messages.ReasonImagePullFailed, "image could not be pulled", err)
	}
	return fail(messages.ReasonInternal, "provisioning failed: image", err)
}

// MountBudget decides the lease mount budget of p, its images admitted (their
// VOLUMEs in p), before any helper runs: an over-budget lease is refused
// definitely, with the rule it broke (image_pull_failed, as any image whose
// metadata is not admissible), however often it is launched again.
func MountBudget(p dockerio.Plan) error {
	if err := dockerio.CheckMountBudget(p); err != nil {
		return fail(messages.ReasonImagePullFailed, notAdmissibleMessage(err), err)
	}
	return nil
}

// notAdmissibleMessage is the failure message of an image refused at
// admission: the rule it broke (17 VOLUMEs, a reserved label…), so the tenant
// knows what to change.
func notAdmissibleMessage(err error) string {
	msg := "image metadata is not admissible"
	if _, why, ok := strings.Cut(err.Error(), dockerio.ErrImageNotAdmissible.Error()+": "); ok {
		msg += ": " + why
	}
	return Bounded(msg)
}
